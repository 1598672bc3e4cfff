"""--lora-variant oft: planned where its terms are pinned (tests/probes/test_oft.py), refused in one line elsewhere
(BOFT's rules: tests/probes/test_boft.py)."""

from types import SimpleNamespace

import pytest

from planner.config.layout import Layout
from planner.config.spec import Knobs
from planner.errors import BadInput
from planner.model.catalog import load_model


@pytest.mark.parametrize(
    "knobs,says",
    [
        ({"quant": "int8"}, "--quant int8"),
        ({"precision": "fp32"}, "--precision fp32"),
        ({"lora_dropout": 0.1}, "--lora-dropout 0.1"),
    ],
)
def test_oft_where_it_is_not_pinned_is_refused_in_one_line(knobs, says):
    with pytest.raises(BadInput) as e:
        Knobs.make(lora_rank=32, lora_variant="oft", **knobs)
    assert e.value.field == "lora_variant" and says in str(e.value) and "\n" not in str(e.value)
    assert str(e.value).endswith("?")


@pytest.mark.parametrize(
    "knobs",
    [
        {},
        {"precision": "bf16-pure"},
        {"checkpointing": "full"},
        {"zero_stage": 0},
        {"zero_stage": 2},
        {"zero_stage": 3},
        {"fsdp": "full"},
        {"quant": "nf4"},
    ],
)
def test_oft_is_planned_on_a_16_bit_or_4_bit_base_under_ddp_zero_or_fsdp(knobs):
    assert Knobs.make(lora_rank=32, lora_variant="oft", **knobs).lora_variant == "oft"


def test_oft_on_a_layer_it_was_not_traced_on_is_refused_by_the_model():
    k = Knobs.make(lora_rank=32, lora_variant="oft")
    hw = SimpleNamespace(gpus_per_node=1, nodes=1)  # Layout.of reads these two
    assert Layout.of(hw, load_model("llama-3.2-1b")).knob_error(k) is None
    error = Layout.of(hw, load_model("gpt2")).knob_error(k)
    assert error is not None and error.field == "lora_variant" and "gpt2" in str(error)
