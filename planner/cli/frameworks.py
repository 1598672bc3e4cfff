"""`planner frameworks`: what each training framework can run, and its defaults (planner.frameworks)."""

from __future__ import annotations

from planner.cli import printout
from planner.config import knobfields  # noqa: F401 (the knobs' defaults, which frameworks_json's rules read)
from planner.frameworks import frameworks_json


def register(p) -> None:
    """The subcommand's flags on its parser (planner.cli.build_parser makes it)."""
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=run)


def run(args) -> int:
    return printout.print_listing(args, frameworks_json(), "frameworks_table")
