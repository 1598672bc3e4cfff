"""The GPU suite's edge part (benchmarks/gpu_suite.py --part edge): does the planner's largest fitting micro-batch run,
and how much of the card was left when it did.

The planner's fragmentation allowance (overheads.FRAGMENTATION_FRACTION) is the median reserved/allocated of steps that
ran with room to spare, where the caching allocator keeps every block it freed. Near capacity it frees its cache and
retries before it fails (c10/cuda/CUDACachingAllocator.cpp, malloc), so a step can use more of the card than that
allowance admits. For six shapes, each with the default allocator and with expandable_segments, this part asks the
planner for the largest micro-batch it declares fitting (estimates.make_plan(...).fits, its margin included) on the real
card or on one emulated by torch.cuda.set_per_process_memory_fraction (the cuda probe's
MEMPLAN_PROBE_CAPACITY_BYTES), runs that step, then the next rung up (an eighth more, at least one); where the
planner's step runs out of memory it halves until a step runs (a plan declared fitting that does not: the OOM this
tool exists to prevent). For the largest step that ran it records the allowance that step left,
(usable - allocated) / allocated with usable = capacity less the CUDA context and the driver's reserve.
gpu_apply.edge_fraction writes the least of those allowances into the calibration file, which then bounds the
planner's (overheads.fragmentation_fraction). Two probes a row where the planner is right (an earlier version climbed
from micro-batch 1 by doubling, about 5 minutes a row: more than a window holds).
"""

from __future__ import annotations

from gpu_parts import GIB, _case, probe
from gpu_plans import card

from planner.config.spec import Goal
from planner.estimate import calibration, memory, overheads
from planner.estimate.setup import Setup
from planner.search.estimates import make_plan

# (model, precision, checkpointing, sequence, emulated card GiB; None = the real card)
SHAPES = [
    ("qwen2.5-0.5b", "bf16", "off", 1024, 24),
    ("qwen2.5-0.5b", "bf16", "full", 4096, 24),
    ("llama-3.2-1b", "bf16", "off", 2048, 40),
    ("llama-3.2-1b", "bf16-pure", "full", 4096, 40),
    ("gemma-2-2b", "bf16", "full", 2048, None),
    ("qwen2.5-vl-3b", "bf16-pure", "full", 2048, None),
]
TINY = [("debug-llama", "bf16", "off", 128, 2)]
MAX_MICRO = 512


def edge_rows(rehearse: bool) -> list[dict]:
    """The default allocator's rows first: a window that ends early has measured every shape once."""
    return [
        {
            "kind": "edge",
            "model": m,
            "precision": p,
            "checkpointing": c,
            "seq_len": s,
            "capacity_gib": cap,
            "expandable_segments": e,
        }
        for e in (False, True)
        for m, p, c, s, cap in (TINY if rehearse else SHAPES)
    ]


def usable_bytes(capacity: int, gpu_kind: str) -> int:
    """The card less what no step can have: the CUDA context and the driver's reserve (as the planner counts them)."""
    cal = calibration.for_gpu(gpu_kind)
    context = cal.cuda_context_bytes if cal and cal.cuda_context_bytes is not None else overheads.CUDA_CONTEXT_BYTES
    driver = cal.driver_reserved_bytes if cal and cal.driver_reserved_bytes is not None else 0
    return capacity - context - driver


def planner_largest(row: dict, ctx: dict, capacity_gib: float | None) -> int | None:
    """The largest micro-batch the planner declares fitting at the row's length (bisection: memory grows with it)."""
    model, knobs, _, seq = _case(row["model"], row["precision"], row["checkpointing"], 1, row["seq_len"], False)
    knobs = knobs.model_copy(update={"expandable_segments": row["expandable_segments"]})
    hw = card(ctx["gpu_kind"], capacity_gib)

    def fits(m: int) -> bool:
        return make_plan(model, hw, Goal(global_batch=m, seq_len=seq), knobs, m).fits

    if not fits(1):
        return None
    lo, hi = 1, MAX_MICRO + 1  # fits(lo), and hi is past the search
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def _run(row: dict, ctx: dict, env: dict, micro: int):
    model, knobs, m, s = _case(row["model"], row["precision"], row["checkpointing"], micro, row["seq_len"], False)
    knobs = knobs.model_copy(update={"expandable_segments": row["expandable_segments"]})  # run_isolated's env
    return probe(model, knobs, m, s, ctx["backend"], env), Setup(model, knobs, m, 1, s, gpu=ctx["gpu_kind"])


def edge_measure(row: dict, ctx: dict) -> dict:
    capacity = int(row["capacity_gib"] * GIB) if row["capacity_gib"] else ctx["capacity_bytes"]
    emulate = not ctx["rehearse"] and capacity < ctx["capacity_bytes"] - GIB
    env = {"MEMPLAN_PROBE_CAPACITY_BYTES": str(capacity)} if emulate else {}
    chosen = planner_largest(row, ctx, row["capacity_gib"] if emulate or ctx["rehearse"] else None)
    out: dict = {"status": "ok", "capacity_bytes": capacity, "planner_micro": chosen}
    if chosen is None:
        return {**out, "status": "refused", "edge_allowance": None, "reason": "the planner refuses micro-batch 1"}
    if ctx["rehearse"]:
        chosen = min(chosen, 2)  # the CPU never runs out: the planner's rung and the next show the code works
    rec, setup = _run(row, ctx, env, chosen)
    out["planner_micro_ran"] = rec.status == "ok"
    if rec.status != "ok":  # what stopped it: an OOM (and the allocator's own account of it), a crash, a timeout
        out["planner_micro_status"] = rec.status
        out["planner_micro_detail"] = {k: rec.detail[k] for k in ("error", "stderr_tail") if k in rec.detail}
    largest, best = (chosen, rec) if rec.status == "ok" else (None, None)
    probe_micro = chosen + max(1, chosen // 8) if rec.status == "ok" else chosen // 2
    while probe_micro >= 1:
        r, s = _run(row, ctx, env, probe_micro)
        if r.status == "ok":
            if largest is None or probe_micro > largest:
                largest, best, setup = probe_micro, r, s
            break  # one rung above the planner's, or the first that runs below it
        if largest is not None:
            break
        probe_micro //= 2
    out.update(next_rung=chosen + max(1, chosen // 8), largest_micro=largest)
    if best is None:
        return {**out, "status": "oom", "edge_allowance": None, "reason": "micro-batch 1 ran out of memory"}
    out["max_memory_allocated"] = best.peak_allocated_bytes
    out["max_memory_reserved"] = best.peak_reserved_bytes
    out["nvml_used"] = best.device_used_bytes
    out["predicted_device_total"] = memory.breakdown(setup, capacity).device_total_bytes
    if ctx["rehearse"]:
        out.update(edge_allowance=None, reason="the CPU has no card to fill: the edge is not measured")
        return out
    out["edge_allowance"] = round(usable_bytes(capacity, ctx["gpu_kind"]) / best.peak_allocated_bytes - 1, 4)
    return out


def summarize(rows: list[dict]) -> dict:
    measured = [r for r in rows if r.get("edge_allowance") is not None]
    return {
        ("expandable" if e else "default"): {
            "rows": sum(r["expandable_segments"] == e for r in rows),
            "least_edge_allowance": min(
                (r["edge_allowance"] for r in measured if r["expandable_segments"] == e), default=None
            ),
            "planner_micro_failed": sum(
                r.get("planner_micro_ran") is False for r in rows if r["expandable_segments"] == e
            ),
            "next_rung_ran": sum(
                (r.get("largest_micro") or 0) > (r.get("planner_micro") or 0)
                for r in rows
                if r["expandable_segments"] == e
            ),
        }
        for e in (False, True)
    }


def markdown(data: dict) -> list[str]:
    """The stored edge part as a table: the planner's largest fitting micro-batch, whether it ran, the largest that ran
    and what that step held."""
    v = data["versions"]
    title = (
        f"# The edge: the planner's largest fitting micro-batch on the card ({data['device']}, torch "
        f"{v.get('torch')}, transformers {v.get('transformers')}, {data['date']})"
    )
    cols = "| model | precision | ckpt | seq | card GiB | allocator | planner's micro | ran | largest that ran |"
    out = [
        title,
        "",
        cols + " its allocated / reserved GiB | left to spare |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in data["rows"]:
        card = f"{r['capacity_gib']} (emulated)" if r["capacity_gib"] else f"{r['capacity_bytes'] / GIB:.1f}"
        ran = "yes" if r.get("planner_micro_ran") else r.get("planner_micro_status", "no")
        held = f"{r['max_memory_allocated'] / GIB:.2f} / {r['max_memory_reserved'] / GIB:.2f}"
        out.append(
            f"| {r['model']} | {r['precision']} | {r['checkpointing']} | {r['seq_len']} | {card} | "
            f"{'expandable' if r['expandable_segments'] else 'default'} | {r['planner_micro']} | {ran} | "
            f"{r['largest_micro']} | {held} | {r['edge_allowance']:.1%} |"
        )
    return out


if __name__ == "__main__":
    import json
    import sys
    from pathlib import Path

    print("\n".join(markdown(json.loads(Path(sys.argv[sys.argv.index("--report") + 1]).read_text()))))
