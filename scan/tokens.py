"""Token counts of dataset rows: text with a local tokenizer, images by the model family's rule.

Rows are one of (the first row decides; every later row must be of the same kind):
- {"text": ...};
- {"prompt": ..., "completion": ...} (TRL's prompt-completion form: both are trained on, counted together);
- {"messages": [{"role": ..., "content": ...}, ...]}, rendered with the tokenizer's own chat template;
- {"input_ids": [...]}, already tokenized (as the bundled trainer reads them): no tokenizer is needed.
Images: "images" (a list) or "image", each a path (relative to the data file's folder; only the header is
read, the pixels are never decoded) or {"width": W, "height": H}.

Images are counted by the model family's rule (--image-rule; planner/model/image_rules.py restates each
family's image processor, planner/model/images.py names them).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from planner.errors import BadInput

BATCH_ROWS = 1024  # rows tokenized in one call of the (Rust) tokenizer


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
