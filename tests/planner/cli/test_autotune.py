"""`planner autotune`: no GPU: one line, exit 2; a fake local GPU: the plan injected into the user's command."""
import json
import shlex

import pytest

pytest.importorskip("transformers")
from planner.cli import main
from tests.conftest import fake_nvml
from tests.planner.cli.helpers import one_line_error, planner

METRIC_KEYS = {"step", "loss", "tokens", "tokens_per_s", "peak_allocated_bytes", "micro_batch", "grad_accum"}

def test_autotune_without_a_gpu_says_so_in_one_line():
    out = planner("autotune", "--model", "llama-3.1-8b", "--global-batch", "256", "--seq-len", "4096", "--dry-run",
                   "--", "torchrun", "train.py")
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("planner: error: autotune needs local NVIDIA GPUs")


def test_a_dry_run_for_a_named_kind_needs_no_local_gpu():
    """Issue 13: `autotune --dry-run --gpu h100` refused on a machine with no GPU (a Slurm login node)."""
    out = planner("autotune", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus-per-node", "8", "--global-batch",
                  "256", "--seq-len", "4096", "--dry-run", "--", "torchrun", "--nproc_per_node", "8", "train.py")
    assert out.returncode == 0, out.stderr
    cmd = shlex.split(out.stdout.strip())
    assert cmd[:4] == ["torchrun", "--nproc_per_node", "8", "train.py"] and "--per_device_train_batch_size" in cmd
    real = planner("autotune", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus-per-node", "8", "--global-batch",
                   "256", "--seq-len", "4096")      # not a dry run: it would launch, so it needs the GPUs
    one_line_error(real, "--dry-run --gpu KIND --gpus-per-node N prepares the command without one")


def test_autotune_injects_the_plan_into_the_users_command(monkeypatch, capsys):
    fake_nvml(monkeypatch, [("NVIDIA H100 80GB HBM3", 80 * 2**30)] * 8)   # a fake 8 x H100 host
    user = ["torchrun", "--nproc_per_node", "8", "train.py", "--model_name_or_path", "m", "--per_device_train_batch_size",
            "64", "--fp16", "--gradient_checkpointing", "False", "--deepspeed=old.json", "--output_dir", "out"]
    assert main(["autotune", "--model", "llama-3.1-8b", "--global-batch", "256", "--seq-len", "4096", "--dry-run",
                 "--", *user]) == 0
    cmd = shlex.split(capsys.readouterr().out.strip())
    assert main(["suggest", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus-per-node", "8", "--global-batch", "256",
                 "--seq-len", "4096", "--evidence", "analytic", "--checkpointing", "off,full", "--loss", "standard",
                 "--json"]) == 0     # autotune searches what HF's Trainer runs (export.bundled_only)
    best = json.loads(capsys.readouterr().out)["plans"][0]
    assert cmd[:6] == user[:6] and cmd[cmd.index("--output_dir") + 1] == "out"
    assert cmd.count("--per_device_train_batch_size") == 1
    assert cmd[cmd.index("--per_device_train_batch_size") + 1] == str(best["micro_batch"])
    assert cmd[cmd.index("--gradient_accumulation_steps") + 1] == str(best["grad_accum"])
    assert ("--gradient_checkpointing" in cmd) == (best["checkpointing"] == "full") and "False" not in cmd
    assert "--fp16" not in cmd and ("--bf16" in cmd) == (best["precision"] == "bf16")
    assert "old.json" not in " ".join(cmd)
    assert ("--deepspeed" in cmd) == (best["zero_stage"] >= 1)


def test_autotune_on_gpus_outside_the_catalog(monkeypatch, capsys):
    """A host of 4 GPUs the catalog does not know: refused with the catalog's kinds, then planned as the
    closest kind named with --gpu, for this host's count."""
    fake_nvml(monkeypatch, [("NVIDIA B300", 191_525_912_576)] * 4)
    base = ["autotune", "--model", "llama-3.1-8b", "--global-batch", "64", "--seq-len", "4096", "--dry-run"]
    assert main(base) == 2
    assert "'NVIDIA B300' is not in the GPU catalog; pass the closest of:" in capsys.readouterr().err
    assert main([*base, "--gpu", "h200"]) == 0
    captured = capsys.readouterr()
    assert "x world 4 = 64" in captured.err and "of 140.4)" in captured.err     # an H200's 140.4 GiB
