"""The load and checkpoint-save phases in a plan: every plan carries both, on the GPU and in host RAM per node, and a
host phase past --host-ram-gb refuses the plan naming the phase (the terms themselves are pinned in
tests/probes/test_save.py)."""

from planner.advise import CheckRequest, check, parse
from planner.config.spec import GIB, Knobs
from planner.estimate import lifecycle
from planner.estimate.memory import breakdown
from planner.estimate.setup import Setup
from planner.model.catalog import load_model


def _setup(model: str = "llama-3.1-8b", g: int = 8, **knobs) -> Setup:
    return Setup(load_model(model), Knobs(**knobs), 1, 1, 2048, g, 1)


def test_every_plan_carries_the_load_and_save_phases_on_the_gpu_and_the_host():
    m = breakdown(_setup(precision="bf16", zero_stage=3, framework="hf"), 80 * GIB)
    assert {"load", "checkpoint-save"} <= set(m.phases) and set(m.host_phases) == {
        "load",
        "training",
        "checkpoint-save",
    }
    assert m.host_bytes_per_node == max(m.host_phases.values())
    params = load_model("llama-3.1-8b").params
    assert m.host_phases["checkpoint-save"] == 2 * params  # ZeRO-3 gathers the 16-bit weights on rank 0 (auto)
    assert m.phases["load"] < m.phases[m.peak_phase]  # loading is never the GPU's peak here


def test_what_decides_each_save_is_the_knob_and_the_framework():
    full = _setup(precision="bf16", fsdp="full", framework="hf", save_weights="full")
    sharded = _setup(precision="bf16", fsdp="full", framework="hf")  # auto: memplan's export, SHARDED_STATE_DICT
    p = load_model("llama-3.1-8b").params
    assert lifecycle.save_host_bytes_per_node(full) == 8 * p  # AdamW's two fp32 moments on rank 0
    assert lifecycle.save_host_bytes_per_node(sharded) == 8 * p * 8 // 8  # 8 ranks x their 1/8
    assert lifecycle.save_gpu_transient_bytes(full) == load_model("llama-3.1-8b").largest_matrix_params() * 4
    assert lifecycle.save_gpu_transient_bytes(sharded) == 0
    z2 = _setup(precision="bf16", zero_stage=2, framework="hf")
    assert lifecycle.save_host_bytes_per_node(z2) == 8 * 2 * p  # every rank clones the bf16 module
    bundled = _setup(precision="bf16", zero_stage=3)  # the bundled trainer saves DeepSpeed's shards
    assert lifecycle.save_host_bytes_per_node(bundled) == 0
    lora = _setup(precision="bf16", zero_stage=2, framework="hf", lora_rank=16)
    from planner.estimate.trained import trainable_params

    assert lifecycle.save_host_bytes_per_node(lora) == 8 * 2 * trainable_params(lora) < p // 10  # PEFT: the adapters


def test_a_host_phase_past_the_host_ram_refuses_the_plan_naming_it():
    """Llama-3.1-8B under HF's FSDP2 on 8 GPUs: every rank upcasts its copy to fp32 while loading, 239 GiB a node."""
    req = {"model": "llama-3.1-8b", "gpu": "h100", "gpus_per_node": 8, "micro_batch": 1, "seq_len": 2048}
    req |= {"fsdp": "full", "framework": "hf", "evidence": "analytic"}
    plan = check(parse(CheckRequest, req | {"host_ram_gb": 200})).plan
    assert not plan.fits and plan.reason.startswith("loading the model needs 239.3 GiB host RAM per node > 200.0 GiB")
    assert check(parse(CheckRequest, req | {"host_ram_gb": 256})).plan.fits


def test_a_save_on_one_rank_gathers_nothing():
    # DeepSpeed uses a partition of one as the parameter (partition_parameters.py:1559-1560); FSDP2's full tensor of
    # one shard is the shard: 0 bytes above the step on an H200 (benchmarks/results/gpu/h200/terms.json)
    for knobs in ({"zero_stage": 3}, {"fsdp": "full", "save_weights": "full"}):
        assert lifecycle.save_gpu_transient_bytes(_setup(g=1, precision="bf16", framework="hf", **knobs)) == 0
        assert lifecycle.save_gpu_transient_bytes(_setup(g=2, precision="bf16", framework="hf", **knobs)) > 0
