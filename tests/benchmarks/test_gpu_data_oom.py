"""The data-aware planning run on the H100 (benchmarks/results/gpu/data_oom.json, benchmarks/data_oom_gpu.py,
2026-11-22): today's planner, on the same seeded dataset, names the step at which the real run ran out of memory,
and the token budget it calls fitting ran the data with no out-of-memory error, its peak within 3% under the
prediction. No GPU is needed: the measurements are data."""

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import data_oom_gpu

RESULT = json.loads((ROOT / "benchmarks" / "results" / "gpu" / "data_oom.json").read_text())


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    from planner.model.catalog import load_model

    path = str(tmp_path_factory.mktemp("d") / "data.jsonl")
    data_oom_gpu.write_data(path, RESULT["rows"], load_model(RESULT["model"]).text.vocab)
    return path


def _args():
    return type(
        "A",
        (),
        {
            "model": RESULT["model"],
            "gpu": "h100",
            "micro_batch": RESULT["micro_batch"],
            "precision": RESULT["precision"],
        },
    )()


def test_the_named_step_is_where_the_h100_ran_out_of_memory(data):
    assert RESULT["device"] == "NVIDIA H100 80GB HBM3"
    got = data_oom_gpu.check(_args(), data).data
    fixed = RESULT["fixed"]
    same = ("step", "rank", "sample", "tokens")
    assert {k: got["first_too_long"][k] for k in same} == {k: fixed["named"][k] for k in same}
    assert fixed["first_oom_step"] == fixed["named"]["step"]  # the real run's first OOM
    # the limit moves with the calibration (2,212 tokens when measured, from a fragmentation prior of 13.07%);
    # it must stay between the widest micro-batch that ran and the one that ran out of memory
    assert fixed["widest_ran_at_full_micro_batch"] <= got["fits_up_to_tokens"] < fixed["oom_width"]


def test_the_token_budget_called_fitting_ran_without_running_out_of_memory(data):
    for b in RESULT["budget"]:
        plan = data_oom_gpu.check(_args(), data, budget=b["max_tokens_per_micro_batch"]).plan
        assert plan.fits == b["planner_fits"]
        if not plan.fits:  # the rung above: the planner refused it, and on the card it ran out of memory
            assert b["oom_events"]
        if plan.fits:
            assert not b["oom_events"]
            # tolerance: the prediction may be over by up to 3%, never under (measured 63.19 vs 64.92 GiB)
            assert 0.97 <= b["measured_peak_allocated_bytes"] / plan.memory.peak_allocated_bytes <= 1.0


def test_each_step_the_trainer_ran_is_within_1_percent_of_the_prediction():
    """Per step of the fixed run, at the trainer's micro-batch and accumulation (8 samples a step). Step 1 is the exception, and the
    planner is right about why: the optimizer's states do not exist until the first optimizer step, so that
    step's backward peaks lower by about them (AdamW: 8 bytes a parameter)."""
    from planner import advise

    for r in RESULT["fixed"]["steps"]:
        accum = RESULT["micro_batch"] // r["micro_batch"]
        req = advise.parse(
            advise.CheckRequest,
            {
                "model": RESULT["model"],
                "gpu": "h100",
                "evidence": "analytic",
                "micro_batch": r["micro_batch"],
                "grad_accum": accum,
                "seq_len": r["width"],
                "precision": RESULT["precision"],
            },
        )
        m = advise.check(req).plan.memory
        err = r["measured_peak_allocated_bytes"] / m.peak_allocated_bytes - 1
        if r["step"] == 1:
            assert (
                abs(r["measured_peak_allocated_bytes"] + m.optimizer_bytes - m.peak_allocated_bytes)
                < 0.01 * m.peak_allocated_bytes
            ), r
        else:
            assert abs(err) < 0.01, (r, err)
