"""One candidate's plan: its memory estimate, speed and fit (make_plan, made once a request through planner.search.memo;
new_plan), a token-budget plan at the costliest of its micro-batch shapes (budget_plan), and GRPO's smaller
generation batches where TRL's default does not fit (generation_split). The search over candidates:
planner.search.search.
"""

from __future__ import annotations

from planner.config.layout import Layout
from planner.config.spec import Goal, Hardware, Knobs, Plan, TokenBatches
from planner.config.stepspec import StepBreakdown
from planner.estimate import rl
from planner.estimate.memory import breakdown
from planner.estimate.setup import Setup
from planner.estimate.speed import step_time
from planner.model.modelspec import ModelSpec
from planner.search import memo
from planner.search.advice import rejection_reason
from planner.search.ranked import divisors, setup_of, speed_of, split_options


def make_plan(
    model: ModelSpec, hw: Hardware, goal: Goal, knobs: Knobs, micro_batch: int, calibrate=None, speed=None
) -> Plan:
    """One candidate (no launch material: planner.export.launch makes it for the plans a face shows);
    `calibrate` (planner.evidence.calibrate.Calibrator) swaps in stored or simulated evidence; `speed`, its speed_of
    where the search has it already. Within a request (planner.search.memo) an analytic estimate is made once: a
    copy of the first is returned again."""
    m = memo.active()
    if m is None or not (calibrate is None or (hasattr(calibrate, "analytic") and calibrate.analytic())):
        return new_plan(model, hw, goal, knobs, micro_batch, calibrate, speed)
    key = (m.token(model), m.token(hw), m.token(goal), knobs, micro_batch)
    plan = m.plans.get(key)
    if plan is None:
        plan = m.plans[key] = new_plan(model, hw, goal, knobs, micro_batch, calibrate, speed)
    return plan.model_copy()


def new_plan(
    model: ModelSpec, hw: Hardware, goal: Goal, knobs: Knobs, micro_batch: int, calibrate=None, speed=None
) -> Plan:
    """make_plan's estimate, made every time."""
    s = setup_of(model, hw, goal, knobs, micro_batch)
    mem = rl.breakdown(s, hw.gpu.capacity_bytes)
    evidence, measured_reason = "analytic", None
    if calibrate is not None and not knobs.workload.rl:  # probe records are supervised steps
        mem, evidence, measured_reason = calibrate(s, hw, mem)
    step_s, tokens_per_s, t = speed or speed_of(s, hw)
    plan = _plan_of(  # its parts are validated already; its own rule runs below
        micro_batch=micro_batch,
        grad_accum=s.grad_accum,
        world_size=hw.world_size,
        global_batch=goal.global_batch,
        **knobs.__dict__,  # its field values (dict(knobs) iterates them one by one)
        memory=mem,
        fits=False,
        step_time_s=step_s,
        tokens_per_s=tokens_per_s,
        speed=StepBreakdown.of(t),
        evidence=evidence,
    )
    plan._exact_global_batch()
    usable = int(hw.gpu.capacity_bytes * (1 - goal.margin))
    plan.reason = measured_reason or rejection_reason(plan, hw, usable)
    plan.fits = plan.reason is None
    return plan


_PLAN: list[Plan] = []  # the first plan new_plan made, which the others are copied from


def _plan_of(**fields) -> Plan:
    """Plan.model_construct(**fields) for the fields new_plan gives, at a sixth of its cost (a search makes hundreds):
    a copy of the first plan so made with every one of them replaced; the rest (reason, launch, token_batches) keep
    their defaults, None, and the fields set are the same."""
    if not _PLAN:
        _PLAN.append(Plan.model_construct(**fields))
    return _PLAN[0].model_copy(update=fields)


def budget_plan(
    model: ModelSpec,
    hw: Hardware,
    goal: Goal,
    knobs: Knobs,
    batches: TokenBatches,
    micro_batch: int | None = None,
    calibrate=None,
) -> Plan:
    """A token-budget plan (planner.search.batching): memory at the costliest of its micro-batch shapes, speed at its
    mean micro-step, and the global batch's fixed split (given, or the largest micro-batch of budget // seq_len
    samples or fewer that divides a rank's share), which HF runs and the bundled trainer reads the batch from."""
    per_rank = goal.global_batch // knobs.data_parallel_of(hw.world_size)
    fit_at_full = max(1, batches.max_tokens_per_micro_batch // goal.seq_len)
    split = make_plan(
        model, hw, goal, knobs, micro_batch or max(d for d in divisors(per_rank) if d <= fit_at_full), calibrate
    )
    worst, evidence, measured_reason = None, "analytic", None
    for k, w in batches.shapes:
        s = Setup(
            model,
            knobs,
            k,
            batches.micro_steps_max,
            w,
            hw.gpus_per_node,
            hw.nodes,
            min(goal.image_tokens, w),
            goal.tower_tokens,
            gpu=hw.gpu.name,
        )
        got = (breakdown(s, hw.gpu.capacity_bytes), "analytic", None)
        if calibrate is not None:
            got = calibrate(s, hw, got[0])
        if worst is None or got[0].device_total_bytes > worst.device_total_bytes:
            worst, evidence, measured_reason = got
    # speed: the mean micro-step as samples x width = its padded tokens, at the planned width (attention FLOPs
    # taken at the longest width, an upper bound), run micro_steps_mean times
    width = min(goal.seq_len, max(1, round(batches.padded_tokens_per_micro_step)))
    speed = Setup(
        model,
        knobs,
        max(1, round(batches.padded_tokens_per_micro_step / width)),
        max(1, round(batches.micro_steps_mean)),
        width,
        hw.gpus_per_node,
        hw.nodes,
        gpu=hw.gpu.name,
    )
    t = step_time(speed, hw)
    plan = split.model_copy(
        update={
            "memory": worst,
            "evidence": evidence,
            "token_batches": batches,
            "step_time_s": round(t.total_s, 6),
            "tokens_per_s": round(batches.tokens_per_step / t.total_s, 1),
            "speed": StepBreakdown.of(t),
        }
    )
    plan.reason = measured_reason or rejection_reason(plan, hw, int(hw.gpu.capacity_bytes * (1 - goal.margin)))
    plan.fits = plan.reason is None
    return plan


def generation_split(
    model: ModelSpec, hw: Hardware, goal: Goal, knobs: Knobs, micro_batch: int, calibrate=None
) -> Plan | None:
    """The plan of one micro-batch; GRPO with TRL's default steps_per_generation (the accumulation: one generation
    samples the rank's whole share) that does not fit tries smaller generation batches (steps_per_generation a
    divisor of the accumulation, largest first: fewer, larger generations decode faster). None: no split TRL takes."""
    w, accum = knobs.workload, goal.global_batch // (knobs.data_parallel_of(hw.world_size) * micro_batch)
    layout = Layout.of(hw)
    first = None
    for spg in split_options(knobs, accum):
        k = (
            knobs
            if spg is None
            else knobs.model_copy(update={"workload": w.model_copy(update={"steps_per_generation": spg})})
        )
        if layout.split_error(k, micro_batch, accum):
            continue
        plan = make_plan(model, hw, goal, k, micro_batch, calibrate)
        if plan.fits:
            return plan
        first = first or plan
    return first
