"""`planner probes list`: the stored probe records."""
from __future__ import annotations

import argparse

from planner.cli import common
from planner.store import Store


def register(sub) -> None:
    p = sub.add_parser("probes", help="stored probe records")
    verbs = p.add_subparsers(dest="verb", required=True, parser_class=type(p))
    ls = verbs.add_parser("list", help="list stored records, newest first")
    ls.add_argument("--model", default=None)
    ls.add_argument("--backend", type=common.one_of("--backend", ("sim", "cpu", "cuda")), default=None)
    ls.add_argument("--limit", type=common.positive_int("--limit"), default=50)
    ls.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    common.add_store_arg(ls)
    ls.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    store = Store(args.store)
    recs = store.list(model=args.model, backend=args.backend, limit=args.limit)
    data = {"store": str(store.path),
            "records": [r.model_dump(exclude={"detail"}) for r in recs]}
    return common.print_listing(args, data, "records_table")
