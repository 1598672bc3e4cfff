"""`check --evidence sim --fsdp full` for every catalog model (issue 15, item 4): the sim traces one rank of the
FSDP2 plan (micro 1 x 512 tokens, 8 x H100) and the plan takes its activation side; prints each model's peak
and whether its evidence is simulated.

    python benchmarks/fsdp_sim_catalog.py --out benchmarks/results/fsdp_sim_catalog.json
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from importlib import metadata

from results_io import save


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    from planner import advise
    from planner.cli.advising import probe_functions
    from planner.model import catalog

    store = os.path.join(tempfile.mkdtemp(), "store.sqlite")
    rows, t0 = [], time.perf_counter()
    for name in catalog.model_names():
        req = advise.parse(
            advise.CheckRequest,
            {
                "model": name,
                "gpu": "h100",
                "gpus_per_node": 8,
                "micro_batch": 1,
                "seq_len": 512,
                "fsdp": "full",
                "evidence": "sim",
            },
        )
        try:
            p = advise.check(req, store=store, probes=probe_functions()).plan
            rows.append({"model": name, "evidence": p.evidence, "peak_allocated_bytes": p.memory.peak_allocated_bytes})
        except Exception as e:  # noqa: BLE001 (a model the sim cannot trace is a result to report)
            rows.append({"model": name, "evidence": None, "error": repr(e)[:300]})
        print(rows[-1], flush=True)
    summary = {
        "models": len(rows),
        "simulated": sum(r["evidence"] == "simulated" for r in rows),
        "seconds": round(time.perf_counter() - t0, 1),
    }
    print(summary)
    if args.out:
        meta = {
            "date": time.strftime("%Y-%m-%d"),
            "cpus": os.cpu_count(),
            **{p: metadata.version(p) for p in ("torch", "transformers")},
        }
        md = ["| model | evidence | peak allocated GiB |", "|---|---|---|"]
        md += [
            f"| {r['model']} | {r['evidence'] or 'error'} | {r.get('peak_allocated_bytes', 0) / 2**30:.2f} |"
            for r in rows
        ]
        md.append(
            f"\n{meta['date']}, {meta['cpus']} CPUs, torch {meta['torch']}, transformers {meta['transformers']}. "
            f"Summary: {summary}"
        )
        save(args.out, {**meta, "summary": summary, "rows": rows}, md)


if __name__ == "__main__":
    main()
