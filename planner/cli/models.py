"""`planner models`: the bundled model catalog, with parameter counts and layers."""

from __future__ import annotations

from planner.cli import common
from planner.model import catalog


def register(sub) -> None:
    p = sub.add_parser("models", help="list catalog models")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=run)


def run(args) -> int:
    return common.print_listing(args, catalog.models_json(), "models_table")
