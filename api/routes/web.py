"""The web page and what it asks beside the plans: GET / (api/web/index.html with its form inlined, api/webform.py),
POST /v1/plans/lines (what the CLI prints beside its table: the workload, the images, the videos), POST
/v1/plans/files (a ranked plan's command and every file it names, for every framework, as planner.export.launch
makes them for `suggest --emit`) and POST /v1/plans/zip (those files and the command as one zip)."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from pydantic import BaseModel, Field

from api.deps import SettingsDep
from api.routes.plans import _context
from api.schemas import PlansRequest
from api.settings import Settings
from planner import advise
from planner.config.knobfields import KnobFields
from planner.errors import BadInput
from planner.export import launch
from planner.search import imagefit, videofit

WEB = Path(__file__).resolve().parents[1] / "web"
FORM_SLOT = '<script type="application/json" id="form-catalog">{}</script>'
COMMAND_NAME = "command.sh"  # the command, where no file of the plan holds it already
router = APIRouter(tags=["web"])


class PlanFilesRequest(BaseModel):
    """A suggest request and the rank of one of its plans (1: the best)."""

    model_config = {"extra": "forbid"}
    request: PlansRequest
    rank: int = Field(default=1, ge=1, le=100, description="the plan's rank in the request's answer (1: the best)")


class PlanFiles(BaseModel):
    rank: int
    framework: str
    command: str = Field(description="the launch command, run beside the files")
    note: str | None = None
    files: dict[str, str] = Field(description="{file name: text}: what `suggest --emit` writes for this plan")


@router.get("/", include_in_schema=False)
def page() -> HTMLResponse:
    """The web page with its form inlined (api/webform.py): nothing to wait for before the form is whole."""
    from api.webform import catalog

    text = (WEB / "index.html").read_text()
    inline = json.dumps(catalog()).replace("<", "\\u003c")  # nothing in it can close the script element
    return HTMLResponse(text.replace(FORM_SLOT, FORM_SLOT.replace("{}", inline)))


@router.post("/v1/plans/lines")
def lines(body: PlansRequest, request: Request, settings: SettingsDep) -> dict:
    """The lines `planner suggest` prints beside its table for this request: the workload it trains, the images
    (planned from the processor's settings) and the videos. Resolves the request; plans nothing."""
    ctx = _context(body, request, settings)
    model, _, _, _, budget = advise.resolve(body, body.global_batch, ctx["resolver"], ctx["scanner"])
    role_run = KnobFields(workload=body.workload, framework=body.framework).role_run  # verl's GRPO: by roles
    videos = videofit.budget(body, model)
    return {
        "workload": body.workload.summary(role_run),
        "images": imagefit.lines(budget.json()) if budget else [],
        "videos": videofit.lines(videos.json()) if videos else [],
    }


def ranked(body: PlanFilesRequest, request: Request, settings: Settings):
    """(plan, files) of the request's plan of that rank: the request planned again (no probe: `verify` is the
    answer's own), the plan's files as `suggest --emit` writes them."""
    req = body.request.model_copy(update={"verify": False})
    result = advise.suggest(req, with_nearest=False, **_context(req, request, settings))
    if body.rank > len(result.plans):
        raise BadInput(f"rank {body.rank}: the request gives {len(result.plans)} plans that fit", "rank")
    plan = result.plans[body.rank - 1]
    model, hw, goal = result.context
    return plan, launch.files(plan, hw, model, goal.seq_len)


@router.post("/v1/plans/files", response_model=PlanFiles)
def files(body: PlanFilesRequest, request: Request, settings: SettingsDep) -> PlanFiles:
    """A ranked plan's launch command and every file it names or needs (its framework's configs, the DeepSpeed
    JSON, the FSDP or accelerate config, the HF arguments, a Slurm script), as `suggest --emit` writes them."""
    plan, made = ranked(body, request, settings)
    return PlanFiles(
        rank=body.rank, framework=plan.framework, command=plan.launch.command, note=plan.launch.note, files=made
    )


def bundle(command: str, made: dict[str, str]) -> dict[str, str]:
    """The files, and the command as command.sh unless a file holds it (launch.sh, or `bash <file>`)."""
    held = launch.LAUNCH_NAME in made or command.removeprefix("bash ") in made
    return made if held else {**made, COMMAND_NAME: f"#!/bin/bash\n{command}\n"}


@router.post("/v1/plans/zip", response_class=Response)
def zipped(body: PlanFilesRequest, request: Request, settings: SettingsDep) -> Response:
    """The ranked plan's files and its command (command.sh where no file holds it) as one zip."""
    plan, made = ranked(body, request, settings)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in bundle(plan.launch.command, made).items():
            z.writestr(name, text)
    name = f"memplan-plan-{body.rank}-{plan.framework}.zip"
    return Response(
        out.getvalue(), media_type="application/zip", headers={"Content-Disposition": f'attachment; filename="{name}"'}
    )
