"""Whether this host can run a probe, asked before one is queued or started: the modules its steps import (the
extras: planner/extras.py) and, for a cuda probe, a GPU that torch can use. The API refuses a probe job it cannot run
with a 422 naming what to install (api/routes/probes.py), as `planner probe` refuses it in one line, instead of
accepting it and recording a crash whose reason sits in the record's stderr."""

from __future__ import annotations

from functools import cache

from planner.errors import BadInput
from planner.extras import for_knobs, require


def check(what: str, backend: str, knobs) -> None:
    """BadInput (field `backend`) naming what `what` (the command or job, as its face says it) lacks here."""
    require(what, for_knobs(knobs, backend=backend), "backend")
    if backend == "cuda" and not cuda_available():
        raise BadInput(
            f"{what} needs an NVIDIA GPU that torch can use, and torch.cuda.is_available() is False here "
            "(a CUDA build of torch on a host with a GPU; --backend sim or cpu run without one)",
            "backend",
        )


@cache
def cuda_available() -> bool:
    """torch.cuda.is_available(), asked once per process (torch is imported here only for a cuda probe)."""
    import torch

    return torch.cuda.is_available()
