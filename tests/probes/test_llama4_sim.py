"""Llama-4 Maverick against the sim (the family-accuracy rows run Scout, one model a model_type): its interleaved dense
(intermediate_size_mlp) and routed layers, no q/k norm (use_qk_norm false), cut to 4 layers (two routed, one NoPE)
and 4 experts, one 144-token tile a sample. Measured when pinned: analytic/sim +0.00% bf16 AMP 4 x 4096, -0.18%
bf16-pure full checkpointing 8 x 4096, -0.04% bf16-pure 4 x 2048 (the sweep tier runs the last)."""

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
from planner.config.spec import Knobs
from planner.estimate.memory import breakdown
from planner.estimate.setup import Setup
from planner.model import catalog
from planner.model.families import from_config
from probes.sim import simulate
from probes.step import Case


@pytest.mark.sweep
def test_maverick_interleaved_layers_match_the_sim():
    cfg = catalog.model_config("llama-4-maverick-17b-128e")
    cfg["text_config"] = {**cfg["text_config"], "num_hidden_layers": 4, "num_local_experts": 4}
    spec = from_config(cfg, "maverick-4")
    assert spec.text.moe.moe_layers == 2 and spec.text.nope_layers == 1 and not spec.text.traits.l2_qk_norm
    knobs = Knobs(precision="bf16-pure", checkpointing="off")
    sim = simulate(Case(cfg, knobs, 4, 2, 2048, 256), paths="cuda")
    analytic = breakdown(Setup(spec, knobs, 4, 2, 2048, image_tokens=sim.image_tokens), 80 * 2**30)
    error = analytic.peak_allocated_bytes / sim.peak_allocated_bytes - 1
    assert sim.image_tokens == 144 and abs(error) <= 0.01, f"analytic/sim {error:+.2%}"
