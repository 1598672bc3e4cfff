"""ms-swift 4.6.0's loss under sequence parallel (planner.estimate.recipe_terms.swift_sp_loss_bytes) against its own
functions, run in ms-swift's venv (MEMPLAN_SWIFT_PYTHON) with every allocation tracked (probes.tracker): the plain
cross-entropy on bf16 logits and ChunkedCrossEntropyLoss (CELOSS_PARALLEL_SIZE). The tracker sees what is allocated
above the logits, which exist before it starts. Tolerance 0.5%."""

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
from probes.tracker import LiveBytes
from swift.sequence_parallel.utils import ChunkedCrossEntropyLoss
out = {{}}
for name in ("chunked", "standard"):
    logits = torch.randn({TOKENS}, VOCAB, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, VOCAB, ({TOKENS},))
    with LiveBytes() as t:
        if name == "chunked":  # swift/trainers/utils.py:178-180
            loss = ChunkedCrossEntropyLoss.apply(logits, labels, {CHUNK})
        else:  # swift/trainers/utils.py:181-183
            loss = CrossEntropyLoss(reduction="none")(logits, labels)
        loss.sum().backward()
    out[name] = t.peak
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
    logits = 2 * TOKENS * t.vocab  # bf16, saved by the chunked loss; allocated before the tracker
    chunked = recipe_terms.swift_sp_loss_bytes(t, Knobs(loss="chunked"), TOKENS, "half") - logits
    standard = recipe_terms.swift_sp_loss_bytes(t, Knobs(), TOKENS, "half")
    assert chunked == pytest.approx(measured["chunked"], rel=0.005)
    assert standard == pytest.approx(measured["standard"], rel=0.005)
