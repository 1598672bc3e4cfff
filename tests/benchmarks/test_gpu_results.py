"""Today's planner against the committed H100 measurements (benchmarks/results/gpu/, measured 2026-11-22 on one
NVIDIA H100 80GB HBM3 with torch 2.11.0 and transformers 5.17.0 by benchmarks/gpu_suite.py). No GPU is needed:
the measurements are data, and every prediction is made again by benchmarks/gpu_report.py, so a change to the
memory or speed model that moves away from the GPU fails here."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "gpu"
sys.path.insert(0, str(ROOT / "benchmarks"))
import gpu_report


@pytest.fixture(scope="module")
def rep():
    return gpu_report.report(RESULTS)


def test_the_measurements_are_from_a_gpu():
    data = json.loads((RESULTS / "accuracy-small.json").read_text())
    assert not data["rehearse"] and data["device"] == "NVIDIA H100 80GB HBM3" and len(data["rows"]) == 24


def test_peak_allocated_is_within_3_percent_of_max_memory_allocated_on_the_small_models():
    # tolerance: 3% on every row (the kit's p95 target), 1% on the median; the largest today is GPT-2 medium
    # under autocast at +2.98% (its attention's fp32 softmax under eager)
    a = gpu_report.accuracy(json.loads((RESULTS / "accuracy-small.json").read_text())["rows"], "h100-80gb")
    assert a["rows"] == 24
    worst = max(a["table"], key=lambda t: abs(t[-1]))
    assert a["max_abs_error"] <= 0.03, worst
    assert a["median_abs_error"] <= 0.01


def test_no_measured_peak_is_more_than_3_percent_over_its_prediction(rep):
    """Every row, the large models' included (accuracy-large: 12 of its 23 rows run on 2026-11-22 ran): the planner
    never predicts less than 97% of what was allocated (the largest shortfall is GPT-2 medium's 2.98%), and the
    median row is within 1%."""
    a = rep["accuracy"]
    assert a["rows"] == 36
    assert max(t[-1] for t in a["table"]) <= 0.03, max(a["table"], key=lambda t: t[-1])
    assert a["median_abs_error"] <= 0.01


def test_the_measured_peaks_meet_the_kits_3_percent_p95_target(rep):
    """The kit's target (docs/gpu-results.md): allocated within 3% of the prediction at the 95th percentile, over
    every row the H100 ran, the large models' included. Until issue 32 the large models missed it, up to 35% over:
    Gemma-2-2B ran with SDPA under the transformers of the window (5.17; eager only from 5.21, modelspec.as_run_by),
    and Qwen2.5-VL-3B's tower took no gradient on text rows (memory.frozen_modules)."""
    a = rep["accuracy"]
    worst = sorted(a["table"], key=lambda t: -abs(t[-1]))[:3]
    assert a["p95_abs_error"] <= 0.03, worst
    large = [t for t in a["table"] if t[0] in ("gemma-2-2b", "qwen2.5-vl-3b")]
    assert len(large) == 12 and max(abs(t[-1]) for t in large) <= 0.01, large


def test_no_plan_declared_fitting_ran_out_of_memory(rep):
    f = rep["fits"]
    oom = [t for t in f["table"] if t[-1] == "oom"]
    assert oom, "the committed runs hold the one plan that ran out of memory on the H100"
    assert f["ooms_among_declared_fitting"] == 0, [t for t in f["table"] if t[5] and t[6] == "oom"]
    assert f["ran_but_declared_not_fitting"] == 0


def test_the_first_ranked_plan_is_the_fastest_measured_and_speed_is_within_15_percent(rep):
    s = rep["speed"]
    assert s["first_ranked_over_best_measured"] >= 0.95
    assert s["median_abs_error"] <= 0.15


def test_the_calibration_file_is_what_apply_makes_of_the_results(tmp_path):
    import gpu_apply

    made = json.loads(gpu_apply.apply(RESULTS, str(tmp_path)).read_text())
    committed = json.loads((ROOT / "planner" / "model" / "catalog" / "calibration" / "h100-80gb.json").read_text())
    assert made == committed
    assert committed["driver_reserved_bytes"] == 506724352 and committed["fragmentation_fraction"] > 0.06


def test_every_large_model_step_that_ran_out_of_memory_is_declared_not_fitting():
    """accuracy-large's 11 out-of-memory rows (Llama-3.1-8B's 7, Gemma-2-2B's 3, one Qwen2.5-VL-3B) on one H100."""
    from planner import advise

    rows = [r for r in json.loads((RESULTS / "accuracy-large.json").read_text())["rows"] if r["status"] == "oom"]
    assert len(rows) == 11
    for r in rows:
        req = advise.parse(
            advise.CheckRequest,
            {
                "model": r["model"],
                "gpu": "h100",
                "micro_batch": r["micro_batch"],
                "seq_len": r["seq_len"],
                "precision": r["precision"],
                "checkpointing": r["checkpointing"],
                "evidence": "analytic",
            },
        )
        assert not advise.check(req).plan.fits, r


def test_the_allocator_replay_reserves_what_the_gpu_windows_reserved():
    """benchmarks/gpu_fragmentation.py: probes/allocator.py over the sim's trace of every default-allocator step the
    windows ran (H100 and H200), at the limit its allocator had. The summary is recomputed from the stored rows."""
    import gpu_fragmentation

    rows = json.loads((ROOT / "benchmarks/results/fragmentation.json").read_text())["rows"]
    s = gpu_fragmentation.summarize(rows)
    rep, prior = s["replay_vs_measured_reserved"], s["prior_vs_measured_reserved"]
    assert s["rows"] == 51 and rep["median"] <= 0.01 and rep["max"] <= 0.07, rep
    assert prior["median"] > 5 * rep["median"] and s["prior_under_measured"] >= 20  # one fraction for every shape
    assert s["replay_runs_what_ran"] == 50  # Llama-3.2-1B 3 x 2048 ran with 0.1 GiB of a 40 GiB card to spare
    # the H100's eleven out-of-memory steps and the edge's rung above the planner's: out of memory in the replay too;
    # not Gemma-2-2B 11 x 2048 on the H200, which did not run for a reason the kit did not keep
    assert (s["did_not_run"], s["replay_oom_where_it_did_not_run"]) == (13, 12)
