"""Training data (nothing is downloaded): `synthetic` token sequences of varying length, a JSONL text
file tokenized with a local tokenizer folder, or pre-tokenized ids (JSONL of {"input_ids": [...]}) ;
and the global-batch sampler.

Sampler semantics (DistributedSampler's, made exact for a fixed global batch): each epoch is one
seeded permutation of all samples, cut into consecutive global batches; rank r takes positions
r, r + world, ... of each global batch, and splits them into its micro-batches in order. Every sample
appears exactly once per epoch across ranks, none twice. The tail (the last global batch, when the
dataset size is not a multiple of it) is kept: it is a smaller global batch, split the same way;
a rank with fewer samples runs empty micro-steps so that all ranks step together, and the loss is
normalized by the tail's own target tokens.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from planner.search.batching import epoch_order, rank_share, split_by_tokens

SYNTHETIC_SAMPLES = 4096


def synthetic(vocab: int, seq_len: int, n: int = SYNTHETIC_SAMPLES, seed: int = 0) -> list[list[int]]:
    """Random token sequences, lengths uniform in [seq_len // 4, seq_len] (padding is present)."""
    rng = random.Random(seed)
    return [[rng.randrange(vocab) for _ in range(rng.randint(max(2, seq_len // 4), seq_len))] for _ in range(n)]


def check_source(data: str, tokenizer: str | None = None, processor: str | None = None) -> None:
    """BadInput, before any process starts, for a --data file or --tokenizer / --processor folder that is not
    there (a processor needs a file of rows with images)."""
    from planner.errors import BadInput

    if data != "synthetic" and not Path(data).is_file():
        raise BadInput(f"--data {data!r}: not 'synthetic' and no such file")
    if processor is not None and data == "synthetic":
        raise BadInput("--processor needs --data FILE: a JSONL of {'text', 'images'} rows", "processor")
    if processor is not None and not Path(processor).is_dir():
        raise BadInput(f"--processor {processor!r}: no such folder (a local processor folder is needed)", "processor")
    if tokenizer is not None and not Path(tokenizer).is_dir():
        raise BadInput(f"--tokenizer {tokenizer!r}: no such folder (a local tokenizer folder is needed)")


def load(data: str, seq_len: int, vocab: int, tokenizer: str | None = None, seed: int = 0) -> list[list[int]]:
    if data == "synthetic":
        return synthetic(vocab, seq_len, seed=seed)
    return validate(data, seq_len, vocab, tokenizer)


def _rows(data: str):
    """(line number, JSON object) of every non-blank line; BadInput naming the file and line otherwise."""
    from planner.errors import BadInput
    from scan.read import jsonl_rows

    for n, row in jsonl_rows(Path(data), "--data"):
        if not ({"input_ids", "text"} & row.keys()):
            raise BadInput(
                f"--data {data!r} line {n}: expected an object with 'input_ids' (token ids) or 'text'", "data"
            )
        yield n, row


def validate(data: str, seq_len: int, vocab: int, tokenizer: str | None = None) -> list[list[int]]:
    """The samples of a JSONL file, each cut to seq_len, after checking every line: JSON, one kind of row
    (token ids or text), ids inside the vocabulary, at least 2 tokens (one to predict). BadInput names the
    file, the line and the problem; the CLI runs this before anything is written or launched."""
    from planner.errors import BadInput

    check_source(data, tokenizer)
    tok, kind, out = None, None, []
    for n, row in _rows(data):
        here = "input_ids" if "input_ids" in row else "text"
        kind = kind or here
        if here != kind:
            raise BadInput(f"--data {data!r} line {n}: has '{here}' where the lines before have '{kind}'", "data")
        if kind == "text":
            if not isinstance(row["text"], str):
                raise BadInput(f"--data {data!r} line {n}: 'text' is not a string", "data")
            if tokenizer is None:
                raise BadInput(
                    f"--data {data!r} holds text (line {n}): give --tokenizer DIR (a local tokenizer folder)",
                    "tokenizer",
                )
            if tok is None:
                from scan.scanner import load_tokenizer

                tok = load_tokenizer(tokenizer)
            ids = tok(row["text"], truncation=True, max_length=seq_len)["input_ids"]
        else:
            ids = row["input_ids"]
            if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
                raise BadInput(f"--data {data!r} line {n}: 'input_ids' is not a list of integers", "data")
            bad = next((i for i in ids if not 0 <= i < vocab), None)
            if bad is not None:
                raise BadInput(
                    f"--data {data!r} line {n}: token id {bad} is outside the model's vocabulary (0 to {vocab - 1})",
                    "data",
                )
            ids = ids[:seq_len]
        if len(ids) < 2:
            raise BadInput(
                f"--data {data!r} line {n}: {len(ids)} token(s); a sample needs at least 2 (one to predict)", "data"
            )
        out.append(list(ids))
    if not out:
        raise BadInput(f"--data {data!r}: no samples (the file is empty)", "data")
    return out


@dataclass
class Position:
    epoch: int = 0
    batch: int = 0  # global batches done in this epoch


class GlobalBatchSampler:
    """This rank's share of each global batch, in the order planner.search.batching defines (the planner names steps
    by the same rule)."""

    def __init__(self, n: int, global_batch: int, world: int, rank: int, seed: int = 0) -> None:
        self.n, self.global_batch, self.world, self.rank, self.seed = n, global_batch, world, rank, seed
        self.pos = Position()

    def batches_per_epoch(self) -> int:
        return -(-self.n // self.global_batch)

    def next(self) -> list[int]:
        """This rank's sample indices of the next global batch (advances the position)."""
        order = epoch_order(self.n, self.seed, self.pos.epoch)
        mine = rank_share(order, self.pos.batch, self.global_batch, self.world, self.rank)
        self.pos.batch += 1
        if self.pos.batch == self.batches_per_epoch():
            self.pos = Position(self.pos.epoch + 1, 0)
        return mine


def micro_batches(indices: list[int], micro_batch: int, accum: int) -> list[list[int]]:
    """Exactly `accum` micro-batches (some empty in a tail batch), in order."""
    return [indices[i * micro_batch : (i + 1) * micro_batch] for i in range(accum)]


def token_micro_batches(indices: list[int], lengths: list[int], budget: int) -> list[list[int]]:
    """The rank's samples cut in order by tokens (planner.search.batching.split_by_tokens: samples x the longest of them
    <= budget), `lengths` already cut to seq_len."""
    return [[indices[p] for p in group] for group in split_by_tokens([lengths[i] for i in indices], budget)]


def collate(samples: list[list[int]], seq_len: int, pad_id: int = 0):
    """input_ids, attention_mask, labels (-100 on padding), padded to the longest sample."""
    import torch

    width = max((len(s) for s in samples), default=1)
    width = min(width, seq_len)
    ids = torch.full((len(samples), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(samples), width), dtype=torch.long)
    for i, s in enumerate(samples):
        s = s[:width]
        ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        mask[i, : len(s)] = 1
    labels = ids.masked_fill(mask == 0, -100)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def target_tokens(batch) -> int:
    """Tokens that carry a loss: every non-padding label after the first of each sample (causal shift)."""
    return int((batch["labels"][:, 1:] != -100).sum()) if batch["labels"].numel() else 0
