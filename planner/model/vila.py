"""VILA and NVILA (NVlabs/VILA; model_type llava_llama, or vila in the -hf remote-code repos), counted from the three
sub-configs their config.json holds inline (llm_cfg, vision_tower_cfg, mm_projector_cfg; VILA loads the same files
from the llm/, vision_tower/ and mm_projector/ folders: llava/model/utils/utils.py:42-53, commit b760c34):

- the language model (`llm`): a Qwen2 or Llama causal LM, counted by planner.model.decoders' llama reader;
- the tower (`vision_tower`): transformers' SigLIP (or CLIP) vision model. Its attention-pooling head is built unless
  vision_use_head says false (VILA1.5's configs leave the key out and have one: siglip/modeling_siglip.py:1166-1168);
  mm_vision_select_layer -2 deletes nothing, the last layer runs with no gradient;
- the projector (`mm_projector`): multimodal_projector/base_projector.py:141-220, every Linear biased, every LayerNorm
  affine, over mm_hidden_size inputs (the tower's width times the S2 scales: 3 x 1152 = 3456 for NVILA-8B,
  multimodal_encoder/builder.py:70-72) to the LLM's hidden_size. The downsample types fold 2 x 2 (or 3 x 3) patches
  into one token.

NVILA-8B totals 8,088,386,800 parameters and VILA1.5-3b 3,148,150,336: each part equals the size of its safetensors
file on the Hub (827 MB tower, 125 MB projector, 15.2 GB LLM for NVILA-8B). Each count equals the meta-device model's
built from the same sub-configs (tests/planner/model/test_vila.py).

Patches per LLM token are the projector's fold (4 or 9), rounded up where the tile's patch side is odd. NVILA's
dynamic S2 also runs the tower on the image at the smaller scales (1 + 4 tiles of 448 beside the 3 x 3 grid of a
square image: 14 tiles of 1,024 patches for 2,304 tokens), so its patches per token are 7 (6.2 exact for a square
image, 5.6 to 6.2 for the others): planned approximately.
"""

from __future__ import annotations

import math

from planner.errors import BadInput
from planner.model import vlm
from planner.model.shapes import FSDP_UNITS, Tensors
from planner.model.shapes import linear as _linear

MODEL_TYPES = ("llava_llama", "vila")
# VILA's training entry point, run under torchrun from a clone of NVlabs/VILA (scripts/NVILA-Lite/sft.sh, commit
# 36f6adc: `torchrun ... llava/train/train_mem.py --deepspeed scripts/zero3.json --model_name_or_path $STAGE_PATH`); its
# TrainingArguments are HF's with VILA's own beside them (llava/train/args.py)
TRAIN_SCRIPT = "llava/train/train_mem.py"
TEXT_MODULE = dict.fromkeys(MODEL_TYPES, "llm")


def is_vila(model_type: str) -> bool:
    """A VILA / NVILA checkpoint (trained with VILA's own entry point, TRAIN_SCRIPT)."""
    return model_type in MODEL_TYPES


TOWER, PROJECTOR = ("vision_tower.",), ("mm_projector.",)
LLMS = ("llama", "qwen2", "mistral")
FOLD = {"linear": 1, "mlp_downsample": 2, "mlp_downsample_2x2_fix": 2, "mlp_downsample_3x3_fix": 3}


def _sub(cfg: dict, key: str) -> dict:
    sub = cfg.get(key)
    if isinstance(sub, dict):
        return sub
    raise BadInput(
        f"config.json: {key} is {sub!r}; VILA's config.json holds it inline (a folder's config.json, such as "
        f"{key[:-4]}/config.json, is not read from here: paste it into {key})",
        "model",
    )


def _layer_norm(d: int) -> list[Tensors]:
    return [Tensors("projector", (d,), 2)]


def projector_tensors(kind: str, m: int, h: int) -> list[Tensors]:
    """base_projector.py's modules for mm_projector_type `kind`, from m inputs to the LLM's h."""
    lin = lambda d_out, d_in: _linear("projector", d_out, d_in, 1, True)
    if kind == "linear":
        return lin(h, m)
    if kind.startswith("mlp") and kind.endswith("x_gelu") and kind[3:-6].isdigit():  # mlp{N}x_gelu (:213-220)
        return lin(h, m) + [t for _ in range(int(kind[3:-6]) - 1) for t in lin(h, h)]
    if kind in ("mlp_downsample", "mlp_downsample_2x2_fix"):  # LN(4m), Linear(4m, h), GELU, Linear(h, h) (:145-162)
        return _layer_norm(4 * m) + lin(h, 4 * m) + lin(h, h)
    if kind == "mlp_downsample_3x3_fix":  # LN(9m), Linear(9m, 3m), LN(3m), Linear(3m, h), Linear(h, h) (:163-174)
        return _layer_norm(9 * m) + lin(3 * m, 9 * m) + _layer_norm(3 * m) + lin(h, 3 * m) + lin(h, h)
    raise BadInput(
        f"config.json: mm_projector_type {kind!r} is not one memplan counts (known: {', '.join(FOLD)}, mlpNx_gelu)",
        "model",
    )


def _fold(kind: str) -> int:
    return FOLD.get(kind, 1)


def patches_per_token(top: dict, v: dict, kind: str) -> int:
    """Tower patches per LLM image token: the projector's fold (rounded up over a tile of odd side); under dynamic S2,
    a square image's tiles at every scale over its tokens (train.py:798-801; llava/mm_utils.py:341-405)."""
    side, r = v["image_size"] // v["patch_size"], _fold(kind)
    per_tile = math.ceil(side * side / math.ceil(side / r) ** 2)
    if not top.get("dynamic_s2"):
        return per_tile
    scales = [int(s) for s in str(top.get("s2_scales", "")).split(",") if s.strip()]
    grid = (scales[-1] // scales[0]) ** 2 if scales else 1
    tiles = sum((s // scales[0]) ** 2 for s in scales[:-1]) + grid if scales else 1
    return math.ceil(tiles * side * side / (grid * math.ceil(side / r) ** 2))


def read(cfg: dict, vision_spec) -> tuple[dict, object, list[Tensors], tuple[str, ...]]:
    """(the language model's config for decoders' llama reader, its VisionSpec, the tower's and projector's tensors,
    the FSDP units), as planner.model.vlm.read gives them."""
    llm, tower_cfg, proj = _sub(cfg, "llm_cfg"), _sub(cfg, "vision_tower_cfg"), _sub(cfg, "mm_projector_cfg")
    lmt, vmt = llm.get("model_type"), tower_cfg.get("model_type", "siglip_vision_model")
    if lmt not in LLMS or vmt not in ("siglip_vision_model", "clip_vision_model"):
        raise BadInput(
            f"config.json: a VILA model of a {lmt!r} language model and a {vmt!r} tower; memplan counts "
            f"{', '.join(LLMS)} with a SigLIP or CLIP tower",
            "model",
        )
    text = {**vlm.TEXT_DEFAULTS[lmt], **llm, "model_type": lmt}
    v = {**vlm.VISION_DEFAULTS[vmt], **tower_cfg}
    v["image_size"], v["patch_size"] = vlm.side(v["image_size"]), vlm.side(v["patch_size"])
    scales = len(str(cfg.get("s2_scales", "")).split(",")) if cfg.get("s2") or cfg.get("dynamic_s2") else 1
    m, h = cfg.get("mm_hidden_size") or v["hidden_size"] * scales, cfg.get("hidden_size") or text["hidden_size"]
    kind = str(proj.get("mm_projector_type", "mlp2x_gelu"))
    tower = vlm.clip_tower(v) if vmt == "clip_vision_model" else vlm.siglip_tower(v, bool(v["vision_use_head"]))
    spec = vision_spec(
        v["num_hidden_layers"],
        v["hidden_size"],
        v["intermediate_size"],
        v["num_attention_heads"],
        False,
        patches_per_token(cfg, v, kind),
        TOWER,
        PROJECTOR,
        block="quick-gelu" if vmt == "clip_vision_model" else "plain",
        attention_tokens=vlm.tile_tokens({**v, "model_type": vmt}),
    )
    units = vlm.TOWER_UNITS[vmt] + FSDP_UNITS.get(lmt, ())
    return text, spec, tower + projector_tensors(kind, m, h), units
