"""What the subcommands print beside their tables (planner.cli.render and render_*.py): JSON on stdout, listings, verbatim lines,
the nearest settings that fit, the headline's marks, and progress on stderr (a spinner, quiet under --json)."""

from __future__ import annotations

import argparse
import json
import sys


def approximate(model, goal) -> str:
    """The headline's mark for a model family counted with the generic formula (model.exact false)."""
    if model.exact:
        return ""
    return (
        f", APPROXIMATE: model_type {model.model_type!r} is counted with the generic llama-like formula; "
        f"margin {goal.margin:g}"
    )


def text_only_mark(model, goal) -> str:
    from planner.search.imagefit import text_only

    if not text_only(model, goal):
        return ""
    return ", text only (no image planned: give --image-tokens, --max-pixels or --data with images)"


def media_mark(media: dict | None) -> str:
    """The headline's mark of the media a row was assumed to hold (planner.intake.media; CheckResult.media):
    `, one image a row of at most 768 tokens (assumed)`."""
    if not media:
        return ""
    each = media["tokens_per_image"]
    what = ["one image a row" + (f" of at most {each:,} tokens" if each else "")] if media["images_per_row"] else []
    what += ["one video a row"] if media["videos"] else []
    return f", {' and '.join(what)} (assumed)"


def print_json(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj, indent=1) + "\n")


def print_listing(args: argparse.Namespace, data: dict, table_name: str) -> int:
    """A listing subcommand's output: JSON with --json, else the named table from render_listings.py."""
    if args.json:
        print_json(data)
    else:
        from planner.cli import render, render_listings

        render.console.print(getattr(render_listings, table_name)(data))
    return 0


QUIET = False  # set by the root command for --json: no progress on stderr


def status(message: str):
    """A spinner with the elapsed time on stderr while long work runs (nothing when stderr is not a terminal,
    or with --json)."""
    from contextlib import contextmanager, nullcontext

    from planner.cli.plain import piped

    if QUIET or piped(sys.stderr):  # --json, or stderr to a file or pipe: not even rich imported
        return nullcontext()
    err = err_console()
    if not err.is_terminal:
        return nullcontext()
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    @contextmanager
    def shown():
        with Progress(
            SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=err, transient=True
        ) as bar:
            bar.add_task(message, total=None)
            yield

    return shown()


def say_line(text: str, console=None) -> None:
    """Print one line verbatim: no wrapping at the terminal's width (a command or path must paste whole), no rich
    markup or highlighting (a `[...]` in a command is not a style)."""
    from planner.cli import render

    (console or render.console).print(text, soft_wrap=True, markup=False, highlight=False)


def print_nearest(nearest: list, console=None) -> None:
    """A "does not fit" ends with the nearest settings that fit (planner.search.nearest), or says none is one change away."""
    from planner.cli import render, render_search

    console = console or render.console
    if nearest:
        console.print(render_search.nearest_table(nearest))
    for line in render_search.nearest_lines(nearest):
        say_line(line, console)


def err_console():
    """A rich console on stderr, for progress that must not mix with --json on stdout."""
    from rich.console import Console

    err = Console(stderr=True)
    return err if err.is_terminal else Console(stderr=True, width=170)  # as render.console: whole tables
