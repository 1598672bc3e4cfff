"""ms-swift 4.6.0's loss under sequence parallel (planner.estimate.recipe_terms.swift_sp_loss_bytes) against its own
functions, run in ms-swift's venv (MEMPLAN_SWIFT_PYTHON) with every allocation tracked (probes.tracker): the plain
cross-entropy and ChunkedCrossEntropyLoss (CELOSS_PARALLEL_SIZE), on the logits as the trainer hands them over:
cast to fp32 by accelerate's convert_to_fp32 (native AMP: DDP and FSDP), or in bf16 (DeepSpeed). The bf16 logits
exist before the tracker starts; the cast copy is made inside it and dropped before backward, as compute_loss drops
its outputs. Tolerance 0.5%."""

import json
import os
import subprocess
from pathlib import Path

import pytest

from planner.config.spec import Knobs
from planner.estimate import recipe_terms
from planner.model.catalog import load_model

ROOT = Path(__file__).resolve().parents[3]
TOKENS, CHUNK = 4096, 512
MEASURE = f"""
import json, torch
from torch.nn import CrossEntropyLoss
from accelerate.utils.operations import convert_to_fp32
from probes.tracker import LiveBytes
from swift.sequence_parallel.utils import ChunkedCrossEntropyLoss

def loss_of(logits, labels, name, upcast):  # compute_loss's scope: the cast logits die when it returns
    x = convert_to_fp32(logits) if upcast else logits  # accelerate utils/operations.py:912-942
    if name == "chunked":  # swift/trainers/utils.py:178-180
        return ChunkedCrossEntropyLoss.apply(x, labels, {CHUNK})
    return CrossEntropyLoss(reduction="none")(x, labels)  # swift/trainers/utils.py:181-183

out = {{}}
for upcast in (True, False):
    for name in ("chunked", "standard"):
        logits = torch.randn({TOKENS}, VOCAB, dtype=torch.bfloat16, requires_grad=True)
        labels = torch.randint(0, VOCAB, ({TOKENS},))
        with LiveBytes() as t:
            loss_of(logits, labels, name, upcast).sum().backward()
        out[f"{{name}} {{upcast}}"] = t.peak
print(json.dumps(out))
"""


def test_swift_sequence_parallel_loss_matches_its_own_functions(monkeypatch):
    python = os.environ.get("MEMPLAN_SWIFT_PYTHON")
    if not python:
        pytest.skip("MEMPLAN_SWIFT_PYTHON is not set: the python of a venv with ms-swift installed runs this check")
    t = load_model("debug-llama").text
    run = subprocess.run(
        [python, "-c", MEASURE.replace("VOCAB", str(t.vocab))],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    measured = json.loads(run.stdout.strip().splitlines()[-1])
    monkeypatch.setattr(recipe_terms, "SWIFT_CE_CHUNK", CHUNK)
    bf16_logits = 2 * TOKENS * t.vocab  # saved by the chunked loss under DeepSpeed; allocated before the tracker
    for upcast, knobs in ((True, {}), (False, {"zero_stage": 2})):
        chunked = recipe_terms.swift_sp_loss_bytes(t, Knobs(loss="chunked", **knobs), TOKENS, "half")
        standard = recipe_terms.swift_sp_loss_bytes(t, Knobs(**knobs), TOKENS, "half")
        held = 0 if upcast else bf16_logits
        assert chunked - held == pytest.approx(measured[f"chunked {upcast}"], rel=0.005)
        assert standard == pytest.approx(measured[f"standard {upcast}"], rel=0.005)
    assert measured["standard True"] == pytest.approx(12 * TOKENS * t.vocab, rel=0.005)  # 12 bytes a token and entry
