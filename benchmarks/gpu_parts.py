"""The GPU validation suite's parts (benchmarks/gpu_suite.py): each a list of rows to measure, with one
function that measures a row. Every probe runs in its own subprocess (probes.run.run_isolated), so an OOM
or a crash costs one row and leaves the GPU clean. Under --rehearse the same rows run on the CPU with tiny
models ("cpu" probes), and what only CUDA can show is skipped with its reason in the row.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from planner.config.spec import Knobs
from planner.estimate.memory import breakdown
from planner.estimate.setup import Setup
from planner.model import catalog
from planner.model.modelspec import as_run_by

HERE = Path(__file__).resolve().parent
GIB = 2**30
# (model, precision, checkpointing, micro-batch, sequence): 48 rows, 6 architectures from 0.5B to 8B, all four
# precisions, both checkpointing modes, micro-batch 1-16, sequence 512-8192
SMALL = [
    (m, p, c, b, s)
    for m in ("qwen2.5-0.5b", "llama-3.2-1b", "gpt2-medium")
    for p, c, b, s in (
        ("bf16", "off", 4, 1024),
        ("bf16", "full", 16, 1024),
        ("fp32", "off", 1, 512),
        ("fp16", "full", 8, 1024),
        ("bf16-pure", "off", 2, 1024),
        ("bf16-pure", "full", 1, 1024),
        ("bf16", "off", 1, 1024),
        ("fp32", "full", 4, 512),
    )
]
LARGE = [
    (m, p, c, b, s)
    for m in ("gemma-2-2b", "qwen2.5-vl-3b", "llama-3.1-8b")
    for p, c, b, s in (
        ("bf16", "full", 1, 8192),
        ("bf16", "off", 1, 2048),
        ("bf16-pure", "full", 4, 4096),
        ("bf16-pure", "off", 1, 4096),
        ("fp16", "full", 2, 2048),
        ("bf16", "full", 8, 2048),
        ("fp32", "full", 1, 1024),
        ("bf16-pure", "full", 16, 1024),
    )
]
# LoRA rank 16 and DoRA (PEFT's use_dora, planner.estimate.lora.dora_norm_linear_bytes) on the same steps: the
# weight norm's temporaries on CUDA's own kernels, where tests/probes/test_dora.py replays autocast on the CPU
TUNERS = [
    (m, p, c, b, s, v)
    for m, p, c, b, s in (
        ("llama-3.2-1b", "bf16", "off", 4, 1024),
        ("llama-3.2-1b", "bf16", "full", 8, 2048),
        ("qwen2.5-0.5b", "bf16-pure", "off", 4, 1024),
    )
    for v in ("lora", "dora", "adalora", "vera")  # PEFT's AdaLoRA and VeRA as ms-swift runs them (allocator each step)
]
TINY = [
    ("debug-llama", "fp32", "off", 2, 128),
    ("debug-llama", "bf16", "full", 4, 256),
    ("debug-gpt2", "bf16-pure", "off", 2, 128),
]
CAPACITIES_GIB = (24, 40, 80, 96)
GOALS = [("llama-3.2-1b", 32, 2048), ("qwen2.5-0.5b", 64, 4096)]  # (model, global batch, sequence)


def _case(model: str, precision: str, ckpt: str, micro: int, seq: int, rehearse: bool, **knobs):
    if model.startswith("gpt2") or model == "debug-gpt2":
        seq = min(seq, catalog.load_model(model).text.max_positions)
    return catalog.load_model(model), Knobs(precision=precision, checkpointing=ckpt, **knobs), micro, seq


def probe(model, knobs, micro, seq, backend: str, env: dict | None = None):
    from planner.evidence.store import Shapes
    from probes.run import run_isolated

    return run_isolated(
        model.name,
        model.config,
        knobs,
        Shapes(micro_batch=micro, grad_accum=1, seq_len=seq),
        backend,
        timeout_s=300,
        env=env,
    )


# -- accuracy ----------------------------------------------------------------------------------------------
def accuracy_rows(which: str, rehearse: bool) -> list[dict]:
    if which == "tuners":
        grid = [(*TINY[0], "dora")] if rehearse else TUNERS
        return [
            {"model": m, "precision": p, "checkpointing": c, "micro_batch": b, "seq_len": s, "lora_rank": 16}
            | {"lora_variant": v}
            for m, p, c, b, s, v in grid
        ]
    if rehearse:  # one tiny row a part: every code path, few subprocesses
        grid = TINY[:1] if which == "small" else TINY[2:]
    else:
        grid = SMALL if which == "small" else LARGE
    return [{"model": m, "precision": p, "checkpointing": c, "micro_batch": b, "seq_len": s} for m, p, c, b, s in grid]


TUNER_KNOBS = ("lora_rank", "lora_variant")


def _transformers() -> str:
    from importlib import metadata

    return metadata.version("transformers")


def accuracy_measure(row: dict, ctx: dict) -> dict:
    from planner.evidence.store import Shapes
    from probes.run import probe_in_process

    model, knobs, micro, seq = _case(
        row["model"],
        row["precision"],
        row["checkpointing"],
        row["micro_batch"],
        row["seq_len"],
        ctx["rehearse"],
        **{k: row[k] for k in TUNER_KNOBS if k in row},
    )
    # the model as the installed transformers builds it (Gemma-2 attends with SDPA before 5.21): the H100 window
    # compared 5.17's steps with 5.23's eager build and read a 35% over-prediction that was not the planner's
    setup = Setup(as_run_by(model, _transformers()), knobs, micro, 1, seq, gpu=ctx["gpu_kind"])
    analytic = breakdown(setup, ctx["capacity_bytes"])
    sim = probe_in_process(model.name, model.config, knobs, Shapes(micro_batch=micro, grad_accum=1, seq_len=seq))
    rec = probe(model, knobs, micro, seq, ctx["backend"])
    allocated = rec.peak_allocated_bytes if rec.status == "ok" else None
    return {
        "status": rec.status,
        "max_memory_allocated": allocated,
        "max_memory_reserved": rec.peak_reserved_bytes,
        "nvml_used": rec.device_used_bytes,
        "analytic_peak_allocated": analytic.peak_allocated_bytes,
        "analytic_device_total": analytic.device_total_bytes,
        "sim_peak_allocated": sim.peak_allocated_bytes,
        "allocated_vs_analytic": round(allocated / analytic.peak_allocated_bytes - 1, 5) if allocated else None,
        "allocated_vs_sim": round(allocated / sim.peak_allocated_bytes - 1, 5) if allocated else None,
        "step_time_s": rec.step_time_s,
    }


# -- priors: context, library workspaces, fragmentation, NCCL ------------------------------------------------
PRIOR_KINDS = ("context", "cublas", "cudnn", "sdpa", "nccl")


def priors_rows(rehearse: bool) -> list[dict]:
    frag = [
        {
            "kind": "fragmentation",
            "model": m,
            "precision": p,
            "checkpointing": c,
            "micro_batch": b,
            "seq_len": s,
            "expandable_segments": e,
        }
        for m, p, c, b, s in (TINY[:1] if rehearse else [SMALL[0], SMALL[1], LARGE[1], LARGE[2]])
        for e in (False, True)
    ]
    return [{"kind": k} for k in PRIOR_KINDS] + frag


def priors_measure(row: dict, ctx: dict) -> dict:
    if row["kind"] == "fragmentation":
        model, knobs, micro, seq = _case(
            row["model"], row["precision"], row["checkpointing"], row["micro_batch"], row["seq_len"], ctx["rehearse"]
        )
        env = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"} if row["expandable_segments"] else {}
        rec = probe(model, knobs, micro, seq, ctx["backend"], env)
        ratio = (
            rec.peak_reserved_bytes / rec.peak_allocated_bytes
            if rec.status == "ok" and rec.peak_reserved_bytes and rec.peak_allocated_bytes
            else None
        )
        out = {
            "status": rec.status,
            "max_memory_allocated": rec.peak_allocated_bytes,
            "max_memory_reserved": rec.peak_reserved_bytes,
            "reserved_over_allocated": ratio,
        }
        if ctx["rehearse"]:
            out["reason"] = "the CPU has no caching allocator: reserved is not measured"
        return out
    if ctx["rehearse"]:
        return {"status": "skipped", "bytes": None, "reason": f"{row['kind']}: CUDA only (no GPU in a rehearsal)"}
    r = subprocess.run(
        [sys.executable, str(HERE / "gpu_priors.py"), row["kind"]],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "PYTHONPATH": str(HERE.parent)},
    )
    if r.returncode:
        return {"status": "crash", "bytes": None, "reason": r.stderr.strip().splitlines()[-1][:300] if r.stderr else ""}
    return {"status": "ok", **json.loads(r.stdout)}
