"""Image tokens from a processor's settings, torch-free: the rule each --image-rule names (planner.model.image_rules
restates each family's image processor), the rule a model's family uses by default, and the worst case a rule's
settings admit (the most LLM tokens one image can give, and an image size that gives them), which a plan without data
takes (planner.search.imagefit). scan/ sizes a dataset's images with the same rules.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache

from planner.errors import BadInput
from planner.model import image_rules as r

IMAGE_RULES = (
    "qwen2-vl, qwen3-vl, internvl, internvl:N (at most N tiles, 1 to 64), llava, llava-next, llava-onevision, "
    "gemma3, gemma3:pan-and-scan, idefics3, mllama, llama4, minicpm-v"
)
# a family's processor as transformers 5.23 configures it by default (smolvlm: none restated yet)
FAMILY_RULE = {
    "qwen2_vl": "qwen2-vl",
    "qwen2_5_vl": "qwen2-vl",
    "qwen2_5_omni_thinker": "qwen2-vl",  # Qwen2_5OmniProcessor: Qwen2-VL's image processor (patch 14, merge 2)
    "qwen2_5_omni": "qwen2-vl",
    "qwen3_vl": "qwen3-vl",
    # Qwen3OmniMoeProcessor: Qwen2VLImageProcessor at patch 16 (image_processing_auto.py:151; ms-swift 4.6 sets
    # image_patch_size=16 for it, swift/model/models/qwen.py:2149), Qwen3-VL's rule
    "qwen3_omni_moe_thinker": "qwen3-vl",
    "qwen3_omni_moe": "qwen3-vl",
    "qwen3_5": "qwen3-vl",  # Qwen3.5 uses Qwen3-VL's image processor (patch 16, merge 2)
    "qwen3_5_moe": "qwen3-vl",
    "internvl": "internvl",
    "llava": "llava",
    "llava_next": "llava-next",
    "llava_onevision": "llava-onevision",
    "gemma3": "gemma3",
    "idefics3": "idefics3",
    "mllama": "mllama",
    "llama4": "llama4",
    "minicpmv": "minicpm-v",
}
# (factor, min_pixels, max_pixels) of the Qwen rules: each family's checkpoints' preprocessor_config.json, what
# from_pretrained runs where the user's files set no bound (image_rules.QWEN2_VL_CHECKPOINT_PIXELS, QWEN3_VL_PIXELS)
PIXEL_RULES = {"qwen2-vl": (28, *r.QWEN2_VL_CHECKPOINT_PIXELS), "qwen3-vl": (32, *r.QWEN3_VL_PIXELS)}
# image sides tried for the rules whose worst case is a tiling's (llava-next's pinpoints, pan-and-scan's crops)
# OneVision's anyres_max_9 scales a grid down past 9 tiles' features, so its count is not monotone in the size: its
# worst case is searched on a 16-pixel grid up to 2,048 (past it every grid is over the cap; measured: 8,765 at
# 960 x 1,168, as many as a 16-pixel scan up to 8,000 finds)
FINE_SIDES = tuple(range(112, 2049, 16))
SIDES = (112, 224, 256, 336, 364, 384, 448, 512, 560, 672, 728, 768, 896, 1008, 1024, 1092, 1344, 1456, 2048, 4096)


def family_rule(model_type: str) -> str | None:
    return FAMILY_RULE.get(model_type)


def tile_cap(spec: str) -> int | None:
    """The tile cap of a tiling rule (internvl: 12, internvl:N: N), None for any other rule."""
    if spec == "internvl":
        return 12
    if spec.startswith("internvl:") and spec[9:].isdigit() and 1 <= int(spec[9:]) <= 64:
        return int(spec[9:])
    return None


def tiled(spec: str) -> bool:
    """A rule that cuts an image into tiles up to a cap (InternVL's MAX_NUM / max_dynamic_patch)."""
    return tile_cap(spec) is not None


def tile_rule(tiles: int) -> str:
    """The tiling rule at a cap of `tiles` (1-64), as --image-rule names it."""
    return f"internvl:{tiles}"


def image_rule(spec: str, min_pixels: int | None = None, max_pixels: int | None = None) -> Callable[[int, int], int]:
    """The rule --image-rule names, (width, height) -> LLM tokens; min/max pixels (None: the family's own) for the
    Qwen rules."""
    if spec in PIXEL_RULES:
        factor, low, high = PIXEL_RULES[spec]
        low, high = min_pixels or low, max_pixels or high
        return lambda w, h: r.qwen_image_tokens(w, h, factor, low, high)
    if spec in r.RULES:
        return r.RULES[spec]
    tiles = tile_cap(spec)
    if tiles is not None:
        return lambda w, h: r.internvl_image_tokens(w, h, tiles)
    if spec.startswith("fixed:") and spec[6:].isdigit() and int(spec[6:]) > 0:
        n = int(spec[6:])
        return lambda w, h: n
    raise BadInput(f"--image-rule {spec!r}: accepted: {IMAGE_RULES}, fixed:N (N tokens per image)", "image_rule")


@cache
def worst_case(spec: str, min_pixels: int | None = None, max_pixels: int | None = None) -> tuple[int, tuple[int, int]]:
    """(the most tokens one image gives under the rule's settings, the (width, height) of an image that gives them).
    Qwen: the most factor x factor blocks within max_pixels on a grid of aspect ratio at most 200 (smart_resize keeps
    such an image as it is); InternVL: every tile of the widest grid and the thumbnail; the others: the most over
    images of the sides in SIDES."""
    rule = image_rule(spec, min_pixels, max_pixels)
    if spec in PIXEL_RULES:
        factor, _, high = PIXEL_RULES[spec]
        n = max(1, (max_pixels or high) // (factor * factor))  # smart_resize keeps one block: max(factor, ...)
        a = max(
            (a for a in range(1, math.isqrt(n) + 1) if n // a <= 200 * a), key=lambda a: (a * (n // a), a), default=1
        )
        size = ((n // a) * factor, a * factor)
    elif (tiles := tile_cap(spec)) is not None:  # a grid of more tiles than max_tiles is never chosen
        t, n = r.INTERNVL_TILE, tiles + 1
        size = max(((c * t, q * t) for c in range(1, n) for q in range(1, n)), key=lambda s: (rule(*s), -s[0] * s[1]))
    elif spec.startswith("fixed:"):
        size = (SIDES[0], SIDES[0])
    else:
        sides = FINE_SIDES if spec == "llava-onevision" else SIDES
        size = max(((w, h) for w in sides for h in sides), key=lambda s: (rule(*s), -s[0] * s[1], -s[0]))
    return rule(*size), size


def fewer_tokens(spec: str, images: int, seq_len: int) -> str:
    """How to bring `images` images at the rule's worst case under `seq_len`, in the rule's own knob: Qwen-VL's pixel
    budget (--max-pixels); InternVL's tile cap (its MAX_NUM / max_dynamic_patch: --image-rule internvl:N, the most
    tiles that fit); the other rules give every image a count of their own."""
    tail = "give --tokens-per-image, or raise --seq-len"
    if spec in PIXEL_RULES:
        return f"lower --max-pixels, {tail}"
    tiles = tile_cap(spec)
    if tiles is not None:
        fit = next((n for n in range(tiles - 1, 0, -1) if images * worst_case(f"internvl:{n}")[0] <= seq_len), None)
        cap = f"--image-rule internvl:{fit}" if fit else "fewer --images (one tile an image is still over)"
        return f"cap InternVL's tiles (MAX_NUM / max_dynamic_patch) with {cap}, {tail}"
    return f"give fewer --images, {tail}"


ANYRES = {  # rule: (its pinpoints, tile side, encoder tokens a tile: NeXT's CLIP keeps its CLS, OneVision's SigLIP has none)
    "llava-next": (r.LLAVA_NEXT_PINPOINTS, r.LLAVA_TILE, (r.LLAVA_TILE // r.LLAVA_PATCH) ** 2 + 1),
    "llava-onevision": (r.ONEVISION_PINPOINTS, r.ONEVISION_TILE, r.ONEVISION_TOKENS),
}


@cache
def _anyres_images(spec: str) -> tuple[tuple[int, int], ...]:
    """(LLM tokens, encoder tokens) of one image of each shape the rule tells apart (the squares of SIDES and the
    pinpoints' own shapes): the base tile and the grid's tiles through the tower."""
    pinpoints, tile, per_tile = ANYRES[spec]
    rule = image_rule(spec)
    shapes = {(s, s) for s in SIDES} | {(w, h) for h, w in pinpoints}
    out = set()
    for w, h in shapes:
        bh, bw = r._best_resolution(h, w, pinpoints)
        out.add((rule(w, h), (1 + (bh // tile) * (bw // tile)) * per_tile))
    return tuple(sorted(out))


def anyres_encoder_tokens(spec: str, tokens: int) -> int:
    """The tower's tokens behind `tokens` LLM tokens of any-resolution images (LLaVA-NeXT, OneVision): a small image
    goes through more tiles than its LLM tokens show (a 336-pixel square: 3 tiles, 1,731 encoder tokens, for 1,176).
    Read as the images with the most LLM tokens that fit, largest first."""
    images = _anyres_images(spec)
    out = 0
    while tokens >= images[0][0]:
        llm, encoder = max((i for i in images if i[0] <= tokens), key=lambda i: (i[0], -i[1]))
        n = tokens // llm
        out, tokens = out + n * encoder, tokens - n * llm
    return out + tokens  # what no image's count fits: one encoder token each
