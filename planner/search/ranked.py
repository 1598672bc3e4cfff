"""The search's fastest-first evaluation: which candidates' memory is worth estimating at all.

A knob family's plans are ranked by predicted speed, which is known before the memory (speed_of, about a
tenth of a candidate's cost). Once a family's smallest micro-batch fits, its larger micro-batches wait in one
queue with every other family's, fastest first; their memory is estimated in that order until `top` fitting plans
are found that no waiting candidate can pass. A micro-batch that does not fit rules out the family's larger ones
(memory grows with the micro-batch at a fixed accumulation > 1; accumulation 1, which holds no gradient accumulation
buffers, is judged on its own), as the exhaustive walk does. The result is the exhaustive search's first `top`
plans, in its order (tests/planner/search/test_ranked.py draws requests and compares both).

Two bounds spare work before any estimate (tests/planner/search/test_bounds.py checks both on every micro-batch):
a family waits as one entry under a speed no micro-batch of it passes (speed_bound), its candidates built only when
the walk reaches it; a family whose model states alone exceed the usable memory (cannot_fit) builds none. The README's
first example: 60 of 120 families expanded, 12 ruled out by their states, 169 memory estimates where there were 201.
"""

from __future__ import annotations

from bisect import insort
from dataclasses import dataclass, field
from functools import lru_cache
from math import inf, isqrt

from planner.config.layout import Layout
from planner.config.spec import Goal, Hardware, Knobs, Plan
from planner.estimate import parallel, rl, state_terms
from planner.estimate.setup import Setup
from planner.estimate.speed import StepTime, compute_seconds, offload_seconds
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


def queued(
    model: ModelSpec, hw: Hardware, goal: Goal, knobs: Knobs, family: int, calibrate=None
) -> list[Candidate | Family]:
    """Every micro-batch of the family, its smallest included (search.search without rejected), waiting (`waiting`);
    a family whose model states alone cannot fit (cannot_fit) waits with none to estimate."""
    per_rank = goal.global_batch // knobs.data_parallel_of(hw.world_size)
    sizes = [per_rank] if knobs.optimizer_in_backward else divisors(per_rank)
    hopeless = cannot_fit(model, hw, goal, knobs, sizes[0], calibrate)
    return waiting(model, hw, goal, knobs, family, sizes, per_rank, hopeless)


@dataclass(order=True)
class Family:
    """A knob family's waiting micro-batches before their speed is known: `key` is a speed key no micro-batch of the
    family passes (speed_bound), so the family's candidates are built (`expand`) only when the fastest-first walk
    reaches it, and never for a family the top plans settle first; a `hopeless` one (cannot_fit) builds none."""

    key: tuple
    order: tuple[int, int]  # (family, 0): before its own candidates at an equal key
    knobs: Knobs = field(compare=False)
    sizes: list[int] = field(compare=False)
    per_rank: int = field(compare=False)
    hopeless: bool = field(compare=False, default=False)

    def expand(self, model: ModelSpec, hw: Hardware, goal: Goal) -> list[Candidate]:
        return (
            [] if self.hopeless else candidates(model, hw, goal, self.knobs, self.order[0], self.sizes, self.per_rank)
        )

    def has_split(self, hw: Hardware) -> bool:
        """Whether the layout runs any of its micro-batches (what `expand` would hold, fitting or not)."""
        layout = Layout.of(hw)
        return any(not layout.split_error(self.knobs, mb, self.per_rank // mb) for mb in self.sizes)


def speed_bound(model: ModelSpec, hw: Hardware, goal: Goal, knobs: Knobs, sizes: list[int]) -> float | None:
    """Tokens/s no micro-batch in `sizes` passes (as speed_of rounds it), or None where none is known (RL workloads:
    generation and the other roles' time). At one global batch every micro-batch split trains the same tokens; a
    step's time is its compute plus communication, offload and generation, none negative, and both its compute and its
    optimizer and parameter offload are least at the fewest micro-steps (speed.compute_seconds: each micro-step adds
    the efficiency curve's fixed share; speed.offload_seconds: a step's CPU Adam and copies, each micro-step's
    parameter copies): the largest micro-batch's compute and offload alone bound the family's speed."""
    if knobs.workload.rl:
        return None
    s = setup_of(model, hw, goal, knobs, max(sizes))
    v = parallel.view(s)
    return round(rl.tokens_per_second(s, StepTime(compute_seconds(v, hw), 0.0, offload_seconds(v, hw))), 1)


def cannot_fit(model: ModelSpec, hw: Hardware, goal: Goal, knobs: Knobs, micro_batch: int, calibrate=None) -> bool:
    """Whether no micro-batch of the family fits: its model states alone (state_terms.model_states_bytes, the same at
    every micro-batch) exceed the usable memory. Only where the analytic breakdown decides: not an RL workload's phases
    or roles, not a device map's GPUs, not a calibrator that holds records or simulates (Calibrator.analytic)."""
    analytic = calibrate is None or (hasattr(calibrate, "analytic") and calibrate.analytic())
    if knobs.workload.rl or knobs.device_map > 1 or not analytic:
        return False
    v = parallel.view(setup_of(model, hw, goal, knobs, micro_batch))
    return state_terms.model_states_bytes(v) > int(hw.gpu.capacity_bytes * (1 - goal.margin))


def waiting(
    model: ModelSpec,
    hw: Hardware,
    goal: Goal,
    knobs: Knobs,
    family: int,
    sizes: list[int],
    per_rank: int,
    hopeless: bool = False,
) -> list[Candidate | Family]:
    """The family's micro-batches `sizes` for the fastest-first walk: one Family under its speed bound (last, and
    empty, where `hopeless`), or (no bound known) its candidates."""
    if hopeless:
        return [Family((inf,), (family, 0), knobs, sizes, per_rank, hopeless=True)]
    bound = speed_bound(model, hw, goal, knobs, sizes)
    if bound is None:
        return candidates(model, hw, goal, knobs, family, sizes, per_rank)
    return [Family(speed_key(bound, knobs, hw.world_size), (family, 0), knobs, sizes, per_rank)]


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
