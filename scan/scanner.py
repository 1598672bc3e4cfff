"""One pass over a dataset: every row's text tokens and image tokens, in bounded memory (4 bytes a row per
array), with the tokenizer called on batches of rows; then the distribution."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from planner.errors import BadInput
from planner.model.images import image_rule
from scan.read import rows
from scan.tokens import BATCH_ROWS, Lengths, _text_of, image_sizes, kind_of, token_ids_length

PERCENTILES = (50, 90, 99)


def load_tokenizer(folder: str):
    from transformers import AutoTokenizer

    if not Path(folder).is_dir():
        raise BadInput(f"--tokenizer {folder!r}: no such folder (a local tokenizer folder is needed)", "tokenizer")
    try:
        return AutoTokenizer.from_pretrained(folder, local_files_only=True)
    except (OSError, ValueError) as e:
        raise BadInput(
            f"--tokenizer {folder!r}: not a tokenizer folder ({str(e).splitlines()[0][:160]})", "tokenizer"
        ) from None


def scan(
    path: str,
    tokenizer: str | None,
    image: str = "qwen2-vl",
    min_pixels: int | None = None,
    max_pixels: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> Lengths:
    """Pre-tokenized rows ({"input_ids": [...]}, as the bundled trainer reads them) need no tokenizer."""
    data = Path(path)
    rule = image_rule(image, min_pixels, max_pixels)
    out, pending, tok = Lengths(), [], None
    for n, row in rows(data):
        where = f"DATA {path!r} line {n}"
        kind = kind_of(row, where)
        if out.kind is None:
            out.kind = kind
            if kind != "input_ids":
                if tokenizer is None:
                    raise BadInput(
                        f"--data {path!r} holds {kind} rows: give --tokenizer DIR (a local tokenizer "
                        "folder) to count their tokens",
                        "tokenizer",
                    )
                tok = load_tokenizer(tokenizer)
        elif kind != out.kind:
            raise BadInput(f"{where}: a '{kind}' row where the rows before are '{out.kind}'", "data")
        if kind == "input_ids":
            out.text.append(token_ids_length(row, where))
        else:
            pending.append((where, _text_of(row, kind, where)))
        tokens = 0
        for w, h in image_sizes(row, data.parent, where):
            try:
                tokens += rule(w, h)
            except ValueError as e:
                raise BadInput(f"{where}: {e}", "data") from None
            out.images += 1
        out.image.append(tokens)
        if len(pending) == BATCH_ROWS:
            _flush(tok, pending, out, progress)
    _flush(tok, pending, out, progress)
    if not out.text:
        raise BadInput(f"DATA {path!r}: no rows", "data")
    return out


def _render(tok, pending: list) -> list[str]:
    """The chat template over a batch of conversations (one call: its per-call cost is most of a row's);
    where the batch fails, row by row, to name the line that fails."""
    try:
        return tok.apply_chat_template([m for _, m in pending], tokenize=False)
    except (ValueError, TypeError):
        for where, messages in pending:
            try:
                tok.apply_chat_template(messages, tokenize=False)
            except (ValueError, TypeError) as e:
                raise BadInput(f"{where}: the tokenizer's chat template failed ({str(e)[:120]})", "data") from None
        raise


def _flush(tok, pending: list, out: Lengths, progress) -> None:
    if not pending:
        return
    # a chat template renders the special tokens itself; plain text gets the tokenizer's own
    chat = out.kind == "messages"
    texts = _render(tok, pending) if chat else [t for _, t in pending]
    backend = getattr(tok, "_tokenizer", None)  # a fast tokenizer's Rust side: batches without Python objects
    if backend is not None:
        out.text.extend(len(e.ids) for e in backend.encode_batch(texts, add_special_tokens=not chat))
    else:
        out.text.extend(len(ids) for ids in tok(texts, add_special_tokens=not chat)["input_ids"])
    if progress is not None:
        progress(len(pending))
    pending.clear()


def distribution(values) -> dict:
    xs = sorted(values)
    if not xs:
        return {}
    pick = {f"p{q}": xs[min(len(xs) - 1, -(-q * len(xs) // 100) - 1)] for q in PERCENTILES}  # nearest rank
    return {"rows": len(xs), "mean": round(sum(xs) / len(xs), 1), **pick, "max": xs[-1]}


def summary(lengths: Lengths) -> dict:
    total = lengths.totals()
    return {
        "kind": lengths.kind,
        "rows": len(lengths.text),
        "images": lengths.images,
        "text_tokens": distribution(lengths.text),
        "image_tokens": distribution(lengths.image),
        "tokens": distribution(total),
        "longest_row": max(range(len(total)), key=total.__getitem__) + 1,
    }
