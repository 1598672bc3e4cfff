"""Per-rank model states under torch DDP and DeepSpeed ZeRO 1-3 on 2 CPU ranks (torchrun, gloo),
measured by probes.dist against the analytic terms of planner.estimate.memory.

    python benchmarks/zero_sharding.py --out benchmarks/results/zero_sharding.json
"""

from __future__ import annotations

import argparse
import json
import os
import time
from importlib import metadata

from results_io import save

GRID = [(0, "bf16"), (1, "bf16"), (2, "bf16"), (3, "bf16"), (0, "fp32"), (2, "fp32"), (3, "fp32")]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--world", type=int, default=2)
    args = ap.parse_args()
    from planner.config.spec import Knobs
    from planner.model.catalog import model_config
    from probes.dist import compare_states
    from probes.step import Case

    rows = []
    for zero, prec in GRID:
        t0 = time.perf_counter()
        case = Case(model_config("debug-llama"), Knobs(precision=prec, zero_stage=zero), 2, 2, 64)
        for r in compare_states(case, args.world):
            r["error"] = {
                k: round(r["measured"][k] / r["analytic"][k] - 1, 5) if r["analytic"][k] else None
                for k in r["measured"]
            }
            r.pop("losses")
            rows.append(r)
        print(
            f"zero {zero} {prec}: {json.dumps(rows[-1]['measured'])} vs {json.dumps(rows[-1]['analytic'])} "
            f"({time.perf_counter() - t0:.1f} s)",
            flush=True,
        )
    errs = [abs(e) for r in rows for e in r["error"].values() if e is not None]
    summary = {"rows": len(rows), "max_abs_error": max(errs)}
    print(json.dumps(summary))
    if args.out:
        meta = {
            "date": time.strftime("%Y-%m-%d"),
            "cpus": os.cpu_count(),
            "world": args.world,
            "model": "debug-llama (7.1M params), micro 2, accum 2, seq 64",
            **{p: metadata.version(p) for p in ("torch", "transformers", "deepspeed")},
        }
        md = [
            "| zero | precision | rank | params MiB (measured / analytic) | optimizer states MiB | DDP buckets MiB |",
            "|---|---|---|---|---|---|",
        ]
        mib = lambda x: f"{x / 2**20:.3f}"
        md += [
            f"| {r['zero']} | {r['precision']} | {r['rank']} | "
            + " | ".join(f"{mib(r['measured'][k])} / {mib(r['analytic'][k])}" for k in ("params", "states", "buckets"))
            + " |"
            for r in rows
        ]
        md.append(
            f"\n{meta['date']}, {meta['cpus']} CPUs, torch {meta['torch']}, transformers "
            f"{meta['transformers']}, deepspeed {meta['deepspeed']}. Summary: {json.dumps(summary)}"
        )
        save(args.out, {**meta, "summary": summary, "rows": rows}, md)


if __name__ == "__main__":
    main()
