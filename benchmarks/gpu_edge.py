"""The GPU suite's edge part (benchmarks/gpu_suite.py --part edge): how much of a card a step can really use.

The planner's fragmentation allowance (memory.FRAGMENTATION_FRACTION) is the median reserved/allocated of steps that
ran with room to spare, where the caching allocator keeps every block it freed. Near capacity it frees its cache and
retries before it fails (c10/cuda/CUDACachingAllocator.cpp, malloc), so a step can use more of the card than that
allowance admits. For a dozen configurations (six shapes, each with the default allocator and with
expandable_segments) this part climbs the micro-batch (doubling, at the row's length) and then the length (doubling,
at micro-batch 1) until a step runs out of memory, on the real card or on one emulated by
torch.cuda.set_per_process_memory_fraction (the cuda probe's MEMPLAN_PROBE_CAPACITY_BYTES). For the largest step
that ran it records the allowance that step left, (usable - allocated) / allocated with usable = capacity less the
CUDA context and the driver's reserve, and whether the planner refused it. gpu_apply.edge_fraction writes the least
of those allowances into the calibration file, which then bounds the planner's (memory.fragmentation_fraction).
"""

from __future__ import annotations

from gpu_parts import GIB, _case, probe

from planner.estimate import calibration, memory
from planner.estimate.setup import Setup

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
MAX_MICRO, MAX_SEQ = 256, 65536


def edge_rows(rehearse: bool) -> list[dict]:
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
        for m, p, c, s, cap in (TINY if rehearse else SHAPES)
        for e in (False, True)
    ]


def usable_bytes(capacity: int, gpu_kind: str) -> int:
    """The card less what no step can have: the CUDA context and the driver's reserve (as the planner counts them)."""
    cal = calibration.for_gpu(gpu_kind)
    context = cal.cuda_context_bytes if cal and cal.cuda_context_bytes is not None else memory.CUDA_CONTEXT_BYTES
    driver = cal.driver_reserved_bytes if cal and cal.driver_reserved_bytes is not None else 0
    return capacity - context - driver


def _climb(row: dict, ctx: dict, env: dict, axis: str) -> tuple | None:
    """The largest micro-batch (axis 'micro') or length (axis 'seq') that runs, doubling from the row's start, and
    its probe record and Setup (None when the first rung does not run)."""
    micro, seq = 1, row["seq_len"]
    best = None
    while micro <= MAX_MICRO and seq <= MAX_SEQ:
        model, knobs, m, s = _case(row["model"], row["precision"], row["checkpointing"], micro, seq, ctx["rehearse"])
        knobs = knobs.model_copy(update={"expandable_segments": row["expandable_segments"]})  # run_isolated's env
        rec = probe(model, knobs, m, s, ctx["backend"], env)
        if rec.status != "ok":
            break
        best = (micro if axis == "micro" else s, rec, Setup(model, knobs, m, 1, s, gpu=ctx["gpu_kind"]))
        if ctx["rehearse"] and (micro >= 2 or seq >= 2 * row["seq_len"]):
            break  # the CPU never runs out: two rungs show the climb works
        micro, seq = (micro * 2, seq) if axis == "micro" else (micro, seq * 2)
    return best


def edge_measure(row: dict, ctx: dict) -> dict:
    capacity = int(row["capacity_gib"] * GIB) if row["capacity_gib"] else ctx["capacity_bytes"]
    emulate = not ctx["rehearse"] and capacity < ctx["capacity_bytes"] - GIB
    env = {"MEMPLAN_PROBE_CAPACITY_BYTES": str(capacity)} if emulate else {}
    out: dict = {"status": "ok", "capacity_bytes": capacity}
    for axis in ("micro", "seq"):
        best = _climb(row, ctx, env, axis)
        if best is None:
            return {**out, "status": "oom", "edge_allowance": None, "reason": "the first rung ran out of memory"}
        value, rec, setup = best
        out[f"largest_{axis}"] = value
        out[f"{axis}_max_memory_allocated"] = rec.peak_allocated_bytes
        out[f"{axis}_max_memory_reserved"] = rec.peak_reserved_bytes
        plan = memory.breakdown(setup, capacity)
        out[f"{axis}_planner_refused"] = plan.device_total_bytes > capacity
    if ctx["rehearse"]:
        out.update(edge_allowance=None, reason="the CPU has no card to fill: the edge is not measured")
        return out
    allocated = max(out["micro_max_memory_allocated"], out["seq_max_memory_allocated"])
    out["edge_allowance"] = round(usable_bytes(capacity, ctx["gpu_kind"]) / allocated - 1, 4)
    return out


def summarize(rows: list[dict]) -> dict:
    measured = [r for r in rows if r.get("edge_allowance") is not None]
    return {
        ("expandable" if e else "default"): {
            "least_edge_allowance": min(
                (r["edge_allowance"] for r in measured if r["expandable_segments"] == e), default=None
            ),
            "largest_that_ran_refused": sum(
                bool(r.get("micro_planner_refused")) + bool(r.get("seq_planner_refused"))
                for r in rows
                if r["expandable_segments"] == e
            ),
        }
        for e in (False, True)
    }
