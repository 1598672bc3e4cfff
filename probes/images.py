"""A VLM's batch with real images' inputs: what each family's processor hands the model for a planned number of image
tokens per sample, so that the probes run the tower, the projector and the placement of the image features as
training does (issue 33 item 5).

Each family's geometry for `image_tokens` LLM-side tokens per sample (planner.model.image_rules restates the
processors; transformers 5.23's processors give these shapes):
- Qwen2-VL / Qwen2.5-VL / Qwen3-VL: one image of a (2a x 2b)-patch grid, a x b = the tokens (a, b as near as the
  tokens allow), one frame (temporal patch 2), `image_grid_thw`, `mm_token_type_ids`;
- LLaVA, InternVL, Gemma-3, Idefics3/SmolVLM: whole images or tiles of the tower's size, each a fixed number of
  tokens (576; 256 a tile; 256; (side / patch)^2 / scale^2 a tile), as many as fit;
- LLaVA-NeXT / OneVision: one square image, the largest of the rules' sides whose count fits, with its any-resolution
  tiles and `image_sizes`;
- Llama-3.2-Vision: each token is one image of its four tiles, with aspect-ratio ids, tile masks and the text x
  image cross-attention mask.
Returns real tensors and the image tokens the batch holds per sample (at most `image_tokens`; fixed-size families
round down; an any-resolution image holds at least its smallest count). Qwen's M-RoPE positions come computed by the model's own get_rope_index (a Python loop over the ids
that fake tensors cannot run). Labels are -100 on image tokens and on the padded last token of sample 0, as TRL's collator does.
"""

from __future__ import annotations

import math

import torch

from planner.model import image_rules
from planner.model.images import SIDES

TILED = {"llava": 576, "internvl": 256, "gemma3": 256}  # tokens per image or tile (defaults of the configs)
# Qwen families: M-RoPE positions from the model's get_rope_index (Qwen3.5: Qwen3-VL's tower and processor)
# GLM-4.1V and GLM-4.5V: Qwen2-VL's patches and grid (Glm4vModel.get_rope_index, modeling_glm4v.py:955)
OMNI = ("qwen2_5_omni_thinker", "qwen3_omni_moe_thinker")  # the thinkers: Qwen2.5-VL's / Qwen3-VL's patches and grid
QWEN = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe", "glm4v", "glm4v_moe")


def vlm_batch(model, config: dict, batch: int, seq: int, image_tokens: int) -> tuple[dict, int]:
    """The batch's real tensors and the image tokens per sample it holds."""
    cfg = model.config
    family = cfg.model_type
    build = _BUILDERS.get(family)
    if build is None:
        raise ValueError(f"images of a {family} model are not built yet: its image tokens stay analytic")
    extra, tokens = build(cfg, batch, seq, image_tokens)
    if family == "llama4":  # its patch Linear does not cast the pixels (Llama4UnfoldConvolution, modeling_llama4.py:
        # 957-974): a framework hands them in the weights' dtype, as real torch refuses fp32 pixels on bf16 weights
        extra["pixel_values"] = extra["pixel_values"].to(model.dtype)
    if tokens < 1 or tokens >= seq:
        raise ValueError(f"{image_tokens} image tokens in {seq}-token samples: a {family} image does not fit")
    ids = torch.randint(0, min(cfg.get_text_config().vocab_size, 1000), (batch, seq), generator=_seeded())
    start = 1
    ids[:, start : start + tokens] = _image_token(cfg)
    mask = torch.ones(batch, seq, dtype=torch.long)
    mask[0, -1] = 0
    labels = ids.masked_fill((mask == 0) | (ids == _image_token(cfg)), -100)
    out = {"input_ids": ids, "attention_mask": mask, "labels": labels, **extra}
    if family in OMNI:  # the Omnis' get_rope_index takes no token types (modeling_qwen2_5_omni.py:217-226,
        # modeling_qwen3_omni_moe.py:220-229)
        out["position_ids"], _ = _inner(model).get_rope_index(
            ids, image_grid_thw=extra["image_grid_thw"], attention_mask=mask
        )
    if family in QWEN:  # M-RoPE positions as the model computes them
        out["mm_token_type_ids"] = (ids == _image_token(cfg)).int()
        out["position_ids"], _ = _inner(model).get_rope_index(
            ids, image_grid_thw=extra["image_grid_thw"], attention_mask=mask, mm_token_type_ids=out["mm_token_type_ids"]
        )
    if family == "gemma3":
        out["token_type_ids"] = (ids == _image_token(cfg)).long()
    if family == "mllama":
        out["cross_attention_mask"] = _cross_mask(extra["aspect_ratio_mask"], seq, start)
    return out, tokens


def _inner(model):
    """The Qwen families' inner model, whose get_rope_index computes the M-RoPE positions: through a PEFT model's
    wrapper to the base model's (a LoRA plan's sim), else the model's own."""
    return model.get_base_model().model if hasattr(model, "get_base_model") else model.model


def _seeded() -> torch.Generator:
    return torch.Generator().manual_seed(0)


def _image_token(cfg) -> int:
    for key in ("image_token_id", "image_token_index"):
        if getattr(cfg, key, None) is not None:
            return getattr(cfg, key)
    raise ValueError(f"{cfg.model_type}: no image token id in its config")


def _pixels(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=_seeded())


def _qwen(cfg, batch: int, seq: int, tokens: int):
    v = cfg.vision_config
    a = max(d for d in range(1, math.isqrt(tokens) + 1) if tokens % d == 0)
    m = v.spatial_merge_size
    grid = torch.tensor([[1, m * a, m * (tokens // a)]] * batch)
    row = v.in_channels * v.temporal_patch_size * v.patch_size**2
    return {"pixel_values": _pixels(int(grid.prod(-1).sum()), row), "image_grid_thw": grid}, tokens


def _tiles(cfg, batch: int, seq: int, tokens: int):
    v, family = cfg.vision_config, cfg.model_type
    per = getattr(cfg, "mm_tokens_per_image", None) or TILED[family]
    side = v.image_size[0] if isinstance(v.image_size, (list, tuple)) else v.image_size
    n = tokens // per
    return {"pixel_values": _pixels(batch * n, 3, side, side)}, n * per


def _llama4(cfg, batch: int, seq: int, tokens: int):
    """Whole 336-pixel tiles, each (side / patch)^2 / (1 / pixel_shuffle_ratio^2) tokens (processing_llama4.py:129-131)."""
    v = cfg.vision_config
    side = v.image_size[0] if isinstance(v.image_size, (list, tuple)) else v.image_size
    per = (side // v.patch_size) ** 2 // round(1.0 / v.pixel_shuffle_ratio**2)
    n = tokens // per
    return {"pixel_values": _pixels(batch * n, 3, side, side)}, n * per


def _idefics3(cfg, batch: int, seq: int, tokens: int):
    v = cfg.vision_config
    per = (v.image_size // v.patch_size) ** 2 // cfg.scale_factor**2
    n = tokens // per
    pixels = _pixels(batch, n, 3, v.image_size, v.image_size) + 1.0  # no tile all zeros (Idefics3 drops those)
    return {"pixel_values": pixels, "pixel_attention_mask": torch.ones(batch, n, v.image_size, v.image_size).bool()}, (
        n * per
    )


def _anyres(cfg, batch: int, seq: int, tokens: int):
    rule = image_rules.RULES["llava-next" if cfg.model_type == "llava_next" else "llava-onevision"]
    side = max((s for s in SIDES if rule(s, s) <= tokens), default=SIDES[0])
    tile = cfg.vision_config.image_size
    h, w = image_rules._best_resolution(side, side, cfg.image_grid_pinpoints)
    patches = 1 + (h // tile) * (w // tile)
    extra = {
        "pixel_values": _pixels(batch, patches, 3, tile, tile),
        "image_sizes": torch.tensor([[side, side]] * batch),
    }
    return extra, rule(side, side)


def _mllama(cfg, batch: int, seq: int, tokens: int):
    v = cfg.vision_config
    tiles = v.max_num_tiles
    return {
        "pixel_values": _pixels(batch, tokens, tiles, 3, v.image_size, v.image_size),
        "aspect_ratio_ids": torch.full((batch, tokens), 6 if tiles == 4 else 1),  # 2 x 2 tiles
        "aspect_ratio_mask": torch.ones(batch, tokens, tiles, dtype=torch.long),
    }, tokens


def _cross_mask(tile_mask: torch.Tensor, seq: int, start: int) -> torch.Tensor:
    """Every text token from the first image on attends to every image's tiles (the processor's mask)."""
    b, n, tiles = tile_mask.shape
    mask = torch.zeros(b, seq, n, tiles, dtype=torch.long)
    mask[:, start:] = tile_mask[:, None]
    return mask


_BUILDERS = {
    "qwen2_vl": _qwen,
    "qwen2_5_vl": _qwen,
    "qwen3_vl": _qwen,
    "qwen3_vl_moe": _qwen,
    "qwen3_5": _qwen,
    "qwen3_5_moe": _qwen,
    "glm4v": _qwen,
    "glm4v_moe": _qwen,
    "qwen2_5_omni_thinker": _qwen,
    "qwen3_omni_moe_thinker": _qwen,
    "llava": _tiles,
    "internvl": _tiles,
    "gemma3": _tiles,
    "idefics3": _idefics3,
    "llava_next": _anyres,
    "llava_onevision": _anyres,
    "mllama": _mllama,
    "llama4": _llama4,
}
