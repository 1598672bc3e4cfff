"""GPU validation suite: everything a GPU can show the planner, in parts that each stop inside a time budget.

    python benchmarks/gpu_suite.py --out benchmarks/results/gpu/                 every part, on the CUDA device
    python benchmarks/gpu_suite.py --out DIR --part accuracy-small --resume     one part, continuing a killed run
    python benchmarks/gpu_suite.py --out DIR --apply                            write the calibration file
    python benchmarks/gpu_suite.py --out DIR --rehearse                         every part on the CPU, tiny models,
                                                                                then the files' schema checked
Parts: accuracy-small, accuracy-large (measured max_memory_allocated / reserved / NVML used against the analytic
and sim predictions), priors (context, library workspaces, fragmentation with and without expandable
segments, NCCL), capacity (emulated 24/40/80/96 GiB cards: OOMs among plans declared fitting, the largest
micro-batch that runs), speed (every fitting plan of a 1B goal timed; MFU by tokens per micro-batch), edge (the
largest micro-batch and length that run for a dozen configurations, with and without expandable segments: the
allowance near capacity, benchmarks/gpu_edge.py).

Each part writes DIR/<part>.json after every row (a killed call loses at most the row in flight) and stops
after --budget-s seconds (default 450: under 8 minutes); --resume continues with the rows not yet measured.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from importlib import metadata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_edge
import gpu_parts
import gpu_plans

PARTS = {
    "accuracy-small": (lambda c: gpu_parts.accuracy_rows("small", c["rehearse"]), gpu_parts.accuracy_measure),
    "accuracy-large": (lambda c: gpu_parts.accuracy_rows("large", c["rehearse"]), gpu_parts.accuracy_measure),
    "accuracy-tuners": (lambda c: gpu_parts.accuracy_rows("tuners", c["rehearse"]), gpu_parts.accuracy_measure),
    "priors": (lambda c: gpu_parts.priors_rows(c["rehearse"]), gpu_parts.priors_measure),
    "capacity": (
        lambda c: gpu_plans.capacity_rows(c["rehearse"], c["gpu_kind"], c["capacity_bytes"]),
        gpu_plans.capacity_measure,
    ),
    "speed": (lambda c: gpu_plans.speed_rows(c["rehearse"], c["gpu_kind"]), gpu_plans.speed_measure),
    "edge": (lambda c: gpu_edge.edge_rows(c["rehearse"]), gpu_edge.edge_measure),
}
# what every row of a part's file must hold (the rehearsal checks it, so the kit cannot rot)
ROW_KEYS = {
    "accuracy-small": {
        "model",
        "precision",
        "checkpointing",
        "micro_batch",
        "seq_len",
        "status",
        "max_memory_allocated",
        "max_memory_reserved",
        "nvml_used",
        "analytic_peak_allocated",
        "analytic_device_total",
        "sim_peak_allocated",
        "allocated_vs_analytic",
    },
    "priors": {"kind", "status"},
    "capacity": {"model", "capacity_gib", "micro_batch", "declared_fits", "status", "oom"},
    "speed": {"model", "rank", "micro_batch", "grad_accum", "status", "tokens_per_s", "mfu"},
    "edge": {"model", "capacity_bytes", "expandable_segments", "status", "edge_allowance"},
}
ROW_KEYS["accuracy-large"] = ROW_KEYS["accuracy-tuners"] = ROW_KEYS["accuracy-small"]
DEFAULT_BUDGET_S = 450  # a part stops inside 8 minutes, the longest command a GPU window allows with margin
FILE_KEYS = {"part", "device", "gpu_kind", "rehearse", "versions", "date", "done", "rows", "summary"}
# Estimates for one H100 (about 8-15 s a probe subprocess, 2-5 s a sim): 20 minutes in all. Every row records its
# seconds; replace these with the measured ones after the first GPU run.
EXPECTED_MINUTES = {
    "accuracy-small": 4,
    "accuracy-large": 7,
    "accuracy-tuners": 6,  # 12 rows: LoRA, DoRA, AdaLoRA, VeRA at three shapes (about 33 s a row on the H200)
    "priors": 2,
    "capacity": 5,
    "speed": 2,
    "edge": 8,
}


def context(rehearse: bool) -> dict:
    import torch

    if rehearse:
        return {
            "rehearse": True,
            "backend": "cpu",
            "device": "cpu (rehearsal)",
            "gpu_kind": "h100-80gb",
            "capacity_bytes": 80 * gpu_parts.GIB,
        }
    if not torch.cuda.is_available():
        raise SystemExit("gpu_suite: no CUDA device (torch.cuda.is_available() is False); --rehearse runs on the CPU")
    from planner.model.hardware import match_local

    name, total = torch.cuda.get_device_name(0), torch.cuda.get_device_properties(0).total_memory
    return {
        "rehearse": False,
        "backend": "cuda",
        "device": name,
        "gpu_kind": match_local(name, total).name,
        "capacity_bytes": total,
    }


def _key(row: dict) -> str:
    return json.dumps({k: v for k, v in row.items() if k in ROW_INPUTS}, sort_keys=True)


ROW_INPUTS = {
    "kind",
    "model",
    "precision",
    "checkpointing",
    "micro_batch",
    "grad_accum",
    "seq_len",
    "capacity_gib",
    "expandable_segments",
    "rank",
    "global_batch",
    "lora_rank",
    "lora_variant",
}


def run_part(name: str, ctx: dict, out: Path, resume: bool, budget_s: float, models: list[str] | None = None) -> dict:
    path = out / f"{name}.json"
    old = json.loads(path.read_text()) if resume and path.is_file() else None
    if old and old.get("done"):
        print(f"{name}: done already (--resume)")
        return old
    rows_fn, measure = PARTS[name]
    data = {
        "part": name,
        "device": ctx["device"],
        "gpu_kind": ctx["gpu_kind"],
        "rehearse": ctx["rehearse"],
        "versions": {p: _version(p) for p in ("torch", "transformers")},
        "date": time.strftime("%Y-%m-%d"),
        "done": False,
        "rows": (old or {}).get("rows", []),
        "summary": {},
    }
    have = {_key(r) for r in data["rows"]}
    todo = [r for r in rows_fn(ctx) if _key(r) not in have and (not models or r.get("model") in models)]
    print(f"{name}: {len(todo)} rows to measure (about {EXPECTED_MINUTES[name]} min on one H100)", flush=True)
    t0 = time.monotonic()
    for i, row in enumerate(todo):
        if time.monotonic() - t0 > budget_s:
            print(f"{name}: budget of {budget_s:.0f} s spent, {len(todo) - i} rows left (run again with --resume)")
            break
        started = time.monotonic()
        try:
            result = measure(row, ctx)
        except Exception as e:  # noqa: BLE001 (a row that breaks is a result: the suite goes on)
            result = {"status": "error", "reason": f"{e.__class__.__name__}: {e}"[:300]}
        data["rows"].append({**row, **result, "seconds": round(time.monotonic() - started, 1)})
        print(f"{name} {len(data['rows'])}: {json.dumps({**row, **result})[:200]}", flush=True)
        _write(path, data)
    else:
        data["done"] = not models  # a run of some models leaves the others for --resume
    data["summary"] = summarize(name, data["rows"])
    _write(path, data)
    return data


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return ""


def _write(path: Path, data: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    tmp.replace(path)  # atomic: a kill leaves the previous file whole


def _quantile(xs: list[float], q: float) -> float | None:
    xs = sorted(abs(x) for x in xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))] if xs else None


def summarize(name: str, rows: list[dict]) -> dict:
    ok = [r for r in rows if r.get("status") == "ok"]
    if name.startswith("accuracy"):
        errs = [r["allocated_vs_analytic"] for r in ok if r.get("allocated_vs_analytic") is not None]
        under = [r for r in ok if r.get("nvml_used") and r["analytic_device_total"] < r["nvml_used"]]
        return {
            "rows": len(rows),
            "ok": len(ok),
            "median_abs_error": _quantile(errs, 0.5),
            "p95_abs_error": _quantile(errs, 0.95),
            "device_total_below_nvml_used": len(under),
        }
    if name == "capacity":
        declared = [r for r in rows if r.get("declared_fits")]
        rungs = [r["rungs_between"] for r in rows if r.get("rungs_between") is not None]
        return {
            "plans_declared_fitting": len(declared),
            "ooms_among_them": sum(bool(r.get("oom")) for r in declared),
            "max_rungs_below_largest_that_runs": max(rungs) if rungs else None,
        }
    if name == "speed":
        measured = [r for r in ok if r.get("tokens_per_s")]
        chosen = next((r for r in measured if r["rank"] == 1), None)
        best = max((r["tokens_per_s"] for r in measured), default=None)
        return {
            "plans": len(rows),
            "chosen_over_best": round(chosen["tokens_per_s"] / best, 4) if chosen and best else None,
            "mfu_by_tokens": sorted((r["tokens_per_micro_batch"], r["mfu"]) for r in measured if r["mfu"]),
        }
    if name == "edge":
        return gpu_edge.summarize(rows)
    if name == "priors":
        frag = [r["reserved_over_allocated"] for r in ok if r.get("reserved_over_allocated")]
        return {
            "measured": {r["kind"]: r.get("bytes") for r in ok if r["kind"] != "fragmentation"},
            "fragmentation_median": statistics.median(frag) - 1 if frag else None,
        }
    return {}


def check_schema(out: Path, parts: list[str]) -> list[str]:
    """Problems with the result files (missing files, keys, rows); empty when every file is whole."""
    problems = []
    for name in parts:
        path = out / f"{name}.json"
        if not path.is_file():
            problems.append(f"{path}: missing")
            continue
        data = json.loads(path.read_text())
        problems += [f"{path}: no '{k}'" for k in FILE_KEYS - set(data)]
        if not data.get("rows"):
            problems.append(f"{path}: no rows")
        for i, row in enumerate(data.get("rows", [])):
            missing = ROW_KEYS[name] - set(row)
            if missing:
                problems.append(f"{path} row {i}: no {sorted(missing)}")
            if row.get("status") in ("skipped", "error") and not row.get("reason"):
                problems.append(f"{path} row {i}: {row['status']} without a reason")
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--part", action="append", choices=list(PARTS), help="default: every part")
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--rehearse", action="store_true")
    ap.add_argument("--apply", action="store_true", help="write the calibration file from DIR's results")
    ap.add_argument("--calibration-dir", default=None, help="where --apply writes (default: the package's)")
    ap.add_argument("--model", action="append", help="measure only these models' rows (default: every row)")
    ap.add_argument("--budget-s", type=float, default=DEFAULT_BUDGET_S, help="stop a part after this (seconds)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    parts = args.part or list(PARTS)
    if args.apply:
        from gpu_apply import apply

        print(f"wrote {apply(out, args.calibration_dir)}")
        return 0
    ctx = context(args.rehearse)
    for name in parts:
        run_part(name, ctx, out, args.resume, args.budget_s, args.model)
    problems = check_schema(out, parts)
    for p in problems:
        print(f"schema: {p}")
    print(json.dumps({n: json.loads((out / f"{n}.json").read_text())["summary"] for n in parts}, indent=1))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
