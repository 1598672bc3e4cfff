"""AdaLoRA's and VeRA's rules (planner.config.spec_lora.tuner_rules): planned where the sim and PEFT's own counts
pinned them (tests/probes/test_peft_tuners.py), a 16-bit or fp32 base's decoder linears under DDP or ZeRO-1/2 with
AdamW or SGD; anything else is refused in one line naming --lora-variant."""

import pytest

from planner.config.spec import Knobs
from planner.errors import BadInput


@pytest.mark.parametrize("variant", ["adalora", "vera"])
@pytest.mark.parametrize(
    "knobs",
    [{"quant": "nf4"}, {"zero_stage": 3}, {"fsdp": "full"}, {"optimizer": "adafactor"}, {"lora_base_fp32": True}],
)
def test_what_adalora_and_vera_are_not_planned_with_is_refused_in_one_line(variant, knobs):
    with pytest.raises(BadInput) as e:
        Knobs.make(lora_rank=8, lora_variant=variant, **knobs)
    assert e.value.field == "lora_variant" and f"--lora-variant {variant}" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("variant", ["adalora", "vera"])
def test_adalora_and_vera_are_planned_under_zero2_and_need_adapters(variant):
    assert Knobs.make(lora_rank=8, lora_variant=variant, zero_stage=2, precision="bf16").lora_variant == variant
    with pytest.raises(BadInput):
        Knobs.make(lora_variant=variant)


@pytest.mark.parametrize(
    "knobs",
    [
        {"quant": "nf4"},
        {"zero_stage": 2},
        {"fsdp": "full"},
        {"precision": "fp32"},
        {"lora_targets": "q_proj,v_proj"},
        {"lora_dropout": 0.05},
        {"lora_train_embeddings": True},
    ],
)
def test_what_the_bottleneck_adapter_is_not_planned_with_is_refused_in_one_line(knobs):
    """ms-swift's adapters (planner.estimate.bottleneck): a bf16 base under AMP or bf16-pure on one GPU or DDP,
    after every MLP (tests/probes/test_adapter.py); LoRA's target and dropout knobs have nothing to act on."""
    with pytest.raises(BadInput) as e:
        Knobs.make(lora_rank=64, lora_variant="adapter", framework="swift", **knobs)
    assert e.value.field == "lora_variant" and "--lora-variant adapter" in str(e.value) and "\n" not in str(e.value)


def test_the_bottleneck_adapter_is_planned_under_bf16_and_bf16_pure():
    for precision in ("bf16", "bf16-pure"):
        assert (
            Knobs.make(lora_rank=64, lora_variant="adapter", framework="swift", precision=precision).lora_variant
            == "adapter"
        )


def test_the_bundled_trainer_refuses_the_bottleneck_adapter_in_one_line():
    """planner train builds PEFT's tuners (recipe.lora_config): ms-swift's adapter is never run or planned as LoRA."""
    with pytest.raises(BadInput) as e:
        Knobs.make(lora_rank=64, lora_variant="adapter")
    assert "--framework swift" in str(e.value) and "\n" not in str(e.value)
