"""Image tokens of the VLM families, each restated from its image processor in transformers 5.23 so that a count needs
neither torch nor the processor (pinned to the real image processors on real image files: tests/scan/test_vlm_rules.py
and tests/scan/test_scan.py); planner.model.images names them (--image-rule):

- qwen2-vl (Qwen2-VL and Qwen2.5-VL): the image is resized so that both sides are multiples of 28 with the pixel count
  within [min_pixels, max_pixels], then cut in 14-pixel patches merged 2 x 2: tokens = (h / 14) * (w / 14) / 4.
  `smart_resize` is transformers' own (models/qwen2_vl/image_processing_pil_qwen2_vl.py). By default between 3,136
  and 12,845,056 pixels (16,384 tokens): the checkpoints' preprocessor_config.json, which from_pretrained applies over
  the class's 1,003,520 (QWEN2_VL_CHECKPOINT_PIXELS); min / max pixels override.
- qwen3-vl (Qwen3-VL): the same resizing with 16-pixel patches merged 2 x 2 (factor 32), between 65,536 and
  16,777,216 pixels (Qwen3-VL's preprocessor_config.json; min / max pixels override).
- internvl[:N] (InternVL 2 / 2.5 / 3 as transformers runs them, GotOcr2ImageProcessor with crop_to_patches): the image
  is cut into 448-pixel tiles on the grid (at most N tiles, 12 by default) whose aspect ratio is closest to the
  image's, plus a thumbnail when there is more than one tile; 256 tokens per tile plus the processor's <img> and
  </img> (models/got_ocr2/image_processing_pil_got_ocr2.py get_optimal_tiled_canvas, models/internvl/
  processing_internvl.py image_seq_length).
- llava (LLaVA 1.5): (336 / 14)^2 = 576 per image whatever its size (processing_llava.py:63-69; the CLS token is
  dropped by the default feature strategy).
- llava-next (LLaVA-NeXT): the base tile's 576, plus the best-fitting grid of 336-pixel tiles among
  image_grid_pinpoints, its padding rows or columns removed, plus one newline token per remaining row
  (processing_llava_next.py:83-123; image_processing_utils.py select_best_resolution).
- llava-onevision (LLaVA-OneVision, one image a sample): NeXT's grid over 384-pixel tiles and 27 x 27 features a
  tile, scaled down past 9 tiles' worth (anyres_max_9), plus a newline a row and the base tile's 729.
- gemma3 (Gemma-3): 256 per image (mm_tokens_per_image); gemma3:pan-and-scan (do_pan_and_scan, off by default)
  adds 256 per crop: an image wider or taller than 1.2 : 1 is cut into 2 to 4 crops of at least 256 pixels along its
  long side (image_processing_pil_gemma3.py pan_and_scan; Gemma-3's preprocessor_config: 256, 4, 1.2).
- idefics3 (Idefics3, image_seq_len 169 per 364-pixel tile, longest edge 1456): the image resized so its longest
  edge is 1456, split into tiles of 364 pixels, 169 tokens a tile plus 169 for the downscaled global image
  (image_processing_pil_idefics3.py resize_for_vision_encoder, split_image; processing_idefics3.py).
- llama4 (Llama-4): the canvas of 336-pixel tiles (at most max_patches 16 of them) that fits the image with the least
  upscaling, else the least downscaling, the smallest of equal ones (image_processing_llama4.py:88-141, 180-275,
  316-340, resize_to_max_canvas off), plus a global tile when there is more than one; 144 tokens a tile
  ((336 / 14)^2 / 4: processing_llama4.py:129-131) and the placeholder's <|image_start|>, <|image|>, <|image_end|> and
  one separator a tile of the grid (:99-112).
- mllama (Llama-3.2-Vision): one <|image|> token per image in the text whatever its size (processing_mllama.py); the
  image's 4 tiles reach the model through cross-attention (planner/model/mllama.py).
- minicpm-v (MiniCPM-V 2.6, remote code): the whole image (about 448 x 448) and, past one 448-pixel square's area, up
  to 9 slices on the grid of nearest aspect, each 64 resampler queries; the placeholder's markers are text
  (OpenBMB/MiniCPM-V finetune/dataset.py:438-499 slice_image, 553-566 get_grid_placeholder; the Hub's
  image_processing_minicpmv.py restates them).
"""

from __future__ import annotations

import math

LLAVA_TILE, LLAVA_PATCH = 336, 14
LLAVA_NEXT_PINPOINTS = ((336, 672), (672, 336), (672, 672), (1008, 336), (336, 1008))  # (height, width)
IDEFICS3_TILE, IDEFICS3_LONGEST, IDEFICS3_TOKENS = 364, 1456, 169
# LLaVA-OneVision's image processor and processor (image_processing_pil_llava_onevision.py:57-66, its checkpoints'
# num_image_tokens 729 and vision_aspect_ratio anyres_max_9: processing_llava_onevision.py:74-154)
ONEVISION_TILE, ONEVISION_TOKENS, ONEVISION_MAX_TILES = 384, 729, 9
ONEVISION_PINPOINTS = tuple((a * 384, b * 384) for a in range(1, 7) for b in range(1, 7))


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


def _unpadded_grid(width: int, height: int, rows: int, cols: int) -> tuple[int, int]:
    """_get_unpadded_features: the feature grid's padding rows or columns dropped."""
    if width / height > cols / rows:
        rows -= 2 * ((rows - int(round(height * (cols / width), 7))) // 2)
    else:
        cols -= 2 * ((cols - int(round(width * (rows / height), 7))) // 2)
    return rows, cols


def llava_next_image_tokens(width: int, height: int) -> int:
    side = LLAVA_TILE // LLAVA_PATCH
    bh, bw = _best_resolution(height, width, LLAVA_NEXT_PINPOINTS)
    rows, cols = _unpadded_grid(width, height, side * (bh // LLAVA_TILE), side * (bw // LLAVA_TILE))
    return rows * cols + rows + side * side


def llava_onevision_image_tokens(width: int, height: int) -> int:
    """NeXT's grid over 384-pixel tiles among 6 x 6 pinpoints, 27 x 27 features a tile ("full": SigLIP has no CLS),
    then anyres_max_9: a grid over 9 tiles' features by more than 1.1 (linearly) is scaled down by that ratio; one
    image a sample (several images give 729 + 1 each)."""
    side = int(math.sqrt(ONEVISION_TOKENS))
    bh, bw = _best_resolution(height, width, ONEVISION_PINPOINTS)
    rows, cols = _unpadded_grid(width, height, side * (bh // ONEVISION_TILE), side * (bw // ONEVISION_TILE))
    ratio = math.sqrt(rows * cols / (ONEVISION_MAX_TILES * side**2))
    if ratio > 1.1:
        rows, cols = int(rows // ratio), int(cols // ratio)
    return rows * cols + rows + ONEVISION_TOKENS


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


LLAMA4_TILE, LLAMA4_TOKENS, LLAMA4_MAX_PATCHES = 336, 144, 16  # Llama4ImageProcessor's size and max_patches


def llama4_tiles(width: int, height: int, max_patches: int = LLAMA4_MAX_PATCHES) -> int:
    """Tiles Llama4ImageProcessor makes of an image, the global one included (get_number_of_image_patches)."""
    grids = {(a, n // a) for n in range(1, max_patches + 1) for a in range(1, n + 1) if n % a == 0}
    scale = {g: min(g[0] * LLAMA4_TILE / height, g[1] * LLAMA4_TILE / width) for g in grids}
    up = [x for x in scale.values() if x >= 1]
    chosen = min(up) if up else max(scale.values())
    tiles = min(a * b for (a, b), x in scale.items() if x == chosen)
    return tiles + 1 if tiles > 1 else 1


def llama4_image_tokens(width: int, height: int) -> int:
    """144 a tile; the placeholder's start, <|image|> and end tokens; one x or y separator a tile of the grid."""
    tiles = llama4_tiles(width, height)
    return LLAMA4_TOKENS * tiles + 3 + (tiles - 1 if tiles > 1 else 0)


MINICPMV_SLICE, MINICPMV_QUERIES, MINICPMV_MAX_SLICES = 448, 64, 9  # scale_resolution, query_num, max_slice_nums


def minicpmv_slices(width: int, height: int, max_slices: int = MINICPMV_MAX_SLICES) -> int:
    """The slices MiniCPM-V cuts an image into beside the whole (dataset.py:438-478): none up to one 448-pixel square's
    area, else the grid of multiple - 1 to multiple + 1 slices (multiple = ceil(area / 448^2), at most max_slices; one
    slice alone never) whose log aspect is nearest the image's, the first of equals (the loop's strict <)."""
    multiple = min(math.ceil(width * height / MINICPMV_SLICE**2), max_slices)
    if multiple <= 1:
        return 0
    nums = [n for n in (multiple - 1, multiple, multiple + 1) if 1 < n <= max_slices]
    grids = [(m, n // m) for n in nums for m in range(1, n + 1) if n % m == 0]
    cols, rows = min(grids, key=lambda g: abs(math.log(width / height) - math.log(g[0] / g[1])))
    return cols * rows


def minicpmv_image_tokens(width: int, height: int) -> int:
    """64 resampler queries for the whole image and for each slice (MiniCPM-V 2.6's query_num)."""
    return MINICPMV_QUERIES * (1 + minicpmv_slices(width, height))


def minicpmv_worst_tokens(max_slices: int = MINICPMV_MAX_SLICES) -> int:
    """The most tokens one image gives at max_slice_nums: every slice (an image of aspect max_slices : 1 and area
    over max_slices - 1 squares takes them all) and the whole; one slice alone is never cut (the whole only)."""
    return MINICPMV_QUERIES * (1 + (max_slices if max_slices > 1 else 0))


RULES = {
    "minicpm-v": minicpmv_image_tokens,
    "llava": llava_image_tokens,
    "llava-next": llava_next_image_tokens,
    "llava-onevision": llava_onevision_image_tokens,
    "gemma3": gemma3_image_tokens,
    "gemma3:pan-and-scan": gemma3_pan_and_scan_tokens,
    "idefics3": idefics3_image_tokens,
    "mllama": lambda width, height: 1,
    "llama4": llama4_image_tokens,
}


QWEN2_VL_MIN_PIXELS = 56 * 56  # Qwen2VLImageProcessor's class defaults (size shortest/longest edge)
QWEN2_VL_MAX_PIXELS = 28 * 28 * 1280
# What AutoProcessor.from_pretrained(checkpoint) runs when the script sets no bound: the published checkpoints'
# preprocessor_config.json say "min_pixels": 3136, "max_pixels": 12845056 (16,384 x 28 x 28), read where a copy is
# public: Qwen/Qwen2.5-VL-7B-Instruct's (github.com/Blaizzy/mlx-vlm issue 1175; trimmed in the test of corpus file
# 69393411951), Qwen2-VL's (Valley's `qwen2vl_processor_config`, processor_class Qwen2VLProcessor: corpus file
# 46628936662), Qwen2.5-Omni-7B's (corpus file 22279043669); the model cards: "the default range for the number of
# visual tokens per image in the model is 4-16384". The processor takes them over its class defaults (transformers
# 5.23 models/qwen2_vl/image_processing_pil_qwen2_vl.py:104-113, the keys as kwargs onto size; 4.48
# image_processing_qwen2_vl.py:176-195, self.max_pixels). Planned at the class's 1,003,520, a script that loads the
# checkpoint's processor would get images of up to 16,384 tokens where memplan planned 1,280.
QWEN2_VL_CHECKPOINT_PIXELS = (3136, 16384 * 28 * 28)


def smart_resize(
    height: int,
    width: int,
    factor: int = 28,
    min_pixels: int = QWEN2_VL_MIN_PIXELS,
    max_pixels: int = QWEN2_VL_MAX_PIXELS,
) -> tuple[int, int]:
    """transformers' qwen2_vl smart_resize (see the module docstring), the aspect-ratio check included."""
    if max(height, width) / min(height, width) > 200:
        raise ValueError(
            f"absolute aspect ratio must be smaller than 200, got {max(height, width) / min(height, width)}"
        )
    h_bar, w_bar = round(height / factor) * factor, round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


QWEN3_VL_MIN_PIXELS, QWEN3_VL_MAX_PIXELS = 65_536, 16_777_216  # Qwen3-VL's preprocessor_config.json
QWEN3_VL_PIXELS = (QWEN3_VL_MIN_PIXELS, QWEN3_VL_MAX_PIXELS)


def qwen_image_tokens(width: int, height: int, factor: int, min_pixels: int, max_pixels: int) -> int:
    """Qwen-VL's tokens: the resized image's factor x factor blocks (2 x 2 patches each)."""
    h, w = smart_resize(height, width, factor, min_pixels, max_pixels)
    return (h // factor) * (w // factor)


INTERNVL_TILE = 448
INTERNVL_TOKENS_PER_TILE = 256  # (448 / 14)^2 patches, pixel-shuffled by 0.5 per side


def internvl_tiles(width: int, height: int, max_tiles: int = 12, min_tiles: int = 1) -> int:
    """Tiles InternVL's processor makes of an image (the thumbnail included): get_optimal_tiled_canvas."""
    if max_tiles <= 1:
        return 1
    grids = sorted(
        ((c, r) for c in range(1, max_tiles + 1) for r in range(1, max_tiles + 1) if min_tiles <= c * r <= max_tiles),
        key=lambda g: g[0] * g[1],
    )
    aspect, area = width / height, width * height
    best, best_diff = (1, 1), float("inf")
    for c, r in grids:
        diff = abs(aspect - c / r)
        if diff < best_diff:
            best, best_diff = (c, r), diff
        elif diff == best_diff and area > 0.5 * INTERNVL_TILE * INTERNVL_TILE * c * r:
            best = (c, r)
    n = best[0] * best[1]
    return n + 1 if n > 1 else 1


def internvl_image_tokens(width: int, height: int, max_tiles: int = 12) -> int:
    return INTERNVL_TOKENS_PER_TILE * internvl_tiles(width, height, max_tiles) + 2
