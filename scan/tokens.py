"""Token counts of dataset rows: text with a local tokenizer, images by the model family's rule.

Rows are one of (the first row decides; every later row must be of the same kind):
- {"text": ...};
- {"prompt": ..., "completion": ...} (TRL's prompt-completion form: both are trained on, counted together);
- {"messages": [{"role": ..., "content": ...}, ...]}, rendered with the tokenizer's own chat template;
- {"input_ids": [...]}, already tokenized (as the bundled trainer reads them): no tokenizer is needed.
Images: "images" (a list) or "image", each a path (relative to the data file's folder; only the header is
read, the pixels are never decoded) or {"width": W, "height": H}.

Image rules:
- qwen2-vl (Qwen2-VL and Qwen2.5-VL): the image is resized so that both sides are multiples of 28 with the
  pixel count within [min_pixels, max_pixels], then cut in 14-pixel patches merged 2 x 2: tokens =
  (h / 14) * (w / 14) / 4. `smart_resize` is transformers' own (models/qwen2_vl/image_processing_pil_qwen2_vl.py,
  transformers 5.23), restated here so that the count needs neither torch nor the processor.
- internvl[:N] (InternVL 2 / 2.5 / 3 as transformers runs them, GotOcr2ImageProcessor with crop_to_patches):
  the image is cut into 448-pixel tiles on the grid (at most N tiles, 12 by default) whose aspect ratio is
  closest to the image's, plus a thumbnail when there is more than one tile; 256 tokens per tile plus the
  processor's <img> and </img> (models/got_ocr2/image_processing_pil_got_ocr2.py get_optimal_tiled_canvas,
  models/internvl/processing_internvl.py image_seq_length, transformers 5.23; restated here).
- qwen3-vl (Qwen3-VL): the same resizing with 16-pixel patches merged 2 x 2 (factor 32), between 65,536 and
  16,777,216 pixels (Qwen3-VL's preprocessor_config.json; --min-pixels / --max-pixels override).
- llava, llava-next, gemma3, idefics3: scan/vlm_rules.py.
- fixed:N: N tokens per image.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from planner.errors import BadInput
from scan import vlm_rules

QWEN2_VL_MIN_PIXELS = 56 * 56  # Qwen2VLImageProcessor's defaults (size shortest/longest edge)
QWEN2_VL_MAX_PIXELS = 28 * 28 * 1280
BATCH_ROWS = 1024  # rows tokenized in one call of the (Rust) tokenizer


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


def qwen3_vl_image_tokens(width: int, height: int, min_pixels: int | None, max_pixels: int | None) -> int:
    """Qwen3-VL: the same resizing with 16-pixel patches merged 2 x 2 (factor 32; processing_qwen3_vl.py:70-73)."""
    h, w = smart_resize(height, width, 32, min_pixels or QWEN3_VL_MIN_PIXELS, max_pixels or QWEN3_VL_MAX_PIXELS)
    return (h // 16) * (w // 16) // 4


def qwen2_vl_image_tokens(
    width: int, height: int, min_pixels: int = QWEN2_VL_MIN_PIXELS, max_pixels: int = QWEN2_VL_MAX_PIXELS
) -> int:
    h, w = smart_resize(height, width, 28, min_pixels, max_pixels)
    return (h // 14) * (w // 14) // 4


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


IMAGE_RULES = (
    "qwen2-vl, qwen3-vl, internvl, internvl:N (at most N tiles, 1 to 64), llava, llava-next, gemma3, "
    "gemma3:pan-and-scan, idefics3"
)


def image_rule(spec: str, min_pixels: int | None, max_pixels: int | None) -> Callable[[int, int], int]:
    """The image-token rule --image-rule names; min/max pixels (None: the family's own) for the Qwen rules."""
    if spec == "qwen2-vl":
        low, high = min_pixels or QWEN2_VL_MIN_PIXELS, max_pixels or QWEN2_VL_MAX_PIXELS
        return lambda w, h: qwen2_vl_image_tokens(w, h, low, high)
    if spec == "qwen3-vl":
        return lambda w, h: qwen3_vl_image_tokens(w, h, min_pixels, max_pixels)
    if spec in vlm_rules.RULES:
        return vlm_rules.RULES[spec]
    if spec == "internvl" or (spec.startswith("internvl:") and spec[9:].isdigit() and 1 <= int(spec[9:]) <= 64):
        tiles = int(spec[9:]) if ":" in spec else 12
        return lambda w, h: internvl_image_tokens(w, h, tiles)
    if spec.startswith("fixed:") and spec[6:].isdigit() and int(spec[6:]) > 0:
        n = int(spec[6:])
        return lambda w, h: n
    raise BadInput(
        f"--image-rule {spec!r}: accepted: {IMAGE_RULES}, fixed:N (N tokens per image)",
        "image_rule",
    )


@dataclass
class Lengths:
    text: array = field(default_factory=lambda: array("I"))
    image: array = field(default_factory=lambda: array("I"))
    kind: str | None = None
    images: int = 0

    def totals(self) -> list[int]:
        """Tokens per row, text plus image (what a row costs in the sequence)."""
        return [t + i for t, i in zip(self.text, self.image, strict=True)]


def _text_of(row: dict, kind: str, where: str) -> str | list:
    if kind == "text":
        value = row["text"]
    elif kind == "prompt-completion":
        value = (row["prompt"], row["completion"])
        if not all(isinstance(v, str) for v in value):
            raise BadInput(f"{where}: 'prompt' and 'completion' must be strings", "data")
        return value[0] + value[1]
    else:
        value = row["messages"]
        if not (isinstance(value, list) and all(isinstance(m, dict) and "role" in m and "content" in m for m in value)):
            raise BadInput(f"{where}: 'messages' must be a list of {{'role', 'content'}} objects", "data")
        return value
    if not isinstance(value, str):
        raise BadInput(f"{where}: 'text' is not a string", "data")
    return value


def kind_of(row: dict, where: str) -> str:
    if "messages" in row:
        return "messages"
    if "prompt" in row and "completion" in row:
        return "prompt-completion"
    if "text" in row:
        return "text"
    if "input_ids" in row:
        return "input_ids"
    raise BadInput(
        f"{where}: no 'text', 'prompt'+'completion', 'messages' or 'input_ids' field (it has: "
        + ", ".join(sorted(row)[:8])
        + ")",
        "data",
    )


def token_ids_length(row: dict, where: str) -> int:
    ids = row["input_ids"]
    if not (isinstance(ids, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in ids)):
        raise BadInput(f"{where}: 'input_ids' is not a list of integers", "data")
    return len(ids)


def image_sizes(row: dict, base: Path, where: str) -> Iterator[tuple[int, int]]:
    items = row.get("images", row.get("image"))
    if items is None:
        return
    for item in items if isinstance(items, list) else [items]:
        if isinstance(item, dict) and {"width", "height"} <= item.keys():
            w, h = item["width"], item["height"]
            if not (isinstance(w, int) and isinstance(h, int) and w > 0 and h > 0):
                raise BadInput(f"{where}: image width and height must be positive integers", "data")
            yield w, h
        elif isinstance(item, str):
            yield _header_size(base / item, where)
        else:
            raise BadInput(f"{where}: an image is a path or {{'width', 'height'}}", "data")


def _header_size(path: Path, where: str) -> tuple[int, int]:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as im:  # reads the header only; the pixels are never decoded
            return im.size
    except (OSError, UnidentifiedImageError) as e:
        raise BadInput(f"{where}: image {str(path)!r} cannot be read ({e.__class__.__name__})", "data") from None
