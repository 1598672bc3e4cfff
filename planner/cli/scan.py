"""`planner scan DATA --tokenizer DIR`: the token-length distribution of a training set (text and image
tokens apart), streamed, with a progress bar on a terminal and --json for scripts. The scanning itself is
the `scan` package (tokenizers are not the core's business); this face imports it lazily."""

from __future__ import annotations

from planner.cli import argtypes, extras, printout

IMAGE_RULE_HELP = (
    "qwen2-vl (default: Qwen2-VL / Qwen2.5-VL resizing, 14-pixel patches merged 2 x 2), qwen3-vl (16-pixel patches), "
    "internvl[:N] (448-pixel tiles, at most N, 12 by default, plus a thumbnail), llava (576), llava-next (anyres "
    "tiles), llava-onevision (anyres_max_9), gemma3 (256; gemma3:pan-and-scan, 256 more a crop), idefics3 "
    "(364-pixel tiles, 169 tokens each), mllama (1), or fixed:N"
)


def register(p) -> None:
    """The subcommand's flags on its parser (planner.cli.build_parser makes it)."""
    p.add_argument(
        "data",
        metavar="DATA",
        help="a .jsonl, .json, .csv or .parquet file, or a save_to_disk folder: "
        "text, prompt/completion, messages or input_ids",
    )
    p.add_argument(
        "--tokenizer",
        default=None,
        help="a local tokenizer folder (its chat template renders messages); not needed for input_ids rows",
    )
    p.add_argument("--image-rule", default="qwen2-vl", help=IMAGE_RULE_HELP)
    p.add_argument("--min-pixels", type=argtypes.int_in("--min-pixels", 1, 10**9), default=None)
    p.add_argument("--max-pixels", type=argtypes.int_in("--max-pixels", 1, 10**9), default=None)
    p.add_argument("--plot", metavar="PNG", help="write the histogram of tokens per row, with p50, p99 and max")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=run)


def run(args) -> int:
    if args.tokenizer:
        extras.require("planner scan --tokenizer", {"transformers": "scan", "jinja2": "scan"})
    from scan.scanner import scan, summary

    with _progress(args) as advance:
        lengths = scan(args.data, args.tokenizer, args.image_rule, args.min_pixels, args.max_pixels, advance)
    out = {"data": args.data, **summary(lengths)}
    if args.plot:
        from planner.cli import plot

        plot.histogram(args.plot, lengths.totals(), lengths.text, out, f"{args.data}: {out['rows']:,} rows")
        out["plot"] = args.plot
    if args.json:
        printout.print_json(out)
        return 0
    from planner.cli import render, render_inputs

    printout.say_line(render_inputs.scan_headline(out))
    render.console.print(render_inputs.scan_table(out))
    return 0


def _progress(args):
    """advance(rows) on a rich progress line (rows and rate) on a terminal; a no-op otherwise."""
    from contextlib import contextmanager

    err = printout.err_console()

    @contextmanager
    def shown():
        if args.json or not err.is_terminal:
            yield None
            return
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        with Progress(
            SpinnerColumn(),
            TextColumn("scanning {task.completed:,} rows"),
            TimeElapsedColumn(),
            console=err,
            transient=True,
        ) as bar:
            task = bar.add_task("", total=None)
            yield lambda n: bar.advance(task, n)

    return shown()
