"""Dependencies: settings, the job queue, bearer-token auth, and model references resolved safely."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from fastapi import Depends, HTTPException, Request

from api.auth import bearer_ok
from api.settings import Settings, get_settings
from planner.errors import BadInput, Forbidden, UnknownName
from planner.model.modelspec import ModelSpec

SettingsDep = Annotated[Settings, Depends(get_settings)]


def get_queue(request: Request):
    return request.app.state.queue


def require_token(request: Request, settings: SettingsDep) -> None:
    """Endpoints that start or cancel work: `Authorization: Bearer <MEMPLAN_API_TOKEN>` (compared in constant time;
    api/auth.py's middleware already asks it of every /v1 path); with no token configured, only a server listening
    on loopback accepts them (one beyond loopback without a token runs only under --insecure)."""
    if settings.api_token is None:
        if settings.loopback_only:
            return
        raise HTTPException(
            403,
            "this server has no MEMPLAN_API_TOKEN and listens beyond loopback: starting or cancelling work is disabled",
        )
    if not bearer_ok(request.headers.get("authorization", ""), settings.api_token):
        raise HTTPException(401, "missing or wrong bearer token", headers={"WWW-Authenticate": "Bearer"})


Authorized = Depends(require_token)


def probe_functions():
    """The probes the core may run for this service (planner.verification.Probes), or None without probes/."""
    from probes import probe_functions as functions

    return functions()


def inside(path: str, dirs: list[Path], field: str, what: str) -> Path:
    """The path, links resolved, when it lies inside one of `dirs` (and names no `..`); Forbidden otherwise."""
    if "\0" in path:
        raise BadInput(f"--{field.replace('_', '-')} {path[:80]!r}: a path cannot hold a NUL byte", field)
    if ".." in Path(path).parts:
        raise Forbidden(f"--{field.replace('_', '-')} {path!r}: '..' is not allowed in {what} paths", field)
    target = Path(path).resolve()
    if not any(target.is_relative_to(Path(d).resolve()) for d in dirs):
        raise Forbidden(
            f"--{field.replace('_', '-')} {path!r}: only paths inside the server's {what} directories may be read",
            field,
        )
    return target


def scanner(settings: Settings):
    """The core's Scanner for this service: a dataset and its tokenizer only from inside the data directories
    (none configured: none may be read), then the scan package's scan."""

    def scan(
        path: str, tokenizer: str | None, image_rule: str, max_length: int | None, min_pixels=None, max_pixels=None
    ):
        data = inside(path, settings.data_dirs, "data", "data")
        tok = inside(tokenizer, settings.data_dirs, "tokenizer", "data") if tokenizer else None
        try:
            from scan.plan import data_fit
        except ImportError:
            raise BadInput("--data: this server cannot scan datasets (install the scan extra)", "data") from None
        return data_fit(str(data), str(tok) if tok else None, image_rule, max_length, min_pixels, max_pixels)

    return scan


def resolve_model(ref: str | dict, settings: Settings) -> ModelSpec:
    """A catalog name; a config.json object posted in the body; a path inside one of the configured model
    directories (after resolving links, never `..`); or a Hugging Face id, as the catalog knows it or, with
    --fetch-models, its config.json from the Hub (planner.intake.models.by_id). Nothing else is read."""
    from planner.intake import hub, models
    from planner.model import catalog
    from planner.resolved import default_resolver, from_config

    if isinstance(ref, dict):
        try:
            return default_resolver(ref)
        except BadInput as e:
            raise BadInput(f"--model: the posted config.json: {e}", "model") from None
    key = ref.strip().lower()
    catalog.checked_path(ref, "model")
    if key in catalog.model_names():
        return catalog.load_model(key)
    if hub.is_repo_id(ref) and (found := models.by_id(ref)) is not None:  # a Hugging Face id: what --model resolves
        return catalog.load_model(found.ref) if found.ref in catalog.model_names() else from_config(found.config, ref)
    if refused := hub.refusal(ref):  # the Hub answered: a missing, private or gated repo
        raise refused
    if settings.model_dirs and ("/" in ref or ref.endswith(".json")):
        p = Path(ref)
        target = inside(str(p / "config.json" if p.is_dir() else p), settings.model_dirs, "model", "model")
        return catalog.load_model(str(target))
    guess = catalog.closest(ref, {n: n for n in catalog.model_names()})
    raise UnknownName(
        f"model {ref!r} is not a bundled model{hub.clause(ref)}"
        + (f"; did you mean {guess}?" if guess else "")
        + f" (GET /v1/models lists all {len(catalog.model_names())}, or post the config.json object "
        "as `model`)",
        "model",
    )
