"""Search: exact global batch, fit test, ranking, rejection reasons, the users' stories."""

import pytest

from planner.config.requests import Space
from planner.config.spec import Goal
from planner.errors import BadInput
from planner.model import catalog, hardware
from planner.search.search import check_global_batch, search

# ZeRO / DDP with checkpointing off or full and the standard loss: the space these tests were written for (suggest's
# own default space adds FSDP, the lighter checkpointing policies and the chunked loss)
NARROW = {"checkpointing": ["off", "full"], "fsdp": ["off"], "loss": ["standard"]}


def space_of(**knobs) -> Space:
    return Space(**{**NARROW, **knobs})


def run(model, gpu, per_node, batch, seq, nodes=1, space=None, **goal):
    hw = hardware.resolve(gpu, per_node, nodes)
    return search(
        catalog.load_model(model), hw, Goal(global_batch=batch, seq_len=seq, **goal), space or space_of(), top=1000
    )


@pytest.mark.parametrize(
    "model,gpu,per_node,nodes,batch",
    [
        ("llama-3.1-8b", "a100-80gb", 8, 1, 256),
        ("qwen2.5-3b", "h20", 6, 1, 24),
        ("qwen2.5-0.5b", "rtx4090", 2, 1, 16),
        ("llama-2-13b", "h100", 8, 4, 512),
    ],
)
def test_every_plan_has_the_exact_global_batch(model, gpu, per_node, nodes, batch):
    r = run(model, gpu, per_node, batch, 2048, nodes)
    assert r.plans
    for p in r.plans + r.rejected:
        assert p.micro_batch * p.grad_accum * p.data_parallel == batch
        assert p.world_size == per_node * nodes


def test_plans_fit_and_are_ranked_by_speed():
    r = run("llama-3.1-8b", "a100-80gb", 8, 256, 4096)
    usable = 0.95 * r.plans[0].memory.capacity_bytes
    assert all(p.fits and p.memory.device_total_bytes <= usable for p in r.plans)
    speeds = [p.tokens_per_s for p in r.plans]
    assert speeds == sorted(speeds, reverse=True)


def test_72b_full_finetune_without_offload_does_not_fit_on_8_a100():
    r = run("qwen2.5-72b", "a100-80gb", 8, 64, 4096, space=space_of(offload=["none"]))
    assert r.plans == []
    assert {p.zero_stage for p in r.rejected} == {0, 1, 2, 3}
    assert all("model states alone need" in p.reason for p in r.rejected)
    zero3 = [p.reason for p in r.rejected if p.zero_stage == 3]
    assert zero3 and all("offload or LoRA adapters" in x and "--zero 3" not in x for x in zero3), zero3


def test_7b_with_zero3_fits_on_8_a100_at_4096():
    r = run("qwen2.5-7b", "a100-80gb", 8, 64, 4096, space=space_of(zero=[3]))
    assert r.plans and all(p.zero_stage == 3 for p in r.plans)


def test_lora_lets_72b_fit_where_full_training_cannot():
    assert run("qwen2.5-72b", "a100-80gb", 8, 64, 2048, space=space_of(offload=["none"], zero=[0, 1, 2])).plans == []
    lora = run("qwen2.5-72b", "a100-80gb", 8, 64, 2048, space=space_of(offload=["none"], zero=[3], lora_rank=16))
    assert lora.plans


def test_h20_vlm_story_reported_split_does_not_fit_but_others_do():
    """6 x H20, 3B-class VLM, per-device 4, accumulation 1 at the maximum length: predicted OOM;
    the default search finds splits of the same global batch that fit."""
    r = run("qwen2.5-vl-3b", "h20", 6, 24, 4096, image_tokens=1024)
    assert r.plans
    assert not any(p.micro_batch == 4 and p.checkpointing == "off" and p.zero_stage == 0 for p in r.plans)
    assert all(p.global_batch == 24 for p in r.plans)


def test_global_batch_not_divisible_names_nearest():
    with pytest.raises(BadInput, match="nearest valid global batches: 252, 258"):
        check_global_batch(255, 6)
    with pytest.raises(BadInput, match="nearest valid global batches: 8"):
        check_global_batch(3, 8)


def test_bf16_on_a_v100_is_bad_input_not_nothing_fits():
    with pytest.raises(BadInput, match="--precision bf16: v100-32gb has no bf16 support; use fp16 or fp32"):
        run("qwen2.5-0.5b", "v100-32gb", 1, 8, 512, space=space_of(precision=["bf16"], zero=[0]))
    assert run("qwen2.5-0.5b", "v100-32gb", 1, 8, 512).plans[0].precision == "fp16"


def test_host_ram_limits_offload():
    hw = hardware.resolve("a100-80gb", 8, 1, host_ram_gib=64)
    r = search(
        catalog.load_model("llama-2-70b"),
        hw,
        Goal(global_batch=8, seq_len=1024),
        space_of(zero=[3], offload=["optimizer+params"]),
    )
    assert r.plans == [] and "host RAM per node" in r.rejected[0].reason


def test_checkpointing_lets_larger_micro_batches_fit():
    r = run("llama-3.1-8b", "a100-80gb", 8, 256, 4096, space=space_of(zero=[3], offload=["none"]))
    best_mb = {c: max(p.micro_batch for p in r.plans if p.checkpointing == c) for c in ("off", "full")}
    assert best_mb["full"] > best_mb["off"]
