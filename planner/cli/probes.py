"""`planner probes list|show|rm`: the stored probe records. None of them creates a store."""

from __future__ import annotations

import argparse

from planner.cli import advising, argtypes, printout
from planner.config.spec import PROBE_BACKENDS
from planner.errors import BadInput
from planner.evidence.store import Store


def register(p) -> None:
    """The subcommand's flags on its parser (planner.cli.build_parser makes it)."""
    verbs = p.add_subparsers(dest="verb", required=True, parser_class=type(p))
    ls = verbs.add_parser("list", help="list stored records, newest first")
    ls.add_argument("--model", default=None)
    ls.add_argument("--backend", type=argtypes.one_of("--backend", PROBE_BACKENDS), default=None)
    ls.add_argument("--limit", type=argtypes.positive_int("--limit"), default=50)
    ls.set_defaults(run=run_list)
    show = verbs.add_parser("show", help="one record in full (its segments and modules too)")
    show.add_argument("id", type=argtypes.positive_int("ID"))
    show.set_defaults(run=run_show)
    rm = verbs.add_parser("rm", help="remove records")
    rm.add_argument("ids", nargs="+", type=argtypes.positive_int("ID"), metavar="ID")
    rm.set_defaults(run=run_rm)
    for v in (ls, show, rm):
        v.add_argument("--json", action="store_true", help="print one JSON object on stdout")
        advising.add_store_arg(v)


def run_list(args: argparse.Namespace) -> int:
    store = Store.existing(args.store)
    recs = store.list(model=args.model, backend=args.backend, limit=args.limit)
    data = {"store": str(store.path), "records": [r.model_dump(exclude={"detail"}) for r in recs]}
    return printout.print_listing(args, data, "records_table")


def run_show(args: argparse.Namespace) -> int:
    store = Store.existing(args.store)
    rec = store.get(args.id)
    if rec is None:
        raise BadInput(f"probe #{args.id}: no such record in {store.path} (`planner probes list`)", "id")
    if args.json:
        printout.print_json({"store": str(store.path), "record": rec.model_dump()})
        return 0
    from planner.cli import render, render_listings

    render.console.print(render_listings.record_line(rec))
    render.console.print(render_listings.record_detail(rec))
    return 0


def run_rm(args: argparse.Namespace) -> int:
    store = Store.existing(args.store)
    missing = [i for i in args.ids if store.get(i) is None]
    if missing:  # all or nothing: a typo removes nothing
        raise BadInput(f"probe #{missing[0]}: no such record in {store.path}; nothing removed", "ids")
    n = store.delete(args.ids)
    if args.json:
        printout.print_json({"store": str(store.path), "removed": args.ids})
    else:
        printout.say_line(f"removed {n} record(s) from {store.path}")
    return 0
