"""Peak allocated bytes of a training step: analytic model vs sim probe vs real steps.

Three small architectures (Llama-style with GQA, Qwen2.5 with a tied 152k vocabulary, GPT-2; and
Llama/GPT-2 with a 256-entry vocabulary, where the peak is inside the last layer's backward),
micro-batch 1-8, sequence 512-4096, all four precisions, checkpointing off/full.
- sim vs real: the sim with CPU code paths (paths="cpu") against real CPU steps counted by the same
  tracker (target: within 1%);
- analytic vs sim: the analytic model against the sim with CUDA code paths (target: within 10% p95).
(sim vs CUDA max_memory_allocated needs a GPU: not run here.)

    python benchmarks/accuracy.py --out benchmarks/results/accuracy.json
"""
from __future__ import annotations

import argparse
import json
import os
import time
from importlib import metadata

from results_io import save

QWEN_TINY = {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "hidden_size": 256,
             "intermediate_size": 688, "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2,
             "vocab_size": 151936, "tie_word_embeddings": True, "max_position_embeddings": 4096,
             "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "hidden_act": "silu"}

# (arch, precision, checkpointing, micro_batch, seq_len)
GRID = [
    ("debug-llama", "fp32", "off", 1, 512), ("debug-llama", "fp32", "full", 4, 1024),
    ("debug-llama", "fp16", "off", 2, 2048), ("debug-llama", "fp16", "full", 8, 512),
    ("debug-llama", "bf16", "off", 4, 512), ("debug-llama", "bf16", "full", 2, 4096),
    ("debug-llama", "bf16-pure", "off", 1, 4096), ("debug-llama", "bf16-pure", "full", 8, 1024),
    ("debug-llama", "bf16", "off", 8, 1024), ("debug-llama", "fp32", "off", 2, 2048),
    ("debug-llama", "bf16", "full", 1, 1024),
    ("qwen-tiny-tied", "fp32", "off", 1, 512), ("qwen-tiny-tied", "fp32", "full", 2, 512),
    ("qwen-tiny-tied", "fp16", "off", 1, 1024), ("qwen-tiny-tied", "fp16", "full", 2, 1024),
    ("qwen-tiny-tied", "bf16", "off", 2, 512), ("qwen-tiny-tied", "bf16", "full", 1, 2048),
    ("qwen-tiny-tied", "bf16-pure", "off", 1, 1024), ("qwen-tiny-tied", "bf16-pure", "full", 4, 512),
    ("qwen-tiny-tied", "bf16", "off", 1, 4096),
    ("debug-gpt2", "fp32", "off", 1, 512), ("debug-gpt2", "fp32", "full", 4, 512),
    ("debug-gpt2", "fp16", "off", 2, 1024), ("debug-gpt2", "fp16", "full", 8, 512),
    ("debug-gpt2", "bf16", "off", 4, 1024), ("debug-gpt2", "bf16", "full", 2, 1024),
    ("debug-gpt2", "bf16-pure", "off", 1, 1024), ("debug-gpt2", "bf16-pure", "full", 8, 1024),
    ("debug-gpt2", "bf16", "off", 8, 512), ("debug-gpt2", "fp32", "full", 1, 1024),
    # a 256-entry vocabulary: the peak moves from the logits into the last layer's backward
    ("debug-llama-v256", "fp32", "full", 4, 1024), ("debug-llama-v256", "bf16", "off", 2, 2048),
    ("debug-gpt2-v256", "bf16", "full", 4, 1024), ("debug-gpt2-v256", "bf16-pure", "off", 2, 1024),
]


def config(arch: str) -> dict:
    from planner.catalog import model_config

    if arch == "qwen-tiny-tied":
        return dict(QWEN_TINY)
    if arch.endswith("-v256"):
        return dict(model_config(arch.removesuffix("-v256")), vocab_size=256)
    return model_config(arch)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--limit", type=int, default=None)
    args = ap.parse_args()
    from planner.memory import Setup, breakdown
    from planner.modelspec import from_config
    from planner.spec import Knobs
    from probes.cpu import measure
    from probes.sim import simulate
    from probes.step import Case

    rows = []
    for arch, prec, ckpt, mb, seq in GRID[: args.limit]:
        cfg = config(arch)
        knobs = Knobs(precision=prec, checkpointing=ckpt)
        case = Case(cfg, knobs, mb, 1, seq)
        analytic = breakdown(Setup(from_config(cfg, arch), knobs, mb, 1, seq), 80 * 2**30).peak_allocated_bytes
        sim_cuda = simulate(case, paths="cuda").peak_allocated_bytes
        sim_cpu = simulate(case, paths="cpu").peak_allocated_bytes
        real = measure(case)["peak_allocated_bytes"]
        rows.append({"arch": arch, "precision": prec, "checkpointing": ckpt, "micro_batch": mb, "seq_len": seq,
                     "analytic": analytic, "sim_cuda_paths": sim_cuda, "sim_cpu_paths": sim_cpu, "cpu_real": real,
                     "sim_vs_real": round(sim_cpu / real - 1, 5), "analytic_vs_sim": round(analytic / sim_cuda - 1, 4)})
        print(f"{arch:15s} {prec:9s} {ckpt:4s} b{mb} s{seq}: sim/real {rows[-1]['sim_vs_real']:+.4%} "
              f"analytic/sim {rows[-1]['analytic_vs_sim']:+.2%}", flush=True)

    def p95(xs):
        xs = sorted(abs(x) for x in xs)
        return xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))]
    summary = {"configs": len(rows), "sim_vs_real_max_abs": max(abs(r["sim_vs_real"]) for r in rows),
               "analytic_vs_sim_p95_abs": p95([r["analytic_vs_sim"] for r in rows]),
               "analytic_vs_sim_max_abs": max(abs(r["analytic_vs_sim"]) for r in rows)}
    print(json.dumps(summary))
    if args.out:
        meta = {"date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count(), "device": "cpu (no GPU run)",
                "torch": metadata.version("torch"), "transformers": metadata.version("transformers")}
        md = [("| arch | precision | ckpt | micro | seq | analytic MiB | sim (cuda paths) MiB | sim (cpu paths) MiB | "
              "cpu real MiB | sim/real | analytic/sim |"), "|" + "---|" * 11]
        md += [f"| {r['arch']} | {r['precision']} | {r['checkpointing']} | {r['micro_batch']} | {r['seq_len']} | "
               f"{r['analytic'] / 2**20:.1f} | {r['sim_cuda_paths'] / 2**20:.1f} | {r['sim_cpu_paths'] / 2**20:.1f} | "
               f"{r['cpu_real'] / 2**20:.1f} | {r['sim_vs_real']:+.3%} | {r['analytic_vs_sim']:+.2%} |" for r in rows]
        md.append(f"\n{meta['date']}, {meta['cpus']} CPUs, torch {meta['torch']}, transformers {meta['transformers']}. "
                  f"Summary: {json.dumps(summary)}")
        save(args.out, {**meta, "summary": summary, "rows": rows}, md)


if __name__ == "__main__":
    main()
