"""Candidates under the exact global-batch constraint, the fit test, ranking, and rejection reasons.

Every candidate has micro_batch x grad_accum x world_size == global_batch. A candidate fits when
device_total_bytes <= capacity x (1 - margin) and its offload host RAM fits in the node's RAM.
Fitting plans are ranked by predicted tokens/s, then by headroom. One candidate's estimate (make_plan, budget_plan,
generation_split): planner.search.estimates.
"""

from __future__ import annotations

from dataclasses import dataclass
from heapq import heapify, heappop, heappush
from itertools import product

from planner.config.knobfields import FIXED, SEARCHED
from planner.config.layout import PARALLEL, Layout, raise_if
from planner.config.requests import Space
from planner.config.spec import Goal, Hardware, Knobs, Plan, TokenBatches
from planner.config.workload import Workload
from planner.errors import BadInput
from planner.frameworks import adapter
from planner.model.modelspec import ModelSpec
from planner.search import estimates, ranked
from planner.search.ranked import divisors, rank_key


@dataclass
class Result:
    plans: list[Plan]
    rejected: list[Plan]


def check_global_batch(global_batch: int, world: int) -> None:
    raise_if(Layout(world).global_batch_error(Workload(), global_batch))


def families(space: Space, hw: Hardware, layout: Layout | None = None, written: bool = True) -> list[Knobs]:
    """Every knob combination of the space that can run on this layout (and, with `written`, whose files the
    framework's release line writes: unwritten). None can: a BadInput with the first combination's reason (a request
    that cannot exist is bad input, not "nothing fits")."""
    layout = layout or Layout.of(hw)
    precisions = space.precision or [adapter(space.framework, space.release).precision(hw.gpu.bf16_tflops > 0)]
    for p, a in product(precisions, space.attention):
        raise_if(hw.gpu.knob_error(p, a))
    searched = {k: list(getattr(space, k)) for k in SEARCHED}
    searched["precision"] = precisions
    for f in PARALLEL:  # empty: 1 (suggest widens it where nothing fits: parallel_spaces)
        searched[f] = searched[f] or [1]
    fixed = {k: getattr(space, k) for k in FIXED}
    out, first = [], None
    varied = {k for k, v in searched.items() if len(v) > 1}
    own = space.release_attention()  # the release's own, kept below where the default's plans all are refused
    if own is not None and not any(hw.gpu.knob_error(p, own) for p in precisions):
        searched["attention"] = [*searched["attention"], own]
    template = Knobs.model_construct(**fixed)  # a copy per combination, its rules run: the Space validated each value
    for combo in product(*searched.values()):
        changes = dict(zip(searched, combo))
        kw = {**fixed, **changes}
        f, o = kw["fsdp"], kw["offload"]
        if f != "off" and layout.world_size == 1 and o == "none":
            continue  # one GPU shards nothing: the same plan as DDP (FSDP on one GPU is for its offload)
        try:  # the layout's rules first (they name what the request cannot have here), then Knobs' own
            k = template.with_valid_values(**changes)
        except BadInput as e:
            first = pick(first, layout.knob_error(template.model_copy(update=changes)) or e, varied)
            continue
        error = layout.knob_error(k) or (unwritten(k, layout) if written else None)
        first = pick(first, error, varied)
        if error is None:
            out.append(k)
    if any(k.attention != own for k in out):
        out = [k for k in out if k.attention != own]
    if not out:
        raise first or BadInput(
            "--fsdp on one GPU shards nothing: give --offload optimizer+params or --fsdp off", "fsdp"
        )
    return out


def unwritten(k: Knobs, layout: Layout) -> BadInput | None:
    """A plan its framework runs but whose files the release line's writer does not write (a rule of scope
    "written"): the search never ranks it, so every plan it ranks exports the line's own files."""
    refused = adapter(k.framework, k.release).unwritten(k.__dict__, layout.where())
    return BadInput(refused[1], refused[0]) if refused else None


def pick(first: BadInput | None, error: BadInput | None, varied: set[str]) -> BadInput | None:
    """The refusal to show where no combination runs: the first, unless a later one names a field the request fixed
    (not one the search varies), which every combination then breaks (verl refuses --sleep-level 1 whatever --fsdp)."""
    if first is None or (first.field in varied and error is not None and error.field not in varied):
        return error or first
    return first


def search(
    model: ModelSpec,
    hw: Hardware,
    goal: Goal,
    space: Space,
    top: int = 10,
    calibrate=None,
    batches: TokenBatches | None = None,
    rejected_too: bool = True,
    written: bool = True,
) -> Result:
    """All fitting plans, best first (at most `top`), and one rejected candidate per knob family
    that has no fitting micro-batch (its smallest micro-batch, with the reason); with a token budget
    (`batches`), one plan per knob family. Without `rejected_too` the rejected list is left empty and a family's
    smallest micro-batch waits with its others (ranked.queued): the same plans from fewer estimates, for the callers
    that read only the plans (a table of plans, the nearest settings, check's alternatives). Without `written` it ranks
    plans the release line's writer writes no file for too (check's alternatives to a user's own file of the line)."""
    layout = Layout.of(hw, model, goal)
    raise_if(layout.global_batch_error(space.workload, goal.global_batch))
    fitting, rejected, pending = [], [], []
    fams = families(space, hw, layout, written)
    for i, knobs in enumerate(fams):
        if batches is not None:  # a token budget: one plan per knob family
            if knobs.optimizer_in_backward:
                raise BadInput(
                    "--optimizer-in-backward runs one micro-step a step; a token budget cuts a varying number",
                    "optimizer_in_backward",
                )
            p = estimates.budget_plan(model, hw, goal, knobs, batches, calibrate=calibrate)
            fitting.append(((i, 0), p)) if p.fits else rejected.append(p)
            continue
        if not rejected_too and ranked.one_plan_per_micro_batch(knobs):
            pending += ranked.queued(model, hw, goal, knobs, i, calibrate)
            continue
        plans, waiting = family(model, hw, goal, knobs, i, calibrate)
        pending += waiting
        fitting += [((i, p.micro_batch), p) for p in plans if p.fits]
        if plans and not any(p.fits for p in plans):
            rejected.append(plans[0])
    waits = any(isinstance(c, ranked.Candidate) or c.has_split(hw) for c in pending)
    if not (fitting or rejected or waits) and batches is None:  # every split refused (GRPO's groups): say why
        raise_if(first_split_error(layout, goal, fams))
    fitting = best_of(model, hw, goal, fitting, pending, top, calibrate)
    if not fitting and batches is None:
        for wider in parallel_spaces(space, hw):  # the sequence fits nothing as asked: split it, or the layers
            try:
                more = search(model, hw, goal, wider, top, calibrate, rejected_too=rejected_too, written=written)
            except BadInput:  # the framework, the model or the GPUs run no such split
                continue
            fitting += more.plans
    fitting.sort(key=rank_key)
    return Result(plans=fitting[:top], rejected=rejected)


def first_split_error(layout: Layout, goal: Goal, knobs: list[Knobs]) -> BadInput | None:
    """The first refusal of a split, where a search found no split any family runs."""
    for k in knobs:
        per_rank = goal.global_batch // k.data_parallel_of(layout.world_size)
        for mb in divisors(per_rank):
            if error := layout.split_error(k, mb, per_rank // mb):
                return error
    return None


def family(
    model: ModelSpec, hw: Hardware, goal: Goal, knobs: Knobs, index: int, calibrate=None
) -> tuple[list[Plan], list[ranked.Candidate | ranked.Family]]:
    """A knob family's micro-batches, smallest first: (the plans estimated, the candidates left for best_of). Memory
    grows with the micro-batch at a fixed accumulation > 1, so the walk stops at the first that does not fit; the
    rank's whole share at once (accumulation 1) holds no gradient accumulation buffers (ZeRO-2's, FSDP's unsharded
    gradients) and is tried apart. Once the smallest fits, the rest wait for best_of, fastest first."""
    per_rank = goal.global_batch // knobs.data_parallel_of(hw.world_size)
    sizes = [per_rank] if knobs.optimizer_in_backward else divisors(per_rank)
    plans: list[Plan] = []
    for j, mb in enumerate(sizes):
        if plans and ranked.deferrable(knobs, per_rank // mb):
            return plans, ranked.waiting(model, hw, goal, knobs, index, sizes[j:], per_rank)
        plan = estimates.generation_split(model, hw, goal, knobs, mb, calibrate)
        if plan is None:
            continue  # TRL refuses every split of this micro-batch (GRPO's whole groups)
        plans.append(plan)
        if not plan.fits:
            if (
                mb < per_rank
                and not ranked.cannot_fit(model, hw, goal, knobs, per_rank, calibrate)
                and (whole := estimates.generation_split(model, hw, goal, knobs, per_rank, calibrate))
            ):
                plans.append(whole)
            break
    return plans, []


def best_of(
    model: ModelSpec,
    hw: Hardware,
    goal: Goal,
    fitting: list[tuple[tuple[int, int], Plan]],
    pending: list[ranked.Candidate | ranked.Family],
    top: int,
    calibrate=None,
) -> list[Plan]:
    """The exhaustive walk's first `top` fitting plans (more where they tie), best first: `fitting` holds the plans
    estimated with their walk order, `pending` the candidates not yet, estimated fastest first (planner.search.ranked)
    until no waiting one can pass the top ones. A candidate that does not fit is followed by a bisection of its
    family's smaller micro-batches, so that the first that does not fit caps the family after about log2 of them
    (fastest first alone estimates them one by one from the top, most not fitting): memory grows with the micro-batch
    at an accumulation > 1 (ranked.ruled_out), and the bisection assumes nothing of the smallest (known to fit after
    family, queued unestimated without rejected_too)."""
    best, ceiling, done = ranked.order(fitting), {}, {}  # done: (family, micro-batch) -> whether it fit

    def estimate(c: ranked.Candidate) -> bool:
        if c.order not in done:
            plan = estimates.make_plan(model, hw, goal, c.knobs, c.micro_batch, calibrate, c.speed)
            ranked.add(best, ceiling, c, plan)
            done[c.order] = plan.fits
        return done[c.order]

    queue = [(c.key, c.order, c) for c in pending]  # (key, order) is unique: a family waits at (family, 0)
    heapify(queue)
    families_of = ranked.by_family([c for c in pending if isinstance(c, ranked.Candidate)])
    while queue:
        c = heappop(queue)[2]
        if ranked.settled(best, top, c):
            break
        if isinstance(c, ranked.Family):  # its candidates, none faster than its key, join the walk
            expanded = c.expand(model, hw, goal)
            families_of.update(ranked.by_family(expanded))
            for e in expanded:
                heappush(queue, (e.key, e.order, e))
            continue
        if c.order in done or ranked.ruled_out(ceiling, c):
            continue
        if not estimate(c) and not c.whole:  # the family's fitting micro-batches end below it: bisect
            smaller = ranked.below(families_of[c.order[0]], c)
            lo, hi = -1, len(smaller)  # smaller[:lo + 1] fit, smaller[hi:] do not
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if estimate(smaller[mid]) else (lo, mid)
    return [p for _, p in best]


def parallel_spaces(space: Space, hw: Hardware) -> list[Space]:
    """Where a request left every parallel size to the search (empty lists) and nothing fits: the same space with
    Ulysses sequence parallel, then with tensor parallel within a node, at 2, 4 and 8 (each alone; a list given,
    even [1], asks for exactly it)."""
    if any(getattr(space, f) for f in PARALLEL):
        return []
    sizes = [n for n in (2, 4, 8) if n <= hw.world_size and hw.world_size % n == 0]
    within = [n for n in sizes if hw.gpus_per_node % n == 0]
    out = [space.model_copy(update={"sequence_parallel": sizes})] if sizes else []
    return out + ([space.model_copy(update={"tensor_parallel": within})] if within else [])
