"""How long the sim probe takes to simulate a 70B-class training step (llama-3.1-70b, 80 layers,
traced at 3 and 4 layers on fake tensors and extrapolated). Target: under 20 s on 2 CPU cores.

    python benchmarks/sim_speed.py --out benchmarks/results/sim_speed.json
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from importlib import metadata

from results_io import save

CASES = [
    ("llama-3.1-70b", "bf16", "full", 1, 4096),
    ("llama-3.1-70b", "bf16", "off", 2, 4096),
    ("qwen2.5-72b", "bf16", "full", 1, 8192),
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    t0 = time.perf_counter()
    import torch  # noqa: F401  (import cost reported apart)

    from planner.config.spec import Knobs
    from planner.model.catalog import model_config
    from probes.sim import simulate
    from probes.step import Case

    import_s = time.perf_counter() - t0
    rows = []
    for name, prec, ckpt, mb, seq in CASES:
        case = Case(model_config(name), Knobs(precision=prec, checkpointing=ckpt), mb, 4, seq)
        t = time.perf_counter()
        r = simulate(case)
        rows.append(
            {
                "model": name,
                "precision": prec,
                "checkpointing": ckpt,
                "micro_batch": mb,
                "grad_accum": 4,
                "seq_len": seq,
                "seconds": round(time.perf_counter() - t, 2),
                "peak_allocated_gib": round(r.peak_allocated_bytes / 2**30, 2),
                "phase": r.phase,
                "traced_layers": list(r.traced_layers),
                "layers": r.layers,
            }
        )
        print(
            f"{name} {prec} ckpt {ckpt} micro {mb} seq {seq}: {rows[-1]['seconds']} s, "
            f"peak {rows[-1]['peak_allocated_gib']} GiB ({r.phase})",
            flush=True,
        )
    out = {
        "date": time.strftime("%Y-%m-%d"),
        "cpus": os.cpu_count(),
        "machine": platform.processor() or platform.machine(),
        "torch": metadata.version("torch"),
        "transformers": metadata.version("transformers"),
        "import_s": round(import_s, 2),
        "target_s": 20,
        "rows": rows,
    }
    if args.out:
        md = [
            "| model | precision | ckpt | micro | seq | seconds | peak GiB | phase |",
            "|---|---|---|---|---|---|---|---|",
        ]
        md += [
            f"| {r['model']} | {r['precision']} | {r['checkpointing']} | {r['micro_batch']} | {r['seq_len']} | "
            f"{r['seconds']} | {r['peak_allocated_gib']} | {r['phase']} |"
            for r in rows
        ]
        md.append(
            f"\n{out['date']}, {out['cpus']} CPUs, torch {out['torch']}, transformers {out['transformers']}; "
            f"import {out['import_s']} s not included."
        )
        save(args.out, out, md)


if __name__ == "__main__":
    main()
