"""The search's fastest-first evaluation: which candidates' memory is worth estimating at all.

A knob family's plans are ranked by predicted speed, which is known before the memory (speed_of, about a
tenth of a candidate's cost). Once a family's smallest micro-batch fits, its larger micro-batches wait in one
queue with every other family's, fastest first; their memory is estimated in that order until `top` fitting plans
are found that no waiting candidate can pass. A micro-batch that does not fit rules out the family's larger ones
(memory grows with the micro-batch at a fixed accumulation > 1; accumulation 1, which holds no gradient accumulation
buffers, is judged on its own), as the exhaustive walk does. The result is the exhaustive search's first `top`
plans, in its order (tests/planner/search/test_ranked.py draws requests and compares both).
"""

from __future__ import annotations

from bisect import insort
from dataclasses import dataclass, field
from functools import lru_cache
from math import isqrt

from planner.config.layout import Layout
from planner.config.spec import Goal, Hardware, Knobs, Plan
from planner.estimate import rl
from planner.estimate.setup import Setup
from planner.estimate.speed import StepTime
from planner.model.modelspec import ModelSpec


def divisors(n: int) -> list[int]:
    """Ascending divisors of n, in O(sqrt n), once per n (a search asks per family; a new list each call)."""
    return list(_divisors(n))


@lru_cache(maxsize=256)
def _divisors(n: int) -> tuple[int, ...]:
    small = [d for d in range(1, isqrt(n) + 1) if n % d == 0]
    return (*small, *(n // d for d in reversed(small) if d * d != n))


def setup_of(model: ModelSpec, hw: Hardware, goal: Goal, knobs: Knobs, micro_batch: int) -> Setup:
    """One candidate's setup: the accumulation is what the global batch leaves over micro-batch x data-parallel."""
    accum = goal.global_batch // (knobs.data_parallel_of(hw.world_size) * micro_batch)
    return Setup.of(model, knobs, micro_batch, accum, hw, goal)


def speed_of(s: Setup, hw: Hardware) -> tuple[float, float, StepTime]:
    """(step seconds, tokens/s) as a plan states them (rounded), the ranking's key known before the memory, and the
    step time by kind."""
    t = rl.step_time(s, hw)
    return round(t.total_s, 6), round(rl.tokens_per_second(s, t), 1), t


def split_options(knobs: Knobs, accum: int) -> list[int | None]:
    """GRPO's steps_per_generation to try, TRL's default (None: the accumulation) first; other runs have one."""
    w = knobs.workload
    if w.kind == "grpo" and w.steps_per_generation is None and w.generation == "hf":
        return [None, *(d for d in reversed(divisors(accum)) if d < accum)]
    return [None]


OFFLOAD_RANK = {"none": 0, "optimizer": 1, "optimizer+params": 2}


def rank_key(p: Plan) -> tuple:
    """Fastest first; at the same predicted speed on one GPU the simpler stack first (DeepSpeed shards
    nothing there: plain DDP, no offload), elsewhere the one with more headroom."""
    return (*speed_key(p.tokens_per_s, p, p.world_size), -p.memory.headroom_bytes)


def speed_key(tokens_per_s: float, k: Knobs | Plan, world: int) -> tuple:
    """The part of rank_key known before the memory."""
    simpler = (k.zero_stage, OFFLOAD_RANK[k.offload]) if world == 1 else (0, 0)
    return (-tokens_per_s, *simpler)


@dataclass(order=True)
class Candidate:
    """A micro-batch of a family whose memory is not estimated yet; ordered as the exhaustive search ranks."""

    key: tuple
    order: tuple[int, int]  # (family, micro-batch): the exhaustive walk's order, which breaks ties
    knobs: Knobs = field(compare=False)
    micro_batch: int = field(compare=False)
    whole: bool = field(compare=False, default=False)  # accumulation 1: no gradient accumulation buffers
    speed: tuple[float, float, StepTime] | None = field(compare=False, default=None)  # speed_of, kept for its plan


def deferrable(knobs: Knobs, accum: int) -> bool:
    """One plan per micro-batch (not GRPO's tries of smaller generation batches, whose speed depends on which fits)."""
    return split_options(knobs, accum) == [None]


def one_plan_per_micro_batch(knobs: Knobs) -> bool:
    """Whether every micro-batch of the family is one plan (deferrable at any accumulation: not GRPO's tries of
    smaller generation batches)."""
    return deferrable(knobs, 2)


def queued(model: ModelSpec, hw: Hardware, goal: Goal, knobs: Knobs, family: int) -> list[Candidate]:
    """Every micro-batch of the family as a candidate, its smallest included (search.search without rejected)."""
    per_rank = goal.global_batch // knobs.data_parallel_of(hw.world_size)
    sizes = [per_rank] if knobs.optimizer_in_backward else divisors(per_rank)
    return candidates(model, hw, goal, knobs, family, sizes, per_rank)


def candidates(
    model: ModelSpec, hw: Hardware, goal: Goal, knobs: Knobs, family: int, sizes: list[int], per_rank: int
) -> list[Candidate]:
    """The family's larger micro-batches with their speed key (those the layout refuses left out); `per_rank`, the
    micro-batch of accumulation 1, is capped by no other's verdict (planner.search.search.family)."""
    layout, out = Layout.of(hw), []
    for mb in sizes:
        s = setup_of(model, hw, goal, knobs, mb)
        if layout.split_error(knobs, mb, s.grad_accum):
            continue
        speed = speed_of(s, hw)
        out.append(Candidate(speed_key(speed[1], knobs, hw.world_size), (family, mb), knobs, mb, mb == per_rank, speed))
    return out


def order(fitting: list[tuple[tuple[int, int], Plan]]) -> list[tuple[tuple[int, int], Plan]]:
    """Estimated plans best first; at the same rank key, in the exhaustive walk's order (its sort is stable)."""
    return sorted(fitting, key=lambda f: (rank_key(f[1]), f[0]))


def settled(best: list[tuple[tuple[int, int], Plan]], top: int, c: Candidate) -> bool:
    """Whether `top` plans are found that this candidate, and every slower one, cannot pass."""
    return len(best) >= top and rank_key(best[top - 1][1])[:3] < c.key


def ruled_out(ceiling: dict[int, int], c: Candidate) -> bool:
    """A micro-batch at or over its family's smallest one known not to fit (memory grows with the micro-batch at an
    accumulation > 1; accumulation 1 is judged on its own)."""
    return not c.whole and c.micro_batch >= ceiling.get(c.order[0], c.micro_batch + 1)


def add(best: list, ceiling: dict[int, int], c: Candidate, plan: Plan) -> None:
    """Take an estimated candidate: a fitting plan joins `best` in order; one that does not fit caps its family."""
    if not plan.fits:
        if not c.whole:
            ceiling[c.order[0]] = min(c.micro_batch, ceiling.get(c.order[0], c.micro_batch))
        return
    insort(best, (c.order, plan), key=lambda f: (rank_key(f[1]), f[0]))  # one key a plan, not a sort of all


def by_family(pending: list[Candidate]) -> dict[int, list[Candidate]]:
    """Each family's waiting micro-batches with an accumulation > 1, smallest first (the ones search.best_of bisects)."""
    out: dict[int, list[Candidate]] = {}
    for c in pending:
        if not c.whole:
            out.setdefault(c.order[0], []).append(c)
    return {f: sorted(cs, key=lambda c: c.micro_batch) for f, cs in out.items()}


def below(family: list[Candidate], over: Candidate) -> list[Candidate]:
    """The family's waiting micro-batches smaller than `over`'s, smallest first."""
    return [c for c in family if c.micro_batch < over.micro_batch]
