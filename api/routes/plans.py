"""POST /v1/plans (suggest), POST /v1/check and POST /v1/check/config: planner.advise behind the CLI's JSON contract,
each run in a planning worker under the request's deadline and the workers' memory limit (api/sandbox.py)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from api import work
from api.deps import SettingsDep, require_token
from api.schemas import CheckRequest, CheckResponse, ConfigCheckRequest, PlansRequest, PlansResponse
from api.settings import Settings
from api.strict import StrictRoute
from planner import advise
from planner.errors import BadInput

router = APIRouter(prefix="/v1", tags=["plans"], route_class=StrictRoute)


def heavy(body: advise.Target) -> bool:
    """Tracing or probing real models (sim evidence, verify) is work: it takes a heavy slot and the long deadline."""
    return body.evidence == "sim" or bool(body.verify)


async def planned(request: Request, settings: Settings, fn, *args, expensive: bool = False):
    """fn(*args, settings) in a planning worker; an expensive call needs the token as starting a probe does."""
    from api.sandbox import offload

    if expensive:
        require_token(request, settings)
    deadline = settings.heavy_timeout_s if expensive else settings.request_timeout_s
    request.state.deadline_s = deadline  # the deadline middleware's (api/main.py) limit for this request
    pool = request.app.state.pool
    return await offload(pool, request.is_disconnected, fn, (*args, settings), deadline, expensive)


@router.post("/plans", response_model=PlansResponse)
async def plans(body: PlansRequest, request: Request, settings: SettingsDep) -> PlansResponse:
    """Ranked plans that fit the global batch exactly; empty `plans` and the `rejected` when none fits."""
    return await planned(request, settings, work.suggest, body, expensive=heavy(body))


@router.post("/check", response_model=CheckResponse)
async def check(body: CheckRequest, request: Request, settings: SettingsDep) -> CheckResponse:
    """One configuration's breakdown, whether it fits, and fitting alternatives."""
    return await planned(request, settings, work.check, body, expensive=heavy(body))


@router.post("/check/config", response_model=CheckResponse)
async def check_config(body: ConfigCheckRequest, request: Request, settings: SettingsDep) -> CheckResponse:
    """Your own run's configuration read (launch script, framework YAML, DeepSpeed JSON, ...) and checked: the
    answer's `config` says what was read, field by field, and where from. No file outside the server's data
    directories is opened, the files a config names included (to the readers they are not there)."""
    if bool(body.config) == bool(body.files):
        raise BadInput("give config (paths on the server) or files (their names and texts), one of the two", "config")
    overrides = {**body.overrides, "gpu": body.gpu}
    flags = advise.parse(CheckRequest, {"model": "debug-llama", "micro_batch": 1, **overrides})  # the bounds hold
    args = (body.config or [], body.files or {}, overrides)
    return await planned(request, settings, work.check_config, *args, expensive=heavy(flags))
