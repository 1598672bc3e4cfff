"""The bundled trainer records each step of each rank in the probe store it is given (trainer/runlog.py), with the
plan it ran, and `planner runs` sets the run against the prediction for that plan: 2 gloo ranks, 3 steps."""

import json
import os
import subprocess
import sys

from tests.trainer.helpers import ROOT


def test_planner_train_with_a_store_records_every_step_of_every_rank(tmp_path):
    store = tmp_path / "store.sqlite"
    cmd = [sys.executable, "-m", "planner.cli", "train", "--model", "debug-llama", "--gpu", "h100"]
    cmd += ["--gpus-per-node", "2", "--seq-len", "48", "--micro-batch", "2", "--grad-accum", "1", "--max-steps", "3"]
    cmd += ["--store", str(store), "--precision", "fp32", "--device", "cpu"]
    env_run = {"MEMPLAN_RUN": "bundled-2x3", "OMP_NUM_THREADS": "1"}
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, timeout=300, env={**os.environ, **env_run})
    out = subprocess.run(
        [sys.executable, "-m", "planner.cli", "runs", "bundled-2x3", "--store", str(store), "--json"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    data = json.loads(out.stdout)
    assert sorted((s["step"], s["rank"]) for s in data["steps"]) == [(s, r) for s in (1, 2, 3) for r in (0, 1)]
    assert all(s["source"] == "bundled" and s["device"] == "cpu" and s["host_rss_bytes"] for s in data["steps"])
    assert data["plan"]["gpu"] == "h100" and data["plan"]["precision"] == "fp32"
    assert data["predicted_bytes"] > 0 and data["not_predicted"] is None
