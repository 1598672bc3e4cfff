"""GLM-4.1V (model_type glm4v) and GLM-4.5V (glm4v_moe) read from config.json as transformers 5.25 builds them
(models/glm4v/modeling_glm4v.py, models/glm4v_moe/modeling_glm4v_moe.py).

The language model is GLM-4's layer (a fused gate_up_proj, four RMSNorms, biased q/k/v and an unbiased o_proj:
:536-676), with two differences the reader passes on: the q/k/v bias is fixed on whatever attention_bias says
(:557-560), and head_dim is always hidden_size / num_attention_heads (:549). Its rotary (M-RoPE over the first
partial_rotary_factor of each head, 1.0 unless rope_parameters says otherwise: :463-465, 521-533) is not GLM-4's
cut-and-repeat, so GLM-4's rotary term is not counted.
The tower (Glm4vVisionModel, :690-725): learned positions over (image_size / patch_size)^2 patches, a 3-D patch
convolution with bias, `depth` blocks (two RMSNorms, a fused qkv biased by attention_bias, an unbiased proj, a gated
MLP whose width is out_hidden_size: :79-90, 320-330, 403-409), post_conv and post RMSNorms, and a strided Conv2d
downsampling spatial_merge_size^2 patches to out_hidden_size; the projector is the merger (:171-185: proj, a
LayerNorm, a gated MLP of the vision config's intermediate_size), as LLaMA-Factory's glm4v plugin freezes it
(projector_key "visual.merger"). Each block is read as Qwen2.5-VL's (RMSNorms, fused qkv, gated MLP), attending over
each image whole.
GLM-4.5V (Glm4vMoeForConditionalGeneration) has the same tower (modeling_glm4v_moe.py:569-915) beside GLM-4.5-Air's
language model (:200-460): GLM-4.5's attention without q/k norms whatever use_qk_norm says (:200-222), its
sigmoid-routed experts, shared expert and first_k_dense_replace dense layers (:271-427), and GLM-4.5's partial
rotary cut and concatenated back (:175-197, partial_rotary_factor 0.5 by default: configuration_glm4v_moe.py:114),
read by modelspec's GLM-4.5 reader (moespec.LAYOUT); head_dim is the config's, else hidden_size // heads (:207).
"""

from __future__ import annotations

from dataclasses import replace

from planner.model.shapes import Tensors, linear, size, sub

# transformers 5.25's config classes' defaults (configuration_glm4v.py:54-69, 109-122)
VISION_DEFAULTS = {
    "depth": 24,
    "hidden_size": 1536,
    "attention_bias": False,
    "num_heads": 12,
    "in_channels": 3,
    "image_size": 336,
    "patch_size": 14,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2,
    "out_hidden_size": 4096,
    "intermediate_size": 13696,
}
TEXT_DEFAULTS = {
    "vocab_size": 151552,
    "hidden_size": 4096,
    "intermediate_size": 13696,
    "num_hidden_layers": 40,
    "num_attention_heads": 32,
    "num_key_value_heads": 2,
    "max_position_embeddings": 32768,
}
# Glm4vMoeTextConfig's defaults (configuration_glm4v_moe.py:82-112); its tower's are GLM-4.1V's (:150-165)
MOE_TEXT_DEFAULTS = {
    "vocab_size": 151424,
    "hidden_size": 4096,
    "intermediate_size": 10944,
    "num_hidden_layers": 46,
    "num_attention_heads": 96,
    "num_key_value_heads": 8,
    "max_position_embeddings": 65536,
    "attention_bias": True,
    "moe_intermediate_size": 1408,
    "num_experts_per_tok": 8,
    "n_shared_experts": 1,
    "n_routed_experts": 128,
    "first_k_dense_replace": 1,
    "router_aux_loss_coef": 0.0001,
}
TOWER = ("visual.",)
PROJECTOR = ("visual.merger.",)
UNITS = {
    "glm4v": ("Glm4vTextDecoderLayer", "Glm4vVisionBlock"),  # Glm4vModel._no_split_modules (:892)
    "glm4v_moe": ("Glm4vMoeTextDecoderLayer", "Glm4vMoeVisionBlock"),  # modeling_glm4v_moe.py:1027
}
MODEL_TYPES = tuple(UNITS)


def _side(x) -> int:
    return x[0] if isinstance(x, (list, tuple)) else x


def tower(v: dict) -> list[Tensors]:
    """The tower's and the merger's tensors."""
    hv, depth, out, inter = v["hidden_size"], v["depth"], v["out_hidden_size"], v["intermediate_size"]
    p, tp, m = size(v, "patch_size"), _side(size(v, "temporal_patch_size")), size(v, "spatial_merge_size")
    grid = _side(size(v, "image_size")) // _side(p)
    t = [Tensors("vision", (grid * grid, hv)), Tensors("vision", (hv, v["in_channels"], tp, _side(p), _side(p)))]
    t += [Tensors("vision", (hv,))]  # the patch convolution's bias
    t += [Tensors("vision", (hv,), 2 * depth)] + linear("vision", 3 * hv, hv, depth, bool(v["attention_bias"]))
    t += linear("vision", hv, hv, depth, False) + linear("vision", out, hv, 2 * depth, False)
    t += linear("vision", hv, out, depth, False) + [Tensors("vision", (hv,), 2)]  # post_conv and post norms
    t += [Tensors("vision", (out, hv, m, m)), Tensors("vision", (out,))]  # downsample
    t += linear("projector", out, out, 1, False) + [Tensors("projector", (out,), 2)]
    return t + linear("projector", inter, out, 2, False) + linear("projector", out, inter, 1, False)


def _text(cfg: dict, mt: str) -> dict:
    """The language model's config as decoders' GLM-4 (glm4v) or GLM-4.5 (glm4v_moe) reader reads it."""
    defaults = MOE_TEXT_DEFAULTS if mt == "glm4v_moe" else TEXT_DEFAULTS
    tc = {**defaults, **{k: x for k, x in sub(cfg, "text_config", required=False).items() if x is not None}}
    heads = size(tc, "num_attention_heads")
    tied = bool(cfg.get("tie_word_embeddings")) or bool(tc.get("tie_word_embeddings"))  # configuration_glm4v.py:178
    tc["num_key_value_heads"] = tc.get("num_key_value_heads") or heads
    if mt == "glm4v_moe":
        head_dim = tc.get("head_dim") or size(tc, "hidden_size") // heads
        return {**tc, "head_dim": head_dim, "use_qk_norm": False, "tie_word_embeddings": tied}
    return {**tc, "head_dim": None, "attention_bias": True, "tie_word_embeddings": tied, "model_type": "glm4"}


def read(cfg: dict, vision_spec) -> tuple[dict, object, list[Tensors], tuple[str, ...]]:
    """(the language model's config for decoders' GLM-4 or GLM-4.5 reader, the tower's VisionSpec, its and the
    merger's tensors, the FSDP units)."""
    mt = cfg["model_type"]
    v = {**VISION_DEFAULTS, **{k: x for k, x in sub(cfg, "vision_config", required=False).items() if x is not None}}
    for key in ("depth", "hidden_size", "num_heads", "in_channels", "out_hidden_size", "intermediate_size"):
        size(v, key)
    m2 = size(v, "spatial_merge_size") ** 2
    spec = vision_spec(v["depth"], v["hidden_size"], v["out_hidden_size"], v["num_heads"], True, m2, TOWER, PROJECTOR)
    # input_embeddings False: Glm4vVisionModel defines no get_input_embeddings (4.55.4, 4.57.1: NotImplementedError,
    # which ms-swift passes over; tests/probes/test_frozen_tower_hook.py)
    return _text(cfg, mt), replace(spec, block="rmsnorm-rotary"), tower(v), UNITS[mt]
