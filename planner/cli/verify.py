"""Evidence work shared by `suggest` and `check`: exact simulation of a chosen plan, and --verify."""
from __future__ import annotations

from planner.cli import common
from planner.evidence import real_shapes, sim_knobs, sim_shapes
from planner.memory import Setup
from planner.search import make_plan
from planner.spec import Plan


def setup_of(plan: Plan, model, hw, goal) -> Setup:
    return Setup(model, plan.knobs, plan.micro_batch, plan.grad_accum, goal.seq_len, hw.gpus_per_node,
                 hw.nodes, goal.image_tokens)


def refine(plan: Plan, model, hw, goal, cal) -> Plan:
    """A plan read off a simulated micro-batch line, traced exactly."""
    if cal is None or "sim_line_micro_batches" not in plan.memory.detail:
        return plan
    with common.status(f"simulating micro-batch {plan.micro_batch} exactly"):
        cal.simulate(setup_of(plan, model, hw, goal))
    return make_plan(model, hw, goal, plan.knobs, plan.micro_batch, cal)


def local_gpu() -> bool:
    """Whether this host has an NVIDIA GPU to run a cuda probe on (in the catalog or not)."""
    from planner.hardware import local_gpu_count

    return local_gpu_count() > 0


def verify(plan: Plan, model, hw, goal, cal, timeout_s: float = 600) -> tuple[Plan, dict]:
    """Run one probe of the plan (cuda when this host has a GPU, else sim), store it, re-plan."""
    from probes.run import run_isolated

    s = setup_of(plan, model, hw, goal)
    backend = "cuda" if local_gpu() and plan.zero_stage == 0 else "sim"
    knobs, shapes = (plan.knobs, real_shapes(s)) if backend == "cuda" else (sim_knobs(plan.knobs), sim_shapes(s))
    with common.status(f"verifying with a {backend} probe"):
        rec = run_isolated(model.name, model.config, knobs, shapes, backend, timeout_s)
    cal.store.add(rec)
    summary = {"backend": backend, "status": rec.status, "probe_id": rec.id,
               "peak_allocated_bytes": rec.peak_allocated_bytes, "device": rec.device}
    return make_plan(model, hw, goal, plan.knobs, plan.micro_batch, cal), summary
