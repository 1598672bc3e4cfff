"""Planning for the data (issue 19, second part), for the faces: the sequence length a dataset needs (its
longest row, or --max-length with the rows it cuts), the longest that a configuration fits, and the first
optimizer step, rank and sample at which the bundled trainer's seeded sampler (trainer.data.
GlobalBatchSampler, same seed) would draw a row longer than that: where the run would run out of memory."""
from __future__ import annotations

from dataclasses import dataclass

from planner.errors import BadInput
from planner.search import make_plan
from trainer.data import GlobalBatchSampler


@dataclass
class DataFit:
    path: str
    lengths: list[int]          # tokens per row (text + image), in file order = the trainer's sample order
    seq_len: int                # what to plan for
    image_tokens: int           # the most image tokens in a row (with seq_len: the conservative pair)
    truncated: int              # rows longer than --max-length
    longest_row: int            # 1-based

    def json(self) -> dict:
        return {"data": self.path, "rows": len(self.lengths), "longest_tokens": max(self.lengths),
                "longest_row": self.longest_row, "planned_seq_len": self.seq_len, "image_tokens": self.image_tokens,
                "truncated_rows": self.truncated}


def data_fit(path: str, tokenizer: str | None, image_rule: str = "qwen2-vl", max_length: int | None = None,
             min_pixels: int | None = None, max_pixels: int | None = None) -> DataFit:
    from scan.scanner import scan

    if tokenizer is None:
        raise BadInput("--data needs --tokenizer DIR (a local tokenizer folder) to count its tokens", "tokenizer")
    got = scan(path, tokenizer, image_rule, min_pixels, max_pixels)
    lengths = got.totals()
    longest = max(range(len(lengths)), key=lengths.__getitem__)
    seq = min(lengths[longest], max_length) if max_length else lengths[longest]
    truncated = sum(n > max_length for n in lengths) if max_length else 0
    return DataFit(path, lengths, seq, min(max(got.image), seq), truncated, longest + 1)


def largest_fitting_seq_len(model, hw, goal, knobs, micro_batch: int) -> int:
    """The longest sequence at which this configuration fits (analytic), 0 when not even 1 token does."""
    def fits(n: int) -> bool:
        g = goal.model_copy(update={"seq_len": n, "image_tokens": min(goal.image_tokens, n)})
        return make_plan(model, hw, g, knobs, micro_batch).fits

    lo, hi = 0, goal.seq_len        # fits(lo) holds (or lo = 0), fits(hi) does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def first_too_long(lengths: list[int], limit: int, global_batch: int, world: int, seed: int = 0) -> dict | None:
    """The first optimizer step (1-based), rank and sample (0-based index, 1-based row) that the trainer's
    sampler draws longer than `limit`; every sample comes once per epoch, so the first epoch decides."""
    order = GlobalBatchSampler(len(lengths), global_batch, world, 0, seed).order(0)
    for pos, idx in enumerate(order):       # rank r takes positions r, r + world, ... of each global batch
        if lengths[idx] > limit:
            step, within = divmod(pos, global_batch)
            return {"step": step + 1, "rank": within % world, "sample": idx, "row": idx + 1, "tokens": lengths[idx],
                    "limit": limit, "seed": seed}
    return None
