"""Running a probe and turning its outcome into a ProbeRecord.

`run_isolated` runs one probe in its own Python subprocess (its own process group) with a timeout
and tells the outcomes apart by exit status and a structured result file, never by reading stderr:
- ok: exit 0 and a result;
- oom: the worker caught an out-of-memory error, wrote the memory at failure, exit 3;
- crash: any other exit (an exception: exit 1; a signal: negative status) without a result;
- timeout: still running at the deadline (a hang); the whole process group is killed.
`probe_in_process` runs the sim backend in the caller's process (the planner's --evidence sim).

The worker holds its own deadline (a watchdog thread kills its process group there), so the timeout holds
when no parent is left to enforce it. A worker whose caller cannot adopt it (`adoptable=False`, the CLI's
probes) also dies, and removes its folder, when its parent does; the API's job queue adopts its probes
after a restart (api/jobs.py), so they run on to their deadline and leave their result in their folder.

MEMPLAN_PROBE_FAULT=oom|crash|hang|slow makes the worker fail that way, or finish after 4 s (tests only).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from planner.config.spec import Knobs
from planner.evidence.store import ProbeRecord, Shapes, flat_segment, make_record
from planner.export.commands import alloc_env

OOM_EXIT = 3
DEFAULT_TIMEOUT_S = 600


def probe_in_process(model: str, config: dict, knobs: Knobs, shapes: Shapes, backend: str = "sim") -> ProbeRecord:
    """Run a probe here and return its record (exceptions propagate)."""
    from probes.step import Case

    case = Case(config, knobs, shapes.micro_batch, shapes.grad_accum, shapes.seq_len, shapes.image_tokens)
    if knobs.workload.rl:
        return _rl_record(model, config, knobs, shapes, backend, case)
    if backend == "sim":
        from probes.sim import simulate

        r = simulate(case)
        shapes = _as_ran(shapes, r.image_tokens)
        return make_record(
            model,
            config,
            knobs,
            shapes,
            "sim",
            "ok",
            "fake-cpu",
            peak_allocated_bytes=r.peak_allocated_bytes,
            by_category=r.by_category,
            phase=r.phase,
            step_time_s=None,
            detail={
                "seconds": round(r.seconds, 3),
                "traced_layers": list(r.traced_layers),
                "layers": r.layers,
                "segments": [[list(flat_segment(s)), c] for s, c in r.segments.items()],
                "layer_modules": r.layer_modules,
                "other_modules": r.other_modules,
            },
        )
    if backend == "cpu":
        from probes.cpu import measure

        out = measure(case)
        return make_record(model, config, knobs, _as_ran(shapes, out.pop("image_tokens")), "cpu", "ok", "cpu", **out)
    if backend == "cuda":
        from probes.cuda import measure

        # MEMPLAN_PROBE_CAPACITY_BYTES: emulate a smaller card (benchmarks/gpu_suite.py, capacity part)
        out = measure(case, capacity_bytes=int(os.environ.get("MEMPLAN_PROBE_CAPACITY_BYTES") or 0) or None)
        status = out.pop("status")
        device = out.pop("device")
        shapes = _as_ran(shapes, out.pop("image_tokens"))
        return make_record(model, config, knobs, shapes, "cuda", status, device, **out)
    raise ValueError(f"backend {backend!r}")


def _as_ran(shapes: Shapes, image_tokens: int) -> Shapes:
    """The shapes a probe ran: whole images of a fixed-size family can hold fewer tokens than planned
    (probes.images), and the record says what ran, so that it is evidence for that case only."""
    return shapes.model_copy(update={"image_tokens": image_tokens}) if shapes.image_tokens else shapes


def _rl_record(model: str, config: dict, knobs: Knobs, shapes: Shapes, backend: str, case) -> ProbeRecord:
    """A DPO / GRPO probe: the peak of each phase (probes/rl_sim.py on fake tensors, probes/rl.py real TRL steps)."""
    if backend == "sim":
        from probes.rl_sim import simulate

        phases = simulate(case)
    else:
        from planner.export.export import trl_args
        from probes.rl import measure, model_for

        w = knobs.workload
        phases = measure(
            w.kind,
            model_for(config, knobs),
            trl_args(w),
            shapes.micro_batch,
            shapes.grad_accum,
            w.prompt_tokens(),
            w.seq_len() - w.prompt_tokens(),
            precision=knobs.precision,
            checkpointing=knobs.checkpointing == "full",
        )
    phase = max(phases, key=phases.get)
    return make_record(
        model,
        config,
        knobs,
        shapes,
        backend,
        "ok",
        "cpu",
        peak_allocated_bytes=phases[phase],
        phase=phase,
        detail={"phases": phases},
    )


def _watchdog(deadline: float, parent: int, folder: Path | None) -> None:
    """Kill this probe's process group at its deadline (wall clock), or, when `folder` is given (the caller
    cannot adopt the probe), as soon as the parent is gone, removing the folder first."""
    while time.time() < deadline:
        if folder is not None and os.getppid() != parent:
            shutil.rmtree(folder, ignore_errors=True)
            break
        time.sleep(0.2)
    os.killpg(os.getpgrp(), signal.SIGKILL)


def _write_result(path: str, rec: ProbeRecord) -> None:
    """Whole or not at all (an adopter may read it after a kill at any moment)."""
    tmp = Path(path).with_suffix(".tmp")
    tmp.write_text(rec.model_dump_json())
    tmp.replace(path)


def _worker(job_path: str, result_path: str) -> int:
    job = json.loads(Path(job_path).read_text())
    if job.get("deadline"):
        folder = None if job.get("adoptable") else Path(job_path).parent
        threading.Thread(target=_watchdog, args=(job["deadline"], job["parent"], folder), daemon=True).start()
    fault = os.environ.get("MEMPLAN_PROBE_FAULT", "")
    if fault == "crash":
        os.abort()
    if fault == "hang":
        while True:
            time.sleep(1)
    if fault == "slow":
        time.sleep(4)
    knobs, shapes = Knobs(**job["knobs"]), Shapes(**job["shapes"])
    if fault == "oom":
        rec = make_record(
            job["model"],
            job["config"],
            knobs,
            shapes,
            job["backend"],
            "oom",
            "injected",
            detail={"error": "injected out-of-memory"},
        )
        _write_result(result_path, rec)
        return OOM_EXIT
    rec = probe_in_process(job["model"], job["config"], knobs, shapes, job["backend"])
    _write_result(result_path, rec)
    return OOM_EXIT if rec.status == "oom" else 0


def write_job(folder: Path, spec: dict, deadline: float | None, adoptable: bool) -> Path:
    """The probe's job file (what `python -m probes.run job.json result.json` runs), from a job spec (model, config,
    knobs, shapes, request.backend). deadline None: no watchdog (a cluster's scheduler holds the time limit)."""
    folder.mkdir(parents=True, exist_ok=True)
    job = folder / "job.json"
    body = {k: spec[k] for k in ("model", "config", "knobs", "shapes")}
    body |= {"backend": spec["request"]["backend"], "deadline": deadline, "parent": os.getpid(), "adoptable": adoptable}
    job.write_text(json.dumps(body))
    return job


def run_isolated(
    model: str,
    config: dict,
    knobs: Knobs,
    shapes: Shapes,
    backend: str,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    env: dict | None = None,
    on_start=None,
    folder: Path | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> ProbeRecord:
    """Run one probe in a subprocess; always returns a record (ok, oom, crash or timeout).
    on_start(popen, deadline) tells a caller (the API's job queue) the probe's process group and deadline.
    folder: the probe's files go there and stay (the caller adopts and removes them; the probe is then
    adoptable: it outlives this process); else a temporary folder removed on every path.
    cancelled(): polled while the probe runs; True kills its process group (the record says 'cancelled')."""
    if folder is None:
        with tempfile.TemporaryDirectory(prefix="memplan-probe-") as tmp:
            return _run_in(Path(tmp), False, model, config, knobs, shapes, backend, timeout_s, env, on_start, cancelled)
    folder.mkdir(parents=True, exist_ok=True)
    return _run_in(folder, True, model, config, knobs, shapes, backend, timeout_s, env, on_start, cancelled)


def _run_in(
    folder: Path, adoptable: bool, model, config, knobs, shapes, backend, timeout_s, env, on_start, cancelled
) -> ProbeRecord:
    job, result, err_path = folder / "job.json", folder / "result.json", folder / "stderr.txt"
    deadline = time.time() + timeout_s
    spec = {"model": model, "config": config, "knobs": knobs.model_dump(), "shapes": shapes.model_dump()}
    write_job(folder, {**spec, "request": {"backend": backend}}, deadline, adoptable)
    root = str(Path(__file__).resolve().parent.parent)
    penv = {**os.environ, **(env or {})}
    penv.update(alloc_env(knobs))  # the plan's allocator: read when CUDA starts in the child
    penv["PYTHONPATH"] = root + os.pathsep + penv.get("PYTHONPATH", "")
    t0 = time.monotonic()
    with open(err_path, "wb") as err:  # a file, not a pipe: a chatty probe cannot block on a full pipe
        proc = subprocess.Popen(
            [sys.executable, "-m", "probes.run", str(job), str(result)],
            env=penv,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
        )
    if on_start is not None:
        on_start(proc, deadline)
    stopped = None
    while proc.poll() is None and stopped is None:
        try:
            proc.wait(timeout=0.25)
        except subprocess.TimeoutExpired:
            if time.time() >= deadline:
                stopped = "timeout"
            elif cancelled is not None and cancelled():
                stopped = "cancelled"
    if stopped is None and proc.returncode == -signal.SIGKILL and time.time() >= deadline:
        stopped = "timeout"  # its own watchdog killed it at the deadline, between two of this loop's looks
    if stopped is not None:
        kill_group(proc.pid)
        proc.wait()
    return outcome(
        folder,
        model,
        config,
        knobs,
        shapes,
        backend,
        proc.returncode,
        stopped,
        round(time.monotonic() - t0, 3),
        timeout_s,
    )


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def outcome(
    folder: Path,
    model,
    config,
    knobs,
    shapes,
    backend,
    returncode: int | None,
    stopped: str | None,
    seconds: float | None,
    timeout_s: float,
) -> ProbeRecord:
    """The record of a probe that ended: its result file, else timeout, cancelled or crash. returncode None:
    the probe was adopted (not our child), so its exit status is unknown and a missing result is a crash
    unless its deadline passed."""
    result = folder / "result.json"
    if stopped is None and result.is_file() and returncode in (0, OOM_EXIT, None):
        rec = ProbeRecord.model_validate_json(result.read_text())
        if seconds is not None:
            rec.detail["wall_s"] = seconds
        return rec
    if stopped in ("timeout", "cancelled"):
        return make_record(model, config, knobs, shapes, backend, stopped, "unknown", detail={"timeout_s": timeout_s})
    err = folder / "stderr.txt"
    tail = err.read_text(errors="replace").strip().splitlines()[-5:] if err.is_file() else []
    return make_record(
        model,
        config,
        knobs,
        shapes,
        backend,
        "crash",
        "unknown",
        detail={"exit_status": returncode, "stderr_tail": tail, "wall_s": seconds},
    )


if __name__ == "__main__":
    sys.exit(_worker(sys.argv[1], sys.argv[2]))
