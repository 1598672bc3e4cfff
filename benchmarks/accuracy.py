"""Peak allocated bytes of a training step: analytic model vs sim probe vs real steps.

Three small architectures (Llama-style with GQA, Qwen2.5 with a tied 152k vocabulary, GPT-2; and
Llama/GPT-2 with a 256-entry vocabulary, where the peak is inside the last layer's backward),
micro-batch 1-8, sequence 512-4096, all four precisions, checkpointing off/full.
- sim vs real: the sim with CPU code paths (paths="cpu") against real CPU steps counted by the same
  tracker (target: within 1%);
- analytic vs sim: the analytic model against the sim with CUDA code paths (target: within 10% p95).
(sim vs CUDA max_memory_allocated needs a GPU: not run here.)
The recipe knobs (RECIPE_GRID: selective / every-N / offloaded checkpointing, chunked and fused losses, flash and
eager attention, packed rows, the optimizer in backward, LoRA targets, dropout and trained embeddings, DoRA, OFT, quantized bases:
real bitsandbytes 4- and 8-bit layers in the CPU run, their stand-ins in the sim; GPTQ and AWQ stand-ins in both) have rows of their own (target: analytic within 3% of the
sim at p95). Offload on CPU copies saved tensors to the same memory the tracker counts, so its real CPU run is not
comparable and is left out.

    python benchmarks/accuracy.py --out benchmarks/results/accuracy.json
    python benchmarks/accuracy.py --append --out benchmarks/results/accuracy.json   (only the rows it lacks)
    python benchmarks/accuracy.py --moe --out benchmarks/results/accuracy-moe.json   (mixture-of-experts rows)
    python benchmarks/accuracy.py --vlm --out benchmarks/results/accuracy-vlm.json   (VLMs with images: accuracy_vlm.py)

This file owns the runners (the flags, one row measured, the summary, the JSON and table written); the rows it
measures are accuracy_grid.py's.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from importlib import metadata

from accuracy_grid import GRID, MOE_GRID, MOE_LORA_GRID, RECIPE_GRID, config
from results_io import save


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--append", action="store_true", help="run only the rows --out does not hold yet, and add them")
    ap.add_argument("--recipes-only", action="store_true", help="only the recipe-knob rows")
    ap.add_argument(
        "--rl", action="store_true", help="TRL's GRPO and DPO rows (accuracy_rl.py), then verl's and OpenRLHF's roles"
    )
    ap.add_argument("--roles-only", action="store_true", help="with --rl: only the verl / OpenRLHF role rows")
    ap.add_argument("--moe", action="store_true", help="only the mixture-of-experts rows (MOE_GRID)")
    ap.add_argument("--vlm", action="store_true", help="the VLM rows with images (accuracy_vlm.py)")
    args = ap.parse_args()
    if args.rl:
        return rl_main(args.out, args.roles_only)
    if args.vlm:
        return vlm_main(args.out)
    grid = [] if args.recipes_only else [(a, p, {"checkpointing": c}, mb, s) for a, p, c, mb, s in GRID]
    todo = grid + RECIPE_GRID
    if args.moe:
        todo = [(a, p, {"checkpointing": c}, mb, s) for a, p, c, mb, s in MOE_GRID] + MOE_LORA_GRID
    rows, held = _held_rows(args.out) if args.append else ([], set())
    kept = len(rows)
    for arch, prec, kw, mb, seq in todo[: args.limit]:
        if (arch, prec, json.dumps(kw, sort_keys=True), mb, seq) in held:
            continue
        rows.append(_row(arch, prec, kw, mb, seq))
        r = rows[-1]
        shown = "n/a" if r["cpu_real"] is None else f"{r['sim_vs_real']:+.4%}"
        print(
            f"{arch:15s} {prec:9s} {r['checkpointing']:12s} {r['recipe']} b{mb} s{seq}: sim/real {shown} "
            f"analytic/sim {r['analytic_vs_sim']:+.2%}",
            flush=True,
        )
    summary = _summary(rows)
    print(json.dumps(summary))
    if args.out:
        _write(args.out, rows, summary, kept)


def _row(arch: str, prec: str, kw: dict, mb: int, seq: int) -> dict:
    """One row measured: the analytic peak, the sim's with CUDA and with CPU code paths, and real CPU steps (none
    for offloaded checkpointing: on the CPU its copies land in the memory the tracker counts)."""
    from planner.config.spec import Knobs
    from planner.estimate.memory import breakdown
    from planner.estimate.setup import Setup
    from planner.model.families import from_config
    from probes.cpu import measure
    from probes.sim import simulate
    from probes.step import Case

    cfg = config(arch)
    knobs = Knobs.make(precision=prec, **kw)
    case = Case(cfg, knobs, mb, 1, seq)
    analytic = breakdown(Setup(from_config(cfg, arch), knobs, mb, 1, seq), 80 * 2**30).peak_allocated_bytes
    sim_cuda = simulate(case, paths="cuda").peak_allocated_bytes
    sim_cpu = simulate(case, paths="cpu").peak_allocated_bytes
    real = None if knobs.checkpointing == "offload" else measure(case)["peak_allocated_bytes"]
    recipe = {k: v for k, v in kw.items() if k not in ("checkpointing", "lora_rank")}
    recipe.update({"lora_rank": kw["lora_rank"]} if "lora_rank" in kw else {})
    return {
        "arch": arch,
        "precision": prec,
        "checkpointing": knobs.checkpointing,
        "recipe": recipe,
        "micro_batch": mb,
        "seq_len": seq,
        "analytic": analytic,
        "sim_cuda_paths": sim_cuda,
        "sim_cpu_paths": sim_cpu,
        "cpu_real": real,
        "sim_vs_real": None if real is None else round(sim_cpu / real - 1, 5),
        "analytic_vs_sim": round(analytic / sim_cuda - 1, 4),
        "recipe_row": (arch, prec, kw, mb, seq) in RECIPE_GRID,
    }


def _p95(xs):
    xs = sorted(abs(x) for x in xs)
    return xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))]


def _summary(rows: list[dict]) -> dict:
    """The largest sim/real gap, and analytic/sim at p95 and max, over every row and over the recipe rows."""
    recipe_rows = [r for r in rows if r["recipe_row"]]
    summary = {
        "configs": len(rows),
        "sim_vs_real_max_abs": max(abs(r["sim_vs_real"]) for r in rows if r["sim_vs_real"] is not None),
        "analytic_vs_sim_p95_abs": _p95([r["analytic_vs_sim"] for r in rows]),
        "analytic_vs_sim_max_abs": max(abs(r["analytic_vs_sim"]) for r in rows),
    }
    if recipe_rows:
        summary.update(
            recipe_configs=len(recipe_rows),
            recipe_analytic_vs_sim_p95_abs=_p95([r["analytic_vs_sim"] for r in recipe_rows]),
            recipe_analytic_vs_sim_max_abs=max(abs(r["analytic_vs_sim"]) for r in recipe_rows),
        )
    return summary


def _write(out: str, rows: list[dict], summary: dict, kept: int) -> None:
    """The JSON and its table; with --append (`kept` rows were the file's) the file's own date and versions."""
    meta = {
        "date": time.strftime("%Y-%m-%d"),
        "cpus": os.cpu_count(),
        "device": "cpu (no GPU run)",
        "torch": metadata.version("torch"),
        "transformers": metadata.version("transformers"),
    }
    if kept:  # --append: the file's own date and versions stand for its rows; the new rows say theirs
        with open(out) as f:
            old = json.load(f)
        added = f"{len(rows) - kept} rows added {meta['date']} (transformers {meta['transformers']})"
        meta = {k: old[k] for k in meta} | {"appended": "; ".join(filter(None, [old.get("appended"), added]))}
    md = [
        (
            "| arch | precision | ckpt | recipe | micro | seq | analytic MiB | sim (cuda paths) MiB | "
            "sim (cpu paths) MiB | cpu real MiB | sim/real | analytic/sim |"
        ),
        "|" + "---|" * 12,
    ]
    md += [
        f"| {r['arch']} | {r['precision']} | {r['checkpointing']} | "
        f"{', '.join(f'{k}={v}' for k, v in r['recipe'].items()) or '-'} | {r['micro_batch']} | {r['seq_len']} | "
        f"{r['analytic'] / 2**20:.1f} | {r['sim_cuda_paths'] / 2**20:.1f} | {r['sim_cpu_paths'] / 2**20:.1f} | "
        + ("n/a | n/a" if r["cpu_real"] is None else f"{r['cpu_real'] / 2**20:.1f} | {r['sim_vs_real']:+.3%}")
        + f" | {r['analytic_vs_sim']:+.2%} |"
        for r in rows
    ]
    md.append(
        f"\n{meta['date']}, {meta['cpus']} CPUs, torch {meta['torch']}, transformers {meta['transformers']}"
        + (f"; {meta['appended']}" if meta.get("appended") else "")
        + f". Summary: {json.dumps(summary)}"
    )
    save(out, {**meta, "summary": summary, "rows": rows}, md)


def _held_rows(out: str | None) -> tuple[list[dict], set]:
    """--append: the rows already in `out` and their keys (arch, precision, knobs, micro-batch, sequence)."""
    if not out or not os.path.exists(out):
        return [], set()
    with open(out) as f:
        rows = json.load(f)["rows"]

    def knobs(r: dict) -> dict:
        kw = dict(r["recipe"])
        return kw | (
            {"checkpointing": r["checkpointing"]} if r["checkpointing"] != "off" or not r["recipe_row"] else {}
        )

    return rows, {
        (r["arch"], r["precision"], json.dumps(knobs(r), sort_keys=True), r["micro_batch"], r["seq_len"]) for r in rows
    }


def _meta(*packages: str) -> dict:
    """Date, CPUs and the versions of torch, transformers and `packages`."""
    names = ("torch", "transformers", *packages)
    return {"date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count(), "device": "cpu (no GPU run)"} | {
        p: metadata.version(p) for p in names
    }


def vlm_main(out: str | None) -> None:
    from accuracy_vlm import analytic_rows, markdown, real_rows

    analytic, real = analytic_rows(), real_rows()
    summary = {
        "analytic_rows": len(analytic),
        "analytic_vs_sim_max_abs": max(abs(r["analytic_vs_sim"]) for r in analytic),
        "real_rows": len(real),
        "sim_vs_real_max_abs": max(abs(r["sim_vs_real"]) for r in real),
    }
    print(json.dumps(summary))
    if out:
        meta = _meta()
        md = markdown(analytic, real) + [
            (
                f"\n{meta['date']}, {meta['cpus']} CPUs, torch {meta['torch']}, transformers {meta['transformers']}. "
                f"Summary: {json.dumps(summary)}"
            )
        ]
        save(out, {**meta, "summary": summary, "analytic_rows": analytic, "real_rows": real}, md)


def rl_main(out: str | None, roles_only: bool = False) -> None:
    import accuracy_roles
    from accuracy_rl import markdown, rows

    got = [] if roles_only else rows(config)
    role_rows = accuracy_roles.rows(config)
    summary = {
        "rows": len(got),
        "role_rows": len(role_rows),
        "role_analytic_vs_sim_max_abs": max(abs(r["analytic_vs_sim"]) for r in role_rows),
    }
    if got:
        summary["sim_vs_real_max_abs"] = max(abs(r["sim_vs_real"]) for r in got)
        summary["analytic_vs_sim_max_abs"] = max(abs(r["analytic_vs_sim"]) for r in got)
    print(json.dumps(summary))
    if out:
        meta = _meta("trl")
        md = (markdown(got) + [""] if got else []) + accuracy_roles.markdown(role_rows)
        md.append(
            f"\n{meta['date']}, {meta['cpus']} CPUs, torch {meta['torch']}, transformers "
            f"{meta['transformers']}, TRL {meta['trl']}. Summary: {json.dumps(summary)}"
        )
        save(out, {**meta, "summary": summary, "rows": got, "role_rows": role_rows}, md)


if __name__ == "__main__":
    main()
