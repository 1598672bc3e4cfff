"""Logits kept for compute_metrics (planner.estimate.nograd.eval_logits_kept_bytes) against HF's Trainer.evaluate on
CPU: the same evaluation with and without compute_metrics under the live-bytes tracker, eval_accumulation_steps k;
the evaluation's peak is the larger of the forward's (tests/probes/test_eval.py) and the kept logits' at a step's
concatenation (2k steps' worth on one rank; the first step is kept as it is). One round of k steps: on a CPU the host
copies of earlier rounds are numpy views of the same storages (on a GPU, .cpu() copies and frees them), which the
tracker would count as if they were on the device."""

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
datasets = pytest.importorskip("datasets")
from planner.config.spec import Knobs
from planner.estimate import nograd
from planner.estimate.setup import Setup
from planner.model.catalog import load_model
from probes.evaluate import evaluate_peak

ROWS, SEQ = 2, 64
WITHIN = 0.01  # measured 2026-11-24: -0.05% (k 1: the forward decides), -0.006% (k 2), -0.01% (k 3)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_the_evaluation_peak_is_the_forwards_or_the_kept_logits(tmp_path, k):
    measured = evaluate_peak(tmp_path, "debug-llama", ROWS, SEQ, k, metrics=True)
    s = Setup(load_model("debug-llama"), Knobs(precision="fp32", eval_batch=ROWS, eval_logits_steps=k), 1, 1, SEQ)
    step = ROWS * SEQ * s.model.text.vocab * 4
    assert nograd.eval_logits_kept_bytes(s) == (2 * k if k > 1 else 1) * step
    assert nograd.eval_forward_bytes(s) == pytest.approx(measured, rel=WITHIN), (measured / step, k)
    if k > 1:  # the kept logits decide
        assert nograd.eval_forward_bytes(s) == nograd.eval_logits_kept_bytes(s)
