"""`planner models`: the bundled model catalog, with parameter counts and layers."""

from __future__ import annotations

from planner.cli import printout
from planner.model import catalog


def register(p) -> None:
    """The subcommand's flags on its parser (planner.cli.build_parser makes it)."""
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=run)


def run(args) -> int:
    return printout.print_listing(args, catalog.models_json(), "models_table")
