"""`gpu_suite.py --apply`: the suite's results as the GPU kind's calibration file (planner/calibration.py), which
the planner then reads for its priors: context and workspaces, fragmentation, NCCL buffers, and the
efficiency curve fitted to the measured MFU. A prior the results do not hold stays null (the constant)."""
from __future__ import annotations

import json
from pathlib import Path

from planner.calibration import Calibration, directory


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


def apply(out: Path, target: str | None = None) -> Path:
    priors, speed = _load(out, "priors"), _load(out, "speed")
    source = priors or speed or _load(out, "accuracy-small")
    if not source:
        raise SystemExit(f"gpu_suite --apply: no results in {out}")
    measured = (priors.get("summary") or {}).get("measured", {})
    context = measured.get("context")
    workspaces = sum(v for k, v in measured.items() if k in ("cublas", "cudnn", "sdpa") and v)
    peak, half = fit_efficiency([tuple(p) for p in (speed.get("summary") or {}).get("mfu_by_tokens", [])])
    cal = Calibration(gpu=source["gpu_kind"], measured=f"{source['date']} {source['device']}",
                      versions=source.get("versions", {}),
                      cuda_context_bytes=None if context is None or source["rehearse"] else context + workspaces,
                      fragmentation_fraction=(priors.get("summary") or {}).get("fragmentation_median"),
                      nccl_bytes=measured.get("nccl"), peak_efficiency=peak, half_efficiency_tokens=half)
    path = (Path(target) if target else directory()) / f"{cal.gpu}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(cal.model_dump_json(indent=1) + "\n")
    return path
