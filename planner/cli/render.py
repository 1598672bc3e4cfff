"""Human tables (rich). Sizes in GiB (2^30 bytes), as the headers say."""
from __future__ import annotations

from rich.console import Console
from rich.table import Table

from planner.spec import GIB, Plan

console = Console()
if not console.is_terminal:  # pipes and files get whole tables, not 80 columns
    console = Console(width=170)


def gib(x: int) -> str:
    return f"{x / GIB:.2f}"


def plans_table(plans: list[Plan], title: str) -> Table:
    t = Table(title=title, title_justify="left")
    for col in ("#", "micro", "accum", "ckpt", "precision", "ZeRO", "offload", "peak GiB", "total GiB",
                "headroom GiB", "tokens/s", "evidence"):
        t.add_column(col, justify="right" if col not in ("ckpt", "precision", "offload", "evidence") else "left")
    for i, p in enumerate(plans, 1):
        m = p.memory
        t.add_row(str(i), str(p.micro_batch), str(p.grad_accum), p.checkpointing, p.precision, str(p.zero_stage),
                  p.offload, gib(m.peak_allocated_bytes), gib(m.device_total_bytes), gib(m.headroom_bytes),
                  f"{p.tokens_per_s:,.0f}", p.evidence)
    return t


def breakdown_table(p: Plan) -> Table:
    m = p.memory
    t = Table(title=f"memory per GPU (GiB), peak during {m.peak_phase}", title_justify="left")
    t.add_column("term")
    t.add_column("GiB", justify="right")
    for name in ("params", "grads", "optimizer", "activations", "temp", "peak_allocated", "overhead",
                 "device_total", "capacity", "headroom"):
        t.add_row(name, gib(getattr(m, f"{name}_bytes")))
    if m.host_bytes_per_node:
        t.add_row("host RAM per node (offload)", gib(m.host_bytes_per_node))
    return t


def rejected_table(rejected: list[Plan]) -> Table:
    t = Table(title="rejected (smallest micro-batch of each family)", title_justify="left")
    for col in ("ckpt", "precision", "ZeRO", "offload", "total GiB", "reason"):
        t.add_column(col)
    for p in rejected:
        t.add_row(p.checkpointing, p.precision, str(p.zero_stage), p.offload,
                  gib(p.memory.device_total_bytes), p.reason or "")
    return t
