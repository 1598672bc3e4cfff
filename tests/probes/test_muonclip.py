"""ms-swift 4's MuonClip (planner.estimate.muonclip, matrix_optim.muonclip_state_bytes) against ms-swift's own optimizer
in its venv (MEMPLAN_SWIFT_PYTHON, ms-swift 4.6.0, torch 2.13 CPU; skipped without it): tests/probes/swift_muonclip.py
groups a 2-layer Llama's parameters with MuonClipOptimizerCallback.create_optimizer itself and runs two steps.

Measured 2026-12-07 (oneDNN off, as test_muon_step), against the terms:
- states: 632,064 B (fp32), 316,032 (bf16) for the 158,016 parameters of tests/planner/estimate/test_torchao_optim.py's
  TINY (one buffer a parameter, 21 buffers in a QK group of 4, 10 other matrices and 7 vectors and embeddings); 74,752
  under LoRA r=8 on every linear (18,688 fp32 factors). Memplan had refused --optimizer muonclip. Exact.
- the step's peak: 196,608 B (fp32) and 151,552 (bf16) where the MLP's matrices decide, 327,680 and 262,144 where the
  QK group's do (hidden 128, MLP 16), 22,784 over the LoRA factors; the same with the QK clip on and off. Exact."""

import pytest

from planner.config.spec import Knobs
from planner.estimate import matrix_optim, muonclip, state_terms
from planner.estimate.setup import Setup
from planner.model.families import from_config
from tests.planner.estimate.test_torchao_optim import TINY
from tests.probes.venv_run import in_venv

QK_WIDE = {**TINY, "hidden_size": 128, "intermediate_size": 16, "num_key_value_heads": 4, "vocab_size": 64}
SB = {"fp32": 4, "bf16": 2}
CASES = {  # name: (config, dtype, LoRA rank, clip)
    "mlp-fp32": (TINY, "fp32", 0, True),
    "mlp-bf16": (TINY, "bf16", 0, True),
    "qk-fp32": (QK_WIDE, "fp32", 0, True),
    "qk-bf16": (QK_WIDE, "bf16", 0, True),
    "qk-bf16-unclipped": (QK_WIDE, "bf16", 0, False),
    "lora-r8": (TINY, "bf16", 8, True),
}


@pytest.fixture(scope="module")
def measured() -> dict:
    reqs = [{"config": c, "dtype": d, "lora_rank": r, "clip": clip} for c, d, r, clip in CASES.values()]
    got = in_venv("MEMPLAN_SWIFT_PYTHON", "tests/probes/swift_muonclip.py", stdin=reqs, env={"OMP_NUM_THREADS": "1"})
    return dict(zip(CASES, got, strict=True))


def _setup(name: str) -> tuple[Setup, int]:
    config, dtype, rank, _ = CASES[name]
    precision = "bf16" if rank else {"fp32": "fp32", "bf16": "bf16-pure"}[dtype]  # LoRA: fp32 factors
    knobs = Knobs(framework="swift", optimizer="muonclip", precision=precision, lora_rank=rank)
    return Setup(from_config(config, "tiny-llama"), knobs, 1, 1, 16), 4 if rank else SB[dtype]


@pytest.mark.parametrize("name", CASES)
def test_one_momentum_buffer_for_every_trained_parameter(measured, name):
    s, sb = _setup(name)
    m = measured[name]
    assert m["buffers"] == sum(m["groups"])
    assert m["qk"][0] and not any(m["qk"][1:])  # the QK group first
    assert matrix_optim.muonclip_state_bytes(s, sb) == state_terms.optimizer_bytes(s) == m["state_bytes"]


@pytest.mark.parametrize("name", CASES)
def test_the_steps_peak_is_each_matrix_beside_the_one_before(measured, name):
    s, sb = _setup(name)
    assert muonclip.muonclip_step_temp_bytes(s, sb) == state_terms.optimizer_step_temp_bytes(s)
    assert muonclip.muonclip_step_temp_bytes(s, sb) == measured[name]["peak"]
