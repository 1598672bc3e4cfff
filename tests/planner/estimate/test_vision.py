"""planner.estimate.vision's rules, torch-free (the bytes themselves are pinned to the sim in
tests/probes/test_vision_terms.py)."""

from dataclasses import replace

from planner.estimate.vision import gated_bytes, vision_activations_bytes, vision_block_bytes
from planner.model.catalog import load_model


def test_layers_past_the_feature_layer_save_nothing():
    v = load_model("llava-1.5-7b").vision  # vision_feature_layer -2
    assert v.unused_layers == 1 and v.block == "quick-gelu"
    block = vision_block_bytes(v, 576, "half")
    assert vision_activations_bytes(v, 1, 576, "half", "off", True) == (v.layers - 1) * block


def test_gated_layers_keep_two_more_tensors_and_a_frozen_tower_keeps_none():
    v = load_model("llama-3.2-11b-vision").vision
    assert v.gated_layers == 8 and v.block == "plain"
    p = v.patches_per_token
    plain = replace(v, gated_layers=0)
    assert vision_activations_bytes(v, 1, 1, "half", "off", True) - vision_activations_bytes(
        plain, 1, 1, "half", "off", True
    ) == 8 * gated_bytes(p, v.hidden, "half")
    assert vision_activations_bytes(v, 1, 1, "half", "off", False) == 0


def test_torch_amp_casts_a_norms_output_for_each_linear_reading_it():
    """CLIP's q, k and v each cast the first norm's output under AMP (two copies more than one fused qkv reads)."""
    clip, qwen3 = load_model("llava-1.5-7b").vision, load_model("qwen3-vl-8b").vision
    for v, extra in ((clip, 2), (qwen3, 0)):
        half_like = vision_block_bytes(v, 100, "amp") - 2 * 2 * 100 * v.hidden  # residual: fp32 under AMP
        assert half_like - vision_block_bytes(v, 100, "half") == extra * 2 * 100 * v.hidden
