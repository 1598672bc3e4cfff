"""`gpu_suite.py --apply`: the suite's results as the GPU kind's calibration file (planner/estimate/calibration.py), which
the planner then reads for its priors: context and workspaces, fragmentation, NCCL buffers, and the
efficiency curve fitted to the measured MFU. A prior the results do not hold stays null (the constant)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from planner.estimate.calibration import Calibration, directory


def _load(out: Path, name: str) -> dict:
    path = out / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def fit_efficiency(points: list[tuple[int, float]]) -> tuple[float | None, int | None]:
    """(peak, half-tokens) of mfu = peak * t / (t + half) through the measured (tokens, mfu) points, by a grid
    over half-tokens and a least-squares peak for each (a closed form for a fixed half)."""
    if len(points) < 2:
        return None, None
    best = None
    for half in range(64, 65536, 64):
        xs = [t / (t + half) for t, _ in points]
        peak = sum(x * m for x, (_, m) in zip(xs, points)) / sum(x * x for x in xs)
        err = sum((peak * x - m) ** 2 for x, (_, m) in zip(xs, points))
        if best is None or err < best[0]:
            best = (err, min(peak, 1.0), half)
    return round(best[1], 4), best[2]


def fragmentation_fraction(rows: list[dict], expandable: bool = False) -> float | None:
    """Median of reserved/allocated - 1 over every measured step with the allocator asked for (the priors'
    fragmentation rows and the accuracy rows: the default allocator, as a plan runs by default; expandable segments
    where a row says so)."""
    ratios = [
        r["max_memory_reserved"] / r["max_memory_allocated"] - 1
        for r in rows
        if r.get("status") == "ok"
        and bool(r.get("expandable_segments")) == expandable
        and r.get("max_memory_reserved")
        and r.get("max_memory_allocated")
    ]
    return round(statistics.median(ratios), 4) if ratios else None


def edge_fraction(rows: list[dict], expandable: bool = False) -> float | None:
    """The largest allowance that refuses none of the edge part's largest steps that ran: the least
    (usable - allocated) / allocated over them (benchmarks/gpu_edge.py). None where a step the planner declared
    fitting did not run: the H200 window of 2026-12-04 ran Llama-3.2-1B with 1.9% of its peak to spare while
    Gemma-2-2B failed with 24.5% (the default allocator), so the least allowance that ran bounds nothing."""
    mine = [r for r in rows if bool(r.get("expandable_segments")) == expandable]
    if any(r.get("planner_micro_ran") is False for r in mine):
        return None
    left = [r["edge_allowance"] for r in mine if r.get("edge_allowance") is not None]
    return round(max(min(left), 0.0), 4) if left else None


def driver_reserved(priors: dict) -> int | None:
    """NVML's used memory before the context prior's process touched the GPU (driver and ECC reserve)."""
    row = next((r for r in priors.get("rows", []) if r.get("kind") == "context" and r.get("status") == "ok"), None)
    return (row.get("detail") or {}).get("nvml_before") if row else None


def apply(out: Path, target: str | None = None) -> Path:
    priors, speed, edge = _load(out, "priors"), _load(out, "speed"), _load(out, "edge")
    accuracy = [_load(out, n) for n in ("accuracy-small", "accuracy-large")]
    source = priors or speed or accuracy[0]
    if not source:
        raise SystemExit(f"gpu_suite --apply: no results in {out}")
    measured = (priors.get("summary") or {}).get("measured", {})
    context = measured.get("context")
    workspaces = sum(v for k, v in measured.items() if k in ("cublas", "cudnn", "sdpa") and v)
    peak, half = fit_efficiency([tuple(p) for p in (speed.get("summary") or {}).get("mfu_by_tokens", [])])
    steps = [r for d in (priors, *accuracy) for r in d.get("rows", []) if r.get("kind", "") != "context"]
    real = not source["rehearse"]
    cal = Calibration(
        gpu=source["gpu_kind"],
        measured=f"{source['date']} {source['device']}",
        versions=source.get("versions", {}),
        cuda_context_bytes=None if context is None or source["rehearse"] else context + workspaces,
        fragmentation_fraction=fragmentation_fraction(steps) if real else None,
        fragmentation_fraction_expandable=fragmentation_fraction(steps, expandable=True) if real else None,
        edge_fraction=edge_fraction(edge.get("rows", [])) if real and not edge.get("rehearse") else None,
        edge_fraction_expandable=edge_fraction(edge.get("rows", []), True)
        if real and not edge.get("rehearse")
        else None,
        driver_reserved_bytes=None if source["rehearse"] else driver_reserved(priors),
        nccl_bytes=measured.get("nccl"),
        peak_efficiency=peak,
        half_efficiency_tokens=half,
    )
    path = (Path(target) if target else directory()) / f"{cal.gpu}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(cal.model_dump_json(indent=1) + "\n")
    return path
