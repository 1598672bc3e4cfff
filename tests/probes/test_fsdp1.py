"""FSDP1's gathered units against planner.estimate.fsdp.gathered_layer_units: torch's FullyShardedDataParallel on 2
gloo ranks (probes/fsdp1.py) wrapping a tiny transformers Llama-4 text model, every decoder layer a unit as accelerate
wraps axolotl's FSDP1 configs; the peak of the decoder units' gathered bytes live at once. Sweep tier (about 15 s a
launch on 2 cores); the cheap case in the default tier pins the same figures
(tests/planner/estimate/test_fsdp.py::test_alternating_layers_gather_a_routed_and_a_dense_unit)."""

import pytest

pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from planner.config.spec import Knobs
from planner.estimate import fsdp
from planner.estimate.setup import Setup
from planner.model.families import from_config
from probes.fsdp1 import TINY, measure_gathers


@pytest.mark.sweep
@pytest.mark.parametrize("step,prefetch", [(2, "BACKWARD_PRE"), (1, "BACKWARD_PRE"), (2, None)])
def test_fsdp1_holds_the_largest_adjacent_pair_of_units(step, prefetch):
    """BACKWARD_PRE: backward holds the running unit and the one prefetched before it, a routed and a dense unit
    where they alternate (step 2), two routed ones where every layer is routed (step 1): the planner's units in
    bf16, exact (FULL_SHARD pads a unit only to a multiple of the ranks; these are even). Forward (no forward
    prefetch) and NO_PREFETCH's backward hold one unit at a time in allocated terms: the planner's second unit
    there is the device's (the free waits for the running unit's kernels: fsdp.gathered_layer_units)."""
    config = transformers.AutoConfig.for_model("llama4_text", interleave_moe_layer_step=step, **TINY).to_dict()
    s = Setup(from_config(config, "probe"), Knobs(precision="bf16", fsdp="full"), 1, 1, 32, 2)
    planned = [2 * p for p in fsdp.gathered_layer_units(s)]
    for r in measure_gathers(config, prefetch):
        assert r["routed"] == [(i + 1) % step == 0 for i in range(4)]
        assert max(r["units"]) == planned[0] and min(r["units"]) == planned[1]
        assert r["peak"]["forward"] == planned[0]
        assert r["peak"]["backward"] == (sum(planned) if prefetch else planned[0])
