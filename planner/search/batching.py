"""How samples become micro-batches, one rule for the planner and the bundled trainer (trainer.data imports it,
so the step the planner names is the step the trainer runs):

- the epoch order: one seeded permutation of all samples per epoch, cut into consecutive global batches; rank r
  takes positions r, r + world, ... of each (DistributedSampler's rule, made exact for a fixed global batch);
- token-budget micro-batches (issue 19, item 3): a rank's share of a global batch, in order, cut greedily so that
  samples x the longest of them (the padded tensor) stays within T tokens; the global batch is still counted in
  samples, only the number of micro-steps varies;
- what such a budget makes of a step, from the data's lengths (every step of the first epoch, all ranks) or, with
  no data, the worst shapes it admits; and the first step at which a sample longer than a limit is drawn.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from planner.config.spec import TokenBatches
from planner.errors import BadInput

WORST_SHAPE_CANDIDATES = 8  # micro-batch sizes tried above the fewest samples a budget admits at full length


def epoch_order(n: int, seed: int, epoch: int) -> list[int]:
    """The epoch's seeded permutation of all n samples."""
    order = list(range(n))
    random.Random(seed * 1_000_003 + epoch).shuffle(order)
    return order


def rank_share(order: Sequence[int], batch: int, global_batch: int, world: int, rank: int) -> list[int]:
    """Rank `rank`'s sample indices of global batch `batch` (0-based) of an epoch's order."""
    start = batch * global_batch
    return list(order[start : start + global_batch][rank::world])


def check_budget(budget: int, seq_len: int) -> None:
    """A sample is never split across micro-batches: the budget must hold the longest one."""
    if budget < seq_len:
        raise BadInput(
            f"--max-tokens-per-micro-batch {budget}: below the sequence length {seq_len}; a sample is "
            "never split, so the budget must be at least the longest sample",
            "max_tokens_per_micro_batch",
        )


def split_by_tokens(lengths: Sequence[int], budget: int) -> list[list[int]]:
    """Positions 0..n-1 cut in order into micro-batches whose count x longest length is at most `budget`
    (a sample longer than the budget goes alone)."""
    out: list[list[int]] = []
    cur: list[int] = []
    width = 0
    for i, n in enumerate(lengths):
        if cur and (len(cur) + 1) * max(width, n) > budget:
            out.append(cur)
            cur, width = [], 0
        cur.append(i)
        width = max(width, n)
    if cur:
        out.append(cur)
    return out


def worst_shapes(budget: int, seq_len: int) -> list[tuple[int, int]]:
    """(samples, padded width) micro-batches the budget admits that could cost the most memory when the lengths
    are unknown: the fewest samples at full length, and a few more samples just short enough to fill the budget
    (the tokens approach T while the s^2 attention terms, T x width at most, shrink)."""
    k0 = max(1, budget // seq_len)
    shapes = {(k, min(seq_len, budget // k)) for k in range(k0, k0 + WORST_SHAPE_CANDIDATES + 1) if budget // k >= 1}
    return sorted(shapes)


def assumed(budget: int, seq_len: int, global_batch: int, world: int) -> TokenBatches:
    """With no data, every sample is taken at seq_len for speed; memory is planned for the worst shapes."""
    check_budget(budget, seq_len)
    per_rank = math.ceil(global_batch / world)
    k = max(1, budget // seq_len)
    steps = math.ceil(per_rank / k)
    return TokenBatches(
        max_tokens_per_micro_batch=budget,
        source="assumed",
        shapes=worst_shapes(budget, seq_len),
        micro_steps_max=steps,
        micro_steps_mean=steps,
        padded_tokens_per_micro_step=per_rank * seq_len / steps,
        tokens_per_step=global_batch * seq_len,
        fill_ratio=round(global_batch * seq_len / (steps * world * budget), 4),
    )


def from_lengths(
    lengths: Sequence[int], budget: int, seq_len: int, global_batch: int, world: int, seed: int = 0
) -> TokenBatches:
    """Every micro-batch of the first epoch, every rank, as the trainer would cut them (lengths cut to seq_len):
    the shapes with the most tokens, the largest s^2 term and the widest; micro-steps per step (the most on any
    rank, which all ranks run); the share of the budget that real tokens fill."""
    check_budget(budget, seq_len)
    cut = [min(n, seq_len) for n in lengths]
    order = epoch_order(len(cut), seed, 0)
    best = {"tokens": (0, 0), "square": (0, 0), "width": (0, 0)}
    steps, padded, real, micro = [], 0, 0, 0
    for b in range(math.ceil(len(cut) / global_batch)):
        most = 0
        for r in range(world):
            mine = [cut[i] for i in rank_share(order, b, global_batch, world, r)]
            groups = split_by_tokens(mine, budget)
            most = max(most, len(groups))
            for g in groups:
                k, w = len(g), max(mine[i] for i in g)
                padded += k * w
                micro += 1
                for key, shape in best.items():
                    if _score(key, (k, w)) > _score(key, shape):
                        best[key] = (k, w)
            real += sum(mine)
        steps.append(most)
    return TokenBatches(
        max_tokens_per_micro_batch=budget,
        source="data",
        shapes=sorted(set(best.values())),
        micro_steps_max=max(steps),
        micro_steps_mean=round(sum(steps) / len(steps), 3),
        padded_tokens_per_micro_step=round(padded / micro, 1),
        tokens_per_step=round(real / len(steps), 1),
        fill_ratio=round(real / (sum(steps) * world * budget), 4),
    )


def _score(key: str, shape: tuple[int, int]):
    k, w = shape
    return {"tokens": k * w, "square": k * w * w, "width": (w, k * w)}[key]


def first_too_long(lengths: Sequence[int], limit: int, global_batch: int, world: int, seed: int = 0) -> dict | None:
    """The first optimizer step (1-based), rank and sample (0-based index, 1-based row) that the trainer's
    sampler draws longer than `limit`; every sample comes once per epoch, so the first epoch decides."""
    order = epoch_order(len(lengths), seed, 0)
    for pos, idx in enumerate(order):  # rank r takes positions r, r + world, ... of each global batch
        if lengths[idx] > limit:
            step, within = divmod(pos, global_batch)
            return {
                "step": step + 1,
                "rank": within % world,
                "sample": idx,
                "row": idx + 1,
                "tokens": lengths[idx],
                "limit": limit,
                "seed": seed,
            }
    return None
