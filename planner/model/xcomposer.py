"""InternLM-XComposer2 (internlm/internlm-xcomposer2-7b; config.json model_type `internlmxcomposer2`, class
InternLMXComposer2ForCausalLM): a model only its repository's own code builds (trust_remote_code), read here in that
code's module names. Its modeling_internlm_xcomposer2.py, modeling_internlm2.py and build_mlp.py (as PaddleMIX
restates them: paddlemix/models/internlm_xcomposer2/modeling.py:46-135, 173-250, 366-425, 811-830, commit 6afaf05;
the PLoRA class and r = 256 are the same in InternLM/InternLM-XComposer's 2.5 OmniLive base,
InternLM-XComposer-2.5-OmniLive/internlm-xcomposer2d5-ol-7b/base/modeling_internlm2.py:250-309, commit 0f70c3e) build:

- `model` and `output`: InternLM2-7B (tok_embeddings, per layer attention.wqkv, one Linear of (heads + 2 kv heads) x
  head_dim outputs, attention.wo, feed_forward.w1 / w3 / w2, attention_norm and ffn_norm; norm; an untied output),
  every Linear unbiased (bias false);
- Partial LoRA ("plora"): each of those five Linears is a PLoRA, an nn.Linear with its own Plora_A (in -> 256) and
  Plora_B (256 -> out), no bias, added (dropout 0.05, scale 256 / 256) on the image tokens alone (im_mask);
- `vit`: CLIP ViT-L/14-336 (openai/clip-vit-large-patch14-336, named in build_mlp.py, not in config.json) with its
  positions resized to img_size / 14 = 35 a side (1,225 patches and the CLS); the patches, CLS dropped, are the image;
- `vision_proj`: Linear(1024, 4096), GELU, Linear(4096, 4096), both biased.

An image is resized to img_size x img_size: 1,225 LLM tokens, one per patch. ms-swift 2.x's LoRA freezes the whole
model first where any parameter's name holds `lora_` (Plora_A does), then adapts wqkv, wo, w1, w2, w3 beside
(v2.5.2 swift/llm/tuner.py:121-123; model.py:661 LoRATM.internlm_xcomposer).

InternLM-XComposer-2.5 (internlm/internlm-xcomposer2d5-7b; its config.json says model_type `internlm2` under the
same class, is_2d5) is the same language model and PLoRAs with, in its remote code as github.com/mbzuai-oryx/GeoPixel
vendors it at 356b56a (model/IXC/build_mlp.py:8-30, 170-215; modeling_internlm_xcomposer2.py __init__):
- three more low-rank pairs on each of the five linears, lora_sft (256), lora_dpo (256) and lora_web (512), which only
  its `write` and `web` modes run (PLoRA.forward infer_mode): weights no training step touches;
- `vit`: internlm/internlm-xcomposer2d5-clip, CLIP-L/14 at 560 pixels (40 x 40 patches; forward asserts N == 40 ** 2);
- `vision_proj`: Linear(4096, 4096), GELU, Linear(4096, 4096), biased: each LLM token is 2 x 2 patches (4 x 1024);
- plora_glb_GN and plora_sub_GN, two 4096-wide separators, counted with the norms.
Its checkpoint is 11,095,734,272 parameters in bf16, the Hub's three shards of 9.97, 10 and 2.22 GB
(planner/model/catalog/SOURCES-vlm.md). Its image is cut into 560-pixel tiles beside a 560-pixel global view:
hd_tokens (build_mlp.py CLIPVisionTower.forward, temp_len).
"""

from __future__ import annotations

from planner.model import vlm
from planner.model.shapes import FAMILY_TRAITS, Tensors, text_fields
from planner.model.shapes import linear as _linear
from planner.model.shapes import size as _get

MODEL_TYPE = "internlmxcomposer2"
PLORA_RANK = 256  # PLoRA(..., lora_r=256, lora_alpha=256): every PLoRA of the 7B models
TOWER, PROJECTOR = ("vit.",), ("vision_proj.",)
CLIP_L = {**vlm.VISION_DEFAULTS["clip_vision_model"], **vlm._CLIP_L336, "model_type": "clip_vision_model"}
UNITS = ("InternLM2DecoderLayer", "CLIPEncoderLayer")
LINEARS = ("attention.wqkv", "attention.wo", "feed_forward.w1", "feed_forward.w3", "feed_forward.w2")
CLASS = "InternLMXComposer2ForCausalLM"  # config.json architectures of XComposer2 and of 2.5
TILE_2D5, MERGE_2D5 = 560, 2  # 2.5's tile side in pixels; 2 x 2 patches an LLM token (build_mlp.py)
MODE_LORAS_2D5 = {"lora_sft": 256, "lora_dpo": 256, "lora_web": 512}  # 2.5's write and web modes' pairs


def is_2d5(cfg: dict) -> bool:
    """InternLM-XComposer-2.5's config.json: model_type internlm2 under XComposer2's class (the 7B's, its 4-bit
    build's and its fine-tunes' config.json alike; XComposer2's own says internlmxcomposer2)."""
    arch = cfg.get("architectures")
    return cfg.get("model_type") == "internlm2" and isinstance(arch, list) and CLASS in arch


def is_xcomposer(cfg: dict) -> bool:
    """XComposer2 (model_type internlmxcomposer2) or 2.5 (is_2d5)."""
    return cfg.get("model_type") == MODEL_TYPE or is_2d5(cfg)


def hd_tokens(rows: int, cols: int) -> int:
    """LLM tokens of a 2.5 image padded to rows x cols tiles of 560 pixels: 400 a tile and 400 for the global view,
    a separator after each of the global view's 20 rows and the tiles' 20 x rows rows, and one between the two
    (build_mlp.py CLIPVisionTower.forward: temp_len = (h*w+1)*400 + 1 + (h+1)*20)."""
    side = TILE_2D5 // CLIP_L["patch_size"] // MERGE_2D5  # 20 tokens a tile's side
    return (rows * cols + 1) * side * side + 1 + (rows + 1) * side


def plora_tensors(dims: dict[str, tuple[int, int]], layers: int, pairs: dict[str, int] | None = None) -> list[Tensors]:
    """Each PLoRA's Plora_A (r x in) and Plora_B (out x r), and 2.5's `pairs` beside ({prefix: rank}), unbiased:
    language-model weights no LoRA target names."""
    out = []
    for prefix, r in {"Plora": PLORA_RANK, **(pairs or {})}.items():
        for name, (d_out, d_in) in dims.items():
            out += [Tensors("layer", (r, d_in), layers, name=f"{name}.{prefix}_A", all_linear=0)]
            out += [Tensors("layer", (d_out, r), layers, name=f"{name}.{prefix}_B", all_linear=0)]
    return out


def plora_saved_bytes_per_image_token(t, trained: bool, c: int) -> int:
    """What the PLoRAs of one layer save for backward per image token beyond the Linear's own: each dropout's mask
    (one byte an input feature; w1 and w3 each drop their shared input); a frozen Plora_A and Plora_B keep no input
    (no weight gradient to make), trained ones (full fine-tuning) keep theirs in the compute dtype of c bytes (the
    dropped input, r features). The gathered rows and the in-place add keep only the image tokens' indices."""
    inputs = 4 * t.hidden + t.intermediate  # wqkv, wo, w1, w3 read the hidden state; w2 the MLP's
    return inputs + (c * (inputs + len(LINEARS) * t.traits.image_lora_rank) if trained else 0)


def _tower(cfg: dict, h: int) -> tuple[dict, list[Tensors]]:
    """(the CLIP tower's config, its and the projector's tensors): XComposer2's at img_size over one patch a token,
    2.5's at 560 over 2 x 2 patches a token, with its two separators (is_2d5)."""
    if is_2d5(cfg):
        v = {**CLIP_L, "image_size": TILE_2D5}
        merged = MERGE_2D5 * MERGE_2D5 * v["hidden_size"]
        proj = _linear("projector", h, merged, 1, True) + _linear("projector", h, h, 1, True)
        return v, vlm.clip_tower(v) + proj + [Tensors("norm", (h,), 2)]  # plora_glb_GN, plora_sub_GN
    side = _get(cfg, "img_size", default=490) // CLIP_L["patch_size"]
    v = {**CLIP_L, "image_size": side * CLIP_L["patch_size"]}
    proj = _linear("projector", h, v["hidden_size"], 1, True) + _linear("projector", h, h, 1, True)
    return v, vlm.clip_tower(v) + proj


def read(cfg: dict, text_spec, vision_spec) -> tuple[object, list[Tensors], object, list[Tensors]]:
    """(TextSpec, the language model's tensors, VisionSpec, the tower's and projector's tensors)."""
    sizes = text_fields(cfg)
    h, L, heads, kv = sizes
    inter = _get(cfg, "intermediate_size")
    vocab, hd, bias = _get(cfg, "vocab_size"), h // heads, bool(cfg.get("bias", False))
    shapes = [((heads + 2 * kv) * hd, h), (h, heads * hd), (inter, h), (inter, h), (h, inter)]  # (out, in)
    dims = dict(zip(LINEARS, shapes, strict=True))
    t = [Tensors("embed", (vocab, h))]
    for name, (d_out, d_in) in dims.items():
        t += _linear("layer", d_out, d_in, L, bias, lora=True, name=name)
    t += plora_tensors(dims, L, MODE_LORAS_2D5 if is_2d5(cfg) else None)
    t += [Tensors("layer", (h,), 2 * L), Tensors("norm", (h,)), Tensors("head", (vocab, h))]
    v, vt = _tower(cfg, h)
    spec = sizes.spec(
        text_spec,
        head_dim=hd,
        intermediate=inter,
        vocab=vocab,
        tied=False,
        max_positions=_get(cfg, "max_length", default=0) or _get(cfg, "max_position_embeddings", default=0),
        biases=(bias, bias, False),
        traits=FAMILY_TRAITS[MODEL_TYPE],
    )
    vision = vision_spec(
        v["num_hidden_layers"],
        v["hidden_size"],
        v["intermediate_size"],
        v["num_attention_heads"],
        False,
        MERGE_2D5 * MERGE_2D5 if is_2d5(cfg) else 1,
        TOWER,
        PROJECTOR,
        block="quick-gelu",
        attention_tokens=vlm.tile_tokens(v),
        tiled=is_2d5(cfg),
        # input_embeddings False: `vit` is build_mlp.py's CLIPVisionTower(nn.Module), no PreTrainedModel, so ms-swift's
        # hasattr(vision_tower, 'enable_input_require_grads') fails (v2.5.2 swift/llm/sft.py:270; InternLM/
        # InternLM-XComposer 00005d6 InternLM-XComposer-2.5-OmniLive/internlm-xcomposer2d5-ol-7b/base/build_mlp.py)
    )
    return spec, t, vision, vt


def image_tokens(cfg: dict) -> int | None:
    """LLM tokens an image of an InternLM-XComposer2 config becomes: (img_size / 14)^2, the CLS dropped; None for
    another model's, and for 2.5's, whose image's tokens follow its size (hd_tokens)."""
    if cfg.get("model_type") != MODEL_TYPE:
        return None
    return (_get(cfg, "img_size", default=490) // CLIP_L["patch_size"]) ** 2
