"""What the search set aside, as tables and lines: the rejected knob families (one row per reason) and the nearest
settings that fit (planner.search.nearest), with each change in its framework's keys."""

from __future__ import annotations

import re

from planner.cli.plain import Table
from planner.cli.render import gib
from planner.config.spec import Plan


def rejected_table(rejected: list[Plan]) -> Table:
    """One row per distinct reason (reasons that differ only in their figures are one): how many knob families
    it rejects, the one of them closest to fitting, and its reason."""
    groups: dict[str, list[Plan]] = {}
    for p in rejected:
        groups.setdefault(re.sub(r"\d[\d,.]*", "#", p.reason or ""), []).append(p)
    t = Table(title="rejected (smallest micro-batch of each knob family, one row per reason)", title_justify="left")
    for col in ("families", "closest: ckpt", "precision", "sharding", "offload", "recipe", "total GiB", "reason"):
        t.add_column(col, justify="right" if col in ("families", "total GiB") else "left")
    for plans in groups.values():
        p = min(plans, key=lambda q: q.memory.device_total_bytes)
        t.add_row(
            str(len(plans)),
            p.checkpointing,
            p.precision,
            p.sharding,
            p.offload,
            p.recipe,
            gib(p.memory.device_total_bytes),
            p.reason or "",
        )
    return t


def nearest_table(nearest: list) -> Table:
    """The nearest settings that fit (planner.search.nearest): the change, and the best plan it gives."""
    t = Table(
        title="nearest settings that fit (one change each; 'any knobs': other knobs changed too)", title_justify="left"
    )
    for col in (
        "change",
        "micro",
        "accum",
        "ckpt",
        "precision",
        "sharding",
        "offload",
        "recipe",
        "total GiB",
        "tokens/s",
    ):
        t.add_column(col, justify="right" if col in ("micro", "accum", "total GiB", "tokens/s") else "left")
    for n in nearest:
        p = n.plan
        t.add_row(
            n.change,
            str(p.micro_batch),
            str(p.grad_accum),
            p.checkpointing,
            p.precision,
            p.sharding,
            p.offload,
            p.recipe,
            gib(p.memory.device_total_bytes),
            f"{p.tokens_per_s:,.0f}",
        )
    return t


def nearest_lines(nearest: list) -> list[str]:
    """What to print after the table: each change in its framework's keys, or a line saying no single change fits."""
    tried = "every knob allowed, adamw-fused, LoRA, more host RAM, twice the GPUs or nodes, half the sequence"
    if not nearest:
        return [f"no single change fits (tried: {tried})"]
    return [f"{n.change}, in {n.plan.framework}'s keys: {'; '.join(n.keys)}" for n in nearest if n.keys]
