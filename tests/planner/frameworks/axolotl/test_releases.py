"""axolotl's releases as the reading plans them (planner/frameworks/axolotl/releases.py, read at each tag of
axolotl-ai-cloud/axolotl): a pin of axolotl beside the YAML, the keys only some releases take, and each line's
defaults that moved (the optimizer: adamw_hf to v0.7.1, adamw_torch_fused from v0.8.0; GRPO's beta from the TRL each
line pins; v0.4.0's required batch and length); `--framework axolotl@RELEASE` on check --config and suggest, and the
YAML an older line is written in. DeepSpeed: one line, its memory defaults unmoved since v0.9.0."""

import os
import subprocess
from pathlib import Path

import pytest

from planner import checkconfig, intake
from planner.cli import main
from planner.config.release import in_memplan_terms
from planner.errors import BadInput
from planner.frameworks import FRAMEWORKS
from planner.frameworks.base import Default
from tests.planner.intake.test_round_trip import written_and_read_back

SFT = "base_model: Qwen/Qwen2.5-0.5B\nmicro_batch_size: 1\nsequence_len: 128\nbf16: true\n{extra}"
GRPO = (
    "base_model: Qwen/Qwen2.5-0.5B\nrl: grpo\nmicro_batch_size: 8\ngradient_accumulation_steps: 1\nsequence_len: 512\n"
    "bf16: true\ntrl:\n  num_generations: 8\n  max_completion_length: 256\n"
)


def _write(tmp_path: Path, text: str, pins: str = "") -> Path:
    if pins:
        (tmp_path / "requirements.txt").write_text(pins)
    path = tmp_path / "axolotl.yaml"
    path.write_text(text)
    return path


def _check(path: Path, **given):
    out = checkconfig.check_config([str(path)], {"gpu": "h100", **given})
    return out, {x["field"]: x for x in out.config["settings"]}


@pytest.mark.parametrize(
    ("text", "line"),
    [("", "0.17"), ("0.4.0", "0.4"), ("0.5.2", "0.5"), ("v0.6.0", "0.5"), ("0.7.1", "0.7"), ("0.11.0.post1", "0.8"),
     ("0.12.2", "0.12"), ("0.13.2", "0.12"), ("0.14.0", "0.14"), ("0.16.1", "0.14"), ("0.17.0", "0.17"),
     ("0.19.0", "0.17")],
)  # fmt: skip
def test_an_axolotl_release_is_its_line_or_a_version_inside_one(text, line):
    assert FRAMEWORKS["axolotl"].release(text).name == line


def test_a_release_axolotl_does_not_list_is_one_line_naming_the_accepted(tmp_path):
    path = _write(tmp_path, SFT.format(extra=""))
    with pytest.raises(BadInput) as e:
        _check(path, framework="axolotl@0.3.0")
    msg = str(e.value)
    assert "\n" not in msg and "axolotl has no release '0.3.0'; it takes 0.4, 0.5, 0.7, 0.8, 0.12, 0.14" in msg


def test_a_pin_decides_the_optimizer_adamw_hf_to_0_7_fused_from_0_8(tmp_path):
    """v0.5.0 v0_4_1/__init__.py:421-432 adamw_hf (planned as the foreach step, a full-size temporary); v0.8.0
    utils/schemas/training.py:53-55 adamw_torch_fused: the same file needs less from 0.8 on."""
    path = _write(tmp_path, SFT.format(extra=""), pins="axolotl[deepspeed]==0.5.2\n")
    old, s = _check(path)
    assert (
        s["framework"]["value"] == "axolotl@0.5"
        and "requirements.txt:1 axolotl[deepspeed]==0.5.2" in (s["framework"]["source"])
    )
    assert s["optimizer"]["value"] == "adamw" and "v0_4_1/__init__.py:421-432" in s["optimizer"]["source"]
    path = _write(tmp_path, SFT.format(extra=""), pins="axolotl==0.8.1\n")
    new, s = _check(path)
    assert s["framework"]["value"] == "axolotl@0.8" and s["optimizer"]["value"] == "adamw-fused"
    assert old.plan.memory.device_total_bytes > new.plan.memory.device_total_bytes
    _, s = _check(_write(tmp_path, SFT.format(extra="optimizer: adamw_torch_fused\n")), framework="axolotl@0.5")
    assert s["optimizer"]["value"] == "adamw-fused"  # a key the file sets is the file's, whatever the release


def test_grpo_keeps_a_reference_model_where_the_line_pins_trl_0_18_or_older(tmp_path):
    """beta None in axolotl's trl section is TRL's GRPOConfig default: 0.04 under trl==0.16.0 (v0.8.0
    requirements.txt:20) .. 0.18.2 (v0.11.0), 0.0 under trl==0.21.0 (v0.12.0 requirements.txt:22) and later."""
    old, s = _check(_write(tmp_path, GRPO, pins="axolotl==0.10.0\n"))
    assert s["workload.beta"]["value"] == 0.04 and "trl==0.16.0" in s["workload.beta"]["source"]
    assert "grpo_config.py:213-214" in s["workload.beta"]["source"]
    new, s = _check(_write(tmp_path, GRPO, pins="axolotl==0.12.0\n"))
    assert s["workload.beta"]["value"] == 0.0 and "trl==0.27.0" in s["workload.beta"]["source"]
    assert new.plan.workload.beta == 0.0
    assert old.plan.memory.device_total_bytes > new.plan.memory.device_total_bytes  # the reference model
    given, s = _check(_write(tmp_path, GRPO + "  beta: 0.0\n", pins="axolotl==0.10.0\n"))
    assert given.plan.workload.beta == 0.0  # the file's beta, not the line's default


def test_grpo_before_0_7_is_refused(tmp_path):
    with pytest.raises(BadInput, match="cannot run --workload grpo: it runs sft, dpo"):
        _check(_write(tmp_path, GRPO), framework="axolotl@0.6.0")


def test_keys_only_some_releases_take_narrow_the_lines_and_the_newest_is_assumed(tmp_path):
    r = intake.read([str(_write(tmp_path, SFT.format(extra="sequence_parallel_degree: 1\n")))])
    s = {x.field: x for x in r.settings}
    assert s["framework"].value == "axolotl" and r.releases == ("0.8", "0.12", "0.14", "0.17")
    assert "release assumed: axolotl 0.17, the newest of 0.8, 0.12, 0.14, 0.17" in s["framework"].source
    assert "sequence_parallel_degree: 1: taken by axolotl 0.8 .. 0.17 only" in s["framework"].source
    plain = intake.read([str(_write(tmp_path, SFT.format(extra="")))])
    assert plain.releases == ("0.4", "0.5", "0.7", "0.8", "0.12", "0.14", "0.17")  # check --config plans each


def test_offload_checkpointing_narrows_the_lines_to_0_8_and_newer(tmp_path):
    """gradient_checkpointing: offload is a value from v0.8.0 (utils/schemas/config.py:178-180 Literal["unsloth",
    "offload"]); v0.7.1's schema takes "unsloth" or a bool (v0_4_1/__init__.py:781) and refuses it."""
    r = intake.read([str(_write(tmp_path, SFT.format(extra="gradient_checkpointing: offload\n")))])
    assert r.releases == ("0.8", "0.12", "0.14", "0.17") and r.request["checkpointing"] == "offload-inputs"
    r = intake.read([str(_write(tmp_path, SFT.format(extra="gradient_checkpointing: true\n")))])
    assert r.releases == ("0.4", "0.5", "0.7", "0.8", "0.12", "0.14", "0.17")


def test_a_key_the_pinned_release_does_not_take_is_dropped_as_axolotl_drops_it(tmp_path):
    """attn_implementation came at v0.12.0 (utils/schemas/config.py:554); before it flash_attention."""
    text = SFT.format(extra="attn_implementation: flash_attention_2\n")
    r = intake.read([str(_write(tmp_path, text, pins="axolotl==0.8.0\n"))])
    assert any("attn_implementation" in u and "not an axolotl 0.8 key" in u for u in r.unplanned)
    assert r.request.get("attention") != "flash"
    r = intake.read([str(_write(tmp_path, text, pins="axolotl==0.12.0\n"))])
    assert r.request["attention"] == "flash"


def test_0_4_stops_without_micro_batch_size_and_sequence_len(tmp_path):
    """v0.4.0 has no schema: utils/config.py:47-52 computes the batch from micro_batch_size."""
    r = intake.read([str(_write(tmp_path, "base_model: Qwen/Qwen2.5-0.5B\n", pins="axolotl==0.4.0\n"))])
    for key in ("micro_batch_size", "sequence_len", "gradient_accumulation_steps"):
        assert any(f"axolotl 0.4 stops without {key}" in u for u in r.unplanned), key
    s = {x.field: x for x in r.settings}
    assert r.request["micro_batch"] == 1 and s["micro_batch"].source.startswith("memplan assumption")
    newer = intake.read([str(_write(tmp_path, "base_model: Qwen/Qwen2.5-0.5B\n", pins="axolotl==0.5.0\n"))])
    assert not any("stops without" in u for u in newer.unplanned) and newer.request["seq_len"] == 512


def test_unsloth_checkpointing_is_offloaded_checkpointing(tmp_path):
    """gradient_checkpointing: unsloth (v0.5.0-v0.9.x) offloads each layer's input to the host
    (v0.5.0 utils/gradient_checkpointing/unsloth.py:19-30): offload-inputs."""
    r = intake.read([str(_write(tmp_path, SFT.format(extra="gradient_checkpointing: unsloth\n")))])
    assert r.request["checkpointing"] == "offload-inputs"


@pytest.mark.parametrize(
    ("release", "keys", "absent"),
    [("0.5", ('gradient_checkpointing: "unsloth"', "sdp_attention: true"), "attn_implementation"),
     ("0.8", ('gradient_checkpointing: "offload"', "sdp_attention: true"), "activation_offloading"),
     ("", ("activation_offloading: true", 'attn_implementation: "sdpa"'), "sdp_attention")],
)  # fmt: skip
def test_an_older_line_is_written_in_its_own_attention_and_offload_keys(tmp_path, release, keys, absent):
    argv = ["suggest", "--model", "qwen2.5-0.5b", "--gpu", "h100", "--global-batch", "8", "--seq-len", "1024"]
    name = f"axolotl@{release}" if release else "axolotl"
    argv += ["--checkpointing", "offload-inputs", "--attention", "sdpa", "--framework", name, "--emit", str(tmp_path)]
    assert main(argv) == 0
    text = (tmp_path / "axolotl.yaml").read_text()
    assert all(k in text for k in keys) and absent not in text
    assert (f"planned as axolotl@{release}" in text) == bool(release)
    back = intake.read([str(tmp_path / "axolotl.yaml")])
    assert (back.request["checkpointing"], back.request["attention"]) == ("offload-inputs", "sdpa")


def test_0_4_runs_no_offloaded_checkpointing(capsys):
    argv = ["suggest", "--model", "qwen2.5-0.5b", "--gpu", "h100", "--global-batch", "8", "--seq-len", "1024"]
    assert main([*argv, "--checkpointing", "offload-inputs", "--framework", "axolotl@0.4"]) != 0
    assert "cannot run --checkpointing offload-inputs: it runs off, full" in capsys.readouterr().err
    assert main([*argv, "--checkpointing", "offload-inputs", "--framework", "axolotl@0.5"]) == 0
    assert main([*argv, "--checkpointing", "offload", "--framework", "axolotl@0.5"]) != 0  # no checkpoint-less offload


def test_deepspeed_is_one_line_its_memory_defaults_unmoved_since_0_9():
    ds = FRAMEWORKS["deepspeed"]
    assert [r.name for r in ds.releases] == ["0.9"] and ds.release("0.16.4") is ds.newest
    assert "runtime/zero/config.py" in ds.releases[0].source
    with pytest.raises(BadInput, match="no release '0.8.3'; it takes 0.9, or a version from 0.9"):
        ds.release("0.8.3")


def test_a_launched_run_takes_the_pin_beside_its_launch_script(tmp_path):
    _write(tmp_path, SFT.format(extra=""), pins="axolotl==0.6.0\n")
    (tmp_path / "run.sh").write_text("accelerate launch -m axolotl.cli.train axolotl.yaml\n")
    r = intake.read([str(tmp_path / "run.sh")])
    s = {x.field: x for x in r.settings}
    assert s["framework"].value == "axolotl@0.5" and "requirements.txt:1 axolotl==0.6.0" in s["framework"].source
    assert s["optimizer"].value == "adamw" and s["optimizer"].source.startswith("axolotl@0.5 default")


@pytest.mark.parametrize(
    ("line", "trl_lines"),
    [("0.7", ("0.15",)), ("0.8", ("0.15",)), ("0.12", ("0.19", "0.22")), ("0.14", ("0.22",)), ("0.17", ("1.0", "1.7"))],
)
def test_each_line_takes_the_meanings_of_the_trl_it_pins_from_trl_s_own_lines(line, trl_lines):
    """axolotl v0.7.0 pins trl==0.15.0, v0.8.0..v0.11.0 trl 0.16.0..0.18.2 (TRL's line 0.15), v0.12.0..v0.16.1 trl
    0.21.0..0.29.0 (TRL's 0.19, 0.22), v0.17.0..0.19.0 trl 1.5.1..1.9.0 (TRL's 1.0, 1.7): beta and the log-prob head are those lines' declarations, alike over them."""
    r = FRAMEWORKS["axolotl"].release(line)
    trl = [FRAMEWORKS["trl"].release(t) for t in trl_lines]
    for t in trl:
        assert t.workload["logprobs"].value == r.workload["logprobs"].value == "full"
        assert t.workload.get("beta", Default(0.0, "")).value == r.workload.get("beta", Default(0.0, "")).value
    assert trl[-1].workload["logprobs"].source in r.workload["logprobs"].source  # TRL's citation, not restated


def test_dpo_and_grpo_score_the_whole_logits_and_the_completion_length_is_axolotl_s_open_one(tmp_path):
    """trl v1.9.0 dpo_trainer.py:1201, grpo_trainer.py:1521 (what 0.19.0 pins); axolotl passes max_completion_length
    None (core/trainers/grpo/__init__.py:104), so TRL's 256 never applies: 512 is planned as memplan's assumption.
    Pinned at 0.19.0: unpinned, every line is planned and the hungriest answered (planner.checkconfig)."""
    pin = "axolotl==0.19.0\n"
    out, s = _check(_write(tmp_path, GRPO.replace("  max_completion_length: 256\n", ""), pin))
    assert out.plan.workload.logprobs == "full" and "trl v1.9.0" in s["workload.logprobs"]["source"]
    assert "memplan assumption" in s["workload.max_completion_length"]["source"]
    assert out.plan.workload.max_completion_length == 512
    liger, s = _check(_write(tmp_path, GRPO + "  use_liger_loss: true\n", pin))
    assert liger.plan.workload.logprobs == "fused"
    assert liger.plan.memory.device_total_bytes < out.plan.memory.device_total_bytes - 2**20
    dpo = in_memplan_terms({"framework": "axolotl", "workload": {"kind": "dpo"}})
    assert dpo["workload"]["logprobs"] == "full"  # the framework's head where a request names none


@pytest.mark.skipif(
    not os.environ.get("MEMPLAN_AXOLOTL_PYTHON"), reason="axolotl's own venv (Makefile FRAMEWORK_PYTHONS)"
)
def test_the_installed_axolotl_pins_trl_1_9_and_passes_an_open_completion_length():
    """The cited sources in the venv axolotl 0.19.0 runs in: its pin and its GRPO strategy's line 104."""
    code = (  # the files as text: importing them loads torch
        "import importlib.metadata as m, importlib.util as u, pathlib;"
        "print([r for r in m.requires('axolotl') if r.startswith('trl')]);"
        "d = pathlib.Path(u.find_spec('axolotl').origin).parent;"
        "print((d / 'core/trainers/grpo/__init__.py').read_text().splitlines()[103].strip());"
        "t = pathlib.Path(u.find_spec('trl').origin).parent / 'trainer/grpo_config.py';"
        "print(' '.join(t.read_text().splitlines()[487:489]).split()[-1])"
    )
    out = subprocess.run([os.environ["MEMPLAN_AXOLOTL_PYTHON"], "-c", code], capture_output=True, text=True, check=True)
    pins, line, default_ = out.stdout.splitlines()
    assert pins == "['trl==1.9.0']"
    assert line == 'grpo_args_kwargs["max_completion_length"] = trl.max_completion_length'
    assert default_ == "default=256,"  # TRL's own (grpo_config.py:488-489), which axolotl's None overrides


def test_muon_runs_from_0_8_and_is_refused_before_it(tmp_path):
    """optimizer: muon came at v0.8.0 (PR #2367; schemas/enums.py:54): the file narrows the lines to 0.8 and newer;
    a line before it refuses it in one line; bfloat16: true loads the weights in bf16 without autocast."""
    path = _write(tmp_path, SFT.format(extra="optimizer: muon\nbf16: false\nbfloat16: true\n"))
    assert intake.read([str(path)]).releases == ("0.8", "0.12", "0.14", "0.17")
    out, s = _check(path)
    assert s["optimizer"]["value"] == "muon" and s["precision"]["value"] == "bf16-pure"
    assert out.plan.memory.optimizer_bytes > 0
    with pytest.raises(BadInput, match=r"\(axolotl\) cannot run --optimizer muon: it runs adamw, ") as e:
        _check(path, framework="axolotl@0.7")
    assert "\n" not in str(e.value) and "muon," not in str(e.value)
    body = {"model": "qwen2.5-0.5b", "gpu": "h100", "gpus_per_node": 2, "micro_batch": 2, "grad_accum": 1}
    body |= {"seq_len": 1024, "framework": "axolotl", "optimizer": "muon", "precision": "bf16-pure"}
    res, files, _, back = written_and_read_back(body, tmp_path)  # optimizer: muon written, read back the same
    assert 'optimizer: "muon"' in files["axolotl.yaml"] and dict(back.plan.knobs) == dict(res.plan.knobs)


def test_galore_and_apollo_run_from_the_lines_whose_transformers_has_them(tmp_path):
    """GaLore's and APOLLO's optim pass through to transformers' OptimizerNames: galore_adamw from v0.5.0 (transformers
    4.46.1; v0.4.0's 4.37.0 has none, and reads no optim_target_modules), apollo_adamw from transformers 4.49.0 (v0.7.1's
    pin, v0.6.0's >=4.46.3): each narrows the lines; a line before refuses it in one line. The file's targets and rank
    are read and written back the same; without optim_target_modules transformers raises: refused in one line."""
    galore = "optimizer: galore_adamw\noptim_target_modules: [q_proj, v_proj]\noptim_args: rank=64\n"
    path = _write(tmp_path, SFT.format(extra=galore))
    assert intake.read([str(path)]).releases == ("0.5", "0.7", "0.8", "0.12", "0.14", "0.17")
    _, s = _check(path)
    assert [s[k]["value"] for k in ("optimizer", "optimizer_rank", "optimizer_targets")] == [
        "galore-adamw",
        64,
        "q_proj,v_proj",
    ]
    with pytest.raises(BadInput, match=r"\(axolotl\) cannot run --optimizer galore-adamw: it runs adamw, ") as e:
        _check(path, framework="axolotl@0.4")
    assert "\n" not in str(e.value)
    apollo = _write(tmp_path, SFT.format(extra="optimizer: apollo_adamw\noptim_target_modules: all_linear\n"))
    assert intake.read([str(apollo)]).releases == ("0.5", "0.7", "0.8", "0.12", "0.14", "0.17")
    bare = _write(tmp_path, SFT.format(extra="optimizer: galore_adamw_8bit\n"))
    with pytest.raises(BadInput, match="no optim_target_modules: transformers raises ValueError") as e:
        intake.read([str(bare)])
    assert "\n" not in str(e.value) and "optimizer: galore_adamw_8bit" in str(e.value)
    body = {"model": "qwen2.5-0.5b", "gpu": "h100", "micro_batch": 1, "grad_accum": 1, "seq_len": 1024}
    body |= {"framework": "axolotl", "optimizer": "galore-adamw-8bit", "optimizer_rank": 32}
    body |= {"optimizer_targets": "q_proj,v_proj", "precision": "bf16-pure"}
    res, files, _, back = written_and_read_back(body, tmp_path)
    assert 'optimizer: "galore_adamw_8bit"' in files["axolotl.yaml"]
    fields = ("optimizer", "optimizer_rank", "optimizer_targets", "optimizer_projection")
    assert [getattr(back.plan.knobs, f) for f in fields] == [getattr(res.plan.knobs, f) for f in fields]


def test_muon_under_fsdp2_is_planned_on_one_gpu_from_0_14(tmp_path):
    """v0.14.0+ take Muon beside FSDP2 (validation.py:891-903; v0.8.0-v0.13.x refuse it): one GPU builds no device
    mesh, so the plain Muon runs (states whole, as without FSDP); several run DistMuon, whose step is not measured."""
    fsdp = "fsdp_config:\n  fsdp_version: 2\n  fsdp_transformer_layer_cls_to_wrap: Qwen2DecoderLayer\n"
    path = _write(tmp_path, SFT.format(extra="optimizer: muon\n" + fsdp))
    out, _ = _check(path)
    assert (out.plan.knobs.fsdp, out.plan.knobs.optimizer, out.plan.world_size) == ("full", "muon", 1)
    with pytest.raises(BadInput, match="runs Muon under FSDP2 on several GPUs as DistMuon"):
        _check(path, gpus_per_node=8)
    for line in ("0.8", "0.12"):  # v0.8.0-v0.13.x: "incompatible with DeepSpeed and FSDP" (validation.py:753-758)
        with pytest.raises(BadInput, match="--optimizer muon steps whole matrices in torch: it runs without DeepSpeed"):
            _check(path, framework=f"axolotl@{line}")


def test_axolotls_cli_turns_expandable_segments_on(tmp_path):
    """axolotl's CLI sets PYTORCH_CUDA_ALLOC_CONF expandable_segments:True where the environment sets none (0.19.0
    cli/main.py:48, since v0.5.0 train.py:56-63); v0.4.0 sets none; a command's own variable decides; `accelerate
    launch -m axolotl.cli.train` sets them at v0.8.0-v0.11.x (cli/train.py:38), not at 0.19.0 (only cli/main.py)."""
    path = _write(tmp_path, SFT.format(extra=""))
    r = intake.read([str(path)])
    assert r.request["expandable_segments"] is True
    assert "set_pytorch_cuda_alloc_conf" in {s.field: s.source for s in r.settings}["expandable_segments"]
    (tmp_path / "old").mkdir()
    old = intake.read([str(_write(tmp_path / "old", SFT.format(extra=""), pins="axolotl==0.4.0\n"))])
    assert old.request["expandable_segments"] is False
    run = "{}accelerate launch -m axolotl.cli.train axolotl.yaml\n"
    (tmp_path / "run.sh").write_text(run.format("export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False\n"))
    assert intake.read([str(tmp_path / "run.sh")]).request["expandable_segments"] is False
    (tmp_path / "run.sh").write_text(run.format(""))
    assert intake.read([str(tmp_path / "run.sh")]).request.get("expandable_segments") is None
    (tmp_path / "requirements.txt").write_text("axolotl==0.8.1\n")  # v0.8.0 cli/train.py:38 sets them too
    assert intake.read([str(tmp_path / "run.sh")]).request["expandable_segments"] is True
    (tmp_path / "requirements.txt").unlink()
    (tmp_path / "run.sh").write_text("axolotl train axolotl.yaml\n")
    assert intake.read([str(tmp_path / "run.sh")]).request["expandable_segments"] is True
