"""`planner gpus`: the GPU catalog."""
from __future__ import annotations

from planner import catalog
from planner.cli import common


def register(sub) -> None:
    p = sub.add_parser("gpus", help="list catalog GPUs")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=run)


def gather() -> dict:
    return {"gpus": [{**g.model_dump(), "capacity_bytes": g.capacity_bytes} for g in catalog.gpus()]}


def run(args) -> int:
    data = gather()
    if args.json:
        common.print_json(data)
        return 0
    from rich.table import Table

    from planner.cli.render import console
    t = Table(title="GPU catalog (memory in GiB = 2^30 bytes; sources: `planner gpus --json`)", title_justify="left")
    for col in ("name", "memory GiB", "bf16 TFLOP/s", "HBM GB/s", "link", "link GB/s/dir", "aliases"):
        t.add_column(col)
    for g in data["gpus"]:
        t.add_row(g["name"], f"{g['capacity_bytes'] / 2**30:.1f}", f"{g['bf16_tflops']:g}",
                  f"{g['memory_bandwidth_gbs']:g}", g["link"], f"{g['link_gbs']:g}", ", ".join(g["aliases"]))
    console.print(t)
    return 0
