"""planner.estimate.v1_head against LLaMA-Factory 0.9.5's v1 trainer's own SFT loss (probes/lf_v1_head.py: its
SFTTrainer.compute_loss on a one-layer Llama 16 wide, in LLaMA-Factory's venv, MEMPLAN_LLAMAFACTORY_PYTHON), fp32 and
bf16 weights, one row and several: the forward's peak is the term's forward moment, the backward's its backward
moment, under the forward's.

Measured when pinned (2026-12-07, torch 2.13 CPU, vocabulary 8,192): fp32 2 x 256 67,673,600 B against the term's
66,977,792; 1 x 512 51,007,488 against 50,298,880 (one row: the shifted slice is contiguous, no copy); 4 x 64
33,636,864 against 33,292,288; bf16 75,775,488 / 59,101,184 / 37,689,856 against 75,366,400 / 58,687,488 / 37,486,592.
Backward: fp32 50,818,048 / 50,932,736 / 25,110,528, bf16 50,531,328 / 50,637,824 / 24,969,216 against 50,266,112 /
50,298,880 / 25,034,752. The rest, under 1.5%, is the one layer's own tensors and the causal mask, which the plan
counts apart."""

import os
from functools import cache
from pathlib import Path

import pytest

from planner.estimate.v1_head import v1_backward_loss_bytes, v1_forward_loss_bytes, v1_loss_bytes
from tests.probes.venvprobe import run_probe

VOCAB = 8192
SHAPES = ((2, 256), (1, 512), (4, 64))
REST = 0.015  # the layer's tensors and the mask beside the head, at most this share of the term


@cache
def measured() -> dict:
    python = os.environ.get("MEMPLAN_LLAMAFACTORY_PYTHON")
    if not python or not Path(python).exists():
        pytest.skip("MEMPLAN_LLAMAFACTORY_PYTHON names no LLaMA-Factory venv (make fwenv builds .fwenv/llamafactory)")
    return run_probe(python, "lf_v1_head.py", str(VOCAB), *(f"{r}:{w}" for r, w in SHAPES))


@pytest.mark.parametrize("dtype,logits_bytes", [("fp32", 4), ("bf16", 2)])
def test_v1s_own_loss_holds_the_terms_bytes(dtype, logits_bytes):
    for rows, width in SHAPES:
        got = measured()[dtype][f"{rows}:{width}"]
        term = v1_loss_bytes(rows, width, VOCAB, logits_bytes)
        forward, backward = (
            v1_forward_loss_bytes(rows, width, VOCAB, logits_bytes),
            v1_backward_loss_bytes(rows, width, VOCAB),
        )
        assert term == forward >= backward  # the forward's moment is the larger, as measured
        assert forward <= got["forward"] <= forward * (1 + REST), (rows, width, got, forward)
        # the backward's: the saved log-softmax and two gradients of the logits' size (0.3% under it at bf16 4 x 64)
        assert backward * (1 - 0.005) <= got["backward"] <= backward * (1 + REST), (rows, width, got, backward)
        assert got["backward"] <= got["forward"]


def test_the_terms_parts():
    """One row has no shifted copy; half logits a fp32 cast of their own (v1's `.float()`), fp32 ones none."""
    t, s = 2 * 256 * VOCAB, 2 * 255 * VOCAB
    assert v1_forward_loss_bytes(2, 256, VOCAB, 4) == 4 * t + 4 * t + 4 * s + 4 * s
    assert v1_forward_loss_bytes(2, 256, VOCAB, 2) == 2 * t + 4 * t + 4 * t + 4 * s + 4 * s
    assert v1_forward_loss_bytes(1, 512, VOCAB, 4) == 8 * 512 * VOCAB + 4 * 511 * VOCAB
