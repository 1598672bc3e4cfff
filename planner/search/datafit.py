"""Planning for the data (issue 19): what a scanned dataset asks of a plan (DataFit: tokens per row, the length
to plan for, the rows --max-length cuts, a histogram), and, for a configuration that does not fit, the longest
row it fits and the first optimizer step, rank and sample at which the bundled trainer's seeded sampler would
draw a longer one. The scan itself belongs to the scan package, handed in by a face (a Scanner);
this module reads its counts only."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from planner.config.spec import Goal, Hardware, Plan, TokenBatches
from planner.errors import BadInput
from planner.estimate.epoch import Epoch
from planner.search import batching
from planner.search.batching import first_too_long
from planner.search.estimates import make_plan
from planner.search.search import check_global_batch

HISTOGRAM_BINS = 24


@dataclass
class DataFit:
    path: str
    lengths: list[int]  # tokens per row (text + image), in file order = the trainer's sample order
    seq_len: int  # what to plan for
    image_tokens: int  # the most image tokens in a row (with seq_len: the conservative pair)
    truncated: int  # rows longer than --max-length
    longest_row: int  # 1-based

    def json(self) -> dict:
        return {
            "data": self.path,
            "rows": len(self.lengths),
            "longest_tokens": max(self.lengths),
            "longest_row": self.longest_row,
            "planned_seq_len": self.seq_len,
            "image_tokens": self.image_tokens,
            "truncated_rows": self.truncated,
            "histogram": histogram(self.lengths),
        }


# How the core scans a dataset without importing the scan package: scanner(path, tokenizer, image_rule,
# max_length, min_pixels, max_pixels) -> DataFit (scan.plan.data_fit on the CLI; the API's checks the paths first).
Scanner = Callable[[str, str | None, str, int | None, int | None, int | None], DataFit]


def scan_data(req, scanner: Scanner | None) -> DataFit | None:
    """The dataset's fit, when the request names one: exactly one of seq_len and data."""
    if req.data is None:
        if req.seq_len is None:
            raise BadInput(
                "give --seq-len N, or --data FILE --tokenizer DIR to plan for the data's longest row", "seq_len"
            )
        return None
    if req.seq_len is not None:
        raise BadInput("give --seq-len or --data, not both (--max-length caps what --data asks for)", "seq_len")
    if scanner is None:
        raise BadInput("--data: this face cannot scan datasets (install the scan extra)", "data")
    return scanner(
        req.data, req.tokenizer, req.image_rule or "qwen2-vl", req.max_length, req.min_pixels, req.max_pixels
    )


def token_batches(req, goal: Goal, hw: Hardware, fit: DataFit | None) -> TokenBatches | None:
    """What the request's token budget makes of a step: from the data's rows, or assumed at seq_len."""
    budget = req.max_tokens_per_micro_batch
    if budget is None:
        return None
    check_global_batch(goal.global_batch, hw.world_size)
    if fit is None:
        return batching.assumed(budget, goal.seq_len, goal.global_batch, hw.world_size)
    return batching.from_lengths(fit.lengths, budget, goal.seq_len, goal.global_batch, hw.world_size, req.seed)


def make_fit(path: str, lengths: list[int], image_tokens: list[int], max_length: int | None) -> DataFit:
    """The plan's length: the longest row, or max_length when that is shorter (with the rows it cuts)."""
    longest = max(range(len(lengths)), key=lengths.__getitem__)
    seq = min(lengths[longest], max_length) if max_length else lengths[longest]
    truncated = sum(n > max_length for n in lengths) if max_length else 0
    return DataFit(path, lengths, seq, min(max(image_tokens, default=0), seq), truncated, longest + 1)


def with_videos(fit: DataFit, tokens: int, max_length: int | None) -> DataFit:
    """The data's rows with `tokens` more each: --videos N at their worst case (the scan reads a row's text and
    images, no video: the flag says what each row's videos hold), cut at max_length as make_fit cuts them."""
    lengths = [n + tokens for n in fit.lengths]
    longest = fit.longest_row - 1  # the same row: every row grew by the same count
    seq = min(lengths[longest], max_length) if max_length else lengths[longest]
    truncated = sum(n > max_length for n in lengths) if max_length else 0
    return DataFit(fit.path, lengths, seq, min(fit.image_tokens, seq), truncated, fit.longest_row)


def histogram(lengths: list[int], bins: int = HISTOGRAM_BINS) -> dict:
    """Rows per token-count bin: `edges` has one more entry than `counts`; bin i holds edges[i] <= n < edges[i+1]
    (the last bin includes its upper edge)."""
    lo, hi = min(lengths), max(lengths)
    width = max(1, -(-(hi - lo + 1) // bins))
    counts = [0] * (-(-(hi - lo + 1) // width))
    for n in lengths:
        counts[(n - lo) // width] += 1
    return {"edges": [lo + i * width for i in range(len(counts) + 1)], "counts": counts}


def largest_fitting_seq_len(model, hw, goal, knobs, micro_batch: int) -> int:
    """The longest sequence at which this configuration fits (analytic), 0 when not even 1 token does; under sequence
    or context parallelism a whole number of the equal chunks each rank takes (planner.config.layout: ms-swift pads a
    row to them), never a length a rank gets no token of."""
    cp = knobs.context_parallel
    chunk = knobs.sequence_parallel * cp * (2 if cp > 1 else 1)

    def fits(n: int) -> bool:
        g = goal.shorter(n * chunk)
        return make_plan(model, hw, g, knobs, micro_batch).fits

    lo, hi = 0, -(-goal.seq_len // chunk)  # in chunks: fits(lo) holds (or lo = 0), fits(hi) does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo * chunk


def epoch_of(rows: int, plan: Plan) -> dict:
    """One epoch of the data as HF's Trainer cuts it at the plan's split (planner.estimate.epoch), and its predicted
    hours; a token-budget plan's steps are the bundled trainer's, not these: none."""
    if plan.token_batches is not None:
        return {}
    e = Epoch(rows, plan.data_parallel, plan.micro_batch, plan.grad_accum)
    return {
        "steps": e.steps,
        "micro_batches_per_rank": e.micro_batches_per_rank,
        "last_step_micro_steps": e.last_step_micro_steps,
        "micro_steps_per_step": e.grad_accum,
        "hours": round(e.seconds(plan.step_time_s) / 3600, 3),
    }


def verdict(fit: DataFit, plan: Plan, model, hw, goal, seed: int = 0) -> dict:
    """The scan's figures; for a fixed-split configuration that does not fit, the longest row it fits and the
    first step, rank and sample at which the trainer's sampler (this seed) draws a longer one."""
    out = fit.json() | {"epoch": epoch_of(len(fit.lengths), plan)}
    if not plan.fits and plan.token_batches is None:
        limit = largest_fitting_seq_len(model, hw, goal, plan.knobs, plan.micro_batch)
        out["fits_up_to_tokens"] = limit
        out["first_too_long"] = (
            first_too_long([min(n, goal.seq_len) for n in fit.lengths], limit, plan.global_batch, plan.world_size, seed)
            if limit
            else None
        )
    return out
