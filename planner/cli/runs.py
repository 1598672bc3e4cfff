"""`planner runs [RUN]`: real runs' measured memory (probes.callback.MemplanCallback, the bundled trainer) against
what the planner predicts for the plan each ran. Without RUN, one line a run (its largest step); with RUN, its steps.
The prediction is made now, from the stored plan (a `planner check` request): `peak_allocated` against the
allocator's peak. A plan the planner cannot check (a model it cannot find offline) shows no prediction, and why."""

from __future__ import annotations

import argparse

from planner.cli import advising, argtypes, printout
from planner.errors import BadInput
from planner.evidence import runs
from planner.evidence.store import Store

GIB = 2**30


def register(p) -> None:
    """The subcommand's flags on its parser (planner.cli.build_parser makes it)."""
    p.add_argument(
        "run_id", nargs="?", default=None, metavar="RUN", help="one run's id: its steps (default: a line a run)"
    )
    p.add_argument("--limit", type=argtypes.positive_int("--limit"), default=50)
    p.add_argument(
        "--calibrate",
        action="store_true",
        help="store RUN's CUDA measurement as a probe record of its plan: later plans use it as measured evidence",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    advising.add_store_arg(p)
    p.set_defaults(run=run)


def checked(plan: dict):
    """`planner check` of a stored plan, analytic: its CheckResult (BadInput where it cannot be checked)."""
    from planner import advise

    return advise.check(advise.parse(advise.CheckRequest, {**plan, "evidence": "analytic"}))


def checked_or_why(plan: dict):
    """(the CheckResult, None), or (None, why the plan cannot be checked)."""
    try:
        return checked(plan), None
    except BadInput as e:
        return None, str(e)


def predicted(plan: dict) -> tuple[int | None, str | None]:
    """(peak_allocated bytes the planner predicts for the plan, None) or (None, why not)."""
    result, why = checked_or_why(plan)
    return (result.plan.memory.peak_allocated_bytes if result else None), why


def calibrate(store: Store, got: list, result) -> int:
    """The run's CUDA measurement stored as a cuda probe record of its plan (`result`: its check;
    runs.as_probe_record); its id."""
    from planner.evidence.store import Shapes

    (spec, _hw, goal), p = result.context, result.plan
    shapes = Shapes(
        micro_batch=p.micro_batch,
        grad_accum=p.grad_accum,
        seq_len=goal.seq_len,
        image_tokens=goal.image_tokens,
        world_size=p.world_size,
    )
    rec = runs.as_probe_record(got, spec, p.knobs, shapes)
    if rec is None:
        raise BadInput("--calibrate: the run has no CUDA step after its first (a CPU run measures no device)", "run")
    return store.add(rec)


def _error(measured: int | None, pred: int | None) -> float | None:
    return None if not measured or not pred else round(measured / pred - 1, 4)


def run(args: argparse.Namespace) -> int:
    store = Store.existing(args.store)
    if args.calibrate and args.run_id is None:
        raise BadInput("--calibrate needs a RUN: the run whose measurement becomes a probe record", "run")
    if args.run_id is None:
        lines = runs.summaries(store, args.limit)
        for line in lines:
            line["predicted_bytes"], line["not_predicted"] = predicted(line["plan"])
            line["error"] = _error(line["allocated_bytes"], line["predicted_bytes"])
        data = {"store": str(store.path), "runs": lines}
    else:
        got = runs.steps(store, args.run_id, limit=100_000)
        if not got:
            raise BadInput(f"run {args.run_id!r}: no such run in {store.path} (`planner runs` lists them)", "run")
        result, why = checked_or_why(got[-1].plan)  # once: the prediction, and the probe record's key
        if args.calibrate and result is None:
            raise BadInput(f"--calibrate: the run's plan cannot be checked ({why})", "run")
        probe = calibrate(store, got, result) if args.calibrate else None
        pred = result.plan.memory.peak_allocated_bytes if result else None
        rows = [{**s.model_dump(exclude={"plan"}), "error": _error(s.allocated_bytes, pred)} for s in got]
        data = {"store": str(store.path), "run": args.run_id, "plan": got[-1].plan, "predicted_bytes": pred}
        data.update(not_predicted=why, steps=rows, calibrated_probe=probe)
    if args.json:
        printout.print_json(data)
        return 0
    _print(data)
    return 0


def _gib(x: int | None) -> str:
    return "-" if not x else f"{x / GIB:.2f}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+.1%}"


def _print(data: dict) -> None:
    from rich.table import Table

    from planner.cli import render

    multi = "runs" in data
    title = f"runs in {data['store']}" if multi else f"run {data['run']} in {data['store']}"
    t = Table(title=title, title_justify="left")
    first = ("run", "model", "steps") if multi else ("step", "rank")
    for col in (*first, "device", "predicted GiB", "allocated GiB", "error", "reserved GiB", "NVML GiB", "RSS GiB"):
        t.add_column(col)
    for r in data["runs"] if multi else data["steps"]:
        pred = r["predicted_bytes"] if multi else data["predicted_bytes"]
        head = (r["run"], r["model"], str(r["steps"])) if multi else (str(r["step"]), str(r["rank"]))
        device = r.get("device") or ""
        t.add_row(
            *head,
            device,
            _gib(pred),
            _gib(r["allocated_bytes"]),
            _pct(r["error"]),
            _gib(r["reserved_bytes"]),
            _gib(r["nvml_bytes"]),
            _gib(r["host_rss_bytes"]),
        )
    render.console.print(t)
    if data.get("calibrated_probe"):
        printout.say_line(
            f"stored probe #{data['calibrated_probe']}: plans of this run's shape now use its measurement"
        )
    why = [r["not_predicted"] for r in data["runs"] if r["not_predicted"]] if multi else [data["not_predicted"]]
    for line in filter(None, why):
        printout.say_line(f"no prediction: {line}")
