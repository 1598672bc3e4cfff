"""What the GPU windows' steps reserved, against the caching allocator replayed over the sim's trace of each step
(probes.reserved) and against the analytic prior (one reserved-over-allocated fraction for every shape).

    python benchmarks/gpu_fragmentation.py --out benchmarks/results/fragmentation.json    replay every measured row
    python benchmarks/gpu_fragmentation.py --report benchmarks/results/fragmentation.json print the stored table

Gemma-2 attends with SDPA before transformers 5.21 and eagerly after (planner.model.modelspec.as_run_by), and the
windows ran 5.17: its rows are replayed with an older transformers (ms-swift's environment, 5.19):
    .fwenv/ms-swift/bin/python benchmarks/gpu_fragmentation.py --out FILE --resume --redo gemma-2-2b
Each row records the transformers that replayed it.

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
    """Every default-allocator step of the windows: the ones that ran with their max_memory_reserved, the ones that
    ran out of memory (the H100's accuracy-large) and each edge row's step that did not run, each with the limit the
    allocator had: the emulated card, or the real card less the driver's reserve and the CUDA context."""
    out = []
    for gpu, path in SOURCES:
        data = json.loads((ROOT / path).read_text())
        for r in data["rows"]:
            if r.get("expandable_segments") or r.get("status") not in ("ok", "oom"):
                continue
            row = {"gpu": gpu, "source": path.rsplit("/", 1)[-1], **{k: r[k] for k in TUNER_KEYS if k in r}}
            row |= {k: r[k] for k in ("model", "precision", "checkpointing", "seq_len")}
            if r.get("kind") != "edge":
                ran = r["status"] == "ok"
                measured = {k: r[k] for k in ("max_memory_allocated", "max_memory_reserved")} if ran else {}
                out.append(row | {"micro_batch": r["micro_batch"], "limit_bytes": _limit(gpu), "ran": ran} | measured)
                continue
            limit = r["capacity_bytes"] if r["capacity_gib"] is not None else _limit(gpu)
            measured = {k: r[k] for k in ("max_memory_allocated", "max_memory_reserved")}
            out.append(row | {"micro_batch": r["largest_micro"], "limit_bytes": limit, "ran": True} | measured)
            if r.get("planner_micro_ran") is False:
                out.append(row | {"micro_batch": r["planner_micro"], "limit_bytes": limit, "ran": False})
            elif r["largest_micro"] < r["next_rung"]:  # the rung above the planner's did not run
                out.append(row | {"micro_batch": r["next_rung"], "limit_bytes": limit, "ran": False})
    return out


# torch.cuda.get_device_properties(0).total_memory of the windows' cards: the H200's as edge.json stores it; the H100's
# as capacity.json's real card (79.18 GiB, rounded to 0.01 GiB: 5 MB either way)
TOTAL_BYTES = {"h200": 150_109_880_320, "h100": round(79.18 * GIB)}
KIND = {"h200": "h200", "h100": "h100-80gb"}  # the catalog's GPU kind, whose calibration file holds the priors


def _limit(gpu: str) -> int:
    """What the allocator could reserve on the real card: its total less the driver's reserve and the CUDA context,
    as the edge part counts them (gpu_edge.usable_bytes, from the kind's calibration)."""
    import gpu_edge

    return gpu_edge.usable_bytes(TOTAL_BYTES[gpu], KIND[gpu])


def _key(row: dict) -> str:
    return json.dumps({k: v for k, v in row.items() if not k.startswith("replay") and k != "seconds"}, sort_keys=True)


def replay_row(row: dict) -> dict:
    import gpu_parts
    import transformers

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
        "replay_transformers": transformers.__version__,
        "seconds": round(time.monotonic() - t0, 1),
    }


def prior(gpu: str) -> float:
    """The fragmentation fraction the planner uses on the card: its calibration's median."""
    from planner.estimate import calibration

    return calibration.for_gpu(KIND[gpu]).fragmentation_fraction


def summarize(rows: list[dict]) -> dict:
    ran = [r for r in rows if r["ran"]]
    rep = [r["replay_reserved"] / r["max_memory_reserved"] - 1 for r in ran]
    pri = [r["max_memory_allocated"] * (1 + prior(r["gpu"])) / r["max_memory_reserved"] - 1 for r in ran]

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
        "replay_runs_what_ran": sum(r["replay_oom_at"] is None for r in ran),
        "did_not_run": sum(not r["ran"] for r in rows),
        "replay_oom_where_it_did_not_run": sum(r["replay_oom_at"] is not None for r in rows if not r["ran"]),
    }


def _versions(rows: list[dict]) -> str:
    """The transformers that replayed the rows: one, or each with its models."""
    by: dict[str, set] = {}
    for r in rows:
        by.setdefault(r["replay_transformers"], set()).add(r["model"])
    if len(by) == 1:
        return next(iter(by))
    return ", ".join(f"{v} ({', '.join(sorted(ms))})" for v, ms in sorted(by.items()))


def markdown(data: dict) -> list[str]:
    s, m = data["summary"], data["meta"]
    rep, pri = s["replay_vs_measured_reserved"], s["prior_vs_measured_reserved"]
    title = (
        f"# Reserved memory: the caching allocator replayed over the sim's trace ({m['date']}, torch {m['torch']}, "
        f"transformers {_versions(data['rows'])}; the calibrated priors: H100 {prior('h100'):.1%}, H200 "
        f"{prior('h200'):.1%})"
    )
    line = (
        f"{s['rows']} steps that ran. |replay / measured reserved - 1|: median {rep['median']:.2%}, p95 "
        f"{rep['p95']:.2%}, max {rep['max']:.2%}; the prior's: median {pri['median']:.2%}, max {pri['max']:.2%}, "
        f"below the measured reserved in {s['prior_under_measured']} of {s['rows']}. The replay runs "
        f"{s['replay_runs_what_ran']} of the {s['rows']} and runs out of memory in "
        f"{s['replay_oom_where_it_did_not_run']} of the {s['did_not_run']} steps that did not run."
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
            verdict = "out of memory" if r["replay_oom_at"] is not None else "runs"
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
    ap.add_argument("--redo", action="append", default=[], help="with --resume: replay this model's rows again")
    args = ap.parse_args()
    if results_io.report_or_out(ap, args, markdown):
        return
    rows = measured_rows()[: args.limit]
    done = {_key(r): r for r in json.loads(Path(args.out).read_text())["rows"]} if args.resume else {}
    for i, row in enumerate(rows, 1):
        if _key(row) in done and row["model"] not in args.redo:
            row.update(done[_key(row)])
            continue
        row.update(replay_row(row))
        results_io.save(args.out, {"meta": {}, "rows": rows[:i], "summary": {}}, [])  # a crash loses one row at most
        print(f"{i}/{len(rows)} {row['model']} {row['micro_batch']}x{row['seq_len']}: {row['seconds']} s", flush=True)
    meta = results_io.cpu_meta(("torch", "transformers"))
    data = {"meta": meta, "rows": rows, "summary": summarize(rows)}
    results_io.save(args.out, data, markdown(data))
    print("\n".join(markdown(data)))


if __name__ == "__main__":
    main()
