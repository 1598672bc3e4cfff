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

from api import work
from api.deps import SettingsDep
from api.routes.plans import heavy, planned
from api.schemas import PlansRequest
from api.settings import Settings
from api.strict import StrictRoute
from planner.errors import BadInput
from planner.export import launch

WEB = Path(__file__).resolve().parents[1] / "web"
FORM_SLOT = '<script type="application/json" id="form-catalog">{}</script>'
COMMAND_NAME = "command.sh"  # the command, where no file of the plan holds it already
router = APIRouter(tags=["web"], route_class=StrictRoute)


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
async def lines(body: PlansRequest, request: Request, settings: SettingsDep) -> dict:
    """The lines `planner suggest` prints beside its table for this request: the workload it trains, the images
    (planned from the processor's settings) and the videos. Resolves the request; plans nothing."""
    return await planned(request, settings, work.lines, body)


async def ranked(body: PlanFilesRequest, request: Request, settings: Settings):
    """(plan, files) of the request's plan of that rank: the request planned again (no probe: `verify` is the
    answer's own), the plan's files as `suggest --emit` writes them."""
    req = body.request.model_copy(update={"verify": False})
    plan, made = await planned(request, settings, work.ranked, req, body.rank, expensive=heavy(req))
    if made is None:
        raise BadInput(f"rank {body.rank}: the request gives {plan} plans that fit", "rank")
    return plan, made


@router.post("/v1/plans/files", response_model=PlanFiles)
async def files(body: PlanFilesRequest, request: Request, settings: SettingsDep) -> PlanFiles:
    """A ranked plan's launch command and every file it names or needs (its framework's configs, the DeepSpeed
    JSON, the FSDP or accelerate config, the HF arguments, a Slurm script), as `suggest --emit` writes them."""
    plan, made = await ranked(body, request, settings)
    return PlanFiles(
        rank=body.rank, framework=plan.framework, command=plan.launch.command, note=plan.launch.note, files=made
    )


def bundle(command: str, made: dict[str, str]) -> dict[str, str]:
    """The files, and the command as command.sh unless a file holds it (launch.sh, or `bash <file>`)."""
    held = launch.LAUNCH_NAME in made or command.removeprefix("bash ") in made
    return made if held else {**made, COMMAND_NAME: f"#!/bin/bash\n{command}\n"}


@router.post("/v1/plans/zip", response_class=Response)
async def zipped(body: PlanFilesRequest, request: Request, settings: SettingsDep) -> Response:
    """The ranked plan's files and its command (command.sh where no file holds it) as one zip."""
    plan, made = await ranked(body, request, settings)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in bundle(plan.launch.command, made).items():
            z.writestr(name, text)
    name = f"memplan-plan-{body.rank}-{plan.framework}.zip"
    return Response(
        out.getvalue(), media_type="application/zip", headers={"Content-Disposition": f'attachment; filename="{name}"'}
    )
