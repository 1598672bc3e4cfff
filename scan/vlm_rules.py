"""Image tokens of the VLM families planner.model.vlm reads, each restated from its processor in transformers 5.23 so
that a count needs neither torch nor the processor (pinned to the real image processors on real image files:
tests/scan/test_vlm_rules.py):

- llava (LLaVA 1.5): (336 / 14)^2 = 576 per image whatever its size (processing_llava.py:63-69; the CLS token is
  dropped by the default feature strategy).
- llava-next (LLaVA-NeXT): the base tile's 576, plus the best-fitting grid of 336-pixel tiles among
  image_grid_pinpoints, its padding rows or columns removed, plus one newline token per remaining row
  (processing_llava_next.py:83-123; image_processing_utils.py select_best_resolution).
- gemma3 (Gemma-3): 256 per image (mm_tokens_per_image); gemma3:pan-and-scan (do_pan_and_scan, off by default)
  adds 256 per crop: an image wider or taller than 1.2 : 1 is cut into 2 to 4 crops of at least 256 pixels along its
  long side (image_processing_pil_gemma3.py pan_and_scan; Gemma-3's preprocessor_config: 256, 4, 1.2).
- idefics3 (Idefics3, image_seq_len 169 per 364-pixel tile, longest edge 1456): the image resized so its longest
  edge is 1456, split into tiles of 364 pixels, 169 tokens a tile plus 169 for the downscaled global image
  (image_processing_pil_idefics3.py resize_for_vision_encoder, split_image; processing_idefics3.py).
(qwen3-vl, Qwen2-VL's resizing with 16-pixel patches, is scan/tokens.py's, beside qwen2-vl.)
"""

from __future__ import annotations

import math

LLAVA_TILE, LLAVA_PATCH = 336, 14
LLAVA_NEXT_PINPOINTS = ((336, 672), (672, 336), (672, 672), (1008, 336), (336, 1008))  # (height, width)
IDEFICS3_TILE, IDEFICS3_LONGEST, IDEFICS3_TOKENS = 364, 1456, 169


def llava_image_tokens(width: int, height: int) -> int:
    return (LLAVA_TILE // LLAVA_PATCH) ** 2


def _best_resolution(height: int, width: int, pinpoints) -> tuple[int, int]:
    """The pinpoint that keeps the most of the image's pixels, then wastes the fewest (select_best_resolution)."""
    best, best_kept, best_waste = pinpoints[0], 0, float("inf")
    for ph, pw in pinpoints:
        scale = min(pw / width, ph / height)
        kept = min(int(width * scale) * int(height * scale), width * height)
        waste = pw * ph - kept
        if kept > best_kept or (kept == best_kept and waste < best_waste):
            best, best_kept, best_waste = (ph, pw), kept, waste
    return best


def llava_next_image_tokens(width: int, height: int) -> int:
    side = LLAVA_TILE // LLAVA_PATCH
    bh, bw = _best_resolution(height, width, LLAVA_NEXT_PINPOINTS)
    rows, cols = side * (bh // LLAVA_TILE), side * (bw // LLAVA_TILE)
    if width / height > cols / rows:  # _get_unpadded_features: the padding rows or columns dropped
        rows -= 2 * ((rows - int(round(height * (cols / width), 7))) // 2)
    else:
        cols -= 2 * ((cols - int(round(width * (rows / height), 7))) // 2)
    return rows * cols + rows + side * side


def gemma3_image_tokens(width: int, height: int) -> int:
    return 256


def gemma3_crops(width: int, height: int, min_crop: int = 256, max_crops: int = 4, min_ratio: float = 1.2) -> int:
    """Pan-and-scan's crops of one image (none when it is not elongated enough, or a crop would be too small)."""
    long, short = max(width, height), min(width, height)
    if long / short < min_ratio:
        return 0
    n = min(max_crops, max(2, min(long // min_crop, math.floor(long / short + 0.5))))
    if min(math.ceil(long / n), short) < min_crop:
        return 0
    return n


def gemma3_pan_and_scan_tokens(width: int, height: int) -> int:
    return 256 * (1 + gemma3_crops(width, height))


def idefics3_tiles(width: int, height: int) -> int:
    """Tiles Idefics3's image processor makes, the global image included."""
    ratio = width / height
    if width >= height:  # resize: the longest edge to IDEFICS3_LONGEST, the other even
        width, height = IDEFICS3_LONGEST, int(IDEFICS3_LONGEST / ratio)
        height += height % 2
    else:
        height, width = IDEFICS3_LONGEST, int(IDEFICS3_LONGEST * ratio)
        width += width % 2
    ratio, tile = width / height, IDEFICS3_TILE
    if width >= height:  # resize_for_vision_encoder: multiples of the tile
        width = math.ceil(width / tile) * tile
        height = math.ceil(int(width / ratio) / tile) * tile
    else:
        height = math.ceil(height / tile) * tile
        width = math.ceil(int(height * ratio) / tile) * tile
    if height > tile or width > tile:
        return math.ceil(height / tile) * math.ceil(width / tile) + 1
    return 1


def idefics3_image_tokens(width: int, height: int) -> int:
    return IDEFICS3_TOKENS * idefics3_tiles(width, height)


RULES = {
    "llava": llava_image_tokens,
    "llava-next": llava_next_image_tokens,
    "gemma3": gemma3_image_tokens,
    "gemma3:pan-and-scan": gemma3_pan_and_scan_tokens,
    "idefics3": idefics3_image_tokens,
}
