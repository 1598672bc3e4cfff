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
    out = planner(
        "autotune",
        "--model",
        "llama-3.1-8b",
        "--global-batch",
        "256",
        "--seq-len",
        "4096",
        "--dry-run",
        "--",
        "torchrun",
        "train.py",
    )
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("planner: error: autotune needs local NVIDIA GPUs")


def test_a_dry_run_for_a_named_kind_needs_no_local_gpu(tmp_path):
    """Issue 13: `autotune --dry-run --gpu h100` refused on a machine with no GPU (a Slurm login node)."""
    out = planner(
        "autotune",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "h100",
        "--gpus-per-node",
        "8",
        "--global-batch",
        "256",
        "--seq-len",
        "4096",
        "--dry-run",
        "--",
        "torchrun",
        "--nproc_per_node",
        "8",
        "train.py",
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    cmd = shlex.split(out.stdout.strip())
    assert cmd[:4] == ["torchrun", "--nproc_per_node", "8", "train.py"] and "--per_device_train_batch_size" in cmd
    real = planner(
        "autotune",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "h100",
        "--gpus-per-node",
        "8",
        "--global-batch",
        "256",
        "--seq-len",
        "4096",
        cwd=tmp_path,
    )  # not a dry run: it would launch, so it needs the GPUs
    one_line_error(real, "--dry-run --gpu KIND --gpus-per-node N prepares the command without one")


def test_a_dry_run_needs_no_gpu_count_and_writes_what_its_command_reads(tmp_path, monkeypatch, capsys):
    """Issue 30: `autotune --dry-run --gpu h100` still refused on a host without GPUs (it wanted --gpus-per-node
    too), and the command it printed read a DeepSpeed config or plan file it never wrote. The count is the
    command's --nproc_per_node (else 1 here); the files are written, nothing is launched."""
    fake_nvml(monkeypatch, [])  # NVML sees no GPU
    monkeypatch.chdir(tmp_path)
    base = [  # issue 50: a dry run writes nowhere but --emit DIR
        "autotune",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "h100",
        "--global-batch",
        "256",
        "--seq-len",
        "4096",
        "--dry-run",
        "--emit",
        ".",
    ]
    assert main([*base, "--", "torchrun", "--nproc_per_node", "8", "train.py"]) == 0
    out, err = capsys.readouterr()
    assert "x world 8 = 256" in err and "dry run: wrote memplan_ds_config.json, memplan_command.sh" in err
    cmd = shlex.split(out)
    ds = json.loads((tmp_path / cmd[cmd.index("--deepspeed") + 1]).read_text())
    assert ds["train_batch_size"] == 256
    assert main(base) == 0  # the bundled trainer: its plan file
    out, err = capsys.readouterr()
    assert "x world 1 = 256" in err and "dry run: wrote memplan_plan.json, memplan_command.sh" in err
    cmd = shlex.split(out)
    assert json.loads((tmp_path / cmd[cmd.index("--plan") + 1]).read_text())["plans"][0]["global_batch"] == 256


def test_autotune_injects_the_plan_into_the_users_command(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # a dry run writes the DeepSpeed config its command names
    fake_nvml(monkeypatch, [("NVIDIA H100 80GB HBM3", 80 * 2**30)] * 8)  # a fake 8 x H100 host
    user = [
        "torchrun",
        "--nproc_per_node",
        "8",
        "train.py",
        "--model_name_or_path",
        "m",
        "--per_device_train_batch_size",
        "64",
        "--fp16",
        "--gradient_checkpointing",
        "False",
        "--deepspeed=old.json",
        "--output_dir",
        "out",
    ]
    assert (
        main(
            [
                "autotune",
                "--model",
                "llama-3.1-8b",
                "--global-batch",
                "256",
                "--seq-len",
                "4096",
                "--dry-run",
                "--",
                *user,
            ]
        )
        == 0
    )
    cmd = shlex.split(capsys.readouterr().out.strip())
    assert (
        main(
            [
                "suggest",
                "--model",
                "llama-3.1-8b",
                "--gpu",
                "h100",
                "--gpus-per-node",
                "8",
                "--global-batch",
                "256",
                "--seq-len",
                "4096",
                "--precision",
                "fp16",
                "--optimizer",
                "adamw-fused",
                "--evidence",
                "analytic",
                "--checkpointing",
                "off,full",
                "--loss",
                "standard",
                "--json",
            ]
        )
        == 0
    )  # autotune searches what HF's Trainer runs (export.bundled_only)
    best = json.loads(capsys.readouterr().out)["plans"][0]
    assert cmd[:6] == user[:6] and cmd[cmd.index("--output_dir") + 1] == "out"
    assert cmd.count("--per_device_train_batch_size") == 1
    assert cmd[cmd.index("--per_device_train_batch_size") + 1] == str(best["micro_batch"])
    assert cmd[cmd.index("--gradient_accumulation_steps") + 1] == str(best["grad_accum"])
    gc = cmd.index("--gradient_checkpointing")  # said either way: TRL's configs default it to true
    on = gc + 1 == len(cmd) or cmd[gc + 1].startswith("--")
    assert cmd.count("--gradient_checkpointing") == 1 and on == (best["checkpointing"] == "full")
    assert on or cmd[gc + 1] == "false"
    assert "--fp16" in cmd and "--bf16" not in cmd and best["precision"] == "fp16"  # the command's precision
    assert "old.json" not in " ".join(cmd)
    assert ("--deepspeed" in cmd) == (best["zero_stage"] >= 1)


def test_autotune_on_gpus_outside_the_catalog(tmp_path, monkeypatch, capsys):
    """A host of 4 GPUs the catalog does not know: refused with the catalog's kinds, then planned as the
    closest kind named with --gpu, for this host's count."""
    monkeypatch.chdir(tmp_path)  # a dry run writes the plan file its command names
    fake_nvml(monkeypatch, [("Tesla P100-PCIE-16GB", 17_071_734_784)] * 4)
    base = ["autotune", "--model", "llama-3.1-8b", "--global-batch", "64", "--seq-len", "4096", "--dry-run"]
    assert main(base) == 2
    assert "'Tesla P100-PCIE-16GB' is not in the GPU catalog; pass the closest of:" in capsys.readouterr().err
    assert main([*base, "--gpu", "h200"]) == 0
    captured = capsys.readouterr()
    assert "x world 4 = 64" in captured.err and "of 140.4)" in captured.err  # an H200's 140.4 GiB


def test_an_fsdp_plan_writes_the_fsdp_config_its_command_names(tmp_path, monkeypatch, capsys):
    """The injected command passed --fsdp_config fsdp_config.json, a file autotune never wrote, and the headline
    said "zero 0" for an FSDP plan."""
    fake_nvml(monkeypatch, [])
    monkeypatch.chdir(tmp_path)
    assert (
        main(
            [
                "autotune",
                "--model",
                "llama-3.2-1b",
                "--gpu",
                "h100",
                "--global-batch",
                "64",
                "--seq-len",
                "2048",
                "--dry-run",
                "--emit",
                ".",
                "--",
                "torchrun",
                "--nproc_per_node",
                "8",
                "train.py",
                "--bf16",
            ]
        )
        == 0
    )
    out, err = capsys.readouterr()
    assert "FSDP" in err and "zero 0" not in err, err
    cmd = shlex.split(out)
    config = json.loads((tmp_path / cmd[cmd.index("--fsdp_config") + 1]).read_text())
    assert config["version"] == 2 and config["reshard_after_forward"] is False, config  # grad-op
    assert "fsdp_config.json" in err


def test_nothing_fits_says_why_and_the_nearest_settings(tmp_path, monkeypatch, capsys):
    """Before: exit 3 with nothing printed at all."""
    fake_nvml(monkeypatch, [])
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        main(
            [
                "autotune",
                "--model",
                "qwen2.5-72b",
                "--gpu",
                "h100",
                "--global-batch",
                "8",
                "--seq-len",
                "4096",
                "--dry-run",
            ]
        )
    assert e.value.code == 3
    err = capsys.readouterr().err
    assert "autotune: nothing fits qwen2.5-72b" in err and "model states alone need" in err
    assert "nearest settings that fit" in err and "LoRA rank 16" in err
    assert not list(tmp_path.iterdir())  # nothing written
