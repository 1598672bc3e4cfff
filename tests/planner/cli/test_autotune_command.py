"""`planner autotune` on the command it wraps (issue 50): read as `check --config` reads it (a VLM-R1 command is GRPO,
with its images), only the flags the plan changes written, `--` the one split between autotune's
flags and the command, and a dry run that writes nowhere but `--emit DIR`."""

import json
import re
import shlex

from tests.planner.cli.helpers import ROOT, one_line_error, planner

VLM_R1 = ROOT / "tests" / "data" / "frameworks" / "scripts" / "VLM-R1"
# run_scripts/run_grpo_rec.sh's command (its variables expanded, its paths under the test data)
COMMAND = [
    "torchrun",
    "--nproc_per_node",
    "8",
    str(VLM_R1 / "src" / "open-r1-multimodal" / "src" / "open_r1" / "grpo_jsonl.py"),
    "--use_vllm",
    "False",
    "--output_dir",
    "out",
    "--model_name_or_path",
    "/training/models/Qwen2.5-VL-3B-Instruct",
    "--per_device_train_batch_size",
    "8",
    "--gradient_accumulation_steps",
    "2",
    "--gradient_checkpointing",
    "true",
    "--bf16",
    "--attn_implementation",
    "flash_attention_2",
    "--num_generations",
    "8",
    "--max_completion_length",
    "2048",
    "--beta",
    "0.04",
    "--deepspeed",
    str(VLM_R1 / "src" / "open-r1-multimodal" / "local_scripts" / "zero3.json"),
]
# check's --workload replaces the config's workload: the same workload in full to both, and one image a row (its
# prompt holds the image's 16,384 tokens at VLM-R1's default max_pixels, read from the command, and 2,048 of text)
SAME = [
    "--gpu",
    "h100",
    "--workload",
    "grpo",
    "--num-generations",
    "8",
    "--max-completion-length",
    "2048",
    "--beta",
    "0.04",
    "--logprobs",
    "full",
    "--max-prompt-length",
    "18432",
    "--images",
    "1",
]
HEADLINE = re.compile(
    r"plan: micro (\d+) x accum (\d+) x world (\d+) = \d+, (\S+), checkpointing (\S+), (.+), offload (\S+) "
    r"\((\w+), ([\d.]+) GiB of"
)


def autotune(*flags, cwd):
    r = planner("autotune", *flags, cwd=cwd)
    assert r.returncode == 0, r.stderr[-2000:]
    return r


def test_a_vlm_r1_command_is_planned_as_check_config_plans_it(tmp_path):
    """Issue 50: autotune planned this command as text-only SFT and wrote --gradient_checkpointing false into it."""
    r = autotune(*SAME, "--dry-run", "--emit", "emitted", "--", *COMMAND, cwd=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["emitted"]  # nothing in the working folder
    script = tmp_path / "emitted" / "memplan_command.sh"
    assert script.read_text().splitlines()[-1] == r.stdout.strip()
    cmd = shlex.split(r.stdout)
    micro, accum, world, precision, ckpt, sharding, offload, _, gib = HEADLINE.search(r.stderr).groups()
    out = json.loads(planner("check", "--config", str(script), *SAME, "--json", cwd=tmp_path).stdout)
    p = out["plan"]
    assert p["workload"]["kind"] == "grpo" and p["workload"]["logprobs"] == "full"
    assert out["images"]["images"] == 1 and out["goal"]["image_tokens"] == out["images"]["tokens_per_image"]
    assert (p["micro_batch"], p["grad_accum"], p["world_size"]) == (int(micro), int(accum), int(world))
    assert (p["precision"], p["checkpointing"], p["offload"]) == (precision, ckpt, offload)
    assert ("ZeRO-3" in sharding) == (p["zero_stage"] == 3)
    assert f"{p['memory']['device_total_bytes'] / 2**30:.1f}" == gib
    # the plan's batch, accumulation and checkpointing are the command's, said once each
    for flag, value in (("--per_device_train_batch_size", micro), ("--gradient_accumulation_steps", accum)):
        assert cmd.count(flag) == 1 and cmd[cmd.index(flag) + 1] == value
    gc = cmd.index("--gradient_checkpointing")
    fsdp = "FSDP" in sharding  # FSDP checkpoints the layers itself (fsdp_config's activation_checkpointing)
    assert cmd.count("--gradient_checkpointing") == 1
    assert cmd[gc + 1] == ("true" if ckpt == "full" and not fsdp else "false")
    if fsdp:
        cfg = json.loads((tmp_path / "emitted" / "fsdp_config.json").read_text())
        assert cfg["activation_checkpointing"] == (ckpt == "full")
    # the image settings the plan assumed: the command's own, VLM-R1's defaults
    per = out["images"]["tokens_per_image"]
    assert cmd[cmd.index("--max_pixels") + 1] == str(per * 28 * 28) == "12845056" and "--min_pixels" in cmd


def test_a_vlm_r1_command_brings_its_images_and_prompt_to_the_plan(tmp_path):
    """Without --images or workload flags, the plan's images are the command's (one a row at VLM-R1's default
    max_pixels, its prompt holding them), and `check --config` on the command autotune writes gives the same plan."""
    r = autotune("--gpu", "h100", "--dry-run", "--emit", "emitted", "--", *COMMAND, cwd=tmp_path)
    micro, accum, world, precision, ckpt, sharding, offload, _, gib = HEADLINE.search(r.stderr).groups()
    script = tmp_path / "emitted" / "memplan_command.sh"
    out = json.loads(planner("check", "--config", str(script), "--gpu", "h100", "--json", cwd=tmp_path).stdout)
    p, images = out["plan"], out["images"]
    assert (images["images"], images["tokens_per_image"], images["max_pixels"]) == (1, 16384, 12845056)
    assert out["goal"]["image_tokens"] == 16384 and p["workload"]["max_prompt_length"] == 16384 + 512
    assert (p["micro_batch"], p["grad_accum"], p["world_size"]) == (int(micro), int(accum), int(world))
    assert (p["precision"], p["checkpointing"], p["offload"]) == (precision, ckpt, offload)
    assert ("ZeRO-3" in sharding) == (p["zero_stage"] == 3)
    assert f"{p['memory']['device_total_bytes'] / 2**30:.1f}" == gib


def test_only_the_flags_the_plan_changes_are_written(tmp_path):
    """The command's own settings that the plan keeps stay as written: no --gradient_checkpointing false after its
    true, its DeepSpeed JSON where the plan's ZeRO settings are the command's, no --optim it did not ask for."""
    r = autotune(*SAME, "--dry-run", "--", *COMMAND, cwd=tmp_path)
    cmd = shlex.split(r.stdout)
    assert cmd[:4] == COMMAND[:4]
    added = cmd[len(_kept(cmd)) :]
    assert "--optim" not in cmd and "--bf16" not in added and "--num_generations" not in added
    if "checkpointing full" in r.stderr and "FSDP" not in r.stderr:
        assert cmd[cmd.index("--gradient_checkpointing") + 1] == "true"  # the command's own
    if "ZeRO-3, offload none" in r.stderr:
        assert cmd[cmd.index("--deepspeed") + 1] == COMMAND[-1] and "memplan_ds_config.json" not in r.stdout
    assert not list(tmp_path.iterdir())


def _kept(cmd: list[str]) -> list[str]:
    """The leading words of `cmd` that are the command's own, in order."""
    n = 0
    while n < len(cmd) and n < len(COMMAND) and cmd[n] in COMMAND:
        n += 1
    return cmd[:n]


def test_everything_after_the_double_dash_is_the_command_and_nothing_before_it(tmp_path):
    """Issue 50: `--workload grpo` after the model flags went into the user's command, and the parser then said
    --global-batch was missing although it was given."""
    r = autotune("--model", "qwen2.5-vl-3b", "--global-batch", "64", *SAME, "--dry-run", "--", *COMMAND, cwd=tmp_path)
    assert "= 64," in r.stderr and "--workload" not in r.stdout and "--global-batch" not in r.stdout
    one_line_error(
        planner("autotune", "--gpu", "h100", "--dry-run", "torchrun", "train.py", cwd=tmp_path),
        "your command goes after --",
    )
    one_line_error(
        planner("autotune", "--gpu", "h100", "--bogus", "1", "--", *COMMAND, cwd=tmp_path), "unrecognized arguments"
    )
    # the command's own flags that autotune also has stay the command's
    r = autotune("--gpu", "h100", "--dry-run", "--", *COMMAND, "--seq-len", "7", cwd=tmp_path)
    assert "--seq-len 7" in r.stdout


def test_a_dry_run_writes_nothing_without_emit(tmp_path):
    base = ["--model", "llama-3.1-8b", "--gpu", "h100", "--global-batch", "256", "--seq-len", "4096", "--dry-run"]
    r = autotune(*base, "--", "torchrun", "--nproc_per_node", "8", "train.py", cwd=tmp_path)
    assert "memplan_ds_config.json" in r.stdout and "wrote nothing" in r.stderr
    r = autotune(*base, cwd=tmp_path)  # the bundled trainer
    assert "memplan_plan.json" in r.stdout and not list(tmp_path.iterdir())
    r = autotune(*base, "--emit", "e", "--", "torchrun", "--nproc_per_node", "8", "train.py", cwd=tmp_path)
    cmd = shlex.split(r.stdout)
    ds = json.loads((tmp_path / "e" / "memplan_ds_config.json").read_text())
    assert cmd[cmd.index("--deepspeed") + 1] == str(tmp_path / "e" / "memplan_ds_config.json")
    assert ds["train_batch_size"] == 256 and sorted(p.name for p in tmp_path.iterdir()) == ["e"]
