"""check's step line: the predicted step by kind, and what each micro-step pays again beyond its tokens (the part of
the step that grows with the accumulation at one global batch; planner.config.stepspec)."""

from __future__ import annotations

from planner.config.spec import Plan


def step_line(plan: Plan) -> str | None:
    """`step: compute 8.34 s, communication 1.53 s; 8 micro-steps at 0.518 s each beyond their tokens (fixed 0.347 s,
    collectives 0.170 s)`; None for a plan without a breakdown."""
    b = plan.speed
    if b is None:
        return None
    kinds = [("compute", b.compute_s), ("communication", b.communication_s)]
    kinds += [(k, v) for k, v in (("offload", b.offload_s), ("generation", b.generation_s)) if v]
    m = b.per_micro_step
    parts = [("fixed", m.fixed_s), ("collectives", m.collectives_s)] + (
        [("offload", m.offload_s)] if m.offload_s else []
    )
    each = ", ".join(f"{k} {v:.3f} s" for k, v in parts)
    micro = "micro-step" if b.micro_steps == 1 else "micro-steps"
    return (
        "step: " + ", ".join(f"{k} {v:.2f} s" for k, v in kinds) + f"; {b.micro_steps} {micro} at "
        f"{m.total_s:.3f} s each beyond their tokens ({each})"
    )
