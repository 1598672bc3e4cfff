"""`planner profile`: where one configuration's memory goes, from the sim probe (fake tensors):
the top modules by saved activations at the start of backward, the peak's phase and its terms."""

from __future__ import annotations

import argparse

from planner import advise
from planner.cli import advising, argtypes, extras, printout
from planner.cli.probe import add_config_args, probe_request
from planner.errors import BadInput
from planner.evidence.store import Store


def register(p) -> None:
    """The subcommand's flags on its parser (planner.cli.build_parser makes it)."""
    add_config_args(p)
    p.add_argument("--top", type=argtypes.positive_int("--top"), default=10)
    advising.add_store_arg(p)
    p.set_defaults(run=run)


def profile_data(args: argparse.Namespace) -> dict:
    model, knobs, shapes = advise.probe_plan(probe_request(args, "sim"))
    extras.require("planner profile", extras.for_knobs(knobs))  # before the store is opened
    store = Store(args.store)
    store.check_writable()
    from probes.run import probe_in_process

    with printout.status(f"simulating {model.name}"):
        try:
            rec = probe_in_process(model.name, model.config, knobs, shapes, "sim")
        except ValueError as e:
            raise BadInput(f"--model {args.model}: cannot be traced: {e}", "model") from None
    store.add(rec)
    layers = rec.detail["layers"]
    rows = [
        {"module": name, "per_layer_bytes": v, "bytes": v * layers} for name, v in rec.detail["layer_modules"].items()
    ]
    rows += [{"module": name, "per_layer_bytes": None, "bytes": v} for name, v in rec.detail["other_modules"].items()]
    rows.sort(key=lambda r: -r["bytes"])
    return {
        "model": model.summary(),
        "knobs": knobs.model_dump(),
        "shapes": shapes.model_dump(),
        "peak_allocated_bytes": rec.peak_allocated_bytes,
        "peak_phase": rec.phase,
        "by_category": rec.by_category,
        "layers": layers,
        "modules": rows[: args.top],
        "note": "modules: activations each module's forward created that are still alive at the start "
        "of backward (nested modules are counted in the innermost one)",
    }


def run(args: argparse.Namespace) -> int:
    data = profile_data(args)
    if args.json:
        printout.print_json(data)
        return 0
    from rich.table import Table

    from planner.cli import render

    render.console.print(
        f"{data['model']['name']}: peak {render.gib(data['peak_allocated_bytes'])} GiB during "
        f"{data['peak_phase']}; " + ", ".join(f"{k} {render.gib(v)}" for k, v in data["by_category"].items()) + " (GiB)"
    )
    t = Table(
        title=f"top modules by saved activations at the start of backward ({data['layers']} layers)",
        title_justify="left",
    )
    for col in ("module", "per layer GiB", "total GiB"):
        t.add_column(col, justify="left" if col == "module" else "right")
    for r in data["modules"]:
        t.add_row(
            r["module"],
            render.gib(r["per_layer_bytes"]) if r["per_layer_bytes"] is not None else "",
            render.gib(r["bytes"]),
        )
    render.console.print(t)
    return 0
