"""HF config.json -> ModelSpec (from_config): which family reads a config, its language model
(planner.model.decoders), its vision or audio tower (the family modules: qwenvl, mllama, glm4v, vlm, ...) and its
FSDP units; a config it cannot read is a one-line BadInput. Their parameter sum equals
`sum(p.numel() for p in model.parameters())` of the real model (tests/planner/model/test_catalog.py instantiates
every catalog entry on the meta device and compares)."""

from __future__ import annotations

from dataclasses import replace

from planner.errors import BadInput
from planner.model import (
    glm4v,
    hybrid,
    llama4,
    minicpmv,
    mllama,
    pending,
    qwen1,
    qwen3omni,
    qwenomni,
    qwenvl,
    vila,
    vlm,
    xcomposer,
)
from planner.model.decoders import LLAMA_LIKE, gpt2_text, llama_text, moe_text, refuse_experts
from planner.model.modelspec import ModelSpec, TextSpec, VisionSpec
from planner.model.moespec import LAYOUT as MOE_LAYOUT
from planner.model.moespec import MOE_FAMILIES
from planner.model.shapes import Tensors, fsdp_units
from planner.model.shapes import checked_size as _checked_size
from planner.model.shapes import linear as _linear
from planner.model.shapes import number as _number
from planner.model.shapes import size as _get
from planner.model.shapes import sub as _sub

ALL_FAMILIES = sorted(
    LLAMA_LIKE
    | {"gpt2", "internvl", "mllama", qwen1.MODEL_TYPE, xcomposer.MODEL_TYPE}
    | set(MOE_FAMILIES)
    | set(vlm.FAMILIES)
    | set(vila.MODEL_TYPES)
    | set(minicpmv.MODEL_TYPES)
    | set(hybrid.TEXT_TYPES)
    | set(glm4v.MODEL_TYPES)
    | set(llama4.MODEL_TYPES)
    | set(qwenomni.MODEL_TYPES)
    | set(qwen3omni.MODEL_TYPES)
)


def _internvl_vision(cfg: dict, v: dict, text_hidden: int) -> tuple[VisionSpec, list[Tensors]]:
    hv, L, iv = _get(v, "hidden_size"), _get(v, "num_hidden_layers"), _get(v, "intermediate_size")
    img, patch = _get(v, "image_size", default=[448, 448]), _get(v, "patch_size", default=[14, 14])
    img = [_checked_size(v, "image_size", x) for x in (img if isinstance(img, (list, tuple)) else [img, img])][:2]
    patch = [
        _checked_size(v, "patch_size", x) for x in (patch if isinstance(patch, (list, tuple)) else [patch, patch])
    ][:2]
    if len(img) < 2 or len(patch) < 2:
        raise BadInput("config.json: vision_config image_size and patch_size need two sides", "model")
    npatch = (img[0] // patch[0]) * (img[1] // patch[1])
    bias = bool(v.get("attention_bias", True))
    t = [
        Tensors("vision", (1, 1, hv)),
        Tensors("vision", (1, npatch + 1, hv)),
        Tensors("vision", (hv, _get(v, "num_channels", default=3), patch[0], patch[1])),
        Tensors("vision", (hv,)),
    ]
    t += [Tensors("vision", (hv,), 2 * L)]  # layer-scale lambdas
    t += _linear("vision", hv, hv, 4 * L, bias) + _linear("vision", iv, hv, L, True)
    t += _linear("vision", hv, iv, L, True) + [Tensors("vision", (hv,), 4 * L)]
    if v.get("use_qk_norm"):
        t += [Tensors("vision", (hv,), 2 * L)]
    if not v.get("use_mean_pooling", True):
        t += [Tensors("vision", (hv,), 2)]
    shuffle = round(1 / _number(cfg, "downsample_ratio", 0.5, low=1e-3, high=1.0) ** 2)
    t += [Tensors("projector", (hv * shuffle,), 2)] + _linear("projector", text_hidden, hv * shuffle, 1, True)
    t += _linear("projector", text_hidden, text_hidden, 1, True)
    heads = _get(v, "num_attention_heads")
    spec = VisionSpec(
        L, hv, iv, heads, False, shuffle, ("vision_tower.",), ("multi_modal_projector.",), block="layer-scale"
    )
    unused = vlm.unused_layers(cfg.get("vision_feature_layer", -1), L)
    # get_input_embeddings: transformers' InternVLVisionModel (4.52.4 modeling_internvl.py:501) and the remote
    # InternVisionModel ms-swift loads (OpenGVLab/InternVL 1fbcd6a internvl_chat/modeling_intern_vit.py, `return
    # self.embeddings`; its encoder checkpoints every layer in training, gradient_checkpointing = True)
    spec = replace(spec, unused_layers=unused, attention_tokens=npatch + 1, tiled=True, input_embeddings=True)
    return spec, t  # a tile and its CLS


def _from_config(cfg: dict, name: str) -> ModelSpec:
    if not isinstance(cfg, dict):
        raise BadInput(f"config for {name!r} is not a JSON object", "model")
    pending.refuse_pending(cfg)
    mt = str(cfg.get("model_type", ""))
    vision, vt = None, []
    tc = cfg.get("text_config")
    units = fsdp_units(mt, tc.get("model_type") if isinstance(tc, dict) else None)
    if mt in llama4.MODEL_TYPES:  # Llama-4: its own MoE layout, every token through every expert
        text, t, vision, vt, units = llama4.read(cfg, TextSpec, VisionSpec)
        return ModelSpec(name, mt, text, tuple(vt + t), vision, exact=True, config=cfg, fsdp_units=units)
    if mt in qwen3omni.MODEL_TYPES:  # Qwen3-Omni's thinker: a Qwen3-MoE decoder beside its towers (moespec.LAYOUT)
        tc, vision, vt = qwen3omni.read(cfg, VisionSpec)
        text, t = moe_text(tc, qwen3omni.TEXT_TYPE)
        return ModelSpec(name, mt, text, tuple(vt + t), vision, exact=True, config=cfg, fsdp_units=units)
    if mt in MOE_FAMILIES or mt in hybrid.TEXT_TYPES:
        text, t = hybrid.read(cfg, mt, TextSpec) if mt in hybrid.TEXT_TYPES else moe_text(cfg, mt)
        return ModelSpec(name, mt, text, tuple(t), None, exact=True, config=cfg, fsdp_units=units)
    routed_text = mt == "internvl" and isinstance(tc, dict) and tc.get("model_type") in MOE_FAMILIES
    if mt not in vlm.MOE_VLMS and mt != "glm4v_moe" and not routed_text:
        refuse_experts(cfg, mt)
    if mt == "gpt2":
        text, t = gpt2_text(cfg)
    elif mt == qwen1.MODEL_TYPE:
        text, t = qwen1.read(cfg, TextSpec)
    elif xcomposer.is_xcomposer(cfg):  # XComposer2, or 2.5 under model_type internlm2 (xcomposer.is_2d5)
        text, t, vision, vt = xcomposer.read(cfg, TextSpec, VisionSpec)
        mt, units = xcomposer.MODEL_TYPE, xcomposer.UNITS
    elif (found := _composite(cfg, mt, units)) is not None:
        text, t, vision, vt, units = found
    elif mt in LLAMA_LIKE:
        tc = _sub(cfg, "text_config", required=False) or cfg
        text, t = llama_text(tc, mt)
        if mt in {"qwen2_5_vl", "qwen2_vl"}:
            vision, vt = qwenvl.read(mt, _sub(cfg, "vision_config"), text.hidden, VisionSpec)
    elif "hidden_size" in cfg and "num_hidden_layers" in cfg:
        text, t = llama_text(cfg, mt or "generic")
        return ModelSpec(name, mt or "generic", text, tuple(t), None, exact=False, config=cfg, fsdp_units=units)
    else:
        raise BadInput(
            f"config for {name!r}: model_type {mt!r} is not a decoder-only language model "
            f"memplan knows (known: {', '.join(ALL_FAMILIES)}; others need hidden_size and "
            "num_hidden_layers)",
            "model",
        )
    return ModelSpec(name, mt, text, tuple(vt + t), vision, exact=True, config=cfg, fsdp_units=units)


def _composite(cfg: dict, mt: str, units):
    """(text spec, text tensors, tower spec, tower tensors, FSDP units) of a composite family's config: a vision or
    audio tower beside its language model (InternVL, Llama-3.2-Vision, GLM-4V, Qwen-Omni's thinker, VILA, MiniCPM-V,
    vlm.FAMILIES); `units` where the family names none of its own; None for any other family."""
    if mt == "internvl":
        # transformers 5 ties the composite's head by its own top-level flag, whatever text_config says
        # (5.25 modeling_utils.py:2494 reads self.config; configuration_internvl.py:122 defaults it to True)
        tc = {**_sub(cfg, "text_config"), "tie_word_embeddings": bool(cfg.get("tie_word_embeddings", True))}
        tmt = str(tc.get("model_type", "qwen2"))  # InternVL3.5's MoE models: a Qwen3-MoE or gpt-oss language model
        text, t = moe_text(tc, tmt, vlm=True) if tmt in MOE_FAMILIES else llama_text(tc, tmt)
        vision, vt = _internvl_vision(cfg, _sub(cfg, "vision_config"), text.hidden)
        return text, t, vision, vt, units
    if mt == "mllama":
        tc, vision, vt, units = mllama.read(cfg, VisionSpec)
        text, t = llama_text(tc, tc["model_type"])
        t = mllama.text_tensors(tc, t, text.head_dim)
        text = replace(text, cross_layers=mllama.cross_layers(tc), first_cross_layer=mllama.first_cross_layer(tc))
        return text, t, vision, vt, units
    if mt in glm4v.MODEL_TYPES:
        tc, vision, vt, units = glm4v.read(cfg, VisionSpec)
        if mt == "glm4v_moe":  # GLM-4.5's language model (moespec.LAYOUT), its rotary cut and concatenated back
            text, t = moe_text(tc, "glm4v_moe_text")
        else:
            text, t = llama_text(tc, "glm4")
            text = replace(text, rotary_cat_dim=0)  # M-RoPE over whole head pairs, not GLM-4's cut-and-repeat
        return text, t, vision, vt, units
    if mt in qwenomni.MODEL_TYPES:  # the thinker (a whole Omni with its talker is refused)
        tc, vision, vt = qwenomni.read(cfg, VisionSpec)
        text, t = llama_text(tc, "qwen2")
        return text, t, vision, vt, units
    if mt in vila.MODEL_TYPES or mt in minicpmv.MODEL_TYPES:
        tc, vision, vt, units = (vila if mt in vila.MODEL_TYPES else minicpmv).read(cfg, VisionSpec)
        text, t = llama_text(tc, tc["model_type"])
        return text, t, vision, vt, units
    if mt in vlm.FAMILIES:
        tc, vision, vt, units = vlm.read(cfg, VisionSpec)
        if tc["model_type"] in hybrid.TEXT_TYPES:
            text, t = hybrid.read(tc, tc["model_type"], TextSpec)
        elif tc["model_type"] in MOE_LAYOUT:
            text, t = moe_text(tc, tc["model_type"])
        else:
            text, t = llama_text(tc, {"qwen3_vl_text": "qwen3"}.get(tc["model_type"], tc["model_type"]))
        return text, t, vision, vt, units
    return None


def from_config(cfg: dict, name: str) -> ModelSpec:
    """Build a ModelSpec from a config.json dict; a config it cannot read is a BadInput naming the model,
    never a traceback. Unknown families use the generic llama-like count (exact False)."""
    try:
        return _from_config(cfg, name)
    except BadInput:
        raise
    except (TypeError, ValueError, KeyError, AttributeError, ZeroDivisionError, OverflowError) as e:
        raise BadInput(f"config for {name!r} is not understood ({e.__class__.__name__}: {e})", "model") from None
