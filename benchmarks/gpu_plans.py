"""The GPU suite's plan parts (benchmarks/gpu_suite.py):
- capacity: cards of 24, 40, 80 and 96 GiB emulated with torch.cuda.set_per_process_memory_fraction (the cuda
  probe's capacity_bytes); every single-GPU plan the planner declares fitting at the maximum length is run a
  few steps, and its OOMs counted; for the best plan's knobs, the largest micro-batch that really runs
  against the planner's choice;
- speed: every fitting single-GPU plan of one 1B-class goal timed; the chosen plan's tokens/s against the best
  measured, and the achieved MFU by tokens per micro-batch (to fit speed.PEAK_EFFICIENCY and
  HALF_EFFICIENCY_TOKENS).
Single-GPU plans are DDP plans (zero 0): the GPU machine has no DeepSpeed.
"""

from __future__ import annotations

from gpu_parts import CAPACITIES_GIB, GIB, GOALS

from planner.config.requests import Space
from planner.config.spec import Goal, Knobs
from planner.estimate.speed import flops_per_token, gpu_tflops
from planner.model import catalog, hardware
from planner.search.search import divisors, search

TINY_GOAL = ("debug-llama", 8, 128)
LADDER_GIB = (24,)  # emulated cards whose largest running micro-batch is searched (and the real card)


def card(gpu_kind: str, capacity_gib: float | None = None):
    """One GPU of the kind, with `capacity_gib` in place of its memory when given (an emulated card)."""
    hw = hardware.resolve(gpu_kind, 1, 1)
    if capacity_gib:
        hw = hw.model_copy(update={"gpu": hw.gpu.model_copy(update={"memory_mib": int(capacity_gib * 1024)})})
    return hw


def _plans(model_name: str, global_batch: int, seq: int, gpu_kind: str, capacity_gib: float | None, top: int):
    hw = card(gpu_kind, capacity_gib)
    model = catalog.load_model(model_name)
    goal = Goal(global_batch=global_batch, seq_len=seq)
    return (
        model,
        hw,
        goal,
        search(
            model,
            hw,
            goal,
            Space(zero_stage=[0], offload=["none"], checkpointing=["off", "full"], fsdp=["off"], loss=["standard"]),
            top=top,
        ).plans,
    )


def _knobs(row: dict) -> Knobs:
    return Knobs(precision=row["precision"], checkpointing=row["checkpointing"])


def card_capacities_gib(real_bytes: int) -> list[float]:
    """The emulated cards smaller than the real one, then the real card itself at its own size (a fraction
    above 1 is refused by set_per_process_memory_fraction, and a bigger card cannot be emulated)."""
    real = real_bytes / GIB
    return [c for c in CAPACITIES_GIB if c < real - 1] + [round(real, 2)]


def capacity_rows(rehearse: bool, gpu_kind: str, real_bytes: int = 80 * GIB) -> list[dict]:
    rows = []
    goals = [TINY_GOAL] if rehearse else GOALS
    for model, gb, seq in goals:
        caps = [2] if rehearse else card_capacities_gib(real_bytes)  # 2: the H100 calibration needs 1.2 GiB
        for cap in caps:
            _, _, _, plans = _plans(model, gb, seq, gpu_kind, cap, top=2 if rehearse else 3)
            for i, p in enumerate(plans):
                ladder = i == 0 and (rehearse or cap == LADDER_GIB[0] or cap == caps[-1])
                rows.append(
                    {
                        "kind": "plan+ladder" if ladder else "plan",
                        "model": model,
                        "global_batch": gb,
                        "seq_len": seq,
                        "capacity_gib": cap,
                        "micro_batch": p.micro_batch,
                        "grad_accum": p.grad_accum,
                        "precision": p.precision,
                        "checkpointing": p.checkpointing,
                        "declared_fits": p.fits,
                        "predicted_device_total": p.memory.device_total_bytes,
                    }
                )
    return rows


def capacity_measure(row: dict, ctx: dict) -> dict:
    from gpu_parts import probe

    model = catalog.load_model(row["model"])
    emulate = not ctx["rehearse"] and row["capacity_gib"] * GIB < ctx["capacity_bytes"] - GIB
    env = {"MEMPLAN_PROBE_CAPACITY_BYTES": str(int(row["capacity_gib"] * GIB))} if emulate else {}
    rec = probe(model, _knobs(row), row["micro_batch"], row["seq_len"], ctx["backend"], env)
    out = {
        "status": rec.status,
        "oom": rec.status == "oom",
        "max_memory_allocated": rec.peak_allocated_bytes,
        "nvml_used": rec.device_used_bytes,
    }
    if ctx["rehearse"]:
        out["reason"] = "no capacity emulation on the CPU: the plan ran at the host's memory"
    if row["kind"] == "plan+ladder":  # the largest micro-batch that runs, one rung at a time upwards
        per_rank, largest = row["global_batch"], None
        for mb in divisors(per_rank):
            if mb < row["micro_batch"] and largest is None:
                continue
            r = probe(model, _knobs(row), mb, row["seq_len"], ctx["backend"], env)
            if r.status != "ok":
                break
            largest = mb
            if ctx["rehearse"] and mb >= row["micro_batch"] * 2:
                break  # the CPU never runs out: two rungs show the loop works
        rungs = divisors(per_rank)
        out.update(
            largest_micro_batch_that_runs=largest,
            planner_micro_batch=row["micro_batch"],
            rungs_between=(rungs.index(largest) - rungs.index(row["micro_batch"])) if largest else None,
        )
    return out


def speed_rows(rehearse: bool, gpu_kind: str) -> list[dict]:
    model, gb, seq = TINY_GOAL if rehearse else GOALS[0]
    _, _, _, plans = _plans(model, gb, seq, gpu_kind, None, top=3 if rehearse else 100)
    return [
        {
            "model": model,
            "global_batch": gb,
            "seq_len": seq,
            "rank": i + 1,
            "micro_batch": p.micro_batch,
            "grad_accum": p.grad_accum,
            "precision": p.precision,
            "checkpointing": p.checkpointing,
            "predicted_tokens_per_s": p.tokens_per_s,
        }
        for i, p in enumerate(plans)
    ]


def speed_measure(row: dict, ctx: dict) -> dict:
    from planner.evidence.store import Shapes
    from probes.run import run_isolated

    model, hw = catalog.load_model(row["model"]), hardware.resolve(ctx["gpu_kind"], 1, 1)
    rec = run_isolated(
        model.name,
        model.config,
        _knobs(row),
        Shapes(micro_batch=row["micro_batch"], grad_accum=row["grad_accum"], seq_len=row["seq_len"]),
        ctx["backend"],
        timeout_s=300,
    )
    if rec.status != "ok" or not rec.step_time_s:
        return {"status": rec.status, "tokens_per_s": None, "mfu": None}
    tokens = row["micro_batch"] * row["grad_accum"] * row["seq_len"]
    tps = tokens / rec.step_time_s
    from planner.estimate.setup import Setup

    s = Setup(model, _knobs(row), row["micro_batch"], row["grad_accum"], row["seq_len"], gpu=ctx["gpu_kind"])
    mfu = None if ctx["rehearse"] else tps * flops_per_token(s) / (gpu_tflops(hw, row["precision"]) * 1e12)
    out = {
        "status": "ok",
        "tokens_per_s": round(tps, 1),
        "tokens_per_micro_batch": row["micro_batch"] * row["seq_len"],
        "mfu": round(mfu, 4) if mfu else None,
    }
    if ctx["rehearse"]:
        out["reason"] = "MFU needs the GPU's peak rate: not computed on the CPU"
    return out
