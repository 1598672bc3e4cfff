"""The evidence behind a plan and its verification (planner.advise's suggest and check, --evidence and --verify):
the calibrator over the probe store, a simulated micro-batch line traced exactly (refine), and one probe of the
plan run, stored and planned again (verify). Torch-free: probes run only through the functions a face hands in
(Probes, from probes/ where the face has it)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from planner.config.requests import (
    Target,
)
from planner.config.spec import (
    Goal,
    Hardware,
    Plan,
)
from planner.errors import BadInput
from planner.estimate.overheads import allocator_limit_bytes, replayable
from planner.estimate.setup import Setup
from planner.evidence.store import ProbeRecord
from planner.model import hardware
from planner.model.modelspec import ModelSpec
from planner.search.estimates import make_plan


@dataclass(frozen=True)
class Probes:
    """How the core runs probes without importing them: `simulate(model, config, knobs, shapes)` runs the
    sim here; `isolated(model, config, knobs, shapes, backend, timeout_s)` runs one in a subprocess;
    `local_gpus()` counts this host's NVIDIA GPUs; `reserved(model, config, knobs, shapes, limit_bytes)` replays a
    sim step's allocations through the CUDA caching allocator (probes.reserved.replay_detail)."""

    simulate: Callable[..., ProbeRecord]
    isolated: Callable[..., ProbeRecord]
    local_gpus: Callable[[], int] = hardware.local_gpu_count
    reserved: Callable[..., dict] | None = None


Status = Callable[[str], AbstractContextManager]


def calibrator(req: Target, model: ModelSpec, store: str | None, probes: Probes | None):
    """The evidence behind plans: None (analytic), or a Calibrator over the store. --verify with auto
    simulates what no record covers."""
    from planner.evidence.calibrate import Calibrator

    mode = "sim" if req.verify and req.evidence == "auto" else req.evidence
    if req.workload.rl and (mode == "sim" or req.verify):
        raise BadInput(
            f"--workload {req.workload.kind} plans are analytic: probe a phase with `planner probe "
            f"--workload {req.workload.kind}`",
            "evidence",
        )
    if (mode == "sim" or req.verify) and probes is None:
        raise BadInput(
            f"--evidence {mode}{' --verify' if req.verify else ''} runs probes, which this face cannot "
            "run: pip install 'memplan[sim]'",
            "evidence",
        )
    if mode == "sim" or req.verify:  # a probe's record must be storable: refuse before it runs, not after
        from planner.evidence.store import Store

        Store(store).check_writable()
    return Calibrator.open(mode, store, model.name, model.config, simulate=probes.simulate if probes else None)


def setup_of(plan: Plan, model: ModelSpec, hw: Hardware, goal: Goal) -> Setup:
    return Setup.of(model, plan.knobs, plan.micro_batch, plan.grad_accum, hw, goal)


def refine(plan: Plan, model, hw, goal, cal, status: Status) -> Plan:
    """A plan read off a simulated micro-batch line, traced exactly."""
    if cal is None or "sim_line_micro_batches" not in plan.memory.detail:
        return plan
    with status(f"simulating micro-batch {plan.micro_batch} exactly"):
        cal.simulate(setup_of(plan, model, hw, goal))
    return make_plan(model, hw, goal, plan.knobs, plan.micro_batch, cal)


def verify(
    plan: Plan, model, hw, goal, cal, probes: Probes, status: Status, store: str | None = None, timeout_s: float = 600
) -> tuple[Plan, dict]:
    """Run one probe of the plan (cuda when this host has a GPU and the plan is zero 0, else sim),
    store it, re-plan with it. With analytic evidence (no calibrator) the re-plan reads the store's
    records (auto), so the answer rests on the probe just run."""
    from planner.evidence.calibrate import Calibrator, real_shapes, sim_shapes
    from planner.evidence.store import Store

    if cal is None:
        cal = Calibrator("auto", Store(store), model.name, model.config, probes.simulate)

    s = setup_of(plan, model, hw, goal)
    backend = "cuda" if plan.zero_stage == 0 and probes.local_gpus() > 0 else "sim"
    shapes = real_shapes(s) if backend == "cuda" else sim_shapes(s)
    knobs = plan.knobs.for_probe(backend)
    with status(f"verifying with a {backend} probe"):
        rec = probes.isolated(model.name, model.config, knobs, shapes, backend, timeout_s)
    if backend == "sim" and rec.status == "ok" and probes.reserved is not None and replayable(plan.knobs):
        with status("replaying the step's allocations through the CUDA caching allocator"):
            replay = probes.reserved(
                model.name, model.config, knobs, shapes, allocator_limit_bytes(s, hw.gpu.capacity_bytes)
            )
        rec = rec.model_copy(
            update={"peak_reserved_bytes": replay["reserved"], "detail": rec.detail | {"replay": replay}}
        )
    cal.store.add(rec)
    summary = {
        "backend": backend,
        "status": rec.status,
        "probe_id": rec.id,
        "peak_allocated_bytes": rec.peak_allocated_bytes,
        "device": rec.device,
    }
    if "replay" in rec.detail:
        summary["replay"] = rec.detail["replay"]
    return make_plan(model, hw, goal, plan.knobs, plan.micro_batch, cal), summary
