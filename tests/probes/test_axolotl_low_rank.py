"""GaLore's and APOLLO's states (planner.estimate.matrix_optim) against axolotl 0.19.0's own optimizer construction
(tests/probes/axolotl_low_rank.py: AxolotlTrainer.create_optimizer, one CPU step): exact, fp32 and bf16, named targets
and all_linear, under which transformers projects the untied head too (Framework.low_rank_head). Measured 2026-12-06
(axolotl 0.19.0, transformers 5.16.1, torch 2.13 CPU, galore-torch 1.0, apollo-torch 1.0.3); the figures are kept in
tests/planner/estimate/test_matrix_optim.py, which runs on every commit."""

import os
import subprocess

import pytest

from planner.config.spec import Knobs
from planner.estimate import matrix_optim
from planner.estimate.setup import Setup
from planner.model.families import from_config
from tests.planner.estimate.test_matrix_optim import AXOLOTL_MEASURED
from tests.planner.estimate.test_torchao_optim import TINY
from tests.probes.axolotl_low_rank import measured_state_bytes

PYTHON = os.environ.get("MEMPLAN_AXOLOTL_PYTHON")
OPTIM = {"galore-adamw": "galore_adamw", "apollo-adamw": "apollo_adamw"}
BYTES = {"float32": 4, "bfloat16": 2}


def _has_low_rank_packages() -> bool:
    check = "import galore_torch, apollo_torch"
    run = subprocess.run([PYTHON, "-c", check], check=False, capture_output=True, env=dict(os.environ), timeout=120)
    return run.returncode == 0


@pytest.mark.sweep  # six real steps in axolotl's venv, one process (about 1 min on 2 busy cores)
@pytest.mark.skipif(not PYTHON, reason="axolotl's own venv (MEMPLAN_AXOLOTL_PYTHON)")
def test_axolotls_own_low_rank_optimizer_keeps_the_planned_states(tmp_path):
    if not _has_low_rank_packages():
        pytest.skip("galore-torch / apollo-torch not importable by axolotl's python (see axolotl_low_rank.py)")
    cases = [
        (OPTIM[o], "all_linear" if t == "all-linear" else t.split(","), rank, dtype)
        for o, t, rank, dtype, _ in AXOLOTL_MEASURED
    ]
    measured = measured_state_bytes(PYTHON, TINY, cases, tmp_path)
    model = from_config(TINY, "tiny-llama")
    for (optimizer, targets, rank, dtype, recorded), got in zip(AXOLOTL_MEASURED, measured, strict=True):
        knobs = Knobs(framework="axolotl", optimizer=optimizer, optimizer_rank=rank, optimizer_targets=targets)
        planned = matrix_optim.matrix_optimizer_bytes(Setup(model, knobs, 1, 1, 16), BYTES[dtype])
        assert got == planned == recorded, (optimizer, targets, rank, dtype)
