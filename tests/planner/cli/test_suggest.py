"""`planner suggest`: ranked plans, the JSON contract, --emit, exit codes, bounds."""

import json
import subprocess
import sys

import pytest

from planner.config.spec import Plan
from planner.export import export
from tests.planner.cli.helpers import MEMORY_KEYS, PLAN_KEYS, SUGGEST, one_line_error, planner


def test_suggest_json_contract():
    r = planner(*SUGGEST, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert set(out) >= {"model", "hardware", "goal", "plans", "rejected"}
    assert out["model"]["params"] == 8_030_261_248
    for p in out["plans"]:
        assert PLAN_KEYS <= set(p) and MEMORY_KEYS <= set(p["memory"])
        assert p["micro_batch"] * p["grad_accum"] * p["world_size"] == 256
        assert p["evidence"] == "analytic" and p["fits"]
        assert set(p["launch"]) == {
            "hf_args",
            "deepspeed_config",
            "command",
            "note",
            "accelerate_config",
            "peft_config",
            "quantization_config",
            "quantization_class",
            "framework_files",
        }
        assert p["launch"]["peft_config"] is None and p["launch"]["quantization_config"] is None  # LoRA / QLoRA only
        assert p["launch"]["quantization_class"] is None
        assert p["framework"] == "memplan" and p["launch"]["framework_files"] is None  # LF / swift / axolotl only
        assert (p["launch"]["accelerate_config"] is None) == (p["fsdp"] == "off")  # FSDP plans only
        assert p["token_batches"] is None  # set by a token budget only
        # a note exactly when HF's Trainer cannot run the plan, whose command is then the bundled trainer's
        assert (p["launch"]["note"] is None) == (not export.bundled_only(Plan.model_validate(p)))
        assert p["launch"]["command"].startswith("planner train") == (p["launch"]["note"] is not None)
        assert all(isinstance(p["memory"][k], int) for k in MEMORY_KEYS)


def test_suggest_table_and_nothing_fits_exit_3():
    r = planner(*SUGGEST, "--top", "3")
    assert r.returncode == 0 and "tokens/s" in r.stdout and "GiB" in r.stdout
    r = planner(
        "suggest",
        "--model",
        "qwen2.5-72b",
        "--gpu",
        "a100-80gb",
        "--gpus-per-node",
        "8",
        "--global-batch",
        "64",
        "--seq-len",
        "4096",
        "--offload",
        "none",
        "--checkpointing",
        "off,full",
        "--loss",
        "standard",
        "--json",
    )
    out = json.loads(r.stdout)
    assert r.returncode == 3 and out["plans"] == [] and len(out["rejected"]) == 12  # 8 ZeRO/DDP, 4 FSDP families
    assert sum(p["fsdp"] != "off" for p in out["rejected"]) == 4


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--global-batch", "0"], "--global-batch 0"),
        (["--global-batch", "-4"], "--global-batch -4"),
        (["--model", "llama-9"], "--model 'llama-9' is not a bundled model"),
        (["--gpu", "mi300x"], "--gpu 'mi300x' is not in the GPU catalog (`planner gpus` lists all"),
        (["--precision", "bf17"], "--precision 'bf17'"),
        (["--zero", "5"], "--zero '5'"),
        (["--global-batch", "255"], "nearest valid global batches: 248, 256"),
        (["--model", "/no/such/config.json"], "no such config.json"),
        (["--gpu", "local"], "--gpu local"),
        (["--image-tokens", "64"], "has no vision tower"),
        (["--model", "gpt2", "--seq-len", "2048"], "gpt2 has learned positions for at most 1024 tokens"),
    ],
)
def test_bad_input_exits_2_with_one_line(args, needle):
    base = dict(zip(SUGGEST[1::2], SUGGEST[2::2]))
    for flag, value in zip(args[::2], args[1::2]):
        base[flag] = value
    r = planner("suggest", *[x for kv in base.items() for x in kv])
    assert r.returncode == 2
    assert needle in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_malformed_config_exits_2(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    r = planner("suggest", "--model", str(tmp_path), "--gpu", "a100-40gb", "--global-batch", "8", "--seq-len", "128")
    assert r.returncode == 2 and "malformed config.json" in r.stderr


def test_emit_writes_launch_files(tmp_path):
    r = planner(*SUGGEST, "--zero", "3", "--emit", str(tmp_path))
    assert r.returncode == 0
    ds = json.loads((tmp_path / "ds_config.json").read_text())
    args = json.loads((tmp_path / "train_args.json").read_text())
    assert ds["train_batch_size"] == 256 == ds["train_micro_batch_size_per_gpu"] * ds["gradient_accumulation_steps"] * 8
    assert args["per_device_train_batch_size"] == ds["train_micro_batch_size_per_gpu"]
    sbatch = (tmp_path / "launch.sbatch").read_text()
    assert "srun" in sbatch and "torchrun" in sbatch and "MASTER_ADDR" in sbatch and "MASTER_PORT" in sbatch


def test_analytic_path_never_imports_torch():
    code = (
        "import sys; from planner.cli import main; "
        "rc = main(['suggest','--model','qwen2.5-7b','--gpu','h100','--gpus-per-node','8',"
        "'--global-batch','64','--seq-len','2048','--json']); "
        "assert rc == 0; assert 'torch' not in sys.modules, 'torch imported'; print('clean')"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0 and r.stdout.strip().endswith("clean"), r.stderr


def test_a_global_batch_past_the_bound_is_refused_at_once():
    """Issue 12: --global-batch 10^18 never finished."""
    r = planner(
        "suggest",
        "--model",
        "llama-3.2-1b",
        "--gpu",
        "h100",
        "--global-batch",
        str(10**18),
        "--seq-len",
        "1024",
        timeout=20,
    )
    one_line_error(r, "--global-batch 1000000000000000000: Input should be less than or equal to 16777216")


@pytest.mark.parametrize(
    "flag,value,needle",
    [
        ("--inter-node-gbps", "nan", "--inter-node-gbps 'nan': expected a finite number"),
        ("--host-ram-gb", "inf", "--host-ram-gb 'inf': expected a finite number"),
        ("--host-ram-gb", "1e300", "--host-ram-gb 1e+300: Input should be less than or equal to 1000000"),
        ("--seq-len", "4194304", "--seq-len 4194304: Input should be less than or equal to 2097152"),
        ("--gpus-per-node", "65", "--gpus-per-node 65: Input should be less than or equal to 64"),
        ("--lora-rank", "5000", "--lora-rank 5000: Input should be less than or equal to 4096"),
        ("--model", "x" * 300, "path or name too long"),
    ],
)
def test_the_cli_enforces_the_apis_bounds(flag, value, needle):
    base = dict(zip(SUGGEST[1::2], SUGGEST[2::2]))
    base[flag] = value
    one_line_error(planner("suggest", *[x for kv in base.items() for x in kv], timeout=20), needle)


def test_emit_into_an_existing_file_is_refused_before_planning(tmp_path):
    """Issue 12: --emit into a file that exists gave a traceback (after planning)."""
    f = tmp_path / "taken"
    f.write_text("mine")
    one_line_error(planner(*SUGGEST, "--emit", str(f)), "a file of that name exists; --emit takes a folder")
    assert f.read_text() == "mine"


def test_verify_probes_the_best_plan(tmp_path):
    pytest.importorskip("transformers")
    r = planner(
        "suggest",
        "--model",
        "debug-llama",
        "--gpu",
        "h100",
        "--global-batch",
        "4",
        "--seq-len",
        "128",
        "--zero",
        "0",
        "--top",
        "2",
        "--evidence",
        "analytic",
        "--verify",
        "--json",
        store=tmp_path / "s.sqlite",
    )
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    assert out["verified"]["status"] == "ok" and out["plans"][0]["evidence"] == "simulated"


def test_on_one_gpu_plain_ddp_ranks_above_deepspeed_at_the_same_speed():
    """Issue 13: on one GPU ZeRO-2 was ranked first at DDP's predicted speed (DeepSpeed shards nothing there)."""
    out = json.loads(
        planner(
            "suggest",
            "--model",
            "llama-3.2-1b",
            "--gpu",
            "h100",
            "--global-batch",
            "16",
            "--seq-len",
            "2048",
            "--evidence",
            "analytic",
            "--json",
        ).stdout
    )
    first, second = out["plans"][:2]
    assert first["tokens_per_s"] == second["tokens_per_s"]
    assert (first["zero_stage"], first["offload"]) == (0, "none") and second["zero_stage"] > 0


@pytest.mark.parametrize("per_node", ["1", "4"])
def test_host_ram_advice_says_what_helps_whatever_the_gpus_per_node(per_node):
    """On one node 4 GPUs need the host RAM of 4 ranks' shares as 8 need 8 ranks' (the same total): fewer GPUs per
    node does not help; more host RAM, more nodes or LoRA do."""
    out = json.loads(
        planner(
            "suggest",
            "--model",
            "llama-3.1-70b",
            "--gpu",
            "h100",
            "--gpus-per-node",
            per_node,
            "--global-batch",
            "8",
            "--seq-len",
            "1024",
            "--zero",
            "3",
            "--offload",
            "optimizer+params",
            "--host-ram-gb",
            "16",
            "--evidence",
            "analytic",
            "--json",
        ).stdout
    )
    reasons = [p["reason"] for p in out["rejected"]]
    assert reasons and all("more host RAM" in r and "more nodes" in r and "LoRA" in r for r in reasons), reasons
    assert not any("fewer GPUs" in r for r in reasons), reasons


def test_progress_is_quiet_with_json():
    from contextlib import nullcontext

    from planner.cli import printout

    printout.QUIET = True
    try:
        assert isinstance(printout.status("planning"), nullcontext)
    finally:
        printout.QUIET = False


def test_long_work_shows_its_step_and_elapsed_time_on_a_terminal(monkeypatch):
    """Issue 13: --verify ran for about a minute with no progress shown."""
    import io
    import time

    from rich.console import Console

    from planner.cli import printout

    out = io.StringIO()
    monkeypatch.setattr(printout, "err_console", lambda: Console(file=out, force_terminal=True, width=80))
    monkeypatch.setattr("planner.cli.plain.piped", lambda stream=None: False)  # stderr a terminal, as the console
    with printout.status("verifying with a sim probe"):
        time.sleep(1.2)
    shown = out.getvalue()
    assert "verifying with a sim probe" in shown and "0:00:01" in shown
