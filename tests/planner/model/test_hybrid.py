"""Qwen3-Next, Qwen3.5 and Qwen3.5-MoE (planner/model/hybrid.py) against transformers 5.25's meta-device build of the
same config: the config classes' own defaults (what a config.json leaves out), the layer pattern from layer_types or
full_attention_interval, Qwen3-Next's fused projections and dense mlp_only_layers, and the composite's tower
(Qwen3-VL's without its deepstack mergers)."""

import pytest

from planner.errors import BadInput
from planner.model import catalog
from planner.model.families import from_config


def _built(model_type: str, **kw) -> tuple[dict, int]:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    conf = transformers.AutoConfig.for_model(model_type, **kw)
    vlm = hasattr(conf, "vision_config")
    auto = transformers.AutoModelForImageTextToText if vlm else transformers.AutoModelForCausalLM
    with torch.device("meta"):
        model = auto.from_config(conf)
    return conf.to_dict(), sum(p.numel() for p in model.parameters())


CASES = {
    "qwen3_5_text-defaults": ("qwen3_5_text", {"num_hidden_layers": 4}),
    "qwen3_5_text-interval-2": ("qwen3_5_text", {"num_hidden_layers": 4, "full_attention_interval": 2}),
    "qwen3_5_text-biased": ("qwen3_5_text", {"num_hidden_layers": 4, "attention_bias": True}),
    "qwen3_next-routed": ("qwen3_next", {"num_hidden_layers": 4, "num_experts": 16}),
    "qwen3_next-dense-layer": ("qwen3_next", {"num_hidden_layers": 4, "num_experts": 16, "mlp_only_layers": [1]}),
    "qwen3_5_moe_text": ("qwen3_5_moe_text", {"num_hidden_layers": 4, "num_experts": 16}),
    "qwen3_5-vlm": ("qwen3_5", {"text_config": {"num_hidden_layers": 4}, "vision_config": {"depth": 2}}),
    "qwen3_5_moe-vlm": (
        "qwen3_5_moe",
        {"text_config": {"num_hidden_layers": 4, "num_experts": 16}, "vision_config": {"depth": 2}},
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_counts_are_the_built_models(case):
    model_type, kw = CASES[case]
    cfg, real = _built(model_type, **kw)
    spec = from_config(cfg, "m")
    assert spec.params == real and spec.exact
    assert all(t.count > 0 for t in spec.tensors)  # no empty group (a zero count divides the ZeRO-3 terms)
    linear = spec.text.linear
    kinds = cfg.get("text_config", cfg)["layer_types"]
    assert linear.layers == kinds.count("linear_attention") and 0 < linear.layers < spec.text.layers


def test_a_config_json_with_only_what_it_sets_counts_the_class_defaults():
    """config.json as a user writes it: the linear-attention shapes and the layer pattern from the class defaults."""
    cfg, real = _built("qwen3_5_text", num_hidden_layers=8)
    short = {k: cfg[k] for k in ("model_type", "hidden_size", "num_hidden_layers", "vocab_size")}
    spec = from_config(short, "m")
    assert spec.params == real and spec.text.linear.layers == 6


def test_the_catalog_entries_are_hybrid():
    q35 = catalog.load_model("qwen3.5-27b")
    assert (q35.text.layers, q35.text.linear.layers, q35.text.linear.v_heads) == (64, 48, 48)
    assert q35.vision is not None and q35.text.moe is None and q35.text.linear.rotary_dims == 64
    nxt = catalog.load_model("qwen3-next-80b-a3b")
    assert (nxt.text.moe.experts, nxt.text.moe.top_k, nxt.text.linear.layers) == (512, 10, 36)
    moe = catalog.load_model("qwen3.5-35b-a3b")  # every layer routed, a gated shared expert
    assert (moe.text.moe.experts, moe.text.moe.moe_layers, moe.text.moe.shared_inter) == (256, 40, 512)
    assert moe.vision is not None and moe.text.linear.layers == 30


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"layer_types": ["linear_attention", "mamba"]}, "layer_types must list"),
        ({"linear_num_key_heads": 5}, "linear_num_key_heads = 5 does not divide"),
    ],
)
def test_bad_hybrid_configs_are_one_line_errors(bad, message):
    cfg = {"model_type": "qwen3_5_text", "num_hidden_layers": 2, **bad}
    with pytest.raises(BadInput, match=message):
        from_config(cfg, "m")
