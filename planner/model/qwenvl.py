"""Qwen2-VL's and Qwen2.5-VL's vision towers (model_type qwen2_vl, qwen2_5_vl), counted from config.json as
transformers 5.25 builds them; the language model is modelspec's llama-like reader's.

Qwen2-VL (models/qwen2_vl/modeling_qwen2_vl.py): the tower's width is vision_config's `embed_dim` (default 1280)
and its MLP's `int(embed_dim * mlp_ratio)` (:432, mlp_ratio default 4); vision_config's `hidden_size` (default
3584) is the merger's output, the language model's width (:666-667). Blocks: two LayerNorms with biases
(:430-431), a fused qkv and proj with biases (:351-352), fc1 -> quick_gelu -> fc2 with biases (:298-300); the patch
convolution has no bias (:268); the merger is a LayerNorm with bias and two biased linears (:279-288). Its input
channels are `in_channels` (default 3): the checkpoints' `in_chans` is a key the config class keeps but the model
never reads (configuration_qwen2_vl.py:33-44).

Qwen2.5-VL: the tower's width is `hidden_size`, the merger's output `out_hidden_size`; RMSNorms, a gated MLP of
`intermediate_size` and windowed attention in all but `fullatt_block_indexes`.
"""

from __future__ import annotations

from dataclasses import replace

from planner.model.shapes import Tensors, linear, size


def _qwen2_vl(v: dict) -> tuple[int, int, int, list[Tensors]]:
    """(width, MLP width, merger output, the blocks' tensors) of Qwen2-VL's tower."""
    hv, depth = size(v, "embed_dim", default=1280), size(v, "depth", default=32)
    iv = hv * size(v, "mlp_ratio", default=4)  # an int: transformers 5.25's strict config refuses 2.5
    t = [Tensors("vision", (hv,), 4 * depth)]  # norm1, norm2: weight and bias
    t += linear("vision", 3 * hv, hv, depth, True) + linear("vision", hv, hv, depth, True)
    t += linear("vision", iv, hv, depth, True) + linear("vision", hv, iv, depth, True)
    return hv, iv, size(v, "hidden_size", default=3584), t


def _qwen2_5_vl(v: dict, text_hidden: int) -> tuple[int, int, int, list[Tensors]]:
    hv, depth, iv = size(v, "hidden_size"), size(v, "depth"), size(v, "intermediate_size")
    t = [Tensors("vision", (hv,), 2 * depth)]  # two RMSNorms
    t += linear("vision", 3 * hv, hv, depth, True) + linear("vision", hv, hv, depth, True)
    t += linear("vision", iv, hv, 2 * depth, True) + linear("vision", hv, iv, depth, True)
    return hv, iv, size(v, "out_hidden_size", default=text_hidden), t


def read(model_type: str, v: dict, text_hidden: int, vision_spec) -> tuple[object, list[Tensors]]:
    """The tower's VisionSpec (`vision_spec` is modelspec's class) and its and the merger's tensors."""
    qwen2 = model_type == "qwen2_vl"
    hv, iv, out, blocks = _qwen2_vl(v) if qwen2 else _qwen2_5_vl(v, text_hidden)
    m2 = size(v, "spatial_merge_size", default=2) ** 2
    patch = size(v, "patch_size", default=14)
    channels = size(v, "in_channels", default=3) if qwen2 else size(v, "in_chans", "in_channels", default=3)
    t = [Tensors("vision", (hv, channels, size(v, "temporal_patch_size", default=2), patch, patch))] + blocks
    t += [Tensors("projector", (hv,), 2 if qwen2 else 1)]  # ln_q: LayerNorm (weight, bias) or RMSNorm
    t += linear("projector", hv * m2, hv * m2, 1, True) + linear("projector", out, hv * m2, 1, True)
    heads = size(v, "num_heads", default=16) if qwen2 else size(v, "num_heads")
    depth = size(v, "depth", default=32) if qwen2 else size(v, "depth")
    spec = vision_spec(depth, hv, iv, heads, not qwen2, m2, ("visual.",), ("visual.merger.",))
    # input_embeddings stays False: the tower class defines no get_input_embeddings and has neither `model` nor
    # `embed_tokens`, so enable_input_require_grads raises NotImplementedError at transformers 4.46-4.57 (4.57.1
    # modeling_utils.py:1802-1834), which ms-swift passes over (v2.5.2 swift/llm/sft.py:270-274): the frozen tower
    # records no graph (a real forward: tests/probes/test_frozen_tower_hook.py). Qwen2.5-Omni's tower the same.
    if qwen2:  # every block attends over each image whole
        return replace(spec, block="quick-gelu-rotary"), t
    window = (size(v, "window_size", default=112) // patch) ** 2
    full = len(v.get("fullatt_block_indexes") or [])
    return replace(spec, block="rmsnorm-rotary", window_tokens=window, full_attention_layers=full), t
