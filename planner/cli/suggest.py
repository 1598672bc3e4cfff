"""`planner suggest`: ranked plans that fit, with the same global batch exactly."""

from __future__ import annotations

import argparse

from planner import advise
from planner.advise import SuggestRequest, SuggestResult
from planner.cli import advising, argtypes, knobargs, printout, targetargs
from planner.config.knobfields import SEARCHED
from planner.export import launch


def register(p) -> None:
    """The subcommand's flags on its parser (planner.cli.build_parser makes it)."""
    targetargs.add_target_args(p)
    p.add_argument(
        "--global-batch",
        type=argtypes.positive_int("--global-batch"),
        required=True,
        help="sequences per optimizer step across all GPUs",
    )
    knobargs.add_knob_args(p, SEARCHED, many=True)
    p.add_argument("--top", type=argtypes.positive_int("--top"), default=10)
    advising.add_evidence_args(p)
    p.add_argument("--plot", metavar="PNG", help="write the memory charts (terms per plan, memory vs micro-batch)")
    p.add_argument(
        "--emit", metavar="DIR", help="write ds_config.json, train_args.json, launch.sbatch for the best plan"
    )
    p.set_defaults(run=run)


def gather(args: argparse.Namespace) -> tuple[dict, SuggestResult, tuple]:
    """advise.suggest on the flags; (JSON object, result, (model, hardware, goal)) for printing."""
    result = answer(args)
    return result_json(result), result, result.context


def answer(args: argparse.Namespace) -> SuggestResult:
    """advise.suggest on the flags."""
    req = advising.request(SuggestRequest, args)
    shown = "always" if args.json or getattr(args, "plot", None) else "if-none-fit"  # the table shows them then only
    return advise.suggest(
        req,
        store=args.store,
        probes=advising.asked_probes(args),
        status=printout.status,
        scanner=advising.scanner,
        rejected=shown,
    )


def result_json(result) -> dict:
    """What --json prints: the result with `verified` only when a probe verified it."""
    return result.model_dump(exclude={"verified"} if result.verified is None else set())


def run(args: argparse.Namespace) -> int:
    if args.emit:
        launch.check_emit_dir(args.emit)
    result = answer(args)
    model, hw, goal = result.context
    # the JSON object where it is printed; the table reads the lines' parts alone (no serializer built for a table)
    out = result_json(result) if args.json else {k: getattr(result, k) for k in ("data", "images", "videos")}
    if args.emit and result.plans:
        out["emitted"] = [str(p) for p in launch.emit(result.plans[0], hw, model, args.emit, goal.seq_len, goal)]
    ref = (result.plans or result.rejected or [None])[0]
    if getattr(args, "plot", None) and ref is not None:
        from planner.cli import plot

        plot.write(args.plot, result.plans or result.rejected, ref, model, hw, goal)
        out["plot"] = args.plot
    if args.json:
        printout.print_json(out)
    else:
        from planner.cli import render, render_search

        title = (
            f"{model.name} ({model.params / 1e9:.2f}B params{printout.approximate(model, goal)}) on "
            f"{hw.world_size} x {hw.gpu.name}, global batch {goal.global_batch} x {goal.seq_len} tokens"
        )
        from planner.cli.data import budget_line, data_lines
        from planner.search import imagefit, videofit

        for line in data_lines(out["data"]) if out.get("data") else []:
            printout.say_line(line)
        for line in imagefit.lines(out["images"]) if out.get("images") else []:
            printout.say_line(line)
        for line in videofit.lines(out["videos"]) if out.get("videos") else []:
            printout.say_line(line)
        if result.plans:
            render.console.print(render.plans_table(result.plans, title, approximate=not model.exact))
            best = result.plans[0]
            render.console.print(render.breakdown_table(best))
            printout.say_line(render.overheads_line(best, goal.margin))
            if best.token_batches is not None:
                printout.say_line(budget_line(best.token_batches))
            printout.say_line(f"best: {best.launch.command}")
        else:
            printout.say_line(f"{title}: nothing fits")
            if result.rejected:
                render.console.print(render_search.rejected_table(result.rejected))
            printout.print_nearest(result.nearest)
        for path in out.get("emitted", []):
            printout.say_line(f"wrote {path}")
    return 0 if result.plans else 3
