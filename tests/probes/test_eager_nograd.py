"""Eager attention's s x s moment in a no-grad forward (planner.estimate.nograd.eager_scores_nograd_bytes) against a
tiny Llama's no-grad forward on CPU under the live-bytes tracker.

peak(2s) - 2 peak(s) cancels what grows with the tokens and leaves the square terms: the softmax's moment and the
4-D mask. Measured when pinned (torch 2.13 CPU, transformers 5.25, debug-llama at vocabulary 256, 2 rows of 256 and
512): 10.25 bytes a score in bf16 (the scores, their fp32 copy, the fp32 softmax, and the bf16 mask over 8 heads),
8.50 in fp32 (no copy; the fp32 mask). SDPA's measured square term is 0 (an all-ones mask is dropped for is_causal),
its plan's 1 byte a position of mask a small excess left as it was. At 1 x 1024 in bf16 the eager no-grad peak is
91.4 MB, the plan 7.4 MB before the term, within 0.1% after. Tolerance 1%."""

import functools
from dataclasses import replace

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from planner.config.spec import Knobs
from planner.estimate import nograd
from planner.estimate.setup import Setup
from planner.model.catalog import load_model, model_config
from probes.tracker import LiveBytes

ROWS, HEADS = 2, 8  # debug-llama's heads
DTYPES = {"bf16-pure": torch.bfloat16, "fp32": torch.float32}


def _setup(precision: str, attention: str, rows: int, seq: int) -> Setup:
    m = load_model("debug-llama")
    m = replace(m, text=replace(m.text, attention=attention))
    return Setup(m, Knobs(precision=precision, attention=attention), rows, 1, seq)


@functools.cache
def _model(precision: str):
    cfg = model_config("debug-llama") | {"vocab_size": 256}
    config = transformers.AutoConfig.for_model(cfg.pop("model_type"), **cfg)
    torch.manual_seed(0)
    dtype = DTYPES[precision]
    return transformers.AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation="eager").eval()


def _peak(precision: str, rows: int, seq: int) -> int:
    model = _model(precision)
    ids = torch.randint(0, 256, (rows, seq))
    with torch.no_grad(), LiveBytes() as t:
        model.model(input_ids=ids, attention_mask=torch.ones_like(ids))
    return t.peak


@pytest.mark.parametrize("precision", [pytest.param("bf16-pure", marks=pytest.mark.sweep), "fp32"])
def test_a_no_grad_eager_forward_holds_the_softmaxs_scores(precision):
    scores = ROWS * HEADS * (512 * 512 - 2 * 256 * 256)
    measured = _peak(precision, ROWS, 512) - 2 * _peak(precision, ROWS, 256)
    s256, s512 = (_setup(precision, "eager", ROWS, n) for n in (256, 512))
    planned = nograd.nograd_forward_bytes(s512, ROWS, 512) - 2 * nograd.nograd_forward_bytes(s256, ROWS, 256)
    assert planned / scores == pytest.approx(measured / scores, rel=0.01), measured / scores
    per_score = {"bf16-pure": 10, "fp32": 8}[precision]
    assert nograd.eager_scores_nograd_bytes(s512, ROWS, 512) == per_score * ROWS * HEADS * 512 * 512
    assert nograd.eager_scores_nograd_bytes(_setup(precision, "sdpa", ROWS, 512), ROWS, 512) == 0
