"""planner.estimate.heads.value_head_bytes against torch: LLaMA-Factory's reward model (stage rm, trl's value-head
model: the whole logits made and cast to fp32, trl's ValueHead, LLaMA-Factory's pairwise loss; probes/lf_valuehead.py)
on a real bf16 lm_head, traced by probes.tracker from the final hidden states on, with and without CUDA's autocast
policy. LLaMA-Factory 0.9.5's own compute_loss and trl 0.24.0's ValueHead where MEMPLAN_LLAMAFACTORY_PYTHON names its
venv, the cited copies in this process (the same bytes: checked below).

Measured when pinned (torch 2.13 CPU, 4 rows x 256 tokens, vocabulary 32,768, hidden 64): 201,723,904 bytes at the
forward's end in bf16 (201,591,808 under autocast), of which the logits and their fp32 copy 201,326,592; backward
661,504 (526,336). The term is CUDA's: exact but for the CPU's dropout, which keeps its bf16 noise (2 bytes an element,
aten Dropout.cpp's _dropout_impl) where CUDA's fused kernel keeps a 1-byte mask (native_dropout), and under autocast
the ValueHead's cached bf16 weight and bias copies (two tracker allocations of at most 512 bytes).

The whole step (full fine-tuning of debug-llama, untied, fp32, AdamW, probes/lf_valuehead.full_step_peak), measured
2026-12-07: 1 pair x 128 tokens 108,385,792 B, planned 108,377,088 (-0.008%; 141,931,520, +31%, while the untied
head's gradient and AdamW states were counted: no gradient reaches it); 2 pairs x 512 312,132,096 B against
336,563,200, where the causal LM over the same 4 rows is 26.0 MB over its measured peak as well (CPU attention:
tests/probes/test_task_heads.py): the change from it, 148,365,312 planned and 146,788,864 measured (+1.1%). LLaMA-
Factory 0.9.5's own code in its venv: the same 108,385,792 B."""

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from planner.config.spec import Knobs
from planner.estimate.heads import value_head_bytes
from planner.estimate.memory import breakdown
from planner.estimate.setup import Setup
from planner.model.catalog import load_model, model_config
from probes.lf_valuehead import full_step_peak, peaks
from tests.probes.venvprobe import run_probe

ROWS, WIDTH, VOCAB, HIDDEN = 4, 256, 32768, 64
CPU_DROPOUT = 1  # bytes an element the CPU's dropout noise keeps over CUDA's bool mask
CACHED_COPIES = 1024  # autocast's bf16 copies of the ValueHead's weight and bias, one tracker block each


def expected(amp: bool) -> int:
    n = ROWS * WIDTH
    return value_head_bytes(n, VOCAB, HIDDEN, 2, amp) + n * HIDDEN * CPU_DROPOUT


@pytest.mark.parametrize("amp", [False, True], ids=["bf16-pure", "amp"])
def test_the_forward_end_holds_both_logits_and_the_value_heads_input(amp):
    got = peaks(ROWS, WIDTH, VOCAB, HIDDEN, amp)
    extra = got["forward"] - expected(amp)
    assert 0 <= extra <= (CACHED_COPIES if amp else 0), got
    assert got["backward"] < got["forward"] // 100  # the logits are gone before backward: nothing of them is saved


def run_llamafactorys_own(python: str) -> dict:
    """probes/lf_valuehead.py in LLaMA-Factory's venv: the head's peaks at ROWS x WIDTH and debug-llama's full step at
    1 pair x 128 tokens, with LLaMA-Factory 0.9.5's compute_loss and trl's ValueHead."""
    sizes = [*map(str, (ROWS, WIDTH, VOCAB, HIDDEN)), json.dumps(model_config("debug-llama")), "1", "128"]
    return run_probe(python, "lf_valuehead.py", *sizes)


def test_llamafactorys_own_loss_and_trls_value_head_hold_the_same_bytes():
    python = os.environ.get("MEMPLAN_LLAMAFACTORY_PYTHON")
    if not python or not Path(python).exists():
        pytest.skip("MEMPLAN_LLAMAFACTORY_PYTHON names no LLaMA-Factory venv (make fwenv builds .fwenv/llamafactory)")
    theirs = run_llamafactorys_own(python)
    for label, amp in (("bf16-pure", False), ("amp", True)):
        assert theirs[label]["source"] == "llamafactory"
        ours = peaks(ROWS, WIDTH, VOCAB, HIDDEN, amp)
        assert (theirs[label]["forward"], theirs[label]["backward"]) == (ours["forward"], ours["backward"]), label
    assert theirs["full_step"] == full_step_peak(model_config("debug-llama"), 1, 128)  # the whole step too


def planned_step(examples: int, width: int) -> int:
    k = Knobs.make(precision="fp32", framework="llamafactory", task="seq-cls", num_labels=1, negatives=1)
    return breakdown(Setup(load_model("debug-llama"), k, examples, 1, width), 80 * 2**30).peak_allocated_bytes


def test_a_full_fine_tune_gives_the_untied_vocabulary_head_no_gradient_and_no_state():
    assert not model_config("debug-llama")["tie_word_embeddings"]
    measured, planned = full_step_peak(model_config("debug-llama"), 1, 128), planned_step(1, 128)
    assert planned == pytest.approx(measured, abs=16 * 1024)  # 8,704 B under when pinned


@pytest.mark.sweep
def test_the_change_from_the_causal_lm_at_a_longer_step():
    """At 2 pairs x 512 the CPU's attention holds less than CUDA's in both runs: the change from the causal LM."""
    from tests.probes.test_task_heads import measured_peak, planned_peak

    measured = measured_peak(4, 512, transformers.AutoModelForCausalLM) - full_step_peak(
        model_config("debug-llama"), 2, 512
    )
    assert planned_peak(4, 512, "causal-lm") - planned_step(2, 512) == pytest.approx(measured, rel=0.015)
