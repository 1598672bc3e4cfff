"""GET /v1/gpus, /v1/models, /v1/models/{name}, /v1/frameworks, /v1/devices."""

from __future__ import annotations

from fastapi import APIRouter, Path

from api.strict import StrictRoute

router = APIRouter(prefix="/v1", tags=["catalog"], route_class=StrictRoute)


@router.get("/gpus")
def gpus() -> dict:
    from planner.model import catalog

    return catalog.gpus_json()


@router.get("/frameworks")
def frameworks() -> dict:
    """What each --framework runs, its defaults (with the file each was read from) and its keys."""
    from planner.config import knobfields  # noqa: F401 (the knobs' defaults, which frameworks_json's rules read)
    from planner.frameworks import frameworks_json

    return frameworks_json()


@router.get("/models")
def models() -> dict:
    from planner.model import catalog

    return catalog.models_json()


@router.get("/models/{name}")
def model(name: str = Path(max_length=128)) -> dict:
    """A catalog model's summary and its bundled config.json."""
    from planner.model import catalog
    from planner.model.families import from_config

    config = catalog.model_config(name)  # catalog names only: never a path
    return {**from_config(config, name.strip().lower()).summary(), "config": config}


@router.get("/devices")
def devices() -> dict:
    """This host's NVIDIA GPUs through NVML (an empty list without a driver): the NVML name, the memory,
    and the catalog kind the planner uses for it (null for a GPU outside the catalog)."""
    from planner.errors import BadInput
    from planner.model.hardware import match_local, nvml_devices

    try:
        found = nvml_devices()
    except BadInput:
        return {"devices": []}
    out = []
    for i, (name, total) in enumerate(found):
        try:
            gpu = match_local(name, total).name
        except BadInput:
            gpu = None
        out.append({"index": i, "name": name, "gpu": gpu, "capacity_bytes": total})
    return {"devices": out}
