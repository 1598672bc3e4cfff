"""The GPU suite's results against the planner as it is now: `python benchmarks/gpu_report.py DIR` prints
and writes DIR/report.json and DIR/report.md; with --md it prints the markdown alone and writes nothing
(the block in docs/gpu-results.md).

The suite's files keep what was predicted when each row was measured; this report predicts every row again
with today's planner (the calibration file included), so a change to the memory or speed model is judged
against the same GPU measurements:
- accuracy: analytic peak allocated against torch.cuda.max_memory_allocated (median, p95, max), and how
  many rows' predicted device total lies below NVML's used memory;
- fits: every plan of the capacity and speed parts that was run, declared fitting or not today, against
  whether it ran or ran out of memory (a plan declared fitting that ran out of memory is the one failure
  the planner must never make);
- speed: predicted tokens/s against measured, and whether the first-ranked plan is the fastest measured.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from gpu_parts import TUNER_KNOBS, _case
from gpu_plans import card

from planner.config.spec import Goal, Knobs
from planner.estimate.memory import breakdown
from planner.estimate.setup import Setup
from planner.estimate.speed import step_time
from planner.model import catalog
from planner.model.modelspec import as_run_by
from planner.search.estimates import make_plan

GIB = 2**30


def _load(out: Path, name: str) -> dict:
    path = out / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else {"rows": []}


def accuracy(rows: list[dict], gpu_kind: str, transformers: str = "") -> dict:
    """Each row predicted for the model as the transformers that ran it builds it (modelspec.as_run_by)."""
    errs, below, table = [], 0, []
    for r in (r for r in rows if r.get("status") == "ok"):
        tuner = {k: r[k] for k in TUNER_KNOBS if k in r}
        model, knobs, micro, seq = _case(
            r["model"], r["precision"], r["checkpointing"], r["micro_batch"], r["seq_len"], False, **tuner
        )
        model = as_run_by(model, transformers)
        s = Setup(model, knobs, micro, 1, seq, gpu=gpu_kind)
        b = breakdown(s, card(gpu_kind).gpu.capacity_bytes)
        err = r["max_memory_allocated"] / b.peak_allocated_bytes - 1
        errs.append(err)
        below += b.device_total_bytes < r["nvml_used"]
        table.append(
            (
                r["model"] + (f" {r['lora_variant']} r{r['lora_rank']}" if tuner else ""),
                r["precision"],
                r["checkpointing"],
                r["micro_batch"],
                seq,
                r["max_memory_allocated"] / GIB,
                b.peak_allocated_bytes / GIB,
                r["nvml_used"] / GIB,
                b.device_total_bytes / GIB,
                err,
            )
        )
    a = sorted(abs(e) for e in errs)
    return {
        "rows": len(errs),
        "median_abs_error": round(statistics.median(a), 4) if a else None,
        "p95_abs_error": round(a[min(len(a) - 1, round(0.95 * (len(a) - 1)))], 4) if a else None,
        "max_abs_error": round(a[-1], 4) if a else None,
        "device_total_below_nvml_used": below,
        "table": table,
    }


def fits(capacity: list[dict], speed: list[dict], gpu_kind: str, real_gib: float, transformers: str = "") -> dict:
    """Each plan that was run: declared fitting today (at the card it ran on) against its outcome."""
    table = []
    for r in [*capacity, *speed]:
        if r.get("status") not in ("ok", "oom"):
            continue
        model = as_run_by(catalog.load_model(r["model"]), transformers)
        hw = card(gpu_kind, r.get("capacity_gib") if r.get("capacity_gib", real_gib) < real_gib - 1 else None)
        goal = Goal(global_batch=r["micro_batch"] * r["grad_accum"], seq_len=r["seq_len"])
        knobs = Knobs(precision=r["precision"], checkpointing=r["checkpointing"])
        plan = make_plan(model, hw, goal, knobs, r["micro_batch"])
        table.append(
            (
                r["model"],
                round(hw.gpu.capacity_bytes / GIB, 2),
                r["micro_batch"],
                r["grad_accum"],
                r["checkpointing"],
                plan.fits,
                r["status"],
            )
        )
    return {
        "run": len(table),
        "declared_fitting": sum(t[5] for t in table),
        "ooms_among_declared_fitting": sum(t[5] and t[6] == "oom" for t in table),
        "ran_but_declared_not_fitting": sum(not t[5] and t[6] == "ok" for t in table),
        "table": table,
    }


def speed(rows: list[dict], gpu_kind: str, transformers: str = "") -> dict:
    table = []
    for r in (r for r in rows if r.get("tokens_per_s")):
        model = as_run_by(catalog.load_model(r["model"]), transformers)
        s = Setup(
            model,
            Knobs(precision=r["precision"], checkpointing=r["checkpointing"]),
            r["micro_batch"],
            r["grad_accum"],
            r["seq_len"],
            gpu=gpu_kind,
        )
        predicted = r["micro_batch"] * r["grad_accum"] * r["seq_len"] / step_time(s, card(gpu_kind)).total_s
        table.append(
            (
                r["micro_batch"],
                r["grad_accum"],
                r["checkpointing"],
                round(predicted),
                r["tokens_per_s"],
                round(predicted / r["tokens_per_s"] - 1, 4),
            )
        )
    if not table:
        return {"rows": 0, "table": []}
    best_predicted = max(table, key=lambda t: t[3])
    best_measured = max(t[4] for t in table)
    return {
        "rows": len(table),
        "median_abs_error": round(statistics.median(abs(t[5]) for t in table), 4),
        "first_ranked_over_best_measured": round(best_predicted[4] / best_measured, 4),
        "table": table,
    }


def _tf(part: dict) -> str:
    """The transformers version a part's rows were measured with (every part of a window shares it)."""
    return part.get("versions", {}).get("transformers", "")


def report(out: Path) -> dict:
    acc = _load(out, "accuracy-small")
    if not acc["rows"]:  # a window that measured the large models only (the H200's)
        acc = _load(out, "accuracy-large") | {"rows": []}
    gpu_kind, device = acc.get("gpu_kind", "h100-80gb"), acc.get("device", "")
    real_gib = max((r.get("capacity_gib", 0) for r in _load(out, "capacity")["rows"]), default=80)
    return {
        "device": device,
        "gpu_kind": gpu_kind,
        "versions": acc.get("versions", {}),
        "date": acc.get("date"),
        "accuracy": accuracy(
            acc["rows"] + _load(out, "accuracy-large")["rows"] + _load(out, "accuracy-tuners")["rows"],
            gpu_kind,
            _tf(acc),
        ),
        "fits": fits(_load(out, "capacity")["rows"], _load(out, "speed")["rows"], gpu_kind, real_gib, _tf(acc)),
        "speed": speed(_load(out, "speed")["rows"], gpu_kind, _tf(acc)),
    }


def markdown(rep: dict) -> str:
    a, f, s = rep["accuracy"], rep["fits"], rep["speed"]
    v = rep["versions"]
    head = (
        f"# GPU results against today's planner ({rep['device']}, torch {v.get('torch')}, "
        f"transformers {v.get('transformers')}, measured {rep['date']})"
    )
    acc = (
        f"Peak allocated, analytic vs measured over {a['rows']} steps: median {a['median_abs_error']:.2%}, "
        f"p95 {a['p95_abs_error']:.2%}, max {a['max_abs_error']:.2%}; predicted device total below NVML used "
        f"in {a['device_total_below_nvml_used']} of {a['rows']}."
    )
    cols = (
        "| model | precision | ckpt | micro | seq | allocated GiB | analytic GiB | NVML used GiB | device total GiB |"
    )
    lines = [head, "", acc, "", cols + " error |", "|---|---|---|---|---|---|---|---|---|---|"]
    lines += [
        f"| {m} | {p} | {c} | {b} | {q} | {x:.2f} | {y:.2f} | {n:.2f} | {d:.2f} | {e:+.2%} |"
        for m, p, c, b, q, x, y, n, d, e in a["table"]
    ]
    fit = (
        f"Plans run: {f['run']}; declared fitting today: {f['declared_fitting']}; out of memory among them: "
        f"{f['ooms_among_declared_fitting']}; ran although declared not fitting: {f['ran_but_declared_not_fitting']}."
    )
    if f["table"]:  # a window that ran no capacity plans (the H200's) prints none
        lines += [
            "",
            fit,
            "",
            "| model | card GiB | micro | accum | ckpt | declared fits | outcome |",
            "|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {m} | {g} | {b} | {k} | {c} | {'yes' if ok else 'no'} | {o} |" for m, g, b, k, c, ok, o in f["table"]
        ]
    if s["rows"]:
        sp = (
            f"Speed: predicted vs measured tokens/s, median error {s['median_abs_error']:.1%}; the plan ranked "
            f"first reaches {s['first_ranked_over_best_measured']:.1%} of the best measured."
        )
        lines += [
            "",
            sp,
            "",
            "| micro | accum | ckpt | predicted tokens/s | measured tokens/s | error |",
            "|---|---|---|---|---|---|",
        ]
        lines += [f"| {b} | {k} | {c} | {p:,} | {m:,.0f} | {e:+.1%} |" for b, k, c, p, m, e in s["table"]]
    return "\n".join(lines) + "\n"


def main() -> int:
    args = sys.argv[1:]
    out = Path(next((a for a in args if not a.startswith("--")), "benchmarks/results/gpu"))
    rep = report(out)
    if "--md" in args:
        print(markdown(rep), end="")
        return 0
    (out / "report.json").write_text(json.dumps(rep, indent=1) + "\n")
    md = markdown(rep)
    (out / "report.md").write_text(md)
    print(
        json.dumps(
            {
                k: {kk: vv for kk, vv in v.items() if kk != "table"} if isinstance(v, dict) else v
                for k, v in rep.items()
            },
            indent=1,
        )
    )
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
