"""The planning calls behind the API's routes, as run inside a planning worker (api/sandbox.py): each takes the
request body and the service's settings (both pickled across) and builds the advise call's context there, so
nothing the routes hold (a request, a closure) has to cross. What a route does before (auth, body checks) and
after (renaming, zipping) stays in the route."""

from __future__ import annotations

import functools
import json
import tempfile
from pathlib import Path

from api.deps import inside, probe_functions, resolve_model, scanner
from api.settings import Settings
from planner import advise, checkconfig, resolved
from planner.config.knobfields import KnobFields
from planner.evidence import db as sql
from planner.export import launch
from planner.intake import hub
from planner.search import imagefit, videofit

STORE_WAIT_S = 1.0  # a request's store calls wait this long in all, then the API answers 503 (issue 51)


def bounded(fn):
    """fn with its store calls waiting STORE_WAIT_S at most, all together (planner.evidence.db.waits), and no model
    fetched from the Hugging Face Hub unless the settings (its last argument) allow it: a request's files must not
    make the server reach the network (planner.intake.hub)."""

    @functools.wraps(fn)
    def call(*args):
        with sql.waits(STORE_WAIT_S), hub.allowed(args[-1].fetch_models):
            return fn(*args)

    return call


def context(settings: Settings) -> dict:
    """The advise call's keywords: the store, the probes, and model references resolved safely."""
    return {
        "store": str(settings.store) if settings.store else None,
        "probes": probe_functions(),
        "resolver": lambda ref: resolve_model(ref, settings),
        "scanner": scanner(settings),
    }


@bounded
def suggest(body, settings: Settings):
    return advise.suggest(body, **context(settings))


@bounded
def check(body, settings: Settings):
    return advise.check(body, **context(settings))


@bounded
def check_config(paths: list[str], files: dict[str, str], overrides: dict, settings: Settings):
    """The config at `paths` (inside the data directories), or the uploaded `files` alone in a fresh folder,
    read and checked; uploaded files are named by their names in the answer."""
    ctx = context(settings)
    if paths:
        paths = [str(inside(p, settings.data_dirs, "config", "data")) for p in paths]
        return checkconfig.check_config(paths, overrides, allowed=settings.data_dirs, **ctx)
    with tempfile.TemporaryDirectory(prefix="memplan-config-") as folder:  # the upload alone: nothing beside it
        for name, text in files.items():
            (Path(folder) / name).write_text(text)
        result = checkconfig.check_config(
            [str(Path(folder) / n) for n in files], overrides, allowed=[Path(folder)], **ctx
        )
    config = json.loads(json.dumps(result.config).replace(folder + "/", ""))  # the files by their names
    return result.model_copy(update={"config": config})


@bounded
def lines(body, settings: Settings) -> dict:
    """The lines `planner suggest` prints beside its table: the workload, the images and the videos."""
    ctx = context(settings)
    model, _, _, _, budget = resolved.resolve(body, body.global_batch, ctx["resolver"], ctx["scanner"])
    role_run = KnobFields(workload=body.workload, framework=body.framework).role_run  # verl's GRPO: by roles
    videos = videofit.budget(body, model)
    return {
        "workload": body.workload.summary(role_run),
        "images": imagefit.lines(budget.json()) if budget else [],
        "videos": videofit.lines(videos.json()) if videos else [],
    }


@bounded
def ranked(req, rank: int, settings: Settings):
    """(plan, files) of the request's plan of that rank, or the number of plans that fit when there are fewer."""
    result = advise.suggest(req, with_nearest=False, **context(settings))
    if rank > len(result.plans):
        return len(result.plans), None
    plan = result.plans[rank - 1]
    model, hw, goal = result.context
    return plan, launch.files(plan, hw, model, goal.seq_len)
