"""--lora-variant dora: planned where its terms are pinned (tests/probes/test_dora.py), refused in one line elsewhere."""

import pytest

from planner.config.spec import Knobs
from planner.errors import BadInput


@pytest.mark.parametrize(
    "knobs,says",
    [
        ({"quant": "nf4"}, "--quant nf4"),
        ({"checkpointing": "selective-op"}, "--checkpointing selective-op"),
        ({"lora_targets": "experts.gate_up_proj"}, "--lora-targets experts.gate_up_proj"),
    ],
)
def test_dora_where_it_is_not_pinned_is_refused_in_one_line(knobs, says):
    with pytest.raises(BadInput) as e:
        Knobs.make(lora_rank=8, lora_variant="dora", **knobs)
    assert e.value.field == "lora_variant" and says in str(e.value) and "\n" not in str(e.value)
    assert str(e.value).endswith("? then give --lora-variant lora")  # a question the user can answer


@pytest.mark.parametrize(
    "knobs",
    [{}, {"zero_stage": 2}, {"zero_stage": 3}, {"fsdp": "full"}, {"checkpointing": "full"}, {"precision": "fp32"}],
)
def test_dora_is_planned_with_ddp_zero_and_fsdp(knobs):
    assert Knobs.make(lora_rank=8, lora_variant="dora", **knobs).lora_variant == "dora"


def test_dora_needs_adapters():
    with pytest.raises(BadInput, match="needs LoRA adapters"):
        Knobs.make(lora_variant="dora")
