"""`planner train`: a plan from suggest --json, or check's flags; one process or torchrun; plan files checked before anything runs."""

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")
from planner.cli import main
from planner.model import catalog
from tests.planner.cli.helpers import one_line_error, planner
from tests.trainer.helpers import rows

METRIC_KEYS = {"step", "loss", "tokens", "tokens_per_s", "peak_allocated_bytes", "micro_batch", "grad_accum"}


def test_train_a_suggested_plan_in_one_process(tmp_path):
    plan = planner(
        "suggest",
        "--model",
        "debug-llama",
        "--gpu",
        "h100",
        "--global-batch",
        "4",
        "--seq-len",
        "64",
        "--precision",
        "fp32",
        "--zero",
        "0",
        "--json",
    )
    assert plan.returncode == 0, plan.stderr
    (tmp_path / "plan.json").write_text(plan.stdout)
    best = json.loads(plan.stdout)["plans"][0]
    out = planner(
        "train",
        "--plan",
        str(tmp_path / "plan.json"),
        "--device",
        "cpu",
        "--max-steps",
        "2",
        "--log",
        str(tmp_path / "m.jsonl"),
        "--save-dir",
        str(tmp_path / "ck"),
    )
    assert out.returncode == 0, out.stderr
    assert "running: " in out.stderr and "trainer.main" in out.stderr
    got = rows(tmp_path / "m.jsonl")
    assert [r["step"] for r in got] == [1, 2] and all(METRIC_KEYS <= set(r) for r in got)
    assert {(r["micro_batch"], r["grad_accum"]) for r in got} == {(best["micro_batch"], best["grad_accum"])}
    assert all(r["tokens"] > 0 and r["tokens_per_s"] > 0 for r in got)


def test_train_two_ranks_under_torchrun(tmp_path):
    out = planner(
        "train",
        "--model",
        "debug-llama",
        "--gpus-per-node",
        "2",
        "--micro-batch",
        "1",
        "--grad-accum",
        "2",
        "--seq-len",
        "48",
        "--precision",
        "fp32",
        "--device",
        "cpu",
        "--max-steps",
        "3",
        "--log",
        str(tmp_path / "m.jsonl"),
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert "torch.distributed.run --nproc_per_node 2" in out.stderr
    shown = next(line for line in out.stderr.splitlines() if line.startswith("running: "))
    assert "-m trainer.main /" in shown and shown.endswith("/memplan-run.json"), shown
    assert len(rows(tmp_path / "m.jsonl")) == 3
    # issue 13: no run file left in the working directory (nor its temporary folder), and no third-party
    # deprecation noise (DeepSpeed-free DDP here; the ZeRO run below checks DeepSpeed's)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.jsonl"]
    assert not Path(shown.split()[-1]).parent.exists()
    assert "Warning" not in out.stderr, out.stderr


def test_train_filters_deepspeed_noise_unless_verbose(tmp_path):
    pytest.importorskip("deepspeed")
    args = [
        "train",
        "--model",
        "debug-llama",
        "--gpus-per-node",
        "2",
        "--micro-batch",
        "1",
        "--seq-len",
        "48",
        "--precision",
        "fp32",
        "--device",
        "cpu",
        "--max-steps",
        "1",
        "--zero",
        "2",
    ]
    quiet = planner(*args, cwd=tmp_path)
    assert quiet.returncode == 0, quiet.stderr[-3000:]
    assert "FutureWarning" not in quiet.stderr and "done: 1 steps" in quiet.stderr
    loud = planner(*args, cwd=tmp_path, env={"MEMPLAN_VERBOSE": "1"})
    assert loud.returncode == 0 and "FutureWarning" in loud.stderr  # what the filter removes, with DeepSpeed 0.19


def test_train_dry_run_launch_forms(tmp_path, capsys):
    base = [
        "train",
        "--model",
        "debug-llama",
        "--gpus-per-node",
        "8",
        "--micro-batch",
        "1",
        "--seq-len",
        "64",
        "--save-dir",
        str(tmp_path),
        "--dry-run",
    ]
    assert main([*base, "--launcher", "deepspeed", "--zero", "2"]) == 0
    assert capsys.readouterr().out.startswith("deepspeed --num_gpus 8 --module trainer.main")
    assert main([*base, "--nnodes", "2", "--node-rank", "1", "--rdzv-endpoint", "10.0.0.1:29500"]) == 0
    cmd = capsys.readouterr().out
    assert "--nnodes 2 --node_rank 1 --rdzv_backend c10d --rdzv_endpoint 10.0.0.1:29500" in cmd
    assert main([*base, "--launcher", "slurm", "--nodes", "2"]) == 0
    cmd = capsys.readouterr().out
    assert cmd.startswith("srun --kill-on-bad-exit=1") and '"$MASTER_ADDR:$MASTER_PORT"' in cmd
    assert main(["train", "--model", "debug-llama", "--seq-len", "64"]) == 2  # no plan, no micro-batch
    assert "running:" not in capsys.readouterr().err  # issue 13: a dry run launches nothing
    assert json.loads((tmp_path / "memplan-run.json").read_text())["model"] == "debug-llama"  # issue 30


def test_a_dry_run_writes_the_run_file_its_command_needs(tmp_path):
    """Issue 30: `train --dry-run` printed `python -m trainer.main memplan-run.json` and never wrote that file.
    It writes it (the working directory without --save-dir), launches nothing, and its command runs as printed."""
    import os
    import shlex
    import subprocess

    dry = planner(
        "train",
        "--model",
        "debug-llama",
        "--micro-batch",
        "1",
        "--seq-len",
        "32",
        "--precision",
        "fp32",
        "--device",
        "cpu",
        "--max-steps",
        "1",
        "--log",
        "m.jsonl",
        "--dry-run",
        cwd=tmp_path,
    )
    assert dry.returncode == 0, dry.stderr
    assert dry.stderr.strip() == "dry run: wrote memplan-run.json; nothing launched (run the command above to train)"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memplan-run.json"]  # nothing trained
    cmd = shlex.split(dry.stdout)
    assert cmd[1:] == ["-m", "trainer.main", "memplan-run.json"]
    ran = subprocess.run(
        cmd,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert [r["step"] for r in rows(tmp_path / "m.jsonl")] == [1]


def test_an_rl_dry_run_writes_its_run_file_too(tmp_path, capsys):
    assert (
        main(
            [
                "train",
                "--workload",
                "grpo",
                "--model",
                "debug-llama",
                "--num-generations",
                "4",
                "--micro-batch",
                "4",
                "--max-prompt-length",
                "8",
                "--max-completion-length",
                "8",
                "--precision",
                "fp32",
                "--device",
                "cpu",
                "--save-dir",
                str(tmp_path),
                "--dry-run",
            ]
        )
        == 0
    )
    path = tmp_path / "memplan-rl-run.json"
    assert capsys.readouterr().out.split() == [sys.executable, "-m", "trainer.rl", str(path)]
    assert json.loads(path.read_text())["model"] == "debug-llama"


def test_train_from_a_local_folder_with_weights(tmp_path):
    import torch
    import transformers

    from recipe import hf_config

    torch.manual_seed(1)
    model = transformers.AutoModelForCausalLM.from_config(hf_config(catalog.model_config("debug-llama")))
    model.save_pretrained(tmp_path / "tiny")
    ids = tmp_path / "ids.jsonl"
    ids.write_text("\n".join(json.dumps({"input_ids": list(range(i, i + 20))}) for i in range(16)))
    out = planner(
        "train",
        "--model",
        str(tmp_path / "tiny"),
        "--micro-batch",
        "2",
        "--seq-len",
        "32",
        "--precision",
        "fp32",
        "--data",
        str(ids),
        "--device",
        "cpu",
        "--max-steps",
        "2",
        "--log",
        str(tmp_path / "m.jsonl"),
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    got = rows(tmp_path / "m.jsonl")
    assert [r["tokens"] for r in got] == [38, 38]  # pre-tokenized ids: 2 samples x 19 predicted tokens


def test_train_a_deepspeed_plan_in_one_process(tmp_path):
    pytest.importorskip("deepspeed")
    out = planner(
        "train",
        "--model",
        "debug-llama",
        "--micro-batch",
        "2",
        "--seq-len",
        "32",
        "--zero",
        "2",
        "--precision",
        "bf16",
        "--device",
        "cpu",
        "--max-steps",
        "2",
        "--log",
        str(tmp_path / "m.jsonl"),
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    got = rows(tmp_path / "m.jsonl")
    assert [r["step"] for r in got] == [1, 2] and all(r["loss"] > 0 for r in got)


def test_train_refuses_missing_data_before_starting(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    base = ["train", "--model", "debug-llama", "--gpus-per-node", "2", "--micro-batch", "1", "--seq-len", "16"]
    assert main([*base, "--data", str(tmp_path / "nope.jsonl")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"planner: error: --data '{tmp_path / 'nope.jsonl'}': not 'synthetic' and no such file"]
    (tmp_path / "ids.jsonl").write_text('{"input_ids": [1, 2, 3]}\n')
    assert main([*base, "--data", str(tmp_path / "ids.jsonl"), "--tokenizer", "tok"]) == 2
    assert "--tokenizer 'tok': no such folder" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == [tmp_path / "ids.jsonl"]  # nothing launched, no run file written


def _plan_file(tmp_path, data) -> str:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(data))
    return str(path)


def _good_plan(tmp_path) -> dict:
    return json.loads(
        planner(
            "suggest",
            "--model",
            "debug-llama",
            "--gpu",
            "h100",
            "--global-batch",
            "4",
            "--seq-len",
            "64",
            "--zero",
            "0",
            "--evidence",
            "analytic",
            "--json",
        ).stdout
    )


@pytest.mark.parametrize(
    "edit,needle",
    [
        (lambda d: [1], "expected the JSON object"),
        (lambda d: {**d, "plans": []}, "no plan in it"),
        (lambda d: {**d, "hardware": "h100"}, "not a plan file"),
        (
            lambda d: {**d, "plans": [{**d["plans"][0], "micro_batch": -3, "grad_accum": -4, "global_batch": 12}]},
            "--micro-batch -3: Input should be greater than or equal to 1",
        ),
        (
            lambda d: {**d, "plans": [{**d["plans"][0], "grad_accum": 3}]},
            "micro_batch x grad_accum x data-parallel size must equal global_batch",
        ),
        (lambda d: {**d, "plans": [{**d["plans"][0], "precision": "fp8"}]}, "precision"),
        (lambda d: {**d, "plans": [{**d["plans"][0], "offload": "optimizer"}]}, "--offload optimizer needs DeepSpeed"),
        (
            lambda d: {**d, "plans": [{**d["plans"][0], "micro_batch": 100_000, "global_batch": 100_000}]},
            "--micro-batch 100000: Input should be less than or equal to 65536",
        ),
        (lambda d: {**d, "hardware": {**d["hardware"], "gpus_per_node": 2}}, "is not the hardware's gpus_per_node"),
        (lambda d: {**d, "model": {**d["model"], "name": "llama-9"}}, "--model 'llama-9' is not a bundled model"),
    ],
)
def test_a_plan_file_is_checked_before_anything_runs(tmp_path, edit, needle):
    """Issue 12: micro_batch -3 in a plan file made each rank grow to 24 GB; a file holding [1] gave a
    traceback. Nothing is printed, written or launched before the check."""
    path = _plan_file(tmp_path, edit(_good_plan(tmp_path)))
    r = planner("train", "--plan", path, "--device", "cpu", "--max-steps", "1", cwd=tmp_path, timeout=60)
    one_line_error(r, needle)
    assert "running:" not in r.stderr and not (tmp_path / "memplan-run.json").exists()
