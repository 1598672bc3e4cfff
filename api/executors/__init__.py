"""Where probe jobs run (issue 36): `local` (api/workers.py: this host's device slots, one probe at a time each) or a
cluster's own scheduler, `slurm` (sbatch, job arrays, scancel) or `ray` (the Ray Jobs API), driven by api/remote.py.

A scheduler client answers four questions, all of which survive the API's death (the scheduler keeps the job; the
job's row keeps its scheduler id; a job submitted by a process that died before writing the id is found by its name):
submit(jobs) -> ids, states(ids) -> State, find(job id) -> id or None, cancel(ids).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Submission:
    """One probe job as a scheduler runs it: `python -m probes.run job.json result.json` in its folder."""

    jid: str
    folder: Path
    timeout_s: int
    env: dict = field(default_factory=dict)


@dataclass
class State:
    """A scheduler's word for a job. terminal: the job holds nothing any more. returncode: the probe's exit status
    where the scheduler knows it (None: it never ran, or the node died). timeout: stopped at its time limit. lost: it
    ended without the probe's own end (node failure, preemption, cancelled by someone else): the job failed."""

    state: str
    reason: str = ""
    terminal: bool = False
    returncode: int | None = None
    timeout: bool = False
    lost: bool = False


def make(settings):
    """The settings' scheduler client (None for the local executor)."""
    if settings.executor == "slurm":
        from api.executors.slurm import Slurm

        return Slurm(settings)
    if settings.executor == "ray":
        from api.executors.ray import Ray

        return Ray(settings)
    return None


def probe_command(settings, sub: Submission) -> list[str]:
    import sys

    python = settings.probe_python or sys.executable
    return [python, "-m", "probes.run", str(sub.folder / "job.json"), str(sub.folder / "result.json")]


def code_root() -> str:
    """This memplan's checkout (PYTHONPATH for a probe on a node that shares it)."""
    return str(Path(__file__).resolve().parents[2])


def unavailable(settings) -> str | None:
    """Why the settings' executor cannot run jobs from this host (None when it can): no Slurm client programs, or no
    Ray Jobs API at the address."""
    if settings.executor == "slurm":
        from api.executors.slurm import Slurm

        return Slurm.available()
    if settings.executor == "ray":
        from api.executors.ray import Ray, RayError

        try:
            code, _ = Ray(settings)._call("GET", "/api/version")
        except RayError as e:
            return f"{e} (start one with `ray start --head`, or set MEMPLAN_RAY_ADDRESS)"
        return (
            None if code == 200 else f"{settings.ray_address} answered HTTP {code} to /api/version: not a Ray dashboard"
        )
    return None
