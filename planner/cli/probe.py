"""`planner probe`: run one probe (sim, cpu or cuda) of a configuration and store its record."""

from __future__ import annotations

import argparse

from planner import advise
from planner.advise import ProbeRequest
from planner.cli import advising, argtypes, knobargs, printout, workloadargs
from planner.config.knobfields import KNOBS
from planner.config.spec import PROBE_BACKENDS
from planner.evidence.store import Store
from probes import ready


def add_config_args(p: argparse.ArgumentParser, required: bool = True) -> None:
    """One configuration's flags (probe, profile; train, where a --plan file may give them instead)."""
    p.add_argument("--model", required=required, help="catalog name (`planner models`), config.json path, or folder")
    p.add_argument("--micro-batch", type=argtypes.positive_int("--micro-batch"), required=required)
    p.add_argument("--grad-accum", type=argtypes.positive_int("--grad-accum"), default=1)
    p.add_argument(
        "--seq-len",
        type=argtypes.positive_int("--seq-len"),
        default=None,
        help="tokens per row (dpo / grpo: from --max-length / --max-prompt-length + --max-completion-length)",
    )
    knobargs.add_knob_args(p, [k for k in KNOBS if k != "workload"])
    workloadargs.add_workload_args(p)
    p.add_argument(
        "--max-length",
        type=argtypes.positive_int("--max-length"),
        default=None,
        help="dpo: tokens of a chosen or rejected row, prompt included (default 1024)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")


def register(p) -> None:
    """The subcommand's flags on its parser (planner.cli.build_parser makes it)."""
    add_config_args(p)
    p.add_argument("--backend", type=argtypes.one_of("--backend", PROBE_BACKENDS), default="sim")
    p.add_argument("--timeout", type=argtypes.positive_int("--timeout"), default=600, help="seconds (default 600)")
    advising.add_store_arg(p)
    p.set_defaults(run=run)


def probe_request(args: argparse.Namespace, backend: str = "sim") -> ProbeRequest:
    return advising.request(ProbeRequest, args, backend=backend)


def run(args: argparse.Namespace) -> int:
    model, knobs, shapes = advise.probe_plan(probe_request(args, args.backend))
    ready.check(f"planner probe --backend {args.backend}", args.backend, knobs)
    store = Store(args.store)
    store.check_writable()  # before the probe runs: its record must not be lost
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from probes.run import run_isolated

    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=printout.err_console(),
        transient=True,
        disable=args.json,
    ) as bar:
        bar.add_task(f"{args.backend} probe of {model.name}", total=None)
        rec = run_isolated(model.name, model.config, knobs, shapes, args.backend, args.timeout)
    store.add(rec)
    out = rec.model_dump()
    out["detail"] = {k: v for k, v in rec.detail.items() if k != "segments"}
    if args.json:
        printout.print_json({"record": out, "store": str(store.path)})
    else:
        from planner.cli import render, render_listings
        from planner.cli.render import gib

        render.console.print(render_listings.record_line(rec))
        if rec.detail.get("phases"):
            printout.say_line(
                "peak by phase: " + ", ".join(f"{k} {gib(v)} GiB" for k, v in rec.detail["phases"].items())
            )
        printout.say_line(f"stored as probe #{rec.id} in {store.path}")
    return {"ok": 0, "oom": 3}.get(rec.status, 1)
