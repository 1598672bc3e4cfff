"""Per-rank FSDP2 shards (torch fully_shard, every decoder layer and the root) on 2 and 4 CPU ranks (torchrun,
gloo): parameters, gradients and optimizer states resident after each step, measured by probes.dist against
the analytic terms of planner.estimate.memory / planner.estimate.fsdp (issue 15's target: within 1%).

    python benchmarks/fsdp_sharding.py --out benchmarks/results/fsdp_sharding.json
"""

from __future__ import annotations

import argparse
import json
import os
import time
from importlib import metadata

from results_io import save

GRID = [
    (w, f, p)
    for w in (2, 4)
    for f, p in (("full", "bf16"), ("full", "bf16-pure"), ("full", "fp32"), ("grad-op", "bf16"))
]
TERMS = ("params", "grads", "states")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    from planner.config.spec import Knobs
    from planner.model.catalog import model_config
    from probes.dist import compare_states
    from probes.step import Case

    rows = []
    for world, fsdp, prec in GRID:
        t0 = time.perf_counter()
        case = Case(model_config("debug-llama"), Knobs(precision=prec, fsdp=fsdp), 2, 2, 64)
        for r in compare_states(case, world):
            r["error"] = {k: round(r["measured"][k] / r["analytic"][k] - 1, 5) for k in TERMS}
            r.pop("losses")
            rows.append(r)
        print(
            f"{world} ranks, fsdp {fsdp}, {prec}: {json.dumps(rows[-1]['measured'])} vs "
            f"{json.dumps(rows[-1]['analytic'])} ({time.perf_counter() - t0:.1f} s)",
            flush=True,
        )
    summary = {"rows": len(rows), "max_abs_error": max(abs(e) for r in rows for e in r["error"].values())}
    print(json.dumps(summary))
    if args.out:
        meta = {
            "date": time.strftime("%Y-%m-%d"),
            "cpus": os.cpu_count(),
            "model": "debug-llama (7.1M params), micro 2, accum 2, seq 64, 2 steps",
            **{p: metadata.version(p) for p in ("torch", "transformers")},
        }
        mib = lambda x: f"{x / 2**20:.3f}"
        md = [
            "| ranks | fsdp | precision | rank | params MiB (measured / analytic) | grads MiB | optimizer states MiB |",
            "|---|---|---|---|---|---|---|",
        ]
        md += [
            f"| {r['world']} | {r['fsdp']} | {r['precision']} | {r['rank']} | "
            + " | ".join(f"{mib(r['measured'][k])} / {mib(r['analytic'][k])}" for k in TERMS)
            + " |"
            for r in rows
        ]
        md.append(
            f"\n{meta['date']}, {meta['cpus']} CPUs, torch {meta['torch']}, transformers {meta['transformers']}. "
            f"Summary: {json.dumps(summary)}"
        )
        save(args.out, {**meta, "summary": summary, "rows": rows}, md)


if __name__ == "__main__":
    main()
