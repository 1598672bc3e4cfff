"""Running a probe and turning its outcome into a ProbeRecord.

`run_isolated` runs one probe in its own Python subprocess (its own process group) with a timeout
and tells the outcomes apart by exit status and a structured result file, never by reading stderr:
- ok: exit 0 and a result;
- oom: the worker caught an out-of-memory error, wrote the memory at failure, exit 3;
- crash: any other exit (an exception: exit 1; a signal: negative status) without a result;
- timeout: still running at the deadline (a hang); the whole process group is killed.
`probe_in_process` runs the sim backend in the caller's process (the planner's --evidence sim).

MEMPLAN_PROBE_FAULT=oom|crash|hang makes the worker fail that way (for tests of this machinery).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from planner.spec import Knobs
from planner.store import ProbeRecord, Shapes, flat_segment, make_record

OOM_EXIT = 3
DEFAULT_TIMEOUT_S = 600


def probe_in_process(model: str, config: dict, knobs: Knobs, shapes: Shapes, backend: str = "sim") -> ProbeRecord:
    """Run a probe here and return its record (exceptions propagate)."""
    from probes.step import Case

    case = Case(config, knobs, shapes.micro_batch, shapes.grad_accum, shapes.seq_len, shapes.image_tokens)
    if backend == "sim":
        from probes.sim import simulate

        r = simulate(case)
        return make_record(model, config, knobs, shapes, "sim", "ok", "fake-cpu",
                       peak_allocated_bytes=r.peak_allocated_bytes, by_category=r.by_category, phase=r.phase,
                       step_time_s=None,
                       detail={"seconds": round(r.seconds, 3), "traced_layers": list(r.traced_layers),
                               "layers": r.layers, "segments": [[list(flat_segment(s)), c] for s, c in r.segments.items()],
                               "layer_modules": r.layer_modules, "other_modules": r.other_modules})
    if backend == "cpu":
        from probes.cpu import measure

        return make_record(model, config, knobs, shapes, "cpu", "ok", "cpu", **measure(case))
    if backend == "cuda":
        from probes.cuda import measure

        # MEMPLAN_PROBE_CAPACITY_BYTES: emulate a smaller card (benchmarks/gpu_suite.py, capacity part)
        out = measure(case, capacity_bytes=int(os.environ.get("MEMPLAN_PROBE_CAPACITY_BYTES") or 0) or None)
        status = out.pop("status")
        device = out.pop("device")
        return make_record(model, config, knobs, shapes, "cuda", status, device, **out)
    raise ValueError(f"backend {backend!r}")


def _worker(job_path: str, result_path: str) -> int:
    job = json.loads(Path(job_path).read_text())
    fault = os.environ.get("MEMPLAN_PROBE_FAULT", "")
    if fault == "crash":
        os.abort()
    if fault == "hang":
        while True:
            time.sleep(1)
    knobs, shapes = Knobs(**job["knobs"]), Shapes(**job["shapes"])
    if fault == "oom":
        rec = make_record(job["model"], job["config"], knobs, shapes, job["backend"], "oom", "injected",
                      detail={"error": "injected out-of-memory"})
        Path(result_path).write_text(rec.model_dump_json())
        return OOM_EXIT
    rec = probe_in_process(job["model"], job["config"], knobs, shapes, job["backend"])
    Path(result_path).write_text(rec.model_dump_json())
    return OOM_EXIT if rec.status == "oom" else 0


def run_isolated(model: str, config: dict, knobs: Knobs, shapes: Shapes, backend: str,
                 timeout_s: float = DEFAULT_TIMEOUT_S, env: dict | None = None, on_start=None) -> ProbeRecord:
    """Run one probe in a subprocess; always returns a record (ok, oom, crash or timeout).
    on_start(popen) lets a caller (the API's job queue) kill the probe's process group to cancel it."""
    with tempfile.TemporaryDirectory(prefix="memplan-probe-") as tmp:
        job, result = Path(tmp) / "job.json", Path(tmp) / "result.json"
        job.write_text(json.dumps({"model": model, "config": config, "knobs": knobs.model_dump(),
                                   "shapes": shapes.model_dump(), "backend": backend}))
        root = str(Path(__file__).resolve().parent.parent)
        penv = {**os.environ, **(env or {})}
        penv["PYTHONPATH"] = root + os.pathsep + penv.get("PYTHONPATH", "")
        t0 = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "probes.run", str(job), str(result)], env=penv,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        if on_start is not None:
            on_start(proc)
        try:
            _, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return make_record(model, config, knobs, shapes, backend, "timeout", "unknown",
                           detail={"timeout_s": timeout_s})
        seconds = round(time.monotonic() - t0, 3)
        if result.is_file() and proc.returncode in (0, OOM_EXIT):
            rec = ProbeRecord.model_validate_json(result.read_text())
            rec.detail["wall_s"] = seconds
            return rec
        tail = err.decode(errors="replace").strip().splitlines()[-5:]
        return make_record(model, config, knobs, shapes, backend, "crash", "unknown",
                       detail={"exit_status": proc.returncode, "stderr_tail": tail, "wall_s": seconds})


if __name__ == "__main__":
    sys.exit(_worker(sys.argv[1], sys.argv[2]))
