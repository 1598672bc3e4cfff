"""Speed model: the behaviours users reported (users' stories)."""

from planner.config.spec import Knobs
from planner.estimate.setup import Setup
from planner.estimate.speed import comm_bytes_per_step, efficiency, step_time, tokens_per_second
from planner.model import catalog, hardware


def tps(model, knobs, micro, accum, per_node, nodes, seq=2048, gpu="a100-80gb"):
    hw = hardware.resolve(gpu, per_node, nodes)
    s = Setup(catalog.load_model(model), knobs, micro, accum, seq, per_node, nodes)
    return tokens_per_second(s, hw, step_time(s, hw))


def test_zero2_accumulation_8_on_4_nodes_is_slower_than_2_for_the_same_global_batch():
    """4 nodes x 8 GPUs: ZeRO-2 reduce-scatters gradients on every micro-step, so more, smaller
    micro-steps cost communication that fewer larger ones do not."""
    z2 = Knobs(zero_stage=2, checkpointing="full")
    slow = tps("llama-2-7b", z2, 1, 8, 8, 4)
    fast = tps("llama-2-7b", z2, 4, 2, 8, 4)
    assert fast > 1.2 * slow


def test_ddp_communicates_once_per_step_whatever_the_accumulation():
    m = catalog.load_model("llama-3.2-1b")
    a = comm_bytes_per_step(Setup(m, Knobs(), 1, 1, 1024, 8, 1))
    b = comm_bytes_per_step(Setup(m, Knobs(), 1, 8, 1024, 8, 1))
    assert a == b


def test_multi_node_scaling_is_sublinear():
    one = tps("llama-2-7b", Knobs(zero_stage=3, checkpointing="full"), 2, 4, 8, 1)
    four = tps("llama-2-7b", Knobs(zero_stage=3, checkpointing="full"), 2, 1, 8, 4)
    assert 0.5 < four / (4 * one) < 1.0


def test_efficiency_grows_and_saturates():
    assert efficiency(512) < efficiency(4096) < efficiency(65536) < 0.55


def test_checkpointing_and_offload_cost_time():
    full = tps("llama-2-7b", Knobs(zero_stage=3, checkpointing="full"), 2, 4, 8, 1)
    off = tps("llama-2-7b", Knobs(zero_stage=3), 2, 4, 8, 1)
    offload = tps("llama-2-7b", Knobs(zero_stage=3, offload="optimizer"), 2, 4, 8, 1)
    assert off > full and off > offload
