"""Per-rank terms of tensor parallel (torch DTensor) and Ulysses sequence parallel on 2 and 4 CPU ranks (torchrun,
gloo), FSDP2 over data x sequence parallel, the bundled trainer's split (recipe/parallel.py), measured by
probes/parallel.py against the terms of the rank's view (planner.estimate.parallel.view): parameters, gradients and
optimizer states after the step, the activations one micro-batch saves, the logits/loss peak and Ulysses' all-to-all
copy of q, k and v (issue 34's target: within 1%). fp32 and bf16 (FSDP2's MixedPrecisionPolicy), without and with
full checkpointing; one row at 4 ranks repeats 2 KV heads to Ulysses 4.

Context parallelism (ring attention) is left out: torch's context_parallel shards only CUDA's SDPA kernels (torch
2.13 distributed/tensor/experimental/_context_parallel/_attention.py:918-945), so it cannot run on CPU, and the sim
(fake tensors, one process) runs no collectives.

    python benchmarks/parallel_sharding.py --out benchmarks/results/parallel_sharding.json
"""

from __future__ import annotations

import argparse
import json
import time

from results_io import cpu_meta, meta_line, publish

MICRO, SEQ = 2, 128
LAYOUTS = {  # ranks -> (name, knobs) rows
    2: [("TP 2", {"tensor_parallel": 2}), ("SP 2", {"sequence_parallel": 2})],
    4: [
        ("TP 2 x FSDP 2", {"tensor_parallel": 2}),
        ("SP 2 x FSDP 2", {"sequence_parallel": 2}),
        ("SP 4", {"sequence_parallel": 4}),
        ("TP 2 x SP 2", {"tensor_parallel": 2, "sequence_parallel": 2}),
    ],
}
KV2 = "debug-llama, 2 KV heads"  # fewer KV heads than Ulysses ranks: repeated to them
TERMS = ("params", "grads", "states", "activations", "logits_loss", "all_to_all")


def cases(world: int) -> list[tuple[str, str, object]]:
    """(model, layout, Case) of one world size."""
    from planner.config.spec import Knobs
    from planner.model.catalog import model_config
    from probes.step import Case

    cfg = model_config("debug-llama")
    out = []
    for name, kw in LAYOUTS[world]:
        for precision in ("fp32", "bf16"):
            for ckpt in ("off", "full"):
                knobs = Knobs(fsdp="full", precision=precision, checkpointing=ckpt, **kw)
                out.append(("debug-llama", name, Case(cfg, knobs, MICRO, 1, SEQ)))
    if world == 4:
        knobs = Knobs(fsdp="full", precision="fp32", sequence_parallel=4)
        out.append((KV2, "SP 4", Case({**cfg, "num_key_value_heads": 2}, knobs, MICRO, 1, SEQ)))
    return out


def run() -> list[dict]:
    from probes.parallel import compare_parallel

    rows = []
    for world in (2, 4):
        t0 = time.perf_counter()
        grid = cases(world)
        measured = compare_parallel([c for _, _, c in grid], world)
        for i, (model, layout, case) in enumerate(grid):
            for r in measured[i * world : (i + 1) * world]:
                k = case.knobs
                rows.append(
                    {"model": model, "layout": layout, "precision": k.precision, "checkpointing": k.checkpointing} | r
                )
        print(f"{world} ranks: {len(grid)} configurations, {time.perf_counter() - t0:.1f} s", flush=True)
    return rows


def markdown(data: dict) -> list[str]:
    mib = lambda x: f"{x / 2**20:.3f}"
    md = [
        "| ranks | layout | model | precision | ckpt | rank | "
        + " | ".join(f"{t} MiB (measured / analytic, error)" for t in TERMS)
        + " |",
        "|" + "---|" * (6 + len(TERMS)),
    ]
    for r in data["rows"]:
        cells = [
            f"{mib(r['measured'][t])} / {mib(r['analytic'][t])}"
            + ("" if r["error"][t] is None else f" ({r['error'][t]:+.3%})")
            for t in TERMS
        ]
        md.append(
            f"| {r['world']} | {r['layout']} | {r['model']} | {r['precision']} | {r['checkpointing']} | {r['rank']} | "
            + " | ".join(cells)
            + " |"
        )
    m = data["meta"]
    md.append(
        f"\n{meta_line({k: v for k, v in m.items() if k != 'summary'})}; micro-batch {MICRO} x {SEQ} tokens, one step. Summary: {json.dumps(m['summary'])}"
    )
    return md


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    t0 = time.perf_counter()
    rows = run()
    errors = [abs(e) for r in rows for e in r["error"].values() if e is not None]
    summary = {"rows": len(rows), "max_abs_error": max(errors), "wall_s": round(time.perf_counter() - t0, 1)}
    print(json.dumps(summary))
    publish(args.out, rows, {**cpu_meta(("torch", "transformers")), "summary": summary}, markdown)


if __name__ == "__main__":
    main()
