"""Today's terms around the step against the committed H200 rows (benchmarks/results/gpu/h200/, measured 2026-12-04 on
one NVIDIA H200 with torch 2.11.0, transformers 5.17.0, DeepSpeed 0.19.8 by benchmarks/gpu_terms.py and gpu_suite.py).
No GPU is needed: the rows are data, predicted again by benchmarks/gpu_terms_report.py and gpu_report.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "benchmarks" / "results" / "gpu" / "h200"
sys.path.insert(0, str(ROOT / "benchmarks"))
import gpu_report
import gpu_terms_report

# tolerance per term: the head's update within 1% (the measurement holds the hidden states' and labels' small
# tensors and the loss's reductions beside the term's), the no-grad pass within 0.1%, the tower within 2% (its output
# and the window index tensors lie beside the saved activations), a save's transient and a whole-model gather on one
# rank exactly; HF generate's phase within 12% under (the row decodes greedily: no fp32 softmax probabilities nor
# processed scores, which memplan plans as TRL samples)
TOLERANCE = {
    "role_heads.update_head_bytes": 0.01,
    "role_heads.logprob_pass_head_bytes": 0.001,
    "vision.vision_activations_bytes": 0.02,
    "lifecycle.save_gpu_transient_bytes": 0.0,
    "weight_sync.gathered_copy_bytes (whole model)": 0.0,
    "rl.generation_terms (cache, logits, weights' gather)": 0.12,
}


@pytest.fixture(scope="module")
def rep():
    return gpu_terms_report.report(H200)


def test_the_rows_are_from_a_gpu():
    data = json.loads((H200 / "terms.json").read_text())
    assert data["device"] == "NVIDIA H200" and data["versions"]["deepspeed"] == "0.19.8"
    assert sum(r["status"] == "ok" for r in data["rows"]) == 16


def test_every_predicted_row_is_within_its_terms_tolerance(rep):
    predicted = [r for r in rep["rows"] if r["predicted"] is not None]
    assert {r["term"] for r in predicted} == set(TOLERANCE)
    for r in predicted:
        assert abs(r["error"]) <= TOLERANCE[r["term"]], r


def test_openrlhfs_update_holds_the_fp32_logits_and_their_gradient_at_once(rep):
    # 16,384 tokens x 151,936: 2 x 9.96 GB of fp32, the bf16 copy long gone (flash-attn's cross-entropy, not in place)
    row = next(r for r in rep["rows"] if r["row"] == "tokens=16384 ce=flash grad=True")
    assert row["measured"] == pytest.approx(2 * 4 * 16384 * 151936, rel=0.001)


def test_a_save_on_one_rank_gathers_nothing(rep):
    saves = {r["row"]: r["measured"] for r in rep["rows"] if r["part"] in ("save", "zero3") and "gather" in r["row"]}
    saves |= {r["row"]: r["measured"] for r in rep["rows"] if r["row"] == "op=fsdp2-full"}
    assert saves == {"op=gather buckets=ds": 0, "op=fsdp2-full": 0}


def test_gemma2_rows_that_read_35_percent_over_are_within_1_percent_for_the_transformers_that_ran_them():
    # the same step allocated the same bytes on the H100 (2026-11-22) and the H200; the kit had compared them with
    # transformers 5.23's eager Gemma-2 (modelspec.as_run_by), the planner for 5.17's SDPA is within 0.6%
    rows = json.loads((H200 / "accuracy-large.json").read_text())["rows"]
    a = gpu_report.accuracy(rows, "h200", "5.17.0")
    assert a["rows"] == 4 and a["max_abs_error"] <= 0.01
    old = json.loads((ROOT / "benchmarks/results/gpu/accuracy-large.json").read_text())["rows"]
    same = {
        (r["precision"], r["checkpointing"], r["seq_len"]): r["max_memory_allocated"]
        for r in old
        if r["model"] == "gemma-2-2b"
    }
    for r in rows:
        if same.get((r["precision"], r["checkpointing"], r["seq_len"])):
            assert r["max_memory_allocated"] == same[(r["precision"], r["checkpointing"], r["seq_len"])]


def test_the_h200_calibration_is_what_its_priors_measured():
    cal = json.loads((ROOT / "planner/model/catalog/calibration/h200.json").read_text())
    priors = json.loads((H200 / "priors.json").read_text())
    assert cal["nccl_bytes"] == priors["summary"]["measured"]["nccl"] == 585105408
    assert cal["fragmentation_fraction"] == pytest.approx(0.1453, abs=1e-4)
