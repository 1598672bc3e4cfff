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
