"""`planner models`: the bundled model catalog, with parameter counts and layers."""
from __future__ import annotations

from planner import catalog
from planner.cli import common


def register(sub) -> None:
    p = sub.add_parser("models", help="list catalog models")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=run)


def gather() -> dict:
    return {"models": [catalog.load_model(n).summary() for n in catalog.model_names()]}


def run(args) -> int:
    data = gather()
    if args.json:
        common.print_json(data)
        return 0
    from rich.table import Table

    from planner.cli.render import console
    t = Table(title="bundled models (HF config.json values; parameter counts exact)", title_justify="left")
    for col in ("name", "model_type", "params", "layers", "hidden", "vocab", "vision params"):
        t.add_column(col, justify="left" if col in ("name", "model_type") else "right")
    for m in data["models"]:
        t.add_row(m["name"], m["model_type"], f"{m['params']:,}", str(m["layers"]), str(m["hidden_size"]),
                  f"{m['vocab_size']:,}", f"{m['vision_params']:,}" if m["vision_params"] else "-")
    console.print(t)
    return 0
