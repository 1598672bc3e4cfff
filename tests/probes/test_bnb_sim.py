"""bitsandbytes' 8-bit AdamW under the sim's fake tensors (recipe._bitsandbytes_optimizer): its quantization maps are
built from Python lists (functional.create_dynamic_map's .tolist()), which fake tensors cannot give, so the optimizer
is built outside fake mode; its states (uint8, with float32 absmax per block) are then allocated by the traced step
as the real one allocates them."""

import pytest

pytest.importorskip("bitsandbytes")
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from planner.config.spec import Knobs
from planner.model.catalog import model_config
from probes.cpu import measure
from probes.sim import simulate
from probes.step import Case
from recipe import make_optimizer

SIM_VS_REAL = 0.01  # as tests/probes/test_recipe_sim.py


def test_eight_bit_adamw_steps_on_fake_tensors():
    """Built and stepped on a fake parameter, under a fake mode that takes real inputs (the maps) as the sim's does
    (probes/shadow.py ShadowFakeMode): one byte a state entry (state1, state2) at 4,096 entries and more."""
    with FakeTensorMode(allow_non_fake_inputs=True):
        p = torch.nn.Parameter(torch.zeros(64, 128))
        p.grad = torch.ones(64, 128)
        opt = make_optimizer([p], "adamw-8bit")
        opt.step()
        state = opt.state[p]
    assert state["state1"].dtype == state["state2"].dtype == torch.uint8
    assert state["state1"].numel() == p.numel()


@pytest.mark.sweep
def test_sim_of_eight_bit_adamw_matches_real_cpu_steps():
    """The sim's peak against real CPU steps with bitsandbytes' CPU kernels (equal on debug-llama, 8 layers: 130,979,840
    bytes both, 2026-12-06); about 3 min on 2 shared cores."""
    cfg = dict(model_config("debug-llama"), num_hidden_layers=8)
    case = Case(cfg, Knobs.make(precision="fp32", optimizer="adamw-8bit"), 2, 1, 128)
    sim = simulate(case, paths="cpu")
    real = measure(case)
    assert sim.by_category["optimizer"] > 0
    assert sim.peak_allocated_bytes == pytest.approx(real["peak_allocated_bytes"], rel=SIM_VS_REAL)
