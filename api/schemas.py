"""Request bodies: the CLI's flags in snake_case, lists as JSON arrays, every size bounded, as the core's
request models (planner.advise) define them. Responses are the CLI's JSON objects (planner.config.spec.Plan inside)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, StringConstraints

from planner import advise

MODEL_DOC = advise.MODEL_DOC

# The request and response bodies are the core's own models (planner/advise.py): one validator for every face.
PlansRequest = advise.SuggestRequest
CheckRequest = advise.CheckRequest
PlansResponse = advise.SuggestResult
CheckResponse = advise.CheckResult


UPLOAD_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$"  # a bare file name: no folder, nothing hidden
MAX_UPLOAD_CHARS = 1 << 16  # each uploaded file (the body's own limit holds them all: api/limits.py)


class ConfigCheckRequest(BaseModel):
    """POST /v1/check/config: your own run's configuration files (paths inside the server's data directories, or the
    files themselves), the GPU, and any check field that overrides what the files say (the CLI's `check --config
    FILE... --gpu G [flags]`)."""

    model_config = {"extra": "forbid"}
    config: list[str] = Field(default_factory=list, max_length=8, description="paths of the configuration files")
    files: dict[
        Annotated[str, StringConstraints(pattern=UPLOAD_NAME)],
        Annotated[str, StringConstraints(max_length=MAX_UPLOAD_CHARS)],
    ] = Field(
        default_factory=dict,
        max_length=8,
        description=(
            "or the files themselves, {file name: text}, read as if side by side in a folder of their own (a file "
            "they name that is not among them is not there); the first leads, as the first path does"
        ),
    )
    gpu: str = Field(min_length=1, max_length=64, description="catalog GPU (GET /v1/gpus)")
    overrides: dict = Field(default_factory=dict, description="check request fields that replace the files' values")


class ProbeRequest(advise.ProbeRequest):
    inject_fault: Literal["oom", "crash", "hang", "slow"] | None = Field(default=None, description="tests only")


JobStatus = Literal["queued", "running", "done", "cancelled", "interrupted", "failed"]


class Job(BaseModel):
    id: str
    status: JobStatus
    outcome: Literal["ok", "oom", "crash", "timeout"] | None = None
    model: str
    backend: str
    device: str | None = None
    request: dict
    record: dict | None = None
    created: float
    started: float | None = None
    finished: float | None = None
    executor: Literal["local", "slurm", "ray"] = "local"
    sweep: str | None = None
    scheduler_id: str | None = Field(default=None, description="the job's id in Slurm (`123`, `123_4`) or Ray")
    scheduler_state: str | None = Field(default=None, description="the scheduler's last word on it: PENDING, NODE_FAIL")
    scheduler_reason: str | None = None


class SweepRequest(BaseModel):
    """POST /v1/probes/sweep: several probes as one submission (one Slurm job array)."""

    model_config = {"extra": "forbid"}
    probes: list[ProbeRequest] = Field(min_length=1, max_length=64)
