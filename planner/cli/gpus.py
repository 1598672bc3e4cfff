"""`planner gpus`: the GPU catalog."""

from __future__ import annotations

from planner.cli import common
from planner.model import catalog


def register(sub) -> None:
    p = sub.add_parser("gpus", help="list catalog GPUs")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=run)


def run(args) -> int:
    return common.print_listing(args, catalog.gpus_json(), "gpus_table")
