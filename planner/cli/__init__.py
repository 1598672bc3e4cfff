"""`planner` command line: a thin root that registers one module per subcommand.

Exit codes (README): 0 ok, 3 nothing fits / the config does not fit, 2 bad input (one line).
"""

from __future__ import annotations

import argparse
import os
import sys

from planner.errors import BadInput

SUBCOMMANDS = {
    "suggest": "rank training configurations that fit",
    "check": "will this configuration fit? and what to run instead",
    "gpus": "list catalog GPUs",
    "models": "list catalog models",
    "frameworks": "what each framework (--framework) can run, its defaults and their sources",
    "scan": "token-length distribution of a dataset (JSONL, JSON, CSV, Parquet)",
    "probe": "measure one configuration (sim on fake tensors, or real cpu/cuda steps)",
    "probes": "stored probe records: list, show, rm",
    "runs": "real runs' measured memory against the prediction for their plan",
    "profile": "per-module activation memory and the peak's phase (sim probe)",
    "serve": "serve the REST API (docs at /docs)",
    "train": "run a plan with the bundled trainer",
    "autotune": "plan for the local GPUs, probe, and launch (bundled trainer or your command)",
}


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad input as one line and exit code 2."""

    def add_argument(self, *args, **kwargs):
        """A flag whose type knows its accepted values (argtypes.one_of, choice_list) lists them in --help."""
        if "metavar" not in kwargs and hasattr(kwargs.get("type"), "metavar"):
            kwargs["metavar"] = kwargs["type"].metavar
        return super().add_argument(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"planner: error: {message}\n")
        raise SystemExit(2)


ALL = "*"


def build_parser(command: str | None = ALL) -> argparse.ArgumentParser:
    """The root parser with every subcommand listed; only `command`'s module is imported and its flags added (ALL:
    every one's), so `planner --help` and one subcommand's run import nothing they do not use."""
    from importlib import import_module

    parser = _Parser(prog="planner", description="Memory planner and OOM-avoidance advisor for LLM/VLM training.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, summary in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=summary)
        if command in (ALL, name):
            import_module(f"planner.cli.{name}").register(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(next((a for a in argv if not a.startswith("-")), None))
    args = parser.parse_args(argv)
    from planner.cli import printout

    printout.QUIET = bool(getattr(args, "json", False))
    try:
        return int(args.run(args))
    except BadInput as e:
        sys.stderr.write(f"planner: error: {e}\n")
        return 2


def entry() -> None:
    # pydantic looks up plugins in every installed distribution's entry points when it builds its first model (about
    # 25 ms, more in a large environment); the planner uses none. A user's own setting of the variable stands.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    raise SystemExit(main())
