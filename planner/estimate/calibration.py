"""Measured priors per GPU kind: what `benchmarks/gpu_suite.py --apply` wrote from a run on that card
(planner/model/catalog/calibration/<gpu>.json, or $MEMPLAN_CALIBRATION_DIR). Where a file holds a measurement the
planner uses it instead of its prior (overheads.CUDA_CONTEXT_BYTES, FRAGMENTATION_FRACTION,
FRAGMENTATION_FRACTION_EXPANDABLE; speed.PEAK_EFFICIENCY, HALF_EFFICIENCY_TOKENS), and plans say their overhead is
measured, term by term (planner.estimate.overheads). nccl_bytes is a group of one rank: a floor under the NCCL prior of
the card's class and process count. driver_reserved_bytes has no prior: the memory NVML shows used on an idle card
(483 MiB on an H100 80GB HBM3, driver 580) is counted only where it was measured. None of the values is required: a
field left null keeps the prior.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from planner.errors import BadInput


class Calibration(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    gpu: str
    measured: str = Field(description="date and device of the run, e.g. '2026-11-22 NVIDIA H100 80GB HBM3'")
    versions: dict[str, str] = {}
    cuda_context_bytes: int | None = Field(default=None, ge=0, description="context + libraries + workspaces")
    driver_reserved_bytes: int | None = Field(
        default=None, ge=0, description="NVML 'used' before any process: no process can have it"
    )
    fragmentation_fraction: float | None = Field(default=None, ge=0, le=2, description="reserved/allocated - 1")
    fragmentation_fraction_expandable: float | None = Field(
        default=None, ge=0, le=2, description="the same with expandable_segments:True"
    )
    edge_fraction: float | None = Field(
        default=None,
        ge=0,
        le=2,
        description="the least (capacity - context - driver)/allocated - 1 of the largest steps that ran",
    )
    edge_fraction_expandable: float | None = Field(
        default=None, ge=0, le=2, description="the same, expandable segments"
    )
    nccl_bytes: int | None = Field(default=None, ge=0, description="communicator buffers of a one-node group")
    peak_efficiency: float | None = Field(default=None, gt=0, le=1, description="best achieved MFU")
    half_efficiency_tokens: int | None = Field(default=None, gt=0, description="tokens/micro-batch at half of it")


def directory() -> Path:
    env = os.environ.get("MEMPLAN_CALIBRATION_DIR")
    return Path(env) if env else _packaged()


@lru_cache(maxsize=1)
def _packaged() -> Path:
    """The package's calibration folder (found once: the search asks for it per candidate)."""
    return Path(__file__).parents[1] / "model" / "catalog" / "calibration"


@lru_cache(maxsize=64)
def _load(path: str) -> Calibration | None:
    p = Path(path)
    if not p.is_file():
        return None
    try:
        return Calibration.model_validate(json.loads(p.read_text()))
    except (OSError, ValueError, ValidationError) as e:
        raise BadInput(
            f"calibration file {path!r} is not valid ({e.__class__.__name__}); delete or regenerate it "
            "with benchmarks/gpu_suite.py --apply"
        ) from None


def for_gpu(name: str) -> Calibration | None:
    """The calibration of a catalog GPU kind, or None where none was measured."""
    return _load(_path(os.environ.get("MEMPLAN_CALIBRATION_DIR"), name))


@lru_cache(maxsize=256)
def _path(env: str | None, name: str) -> str:
    """for_gpu's file, its path joined once per folder and GPU kind: the search asks three times per candidate."""
    return str((Path(env) if env else _packaged()) / f"{name}.json")
