"""planner.estimate.heads.value_head_bytes against torch: LLaMA-Factory's reward model (stage rm, trl's value-head
model: the whole logits made and cast to fp32, trl's ValueHead, LLaMA-Factory's pairwise loss; probes/lf_valuehead.py)
on a real bf16 lm_head, traced by probes.tracker from the final hidden states on, with and without CUDA's autocast
policy. LLaMA-Factory 0.9.5's own compute_loss and trl 0.24.0's ValueHead where MEMPLAN_LLAMAFACTORY_PYTHON names its
venv, the cited copies in this process (the same bytes: checked below).

Measured when pinned (torch 2.13 CPU, 4 rows x 256 tokens, vocabulary 32,768, hidden 64): 201,723,904 bytes at the
forward's end in bf16 (201,591,808 under autocast), of which the logits and their fp32 copy 201,326,592; backward
661,504 (526,336). The term is CUDA's: exact but for the CPU's dropout, which keeps its bf16 noise (2 bytes an element,
aten Dropout.cpp's _dropout_impl) where CUDA's fused kernel keeps a 1-byte mask (native_dropout), and under autocast
the ValueHead's cached bf16 weight and bias copies (two tracker allocations of at most 512 bytes)."""

import json
import os
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("torch")
from planner.estimate.heads import value_head_bytes
from probes.lf_valuehead import peaks

ROWS, WIDTH, VOCAB, HIDDEN = 4, 256, 32768, 64
ROOT = Path(__file__).parents[2]
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


def test_llamafactorys_own_loss_and_trls_value_head_hold_the_same_bytes():
    python = os.environ.get("MEMPLAN_LLAMAFACTORY_PYTHON")
    if not python or not Path(python).exists():
        pytest.skip("MEMPLAN_LLAMAFACTORY_PYTHON names no LLaMA-Factory venv (make fwenv builds .fwenv/llamafactory)")
    run = subprocess.run(
        [python, str(ROOT / "probes" / "lf_valuehead.py"), *map(str, (ROWS, WIDTH, VOCAB, HIDDEN))],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    theirs = json.loads(run.stdout.strip().splitlines()[-1])
    for label, amp in (("bf16-pure", False), ("amp", True)):
        assert theirs[label]["source"] == "llamafactory"
        ours = peaks(ROWS, WIDTH, VOCAB, HIDDEN, amp)
        assert (theirs[label]["forward"], theirs[label]["backward"]) == (ours["forward"], ours["backward"]), label
