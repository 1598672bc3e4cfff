"""`planner` command line: a thin root that registers one module per subcommand.

Exit codes (README): 0 ok, 3 nothing fits / the config does not fit, 2 bad input (one line).
"""

from __future__ import annotations

import argparse
import sys

from planner.errors import BadInput

SUBCOMMANDS = (
    "suggest",
    "check",
    "gpus",
    "models",
    "frameworks",
    "scan",
    "probe",
    "probes",
    "runs",
    "profile",
    "serve",
    "train",
    "autotune",
)


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad input as one line and exit code 2."""

    def add_argument(self, *args, **kwargs):
        """A flag whose type knows its accepted values (common.one_of, choice_list) lists them in --help."""
        if "metavar" not in kwargs and hasattr(kwargs.get("type"), "metavar"):
            kwargs["metavar"] = kwargs["type"].metavar
        return super().add_argument(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"planner: error: {message}\n")
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    from importlib import import_module

    parser = _Parser(prog="planner", description="Memory planner and OOM-avoidance advisor for LLM/VLM training.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in SUBCOMMANDS:
        import_module(f"planner.cli.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from planner.cli import common

    common.QUIET = bool(getattr(args, "json", False))
    try:
        return int(args.run(args))
    except BadInput as e:
        sys.stderr.write(f"planner: error: {e}\n")
        return 2


def entry() -> None:
    raise SystemExit(main())
