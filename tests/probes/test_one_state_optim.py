"""The one-state optimizers transformers' optim names build (planner.config.knobfields.ONE_STATE_OPTIMIZERS):
bitsandbytes' Lion and RMSprop, 32-bit and 8-bit, and torch's RMSprop and Adagrad, against real steps on the CPU of
the 2-layer Llama tests/probes/test_torchao_optim.py steps (its k/v projections and norms under bitsandbytes' 4,096
elements, so 8-bit runs keep fp32 states for them), fp32 and bf16: after two steps the bytes every state tensor holds
equal the plan's optimizer term (the step counters and bitsandbytes' 256-entry qmaps, 1 KiB a tensor, left out), and
torch's foreach steps allocate the temporaries trained.FOREACH_TEMPS counts (the live-bytes tracker around the
second step; its 512-byte rounding a tensor within 1%)."""

import json
import os
import subprocess
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("bitsandbytes")
from planner.config.spec import Knobs
from planner.estimate import state_terms
from planner.estimate.setup import Setup
from planner.model.families import from_config
from recipe import make_optimizer
from tests.planner.estimate.test_torchao_optim import TINY

UNPAGED = ["lion", "lion-8bit", "rmsprop-bnb", "rmsprop-bnb-8bit", "rmsprop", "adagrad"]


def _stepped(optimizer: str, dtype, track: bool = False):
    from probes.tracker import LiveBytes

    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(**{k: v for k, v in TINY.items() if k not in ("model_type", "architectures")})
    model = transformers.LlamaForCausalLM(cfg).to(dtype)
    opt = make_optimizer(list(model.parameters()), optimizer, lr=1e-3)
    peak = 0
    for step in range(2):
        ids = torch.randint(0, TINY["vocab_size"], (2, 16))
        model(input_ids=ids, labels=ids).loss.backward()
        if step and track:
            with LiveBytes() as t:
                opt.step()
            peak = t.peak
        else:
            opt.step()
        opt.zero_grad()
    held = sum(
        v.untyped_storage().nbytes()
        for st in opt.state.values()
        for key, v in st.items()
        if torch.is_tensor(v) and key not in ("step", "qmap1", "qmap2")
    )
    return held, peak


def _setup(optimizer: str, precision: str, framework: str = "hf") -> Setup:
    knobs = Knobs(framework=framework, optimizer=optimizer, precision=precision)
    return Setup(from_config(TINY, "tiny-llama"), knobs, 1, 1, 16)


@pytest.mark.parametrize("optimizer", UNPAGED)
@pytest.mark.parametrize("precision,dtype", [("fp32", "float32"), ("bf16-pure", "bfloat16")])
def test_the_states_are_the_terms_bytes(optimizer, precision, dtype):
    held, _ = _stepped(optimizer, getattr(torch, dtype))
    assert state_terms.optimizer_bytes(_setup(optimizer, precision)) == held


@pytest.mark.parametrize("optimizer", ["rmsprop", "adagrad"])
@pytest.mark.parametrize("precision,dtype", [("fp32", "float32"), ("bf16-pure", "bfloat16")])
def test_torchs_foreach_step_allocates_the_counted_temporaries(optimizer, precision, dtype):
    _, peak = _stepped(optimizer, getattr(torch, dtype), track=True)
    assert state_terms.optimizer_step_temp_bytes(_setup(optimizer, precision)) == pytest.approx(peak, rel=0.01)


def test_paged_ones_keep_the_large_states_outside_the_allocator():
    """paged-lion(-8bit): the states of tensors of 1e5 elements and more in CUDA unified memory (not on this CPU:
    counted apart, paged_optimizer_bytes), the same bytes as the unpaged ones'."""
    big = {**TINY, "vocab_size": 2048}  # a 131,072-element embedding and head
    for paged, plain in (("paged-lion", "lion"), ("paged-lion-8bit", "lion-8bit")):
        s, u = (
            Setup(from_config(big, "tiny-llama"), Knobs(framework="hf", optimizer=o), 1, 1, 16) for o in (paged, plain)
        )
        assert state_terms.paged_optimizer_bytes(s) > 0 == state_terms.paged_optimizer_bytes(u)
        assert state_terms.optimizer_bytes(s) + state_terms.paged_optimizer_bytes(s) == state_terms.optimizer_bytes(u)


SIM_ROWS = [  # (optimizer, the sim's peak phase); analytic / sim - 1 when pinned (2026-12-07): -0.001% each
    ("adagrad", "optimizer-step"),  # its two foreach temporaries make the step the peak
    *((o, "end-of-backward") for o in ("rmsprop", "lion", "lion-8bit", "rmsprop-bnb-8bit")),
]


@pytest.mark.parametrize("optimizer,phase", SIM_ROWS)
def test_the_analytic_peak_matches_the_sim(optimizer, phase):
    """Qwen2.5-0.5B at 4 layers, bf16 AMP with checkpointing, one row of 256 tokens: the step's states and
    temporaries beside the model's, the optimizer built by recipe.make_optimizer as the probes and trainer build it."""
    from planner.estimate.memory import breakdown
    from planner.model import catalog
    from probes.sim import simulate
    from probes.step import Case
    from tests.probes.test_family_accuracy import _four_layers

    cfg = _four_layers(catalog.model_config("qwen2.5-0.5b"))
    k = Knobs(framework="hf", precision="bf16", checkpointing="full", optimizer=optimizer)
    sim = simulate(Case(cfg, k, 1, 1, 256))
    a = breakdown(Setup(from_config(cfg, "qwen2.5-0.5b"), k, 1, 1, 256), 80 * 2**30)
    assert a.peak_allocated_bytes == pytest.approx(sim.peak_allocated_bytes, rel=0.001)
    assert a.peak_phase == sim.phase == phase


ADOPT = """
import json, sys
import torch, transformers
from probes.tracker import LiveBytes
from axolotl.utils.optimizers.adopt import ADOPT
tiny = json.loads(sys.argv[1])
cfg = transformers.LlamaConfig(**{k: v for k, v in tiny.items() if k not in ("model_type", "architectures")})
out = {}
for dtype in ("float32", "bfloat16"):
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).to(getattr(torch, dtype))
    opt = ADOPT(model.parameters(), lr=1e-3, decouple=True, foreach=True)
    for step in range(3):
        ids = torch.randint(0, tiny["vocab_size"], (2, 16))
        model(input_ids=ids, labels=ids).loss.backward()
        if step == 2:
            with LiveBytes() as t:
                opt.step()
        else:
            opt.step()
        opt.zero_grad()
    held = sum(v.untyped_storage().nbytes() for s in opt.state.values() for k, v in s.items() if k != "step")
    out[dtype] = [held, t.peak]
print(json.dumps(out))
"""


@pytest.mark.skipif(not os.environ.get("MEMPLAN_AXOLOTL_PYTHON"), reason="axolotl's venv (Makefile FRAMEWORK_PYTHONS)")
def test_axolotls_adopt():
    """axolotl's adopt_adamw (core/builders/base.py:374-378: ADOPT with decouple, foreach on CUDA) in axolotl's own
    venv: AdamW's two states and two foreach temporaries at a step past the first (adopt.py:431-434)."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    cmd = [os.environ["MEMPLAN_AXOLOTL_PYTHON"], "-c", ADOPT, json.dumps(TINY)]
    got = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True, env=env).stdout.splitlines()[-1])
    for precision, dtype in (("fp32", "float32"), ("bf16-pure", "bfloat16")):
        s = _setup("adopt", precision, "axolotl")
        assert state_terms.optimizer_bytes(s) == got[dtype][0]
        assert state_terms.optimizer_step_temp_bytes(s) == pytest.approx(got[dtype][1], rel=0.01)
