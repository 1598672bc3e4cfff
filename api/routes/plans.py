"""POST /v1/plans (suggest) and POST /v1/check: the CLI's gatherers behind the CLI's JSON contract."""
from __future__ import annotations

from argparse import Namespace

from fastapi import APIRouter, Request

from api.deps import SettingsDep, require_token, resolve_model
from api.schemas import CheckRequest, CheckResponse, PlansRequest, PlansResponse, Target
from api.settings import Settings


def _args(body: Target, request: Request, settings: Settings, **extra) -> Namespace:
    if body.evidence == "sim":      # tracing real models is work: same rule as starting a probe
        require_token(request, settings)
    fields = body.model_dump(exclude={"model"})
    return Namespace(**fields, model=resolve_model(body.model, settings), images=None, tokens_per_image=None,
                     verify=False, store=str(settings.store) if settings.store else None, json=True, **extra)


router = APIRouter(prefix="/v1", tags=["plans"])


@router.post("/plans", response_model=PlansResponse)
def plans(body: PlansRequest, request: Request, settings: SettingsDep) -> dict:
    """Ranked plans that fit the global batch exactly; empty `plans` and the `rejected` when none fits."""
    from planner.cli import suggest

    out, _, _ = suggest.gather(_args(body, request, settings, emit=None))
    return out


@router.post("/check", response_model=CheckResponse)
def check(body: CheckRequest, request: Request, settings: SettingsDep) -> dict:
    """One configuration's breakdown, whether it fits, and fitting alternatives."""
    from planner.cli import check as check_cmd

    out, *_ = check_cmd.gather(_args(body, request, settings))
    return out
