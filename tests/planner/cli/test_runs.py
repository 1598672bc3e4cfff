"""`planner runs` on a store (SQLite, and PostgreSQL: tests/engines) holding a run's steps (planner.evidence.runs): one line a run against its prediction,
a run's steps, the bad RUN in one line, and --calibrate: a CUDA run's measurement stored as a probe record of its plan,
which `planner check` of that plan then uses as measured evidence (its peak, NVML's overhead on the same GPU kind)."""

import json

import pytest

from planner.cli import main
from planner.evidence import runs
from planner.evidence.store import Store

GIB = 2**30
PLAN = {"model": "llama-3.1-8b", "gpu": "h100", "gpus_per_node": 8, "micro_batch": 2, "grad_accum": 4}
PLAN |= {"seq_len": 4096, "zero": 3, "checkpointing": "full", "precision": "bf16"}


def _store(where, device="NVIDIA H100 80GB HBM3") -> str:
    """A store (a SQLite file in the folder `where`, or the PostgreSQL URL `where`) holding run r1's steps."""
    path = where if isinstance(where, str) else str(where / "store.sqlite")
    rows = [
        runs.RunStep(
            run="r1",
            step=step,
            rank=rank,
            model=PLAN["model"],
            plan=PLAN,
            allocated_bytes=(30 + step) * GIB,
            reserved_bytes=(34 + step) * GIB,
            nvml_bytes=(36 + step) * GIB,
            device=device,
        )
        for step in (1, 2, 3)
        for rank in (0, 1)
    ]
    store = Store(path)
    runs.add(store, rows)
    store.close()
    return path


def test_runs_lists_a_run_and_its_steps_against_the_prediction(store_at, capsys):
    store = _store(store_at if isinstance(store_at, str) else store_at.parent)
    assert main(["runs", "--store", store, "--json"]) == 0
    line = json.loads(capsys.readouterr().out)["runs"][0]
    assert (line["run"], line["steps"], line["allocated_bytes"]) == ("r1", 6, 33 * GIB)
    assert line["predicted_bytes"] > 0 and line["error"] == pytest.approx(
        33 * GIB / line["predicted_bytes"] - 1, abs=1e-4
    )
    assert main(["runs", "r1", "--store", store, "--json"]) == 0
    steps = json.loads(capsys.readouterr().out)["steps"]
    assert [(s["step"], s["rank"]) for s in steps] == [(1, 0), (1, 1), (2, 0), (2, 1), (3, 0), (3, 1)]
    assert main(["runs", "nope", "--store", store]) == 2
    assert "run 'nope': no such run" in capsys.readouterr().err


def test_calibrate_turns_a_cuda_run_into_measured_evidence(store_at, capsys):
    """On a SQLite file and on the team's PostgreSQL store (issue 36: runs anywhere feed every planner)."""
    store = _store(store_at if isinstance(store_at, str) else store_at.parent)
    assert main(["runs", "r1", "--store", store, "--calibrate", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["calibrated_probe"] == 1
    flags = ["--model", "llama-3.1-8b", "--gpu", "h100", "--gpus-per-node", "8", "--micro-batch", "2"]
    flags += ["--grad-accum", "4", "--seq-len", "4096", "--zero", "3", "--checkpointing", "full"]
    main(["check", *flags, "--precision", "bf16", "--store", store, "--json"])
    plan = json.loads(capsys.readouterr().out)["plan"]
    assert plan["evidence"] == "measured" and plan["memory"]["peak_allocated_bytes"] == 33 * GIB


def test_calibrate_refuses_a_cpu_run(tmp_path, capsys):
    store = _store(tmp_path, device="cpu")
    assert main(["runs", "r1", "--store", store, "--calibrate"]) == 2
    assert "no CUDA step" in capsys.readouterr().err
