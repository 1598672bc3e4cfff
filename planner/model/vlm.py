"""VLM families beyond Qwen2/2.5-VL and InternVL (planner.model.modelspec reads those), counted exactly from
config.json as transformers 5.23 builds them: LLaVA (1.5), LLaVA-NeXT and LLaVA-OneVision (a CLIP or SigLIP tower
and a two-linear projector), Gemma-3 (SigLIP, a projection matrix and a soft-embedding norm), Idefics3 and SmolVLM
(their SigLIP-like tower and a pixel-shuffle connector), and Qwen3-VL (its own tower with deepstack mergers). Each
count equals the meta-device model's (tests/planner/model/test_vlm_families.py).

A key config.json leaves out takes the value transformers 5.23's config class gives it: when a sub-config is absent
the composite class builds its own (LLaVA's CLIP-L/336), when it is present its missing keys fall back to the
sub-config class's defaults (CLIPVisionConfig's 768 hidden, 12 layers). The language model is counted by
modelspec's llama-like reader with the tie flag the composite resolves: the top-level one (LLaVA and OneVision also
take text_config's true, configuration_llava.py:84-87).

LLaVA, NeXT and OneVision take their image features from an inner layer (vision_feature_layer, -2 for LLaVA): the
tower still runs its last layers and post-layernorm, whose parameters then get no gradient. Their patches per image
token are approximate: NeXT and OneVision encode whole tiles and then unpad (no constant ratio); the others' ratio
is exact (Gemma-3 16 from its 4 x 4 pooling, Idefics3/SmolVLM the pixel shuffle's square, Qwen3-VL the merge's).
"""

from __future__ import annotations

import dataclasses

from planner.errors import BadInput
from planner.model.hybrid import COMMON as HYBRID_COMMON
from planner.model.hybrid import DEFAULTS as HYBRID_DEFAULTS
from planner.model.shapes import FSDP_UNITS, Tensors
from planner.model.shapes import linear as _linear

_CLIP_L336 = {
    "hidden_size": 1024,
    "intermediate_size": 4096,
    "num_hidden_layers": 24,
    "num_attention_heads": 16,
    "image_size": 336,
    "patch_size": 14,
}
VISION_DEFAULTS = {  # transformers 5.23 config classes' defaults
    "clip_vision_model": {
        "hidden_size": 768,
        "intermediate_size": 3072,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "image_size": 224,
        "patch_size": 32,
        "num_channels": 3,
    },
    "siglip_vision_model": {
        "hidden_size": 768,
        "intermediate_size": 3072,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "image_size": 224,
        "patch_size": 16,
        "num_channels": 3,
        "vision_use_head": True,
    },
    "idefics3_vision": {
        "hidden_size": 1152,
        "intermediate_size": 3072,
        "num_hidden_layers": 12,
        "num_attention_heads": 16,
        "image_size": 224,
        "patch_size": 32,
        "num_channels": 3,
    },
    "qwen3_vl_vision": {
        "hidden_size": 1152,
        "intermediate_size": 4304,
        "depth": 27,
        "num_heads": 16,
        "in_channels": 3,
        "patch_size": 16,
        "temporal_patch_size": 2,
        "spatial_merge_size": 2,
        "out_hidden_size": 3584,
        "num_position_embeddings": 2304,
        "deepstack_visual_indexes": [8, 16, 24],
    },
}
VISION_DEFAULTS["smolvlm_vision"] = VISION_DEFAULTS["idefics3_vision"]
VISION_DEFAULTS["qwen3_vl_moe_vision"] = VISION_DEFAULTS["qwen3_vl_vision"]  # configuration_qwen3_vl_moe.py:135-146
# Qwen3.5's tower is Qwen3-VL's without the deepstack mergers (modular_qwen3_5.py:148-158,468-476, transformers 5.25)
VISION_DEFAULTS["qwen3_5_vision"] = {**VISION_DEFAULTS["qwen3_vl_vision"], "deepstack_visual_indexes": []}
VISION_DEFAULTS["qwen3_5_moe_vision"] = VISION_DEFAULTS["qwen3_5_vision"]
TEXT_DEFAULTS = {
    "llama": {
        "vocab_size": 32000,
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
    },
    "mistral": {
        "vocab_size": 32000,
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
    },
    "qwen2": {
        "vocab_size": 151936,
        "hidden_size": 4096,
        "intermediate_size": 22016,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
    },
    "gemma3_text": {
        "vocab_size": 262208,
        "hidden_size": 2304,
        "intermediate_size": 9216,
        "num_hidden_layers": 26,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
    },
    "qwen3_vl_text": {
        "vocab_size": 151936,
        "hidden_size": 4096,
        "intermediate_size": 22016,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "head_dim": 128,
    },
    "qwen3_vl_moe_text": {  # configuration_qwen3_vl_moe.py:77-106 (transformers 5.25)
        "vocab_size": 151936,
        "hidden_size": 2048,
        "intermediate_size": 5632,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "moe_intermediate_size": 1408,
        "num_experts_per_tok": 4,
        "num_experts": 60,
    },
}
TEXT_DEFAULTS.update({mt: {**HYBRID_COMMON, **HYBRID_DEFAULTS[mt]} for mt in ("qwen3_5_text", "qwen3_5_moe_text")})
# family: (vision model_type, the composite's vision init when vision_config is absent), text model_type, top defaults
FAMILIES = {
    "llava": (("clip_vision_model", _CLIP_L336), "llama", {"vision_feature_layer": -2, "tie_word_embeddings": False}),
    "llava_next": (
        ("clip_vision_model", _CLIP_L336),
        "llama",
        {"vision_feature_layer": -2, "tie_word_embeddings": False},
    ),
    "llava_onevision": (
        (
            "siglip_vision_model",
            {
                "hidden_size": 1152,
                "intermediate_size": 4304,
                "patch_size": 14,
                "image_size": 384,
                "num_hidden_layers": 26,
                "num_attention_heads": 16,
                "vision_use_head": False,
            },
        ),
        "qwen2",
        {"vision_feature_layer": -1, "tie_word_embeddings": False},
    ),
    "gemma3": (("siglip_vision_model", {}), "gemma3_text", {"mm_tokens_per_image": 256, "tie_word_embeddings": True}),
    "idefics3": (("idefics3_vision", {}), "llama", {"scale_factor": 2, "tie_word_embeddings": False}),
    "smolvlm": (("smolvlm_vision", {}), "llama", {"scale_factor": 2, "tie_word_embeddings": False}),
    "qwen3_vl": (("qwen3_vl_vision", {}), "qwen3_vl_text", {"tie_word_embeddings": False}),
    "qwen3_vl_moe": (("qwen3_vl_moe_vision", {}), "qwen3_vl_moe_text", {"tie_word_embeddings": False}),
    # Qwen3.5 and Qwen3.5-MoE: a hybrid linear-attention language model (planner/model/hybrid.py)
    "qwen3_5": (("qwen3_5_vision", {}), "qwen3_5_text", {"tie_word_embeddings": False}),
    "qwen3_5_moe": (("qwen3_5_moe_vision", {}), "qwen3_5_moe_text", {"tie_word_embeddings": False}),
}
# one tower; a dense, a routed (moespec.LAYOUT) or a hybrid (hybrid.TEXT_TYPES) language model
QWEN3_VL = ("qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe")
MOE_VLMS = ("qwen3_vl_moe", "qwen3_5_moe")
LLAVA = ("llava", "llava_next", "llava_onevision")
# (tower modules, projector modules) as named_parameters names them below the model
PREFIXES = {
    "llava": (("vision_tower.",), ("multi_modal_projector.",)),
    "llava_next": (("vision_tower.",), ("multi_modal_projector.", "image_newline")),
    "llava_onevision": (("vision_tower.",), ("multi_modal_projector.", "image_newline")),
    "gemma3": (("vision_tower.",), ("multi_modal_projector.",)),
    "idefics3": (("vision_model.",), ("connector.",)),
    "smolvlm": (("vision_model.",), ("connector.",)),
    "qwen3_vl": (("visual.",), ("visual.merger.", "visual.deepstack_merger_list.")),
}
PREFIXES["qwen3_vl_moe"] = PREFIXES["qwen3_vl"]
PREFIXES["qwen3_5"] = PREFIXES["qwen3_5_moe"] = (("visual.",), ("visual.merger.",))
# the layer classes FSDP wraps: the tower's own (_no_split_modules of its model class, transformers 5.23)
TOWER_UNITS = {
    "clip_vision_model": ("CLIPEncoderLayer",),
    "siglip_vision_model": ("SiglipEncoderLayer",),
    "idefics3_vision": ("Idefics3VisionAttention",),
    "smolvlm_vision": ("SmolVLMVisionAttention",),
    "qwen3_vl_vision": ("Qwen3VLVisionBlock",),
    "qwen3_vl_moe_vision": ("Qwen3VLMoeVisionBlock",),
    "qwen3_5_vision": ("Qwen3_5VisionBlock",),
    "qwen3_5_moe_vision": ("Qwen3_5MoeVisionBlock",),
}
TEXT_UNITS = {
    "qwen3_vl_text": ("Qwen3VLTextDecoderLayer",),
    "qwen3_vl_moe_text": ("Qwen3VLMoeTextDecoderLayer",),
    "qwen3_5_text": ("Qwen3_5DecoderLayer",),
    "qwen3_5_moe_text": ("Qwen3_5MoeDecoderLayer",),
}
# the language model's module below the model, where LoRA's targets are (Idefics3 and SmolVLM call it text_model)
TEXT_MODULE = {"idefics3": "text_model", "smolvlm": "text_model"}


def resolve(cfg: dict) -> tuple[dict, str, dict, dict]:
    """(top-level fields, the tower's model_type, its fields, the text model's fields) as transformers fills them."""
    mt = cfg["model_type"]
    (vmt, vinit), tmt, top_defaults = FAMILIES[mt]
    top = {**top_defaults, **{k: v for k, v in cfg.items() if k not in ("vision_config", "text_config")}}
    v_in, t_in = cfg.get("vision_config"), cfg.get("text_config")
    if v_in is None:
        vision = {**VISION_DEFAULTS[vmt], **vinit}
    else:  # LLaVA and Gemma-3 look the tower's class up by its model_type; the others fix it
        vmt = v_in.get("model_type", vmt) if mt in (*LLAVA, "gemma3") else vmt
        if vmt not in VISION_DEFAULTS:  # e.g. Pixtral-12B: a llava config over a `pixtral` tower
            raise BadInput(
                f"config.json: {mt}'s vision_config model_type {vmt!r} is not counted by memplan (accepted: "
                "clip_vision_model, siglip_vision_model)",
                "model",
            )
        vision = {**VISION_DEFAULTS[vmt], **v_in}
    if isinstance(t_in, dict):
        tmt = t_in.get("model_type", tmt) if mt not in ("gemma3", *QWEN3_VL) else tmt
        text = {**TEXT_DEFAULTS.get(tmt, {}), **t_in}
    else:
        text = dict(TEXT_DEFAULTS[tmt])
    tied = bool(top.get("tie_word_embeddings")) or (
        mt in ("llava", "llava_onevision") and bool(text.get("tie_word_embeddings"))
    )
    return top, vmt, vision, {**text, "model_type": tmt, "tie_word_embeddings": tied}


def side(x) -> int:
    return x[0] if isinstance(x, (list, tuple)) else x


def _encoder(v: dict) -> list[Tensors]:
    """CLIP / SigLIP / Idefics3 encoder layers: q, k, v, out projections and fc1, fc2 with biases, two LayerNorms."""
    h, i, n = v["hidden_size"], v["intermediate_size"], v["num_hidden_layers"]
    out = _linear("vision", h, h, 4 * n, True) + _linear("vision", i, h, n, True) + _linear("vision", h, i, n, True)
    return out + [Tensors("vision", (h,), 4 * n)]


def _patches(v: dict) -> int:
    return (side(v["image_size"]) // side(v["patch_size"])) ** 2


def tile_tokens(v: dict) -> int:
    """Encoder tokens one attention call of a CLIP or SigLIP tower spans: a tile's patches, and CLIP's CLS; 0 for
    Qwen3-VL (each image whole)."""
    if "image_size" not in v:
        return 0
    return (side(v["image_size"]) // side(v["patch_size"])) ** 2 + (v.get("model_type") == "clip_vision_model")


def clip_tower(v: dict) -> list[Tensors]:
    """CLIPVisionModel: class embedding, patch convolution (no bias), positions (patches + 1), pre- and
    post-layernorm."""
    h, p, c = v["hidden_size"], side(v["patch_size"]), v.get("num_channels", 3)
    out = [Tensors("vision", (h,)), Tensors("vision", (h, c, p, p)), Tensors("vision", (_patches(v) + 1, h))]
    return out + [Tensors("vision", (h,), 4)] + _encoder(v)


def siglip_tower(v: dict, head: bool) -> list[Tensors]:
    """SiglipVisionModel / Idefics3's tower: patch convolution with bias, positions, post-layernorm, and with
    vision_use_head the attention-pooling head (probe, in/out projections, LayerNorm, MLP)."""
    h, i, p, c = v["hidden_size"], v["intermediate_size"], side(v["patch_size"]), v.get("num_channels", 3)
    out = [Tensors("vision", (h, c, p, p)), Tensors("vision", (h,)), Tensors("vision", (_patches(v), h))]
    out += [Tensors("vision", (h,), 2)] + _encoder(v)
    if head:
        # nn.MultiheadAttention: its in-projection is a bare parameter, its out_proj a Linear
        out += [Tensors("vision", (h,)), Tensors("vision", (3 * h, h)), Tensors("vision", (3 * h,))]
        out += _linear("vision", h, h, 1, True)
        out += [Tensors("vision", (h,), 2)] + _linear("vision", i, h, 1, True) + _linear("vision", h, i, 1, True)
    return out


def _qwen3_vl(v: dict) -> list[Tensors]:
    """Qwen3VLVisionModel: a 3-D patch convolution with bias, learned positions, blocks (two LayerNorms, fused qkv,
    proj, a two-linear MLP, all biased); the merger (LayerNorm over the tower's width) and the deepstack mergers
    (LayerNorm over the merged width) are the projector."""
    h, i, n = v["hidden_size"], v["intermediate_size"], v["depth"]
    p, tp, c = side(v["patch_size"]), side(v["temporal_patch_size"]), v.get("in_channels", 3)
    hm, out_h, deep = h * v["spatial_merge_size"] ** 2, v["out_hidden_size"], len(v["deepstack_visual_indexes"])
    t = [
        Tensors("vision", (h, c, tp, p, p)),
        Tensors("vision", (h,)),
        Tensors("vision", (v["num_position_embeddings"], h)),
    ]
    t += [Tensors("vision", (h,), 4 * n)] + _linear("vision", 3 * h, h, n, True) + _linear("vision", h, h, n, True)
    t += _linear("vision", i, h, n, True) + _linear("vision", h, i, n, True)
    t += (
        [Tensors("projector", (h,), 2)]
        + _linear("projector", hm, hm, 1, True)
        + _linear("projector", out_h, hm, 1, True)
    )
    if not deep:  # Qwen3.5's tower: no deepstack mergers
        return t
    t += [Tensors("projector", (hm,), 2 * deep)] + _linear("projector", hm, hm, deep, True)
    return t + _linear("projector", out_h, hm, deep, True)


def _projector(mt: str, top: dict, v: dict, ht: int) -> list[Tensors]:
    hv = v["hidden_size"]
    if mt in LLAVA:
        f = top["vision_feature_layer"]
        width = hv * (1 if isinstance(f, int) else len(f))
        bias = bool(top.get("multimodal_projector_bias", True))
        out = _linear("projector", ht, width, 1, bias) + _linear("projector", ht, ht, 1, bias)
        return out + ([Tensors("projector", (ht,))] if mt != "llava" else [])  # NeXT/OneVision's image_newline
    if mt == "gemma3":  # mm_input_projection_weight (hv, ht), mm_soft_emb_norm
        return [Tensors("projector", (hv, ht)), Tensors("projector", (hv,))]
    if mt in ("idefics3", "smolvlm"):  # connector.modality_projection.proj, no bias
        return _linear("projector", ht, hv * top["scale_factor"] ** 2, 1, False)
    return []


def unused_layers(feature_layer, layers: int) -> int:
    """Tower layers past the one whose output the projector reads (hidden_states[f], index 0 the embeddings)."""
    chosen = feature_layer if isinstance(feature_layer, list) else [feature_layer]
    return max(0, layers - max(f if f >= 0 else layers + 1 + f for f in chosen))


def read(cfg: dict, vision_spec) -> tuple[dict, object, list[Tensors], tuple[str, ...]]:
    """(the language model's config for modelspec's llama-like reader, its VisionSpec, the tower's and projector's
    tensors, the FSDP units). `vision_spec` is modelspec's VisionSpec class."""
    mt = cfg["model_type"]
    top, vmt, v, text = resolve(cfg)
    ht = text["hidden_size"]
    if mt in QWEN3_VL:
        tensors = _qwen3_vl(v)
        layers, heads, ppt = v["depth"], v["num_heads"], v["spatial_merge_size"] ** 2
    else:
        tower = (
            clip_tower(v)
            if vmt == "clip_vision_model"
            else siglip_tower(v, bool(v.get("vision_use_head", False)) and mt != "idefics3" and mt != "smolvlm")
        )
        tensors = tower + _projector(mt, top, v, ht)
        layers, heads = v["num_hidden_layers"], v["num_attention_heads"]
        ppt = 1  # LLaVA: 577 encoder tokens for 576 (CLS); NeXT/OneVision: approximate (the module's docstring)
        if mt == "gemma3":  # a 4 x 4 average pool down to mm_tokens_per_image
            grid = side(v["image_size"]) // side(v["patch_size"])
            ppt = (grid // max(1, int(top["mm_tokens_per_image"] ** 0.5))) ** 2
        elif mt in ("idefics3", "smolvlm"):  # the pixel shuffle
            ppt = top["scale_factor"] ** 2
    towers, projectors = PREFIXES[mt]
    spec = vision_spec(layers, v["hidden_size"], v["intermediate_size"], heads, False, ppt, towers, projectors)
    block = "rotary" if mt in QWEN3_VL else ("quick-gelu" if vmt == "clip_vision_model" else "plain")
    unused = unused_layers(top.get("vision_feature_layer", -1), layers) if mt.startswith("llava") else 0
    anyres = {"llava_next": "llava-next", "llava_onevision": "llava-onevision"}.get(mt, "")
    spec = dataclasses.replace(spec, block=block, unused_layers=unused, anyres=anyres, attention_tokens=tile_tokens(v))
    # CLIPVisionModel, SiglipVisionModel, Idefics3's and SmolVLM's VisionTransformer define get_input_embeddings
    # (their patch embedding) at transformers 4.46-4.57, so ms-swift's enable_input_require_grads on the frozen tower
    # takes; Qwen3-VL's tower defines none (4.57.1: NotImplementedError, which ms-swift passes over): measured on
    # each line's venv, tests/probes/test_frozen_tower_hook.py
    spec = dataclasses.replace(spec, input_embeddings=mt not in QWEN3_VL)
    text_mt = text["model_type"]
    units = TOWER_UNITS.get(vmt, ()) + TEXT_UNITS.get(text_mt, FSDP_UNITS.get(text_mt, ()))
    return text, spec, tensors, units
