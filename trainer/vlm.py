"""Images in the bundled trainer: a JSONL of {"text", "images"} rows (image paths relative to the file, as `planner
scan` reads them) made into a VLM's inputs by the user's local processor folder (what `AutoProcessor.save_pretrained`
writes: the image processor and the tokenizer).

A row's text marks where each image goes with `<image>` or the processor's own image token (`<|image_pad|>` for
Qwen-VL); a row without a mark gets one per image at its start. The processor expands each mark into the image's
tokens, so a sample's length is counted with its images; a sample longer than the run's sequence is refused (an
image's tokens cannot be cut). Labels: every token but the padding and the image tokens (the model predicts text).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from planner.errors import BadInput

MARK = "<image>"  # LLaMA-Factory's and ms-swift's placeholder in a row's text


@dataclass
class ImageSample:
    """One row: its text with one image token per image, its images (paths) and its length in tokens once the
    processor has expanded the images (the sampler and the token budget read len())."""

    text: str
    images: list[str]
    length: int

    def __len__(self) -> int:
        return self.length


def load_processor(folder: str):
    """The processor of a local folder, padding on the right (the trainer's labels follow the text)."""
    from transformers import AutoProcessor

    if not Path(folder).is_dir():
        raise BadInput(f"--processor {folder!r}: no such folder (a local processor folder is needed)", "processor")
    try:
        proc = AutoProcessor.from_pretrained(folder, local_files_only=True)
    except (OSError, ValueError, AttributeError, KeyError) as e:
        raise BadInput(f"--processor {folder!r}: not a processor folder ({str(e).splitlines()[0][:200]})") from None
    if getattr(proc, "image_token", None) is None or not hasattr(proc, "tokenizer"):
        raise BadInput(f"--processor {folder!r}: {type(proc).__name__} is not an image processor with a tokenizer")
    proc.tokenizer.padding_side = "right"
    return proc


def check_batching(batching: str) -> None:
    """Rows with images are padded: --batching packed is refused (by the CLI before launch, and by the trainer)."""
    if batching == "packed":
        raise BadInput("--batching packed with --processor: the bundled trainer pads rows with images", "batching")


def image_paths(row: dict, base: Path, where: str) -> list[str]:
    items = row.get("images", row.get("image"))
    items = [] if items is None else items if isinstance(items, list) else [items]
    out = []
    for item in items:
        if not isinstance(item, str):
            raise BadInput(f"{where}: an image is a path (relative to the file) in the trainer's data", "data")
        path = base / item
        if not path.is_file():
            raise BadInput(f"{where}: image {str(path)!r}: no such file", "data")
        out.append(str(path))
    return out


def marked_text(text: str, n_images: int, image_token: str, where: str) -> str:
    """The text with one processor image token per image: `<image>` marks become it, no mark puts them first."""
    if image_token != MARK:
        text = text.replace(MARK, image_token)
    marks = text.count(image_token)
    if marks == 0:
        return image_token * n_images + text
    if marks != n_images:
        raise BadInput(f"{where}: {marks} image mark(s) in the text for {n_images} image(s)", "data")
    return text


def _open(paths: list[str], where: str):
    from PIL import Image, UnidentifiedImageError

    try:
        return [Image.open(p).convert("RGB") for p in paths]
    except (OSError, UnidentifiedImageError) as e:
        raise BadInput(f"{where}: an image cannot be read ({e.__class__.__name__})", "data") from None


def load(data: str, seq_len: int, vocab: int, processor) -> list[ImageSample]:
    """Every row of the file, checked: text, images that open, ids inside the model's vocabulary, and a length
    with the images of at most seq_len. BadInput names the file, the line and the problem."""
    from scan.read import jsonl_rows

    base, out = Path(data).parent, []
    for n, row in jsonl_rows(Path(data), "--data"):
        where = f"--data {data!r} line {n}"
        if not isinstance(row.get("text"), str):
            raise BadInput(f"{where}: expected an object with 'text' (and 'images') with --processor", "data")
        paths = image_paths(row, base, where)
        text = marked_text(row["text"], len(paths), processor.image_token, where)
        ids = processor(text=[text], images=_open(paths, where) or None)["input_ids"][0]
        ids = ids.tolist() if hasattr(ids, "tolist") else list(ids)
        if max(ids, default=0) >= vocab:
            raise BadInput(f"{where}: token id {max(ids)} is outside the model's vocabulary (0 to {vocab - 1})", "data")
        if len(ids) > seq_len:
            raise BadInput(
                f"{where}: {len(ids)} tokens with its images, over --seq-len {seq_len} (an image's tokens are not cut)",
                "seq_len",
            )
        if len(ids) < 2:
            raise BadInput(f"{where}: {len(ids)} token(s); a sample needs at least 2 (one to predict)", "data")
        out.append(ImageSample(text, paths, len(ids)))
    if not out:
        raise BadInput(f"--data {data!r}: no samples (the file is empty)", "data")
    return out


def collate(processor, samples: list[ImageSample]) -> dict:
    """A micro-batch as the processor makes it (padded on the right) with its labels."""
    images = [im for s in samples for im in _open(s.images, "--data")]
    batch = dict(processor(text=[s.text for s in samples], images=images or None, padding=True, return_tensors="pt"))
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    batch["labels"] = labels.masked_fill(batch["input_ids"] == processor.image_token_id, -100)
    return batch
