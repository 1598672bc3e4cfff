"""`planner gpus`: the GPU catalog."""
from __future__ import annotations

from planner import catalog
from planner.cli import common


def register(sub) -> None:
    p = sub.add_parser("gpus", help="list catalog GPUs")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=run)


def gather() -> dict:
    return {"gpus": [{**g.model_dump(), "capacity_bytes": g.capacity_bytes} for g in catalog.gpus()]}


def run(args) -> int:
    return common.print_listing(args, gather(), "gpus_table")
