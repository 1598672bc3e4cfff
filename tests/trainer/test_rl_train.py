"""`planner train --workload grpo|dpo` drives TRL's own trainers (trainer/rl.py) on a tiny preset, on CPU: in one
process and under torchrun with two gloo ranks, with the built-in reward or the user's module:function."""

import json
import math
import os
import subprocess
import sys

import pytest

pytest.importorskip("trl")
from tests.trainer.helpers import ROOT

GRPO = [
    "--workload",
    "grpo",
    "--model",
    "debug-llama",
    "--num-generations",
    "4",
    "--max-prompt-length",
    "8",
    "--max-completion-length",
    "8",
    "--precision",
    "fp32",
    "--max-steps",
    "2",
    "--device",
    "cpu",
    "--json",
]


def train(*flags, env=None, stderr=None):
    r = subprocess.run(
        [sys.executable, "-m", "planner.cli", "train", *flags],
        cwd=ROOT,
        capture_output=True,
        check=False,
        text=True,
        timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})},
    )
    assert r.returncode == 0, r.stderr[-3000:]
    if stderr is not None:
        stderr.append(r.stderr)
    return json.loads(r.stdout[r.stdout.index("{") :])


def test_dpo_first_loss_is_log_2_where_the_policy_is_its_reference():
    """DPO's sigmoid loss is -log sigmoid(beta x 0) = log 2 while the policy equals its reference model."""
    out = train(
        "--workload",
        "dpo",
        "--model",
        "debug-llama",
        "--micro-batch",
        "2",
        "--max-length",
        "32",
        "--precision",
        "fp32",
        "--max-steps",
        "2",
        "--device",
        "cpu",
        "--json",
    )
    assert out["steps"] == 2
    assert out["metrics"][0]["loss"] == pytest.approx(math.log(2), abs=1e-4)


def test_grpo_runs_the_users_reward(tmp_path):
    (tmp_path / "my_reward.py").write_text("def constant(completions, **kw):\n    return [0.5] * len(completions)\n")
    out = train(
        "--micro-batch",
        "4",
        "--grad-accum",
        "2",
        "--beta",
        "0.04",
        "--reward",
        "my_reward:constant",
        *GRPO,
        env={"PYTHONPATH": f"{tmp_path}:{ROOT}"},
    )
    assert out["steps"] == 2
    assert [m["reward"] for m in out["metrics"]] == [0.5, 0.5]
    assert all(m["completions/mean_length"] == 8 for m in out["metrics"])  # the planned lengths


def test_grpo_under_torchrun_with_two_ranks_and_deepspeed_zero_2():
    err = []
    out = train("--gpus-per-node", "2", "--micro-batch", "2", "--zero", "2", *GRPO, stderr=err)
    assert "TRL GRPOTrainer, DeepSpeed ZeRO-2, 2 process(es) on cpu" in err[0]
    assert out["steps"] == 2
    assert all(math.isfinite(m["loss"]) for m in out["metrics"])


def test_a_split_trl_refuses_is_one_line_before_anything_runs():
    r = subprocess.run(
        [sys.executable, "-m", "planner.cli", "train", "--micro-batch", "3", *GRPO],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert r.returncode == 2
    assert "not divisible by --num-generations 4" in r.stderr and len(r.stderr.strip().splitlines()) == 1
