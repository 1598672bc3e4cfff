"""Probe jobs, run by the service's executor: POST /v1/probes (202), POST /v1/probes/sweep, GET /v1/probes/{id},
GET /v1/probes, DELETE."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Path, Query, Request, Response

from api.backpressure import Rate, admit
from api.deps import Authorized, SettingsDep, get_queue, resolve_model
from api.errors import api_message
from api.jobs import JobQueue
from api.schemas import Job, JobStatus, ProbeRequest, SweepRequest
from api.strict import StrictRoute
from planner import advise
from planner.errors import BadInput
from probes import ready

router = APIRouter(prefix="/v1/probes", tags=["probes"], route_class=StrictRoute)
Queue = Annotated[JobQueue, Depends(get_queue)]
JobId = Annotated[str, Path(max_length=64, pattern=r"^[0-9a-f]+$")]


@router.post("", status_code=202, response_model=Job, dependencies=[Authorized])
def submit(body: ProbeRequest, queue: Queue, settings: SettingsDep, request: Request, response: Response) -> Job:
    """Queue a probe; an identical queued request returns that job (200 instead of 202). 429 with Retry-After past
    the queue's cap (MEMPLAN_MAX_QUEUED_JOBS) or the client's rate (MEMPLAN_JOBS_PER_MINUTE)."""
    _faults_allowed(body, settings)
    model, knobs, shapes = advise.probe_plan(body, lambda ref: resolve_model(ref, settings))
    _runnable(body, knobs, queue)
    admit(queue, _rate(request, settings), _client(request), 1, settings.max_queued_jobs)
    job, created = queue.submit(body, model.name, model.config, knobs, shapes)
    if not created:
        response.status_code = 200
    return job


@router.post("/sweep", status_code=202, response_model=list[Job], dependencies=[Authorized])
def sweep(body: SweepRequest, queue: Queue, settings: SettingsDep, request: Request) -> list[Job]:
    """Queue several probes as one sweep: every one is checked before any is queued; with the Slurm executor they
    run as one job array. Never coalesced with queued jobs."""
    plans = []
    for i, probe in enumerate(body.probes):
        _faults_allowed(probe, settings, ("body", "probes", i))
        plans.append(advise.probe_plan(probe, lambda ref: resolve_model(ref, settings)))
        _runnable(probe, plans[-1][1], queue, ("body", "probes", i))
    admit(queue, _rate(request, settings), _client(request), len(body.probes), settings.max_queued_jobs)
    return queue.submit_sweep(
        [(probe, model.name, model.config, knobs, shapes) for probe, (model, knobs, shapes) in zip(body.probes, plans)]
    )


def _rate(request: Request, settings) -> Rate:
    """The app's per-client rate (one per app: its settings' rate)."""
    state = request.app.state
    if getattr(state, "job_rate", None) is None:
        state.job_rate = Rate(settings.jobs_per_minute)
    return state.job_rate


def _client(request: Request) -> str:
    return request.client.host if request.client else "unknown"


def _faults_allowed(body: ProbeRequest, settings, loc: tuple = ("body",)) -> None:
    if body.inject_fault and not settings.test_faults:
        raise HTTPException(
            422,
            [
                {
                    "loc": [*loc, "inject_fault"],
                    "type": "value_error",
                    "msg": "inject_fault is accepted only when MEMPLAN_TEST_FAULTS=1",
                }
            ],
        )


def _runnable(body: ProbeRequest, knobs, queue: JobQueue, loc: tuple = ("body",)) -> None:
    """Refuse, before it is queued, a probe job this host's slots cannot run: a module its steps import is missing
    (422 naming the extra to install) or, for a cuda probe, torch sees no GPU. The local executor only: a cluster's
    jobs run on its nodes' own python (MEMPLAN_PROBE_PYTHON)."""
    if queue.kind != "local":
        return
    try:
        ready.check(f"a {body.backend} probe", body.backend, knobs)
    except BadInput as e:
        msg = f"{api_message(str(e))} (on this server)"
        raise HTTPException(422, [{"loc": [*loc, "backend"], "type": "value_error", "msg": msg}]) from None


@router.get("/{job_id}", response_model=Job)
def get(job_id: JobId, queue: Queue) -> Job:
    job = queue.get(job_id)
    if job is None:
        raise HTTPException(404, f"no probe job {job_id!r}")
    return job


@router.get("", response_model=list[Job])
def list_jobs(
    queue: Queue,
    model: Annotated[str | None, Query(max_length=128)] = None,
    device: Annotated[str | None, Query(max_length=64)] = None,
    status: JobStatus | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> list[Job]:
    return queue.list(model, device, status, limit)


@router.delete("/{job_id}", response_model=Job, dependencies=[Authorized])
def cancel(job_id: JobId, queue: Queue) -> Job:
    """Cancel a queued or running job (its probe process group is killed); finished jobs stay."""
    job = queue.cancel(job_id)
    if job is None:
        raise HTTPException(404, f"no probe job {job_id!r}")
    return job
