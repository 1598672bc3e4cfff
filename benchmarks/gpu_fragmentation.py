"""What the GPU windows' steps reserved, against the caching allocator replayed over the sim's trace of each step
(probes.reserved) and against the analytic prior (one reserved-over-allocated fraction for every shape).

    python benchmarks/gpu_fragmentation.py --out benchmarks/results/fragmentation.json    replay every measured row
    python benchmarks/gpu_fragmentation.py --report benchmarks/results/fragmentation.json print the stored table

The rows are the default allocator's steps that ran in benchmarks/results/gpu/ (H100, accuracy-small and
accuracy-large) and benchmarks/results/gpu/h200/ (accuracy-large, accuracy-tuners, and edge's largest steps: those
ran near capacity, on a card emulated by set_per_process_memory_fraction or on the real one, so the replay gets the
same limit and frees its cache at it as the allocator does). The edge rows whose planner step failed are replayed at
that micro-batch too. About 20 s a row on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
import results_io

GIB = 2**30
SOURCES = [
    ("h100", "benchmarks/results/gpu/accuracy-small.json"),
    ("h100", "benchmarks/results/gpu/accuracy-large.json"),
    ("h200", "benchmarks/results/gpu/h200/accuracy-large.json"),
    ("h200", "benchmarks/results/gpu/h200/accuracy-tuners.json"),
    ("h200", "benchmarks/results/gpu/h200/edge.json"),
]
TUNER_KEYS = ("lora_rank", "lora_variant")


def measured_rows() -> list[dict]:
    """Every default-allocator step with a measured max_memory_reserved, and each edge row's failed planner step."""
    out = []
    for gpu, path in SOURCES:
        data = json.loads((ROOT / path).read_text())
        for r in data["rows"]:
            if r.get("expandable_segments") or not r.get("max_memory_reserved"):
                continue
            row = {"gpu": gpu, "source": path.rsplit("/", 1)[-1], **{k: r[k] for k in TUNER_KEYS if k in r}}
            row |= {k: r[k] for k in ("model", "precision", "checkpointing", "seq_len")}
            edge = r.get("kind") == "edge"
            micro = r["largest_micro"] if edge else r["micro_batch"]
            limit = _edge_limit(r) if edge else None
            out.append(
                row
                | {"micro_batch": micro, "limit_bytes": limit, "ran": True}
                | {k: r[k] for k in ("max_memory_allocated", "max_memory_reserved")}
            )
            if edge and r.get("planner_micro_ran") is False:
                out.append(row | {"micro_batch": r["planner_micro"], "limit_bytes": limit, "ran": False})
            elif edge and r["largest_micro"] < r["next_rung"]:  # the rung above the planner's did not run
                out.append(row | {"micro_batch": r["next_rung"], "limit_bytes": limit, "ran": False})
    return out


def _edge_limit(r: dict) -> int:
    """What the allocator could reserve: the emulated fraction of the card, or the real card less the driver's
    reserve and the CUDA context (planner/model/catalog/calibration/h200.json)."""
    if r["capacity_gib"] is not None:
        return r["capacity_bytes"]
    cal = json.loads((ROOT / "planner/model/catalog/calibration/h200.json").read_text())
    return r["capacity_bytes"] - cal["driver_reserved_bytes"] - cal["cuda_context_bytes"]


def _key(row: dict) -> str:
    return json.dumps({k: v for k, v in row.items() if not k.startswith("replay") and k != "seconds"}, sort_keys=True)


def replay_row(row: dict) -> dict:
    import gpu_parts

    from probes.reserved import reserved
    from probes.step import Case

    t0 = time.monotonic()
    extra = {k: row[k] for k in TUNER_KEYS if k in row}
    model, knobs, micro, seq = gpu_parts._case(
        row["model"], row["precision"], row["checkpointing"], row["micro_batch"], row["seq_len"], False, **extra
    )
    a = reserved(Case(model.config, knobs, micro, 1, seq), row["limit_bytes"])
    return {
        "replay_allocated": a.peak_allocated,
        "replay_reserved": a.peak_reserved,
        "replay_oom_at": a.oom_at,
        "seconds": round(time.monotonic() - t0, 1),
    }


def summarize(rows: list[dict], prior: float) -> dict:
    ran = [r for r in rows if r["ran"]]
    rep = [r["replay_reserved"] / r["max_memory_reserved"] - 1 for r in ran]
    pri = [r["max_memory_allocated"] * (1 + prior) / r["max_memory_reserved"] - 1 for r in ran]

    def stats(xs):
        a = sorted(abs(x) for x in xs)
        return {"median": round(statistics.median(a), 4), "p95": round(a[int(0.95 * (len(a) - 1))], 4)} | {
            "max": round(a[-1], 4)
        }

    return {
        "rows": len(ran),
        "replay_vs_measured_reserved": stats(rep),
        "prior_vs_measured_reserved": stats(pri),
        "prior_under_measured": sum(x < 0 for x in pri),
        "replay_under_measured_by_2pct": sum(x < -0.02 for x in rep),
        "failed_steps": [
            {k: r[k] for k in ("model", "micro_batch", "replay_reserved", "replay_oom_at", "limit_bytes")}
            for r in rows
            if not r["ran"]
        ],
    }


def markdown(data: dict) -> list[str]:
    s, m = data["summary"], data["meta"]
    rep, pri = s["replay_vs_measured_reserved"], s["prior_vs_measured_reserved"]
    title = (
        f"# Reserved memory: the caching allocator replayed over the sim's trace ({m['date']}, transformers "
        f"{m['transformers']}, torch {m['torch']}; prior {m['prior']:.1%})"
    )
    line = (
        f"{s['rows']} steps that ran. |replay / measured reserved - 1|: median {rep['median']:.2%}, p95 "
        f"{rep['p95']:.2%}, max {rep['max']:.2%}; the prior's: median {pri['median']:.2%}, max {pri['max']:.2%}, "
        f"below the measured reserved in {s['prior_under_measured']} of {s['rows']}."
    )
    out = [
        title,
        "",
        line,
        "",
        "| gpu | model | precision | ckpt | micro x seq | measured reserved / allocated | replay | replay vs measured reserved |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in data["rows"]:
        tuner = f" {r['lora_variant']}" if r.get("lora_variant") else ""
        shape = f"{r['micro_batch']} x {r['seq_len']}"
        rep = f"{r['replay_reserved'] / GIB:.2f} GiB ({r['replay_reserved'] / r['replay_allocated'] - 1:+.1%})"
        if not r["ran"]:
            verdict = "out of memory" if r["replay_oom_at"] else "runs"
            out.append(
                f"| {r['gpu']} | {r['model']}{tuner} | {r['precision']} | {r['checkpointing']} | {shape} | "
                f"did not run | {rep} | replay: {verdict} |"
            )
            continue
        meas = r["max_memory_reserved"] / GIB
        out.append(
            f"| {r['gpu']} | {r['model']}{tuner} | {r['precision']} | {r['checkpointing']} | {shape} | {meas:.2f} GiB "
            f"({r['max_memory_reserved'] / r['max_memory_allocated'] - 1:+.1%}) | {rep} | "
            f"{r['replay_reserved'] / r['max_memory_reserved'] - 1:+.2%} |"
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="write the results (JSON, and the table beside it as .md)")
    ap.add_argument("--report", help="print the table of stored results; replay nothing")
    ap.add_argument("--limit", type=int, help="replay only the first N rows (a quick look)")
    ap.add_argument("--resume", action="store_true", help="keep the rows --out holds already; replay the others")
    args = ap.parse_args()
    if results_io.report_or_out(ap, args, markdown):
        return
    from planner.estimate.overheads import FRAGMENTATION_FRACTION

    rows = measured_rows()[: args.limit]
    done = {_key(r): r for r in json.loads(Path(args.out).read_text())["rows"]} if args.resume else {}
    for i, row in enumerate(rows, 1):
        if _key(row) in done:
            row.update(done[_key(row)])
            continue
        row.update(replay_row(row))
        print(f"{i}/{len(rows)} {row['model']} {row['micro_batch']}x{row['seq_len']}: {row['seconds']} s", flush=True)
    meta = results_io.cpu_meta(("torch", "transformers")) | {"prior": FRAGMENTATION_FRACTION}
    data = {"meta": meta, "rows": rows, "summary": summarize(rows, FRAGMENTATION_FRACTION)}
    results_io.save(args.out, data, markdown(data))
    print("\n".join(markdown(data)))


if __name__ == "__main__":
    main()
