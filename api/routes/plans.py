"""POST /v1/plans (suggest), POST /v1/check and POST /v1/check/config: planner.advise behind the CLI's JSON contract."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from fastapi import APIRouter, Request

from api.deps import SettingsDep, inside, probe_functions, require_token, resolve_model, scanner
from api.schemas import CheckRequest, CheckResponse, ConfigCheckRequest, PlansRequest, PlansResponse
from api.settings import Settings
from planner import advise
from planner.errors import BadInput

router = APIRouter(prefix="/v1", tags=["plans"])


def _context(body: advise.Target, request: Request, settings: Settings) -> dict:
    """The advise call's keywords: the store, the probes, and model references resolved safely."""
    if body.evidence == "sim" or body.verify:  # tracing or probing real models is work: as starting a probe
        require_token(request, settings)
    return {
        "store": str(settings.store) if settings.store else None,
        "probes": probe_functions(),
        "resolver": lambda ref: resolve_model(ref, settings),
        "scanner": scanner(settings),
    }


@router.post("/plans", response_model=PlansResponse)
def plans(body: PlansRequest, request: Request, settings: SettingsDep) -> PlansResponse:
    """Ranked plans that fit the global batch exactly; empty `plans` and the `rejected` when none fits."""
    return advise.suggest(body, **_context(body, request, settings))


@router.post("/check", response_model=CheckResponse)
def check(body: CheckRequest, request: Request, settings: SettingsDep) -> CheckResponse:
    """One configuration's breakdown, whether it fits, and fitting alternatives."""
    return advise.check(body, **_context(body, request, settings))


@router.post("/check/config", response_model=CheckResponse)
def check_config(body: ConfigCheckRequest, request: Request, settings: SettingsDep) -> CheckResponse:
    """Your own run's configuration read (launch script, framework YAML, DeepSpeed JSON, ...) and checked: the
    answer's `config` says what was read, field by field, and where from. No file outside the server's data
    directories is opened, the files a config names included (to the readers they are not there)."""
    if bool(body.config) == bool(body.files):
        raise BadInput("give config (paths on the server) or files (their names and texts), one of the two", "config")
    overrides = {**body.overrides, "gpu": body.gpu}
    flags = advise.parse(CheckRequest, {"model": "debug-llama", "micro_batch": 1, **overrides})  # the bounds hold
    context = _context(flags, request, settings)
    if body.config:
        paths = [str(inside(p, settings.data_dirs, "config", "data")) for p in body.config]
        return advise.check_config(paths, overrides, allowed=settings.data_dirs, **context)
    with tempfile.TemporaryDirectory(prefix="memplan-config-") as folder:  # the upload alone: nothing beside it
        for name, text in body.files.items():
            (Path(folder) / name).write_text(text)
        paths = [str(Path(folder) / name) for name in body.files]
        result = advise.check_config(paths, overrides, allowed=[Path(folder)], **context)
    config = json.loads(json.dumps(result.config).replace(folder + "/", ""))  # the files by their names
    return result.model_copy(update={"config": config})
