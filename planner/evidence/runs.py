"""Real training runs' memory, step by step (issue 36 item 4): what a run measured at each optimizer step, beside the
plan it ran, in the probe store's SQLite file (table `runs`, made by planner.evidence.store's schema).

A step row holds the run's id, the step, the measurements the recorder could take (the device allocator's peak since
the previous step, allocated and reserved; NVML's used memory; on a CPU the live tensor bytes of the step as the
CUDA allocator would round them, and the process's peak RSS), and the plan as a `planner check` request (model,
GPUs, batch split, sequence, knobs): `planner runs` predicts from it again, so that a record keeps its value when the
memory model changes. Written by probes.callback.MemplanCallback (HF Trainer, TRL and the frameworks on them) and
the bundled trainer.
"""

from __future__ import annotations

import json
import resource
import time

from pydantic import BaseModel, ConfigDict, Field

Source = str  # "hf-callback" | "bundled"


class RunStep(BaseModel):
    model_config = ConfigDict(defer_build=True)  # built at first use: a command builds only its own models

    run: str = Field(min_length=1, max_length=200)
    step: int = Field(ge=0)
    rank: int = Field(default=0, ge=0)
    model: str = ""
    plan: dict = Field(default_factory=dict)  # a CheckRequest body: what the run ran
    allocated_bytes: int | None = None  # the allocator's peak since the previous step (CUDA), or live tensors (CPU)
    reserved_bytes: int | None = None
    nvml_bytes: int | None = None
    host_rss_bytes: int | None = None
    device: str = ""
    source: Source = "hf-callback"
    created: float = Field(default_factory=time.time)
    id: int | None = None


def peak_rss_bytes() -> int:
    """This process's peak resident set (Linux reports KiB), the host figure every recorder takes."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def add(store, rows: list[RunStep]) -> list[int]:
    """Insert the rows in one transaction; their ids."""
    ids = []
    with store.db:
        for r in rows:
            cur = store.db.execute(
                "INSERT INTO runs (run, step, rank, model, created, record) VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
                (r.run, r.step, r.rank, r.model, r.created, r.model_dump_json(exclude={"id"})),
            )
            ids.append(int(cur.fetchall()[0][0]))
    return ids


def _has_table(store) -> bool:
    """A store of an earlier version opened read-only has no `runs` table (planner.evidence.store)."""
    from planner.evidence.db import has_table

    return has_table(store.db, "runs")


def steps(store, run: str | None = None, limit: int = 1000) -> list[RunStep]:
    """A run's steps in order (every run's, newest run first, where none is named)."""
    if not _has_table(store):
        return []
    if run is not None:
        sql, args = "SELECT id, record FROM runs WHERE run = ? ORDER BY step, rank LIMIT ?", (run, limit)
    else:
        sql, args = "SELECT id, record FROM runs ORDER BY created DESC, step LIMIT ?", (limit,)
    return [RunStep(**{**json.loads(rec), "id": i}) for i, rec in store.db.execute(sql, args)]


def summaries(store, limit: int = 50) -> list[dict]:
    """One line a run: its steps, its largest measurements, the plan it ran (newest first)."""
    if not _has_table(store):
        return []
    rows = store.db.execute(
        "SELECT run, COUNT(*), MAX(created) FROM runs GROUP BY run ORDER BY MAX(created) DESC LIMIT ?", (limit,)
    ).fetchall()
    out = []
    for run, n, last in rows:
        got = steps(store, run, limit=100_000)
        peak = {
            k: max((getattr(s, k) or 0 for s in got), default=0) or None
            for k in ("allocated_bytes", "reserved_bytes", "nvml_bytes", "host_rss_bytes")
        }
        last_step = got[-1]
        out.append(
            {"run": run, "steps": n, "last": last, "model": last_step.model, "device": last_step.device}
            | {"plan": last_step.plan, **peak}
        )
    return out


def as_probe_record(got: list[RunStep], spec, knobs, shapes):
    """A CUDA run's measurement as a cuda probe record of its plan (`spec`, `knobs`, `shapes`: the plan as `planner
    check` makes it, so that its key is the one calibration looks up), which calibration then uses as it uses a
    probe's (its measured peak, NVML's overhead on the same GPU kind): rank 0's steps from the second on (the
    optimizer's states exist from then), their largest allocated, reserved and NVML figures. None for a run with no
    such step (a CPU run)."""
    from planner.evidence.store import make_record

    steady = [s for s in got if s.rank == 0 and s.step >= 2 and s.allocated_bytes and s.device not in ("", "cpu")]
    if not steady:
        return None
    best = max(steady, key=lambda s: s.allocated_bytes)
    return make_record(
        spec.name,
        spec.config,
        knobs,
        shapes,
        "cuda",
        "ok",
        best.device,
        peak_allocated_bytes=best.allocated_bytes,
        peak_reserved_bytes=max((s.reserved_bytes or 0 for s in steady), default=0) or None,
        device_used_bytes=max((s.nvml_bytes or 0 for s in steady), default=0) or None,
        detail={"run": best.run, "source": best.source},
    )
