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
"""

from __future__ import annotations

import argparse
import json
import os
import time
from importlib import metadata

from results_io import save

QWEN_TINY = {
    "model_type": "qwen2",
    "architectures": ["Qwen2ForCausalLM"],
    "hidden_size": 256,
    "intermediate_size": 688,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "vocab_size": 151936,
    "tie_word_embeddings": True,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0,
    "hidden_act": "silu",
}

# (arch, precision, checkpointing, micro_batch, seq_len)
GRID = [
    ("debug-llama", "fp32", "off", 1, 512),
    ("debug-llama", "fp32", "full", 4, 1024),
    ("debug-llama", "fp16", "off", 2, 2048),
    ("debug-llama", "fp16", "full", 8, 512),
    ("debug-llama", "bf16", "off", 4, 512),
    ("debug-llama", "bf16", "full", 2, 4096),
    ("debug-llama", "bf16-pure", "off", 1, 4096),
    ("debug-llama", "bf16-pure", "full", 8, 1024),
    ("debug-llama", "bf16", "off", 8, 1024),
    ("debug-llama", "fp32", "off", 2, 2048),
    ("debug-llama", "bf16", "full", 1, 1024),
    ("qwen-tiny-tied", "fp32", "off", 1, 512),
    ("qwen-tiny-tied", "fp32", "full", 2, 512),
    ("qwen-tiny-tied", "fp16", "off", 1, 1024),
    ("qwen-tiny-tied", "fp16", "full", 2, 1024),
    ("qwen-tiny-tied", "bf16", "off", 2, 512),
    ("qwen-tiny-tied", "bf16", "full", 1, 2048),
    ("qwen-tiny-tied", "bf16-pure", "off", 1, 1024),
    ("qwen-tiny-tied", "bf16-pure", "full", 4, 512),
    ("qwen-tiny-tied", "bf16", "off", 1, 4096),
    ("debug-gpt2", "fp32", "off", 1, 512),
    ("debug-gpt2", "fp32", "full", 4, 512),
    ("debug-gpt2", "fp16", "off", 2, 1024),
    ("debug-gpt2", "fp16", "full", 8, 512),
    ("debug-gpt2", "bf16", "off", 4, 1024),
    ("debug-gpt2", "bf16", "full", 2, 1024),
    ("debug-gpt2", "bf16-pure", "off", 1, 1024),
    ("debug-gpt2", "bf16-pure", "full", 8, 1024),
    ("debug-gpt2", "bf16", "off", 8, 512),
    ("debug-gpt2", "fp32", "full", 1, 1024),
    # a 256-entry vocabulary: the peak moves from the logits into the last layer's backward
    ("debug-llama-v256", "fp32", "full", 4, 1024),
    ("debug-llama-v256", "bf16", "off", 2, 2048),
    ("debug-gpt2-v256", "bf16", "full", 4, 1024),
    ("debug-gpt2-v256", "bf16-pure", "off", 2, 1024),
]
# (arch, precision, recipe knobs, micro_batch, seq_len)
RECIPE_GRID = [
    ("debug-llama", "bf16", {"checkpointing": "selective-op"}, 4, 1024),
    ("qwen-tiny-tied", "bf16-pure", {"checkpointing": "selective-op"}, 2, 1024),
    ("debug-gpt2", "fp32", {"checkpointing": "selective-op"}, 4, 512),
    ("debug-llama", "fp32", {"checkpointing": "every-2"}, 4, 1024),
    ("debug-gpt2", "bf16", {"checkpointing": "every-3"}, 2, 1024),
    ("debug-llama", "bf16", {"checkpointing": "offload"}, 4, 1024),
    ("qwen-tiny-tied", "fp32", {"checkpointing": "offload"}, 2, 512),
    ("debug-llama", "bf16", {"loss": "chunked"}, 2, 2048),
    ("qwen-tiny-tied", "bf16", {"loss": "chunked"}, 2, 1024),
    ("debug-gpt2", "fp32", {"loss": "chunked"}, 4, 512),
    ("debug-llama", "bf16-pure", {"loss": "fused"}, 2, 2048),
    ("qwen-tiny-tied", "bf16", {"loss": "fused"}, 2, 1024),
    ("debug-gpt2", "fp32", {"loss": "fused"}, 4, 512),
    ("debug-llama", "bf16", {"attention": "flash"}, 4, 1024),
    ("qwen-tiny-tied", "fp32", {"attention": "flash"}, 2, 1024),
    ("debug-llama", "fp32", {"attention": "eager"}, 2, 1024),
    ("debug-gpt2", "bf16-pure", {"attention": "eager"}, 2, 1024),
    ("debug-llama", "bf16", {"batching": "packed"}, 4, 512),
    ("qwen-tiny-tied", "bf16-pure", {"batching": "packed"}, 2, 1024),
    ("debug-llama", "bf16-pure", {"batching": "packed", "attention": "flash"}, 4, 1024),
    ("debug-llama", "fp32", {"optimizer_in_backward": True}, 2, 1024),
    ("qwen-tiny-tied", "bf16-pure", {"optimizer_in_backward": True}, 2, 512),
    ("debug-llama", "bf16", {"lora_rank": 8, "lora_targets": "attention"}, 4, 1024),
    ("qwen-tiny-tied", "fp32", {"lora_rank": 8, "lora_targets": "q_proj,v_proj"}, 2, 1024),
    ("debug-llama", "bf16-pure", {"lora_rank": 8, "lora_dropout": 0.1}, 4, 1024),
    ("debug-llama", "bf16", {"lora_rank": 8, "lora_train_embeddings": True}, 2, 1024),
    ("debug-llama", "bf16", {"lora_rank": 8, "lora_variant": "dora"}, 4, 1024),
    ("qwen-tiny-tied", "bf16-pure", {"lora_rank": 8, "lora_variant": "dora"}, 2, 1024),
    ("debug-llama", "fp32", {"lora_rank": 8, "lora_variant": "dora", "checkpointing": "full"}, 2, 1024),
    ("debug-llama", "bf16", {"lora_rank": 32, "lora_variant": "oft"}, 4, 1024),  # OFT block 32 (planner.estimate.oft)
    ("qwen-tiny-tied", "bf16-pure", {"lora_rank": 32, "lora_variant": "oft"}, 2, 1024),
    ("debug-llama", "bf16", {"lora_rank": 16, "lora_variant": "oft", "checkpointing": "full"}, 2, 1024),
    ("debug-llama", "bf16", {"lora_rank": 8, "quant": "nf4"}, 4, 1024),
    ("qwen-tiny-tied", "bf16", {"lora_rank": 8, "quant": "fp4", "lora_targets": "attention"}, 2, 1024),
    ("debug-llama", "bf16", {"lora_rank": 8, "quant": "nf4", "quant_absmax": "fp32"}, 4, 1024),
    ("debug-llama", "bf16", {"lora_rank": 8, "quant": "int8"}, 4, 1024),
    ("debug-llama", "bf16", {"lora_rank": 8, "quant": "int8", "checkpointing": "full"}, 4, 1024),
    ("debug-llama", "bf16", {"lora_rank": 8, "quant": "gptq", "framework": "hf"}, 4, 1024),  # stand-in in both runs
    ("debug-llama", "fp16", {"lora_rank": 8, "quant": "awq", "framework": "hf"}, 4, 1024),  # stand-in in both runs
    ("debug-llama-v256", "bf16", {"checkpointing": "selective-op", "loss": "chunked"}, 4, 2048),
    (
        "debug-llama",
        "bf16",
        {"checkpointing": "selective-op", "loss": "fused", "batching": "packed", "attention": "flash"},
        4,
        1024,
    ),
]


# Mixture-of-experts rows (issue 18, --moe): the debug-moe preset (Qwen3-MoE, 8 experts, top-2) and tiny members
# of the other routed families: DeepSeek-V2 (latent attention, a dense first layer, shared experts), Mixtral and
# gpt-oss (eager attention with sinks, clamped SwiGLU, biases). Real CPU steps route for real.
MOE_TINY = {
    "deepseek-tiny": {
        "model_type": "deepseek_v2",
        "hidden_size": 256,
        "intermediate_size": 688,
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 8,
        "n_routed_experts": 8,
        "n_shared_experts": 1,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 128,
        "first_k_dense_replace": 1,
        "q_lora_rank": None,
        "kv_lora_rank": 64,
        "qk_nope_head_dim": 32,
        "qk_rope_head_dim": 16,
        "v_head_dim": 32,
        "vocab_size": 8192,
        "max_position_embeddings": 4096,
        "topk_method": "greedy",
    },
    "mixtral-tiny": {
        "model_type": "mixtral",
        "hidden_size": 256,
        "intermediate_size": 512,
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
        "vocab_size": 8192,
        "max_position_embeddings": 4096,
    },
    "gpt-oss-tiny": {
        "model_type": "gpt_oss",
        "hidden_size": 256,
        "intermediate_size": 256,
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 32,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
        "vocab_size": 8192,
        "max_position_embeddings": 4096,
        "sliding_window": 128,
        "layer_types": ["sliding_attention", "full_attention"] * 2,
    },
}
MOE_GRID = [
    ("debug-moe", "fp32", "off", 2, 512),
    ("debug-moe", "fp32", "full", 4, 1024),
    ("debug-moe", "bf16", "off", 4, 512),
    ("debug-moe", "bf16", "full", 2, 2048),
    ("debug-moe", "bf16-pure", "off", 2, 1024),
    ("debug-moe", "bf16-pure", "full", 8, 512),
    ("debug-moe-v256", "fp32", "full", 4, 1024),
    ("debug-moe-v256", "bf16", "off", 2, 1024),
    ("deepseek-tiny", "fp32", "off", 2, 512),
    ("deepseek-tiny", "bf16-pure", "off", 2, 1024),
    ("deepseek-tiny", "bf16", "full", 2, 1024),
    ("mixtral-tiny", "fp32", "off", 2, 1024),
    ("mixtral-tiny", "bf16", "full", 4, 512),
    ("gpt-oss-tiny", "fp32", "off", 2, 512),
    ("gpt-oss-tiny", "bf16-pure", "off", 2, 512),
    # the eager dispatch (experts_implementation: eager): the sim routes by the plan's imbalance (2), real steps
    # by their routers
    ("debug-moe-eager", "fp32", "off", 2, 512),
    ("debug-moe-eager", "bf16", "off", 2, 512),
    ("debug-moe-v256-eager", "fp32", "full", 4, 1024),
    ("mixtral-tiny-eager", "bf16", "full", 4, 512),
    ("gpt-oss-tiny-eager", "fp32", "off", 2, 512),
]
# LoRA on the tiny MoE (PEFT target_parameters for the stacked experts): experts adapted, frozen, or both
MOE_LORA = [
    {"lora_rank": 16, "lora_targets": t} for t in ("all-linear", "attention", "experts.gate_up_proj,experts.down_proj")
]
MOE_LORA_GRID = [
    (a, "bf16-pure", {"checkpointing": c, **kw}, mb, s)
    for a, c, mb, s in (("debug-moe", "off", 2, 512), ("debug-moe-v256", "full", 4, 1024))
    for kw in MOE_LORA
]


def config(arch: str) -> dict:
    from planner.model.catalog import model_config

    if arch.endswith("-eager"):
        return {**config(arch.removesuffix("-eager")), "experts_implementation": "eager"}
    if arch == "qwen-tiny-tied":
        return dict(QWEN_TINY)
    if arch in MOE_TINY:
        return {"rms_norm_eps": 1e-6, "hidden_act": "silu", "tie_word_embeddings": False, **MOE_TINY[arch]}
    if arch.endswith("-v256"):
        return dict(model_config(arch.removesuffix("-v256")), vocab_size=256)
    return model_config(arch)


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
    from planner.config.spec import Knobs
    from planner.estimate.memory import breakdown
    from planner.estimate.setup import Setup
    from planner.model.families import from_config
    from probes.cpu import measure
    from probes.sim import simulate
    from probes.step import Case

    grid = [] if args.recipes_only else [(a, p, {"checkpointing": c}, mb, s) for a, p, c, mb, s in GRID]
    todo = grid + RECIPE_GRID
    if args.moe:
        todo = [(a, p, {"checkpointing": c}, mb, s) for a, p, c, mb, s in MOE_GRID] + MOE_LORA_GRID
    rows, held = _held_rows(args.out) if args.append else ([], set())
    kept = len(rows)
    for arch, prec, kw, mb, seq in todo[: args.limit]:
        if (arch, prec, json.dumps(kw, sort_keys=True), mb, seq) in held:
            continue
        cfg = config(arch)
        knobs = Knobs.make(precision=prec, **kw)
        case = Case(cfg, knobs, mb, 1, seq)
        analytic = breakdown(Setup(from_config(cfg, arch), knobs, mb, 1, seq), 80 * 2**30).peak_allocated_bytes
        sim_cuda = simulate(case, paths="cuda").peak_allocated_bytes
        sim_cpu = simulate(case, paths="cpu").peak_allocated_bytes
        real = None if knobs.checkpointing == "offload" else measure(case)["peak_allocated_bytes"]
        recipe = {k: v for k, v in kw.items() if k not in ("checkpointing", "lora_rank")}
        recipe.update({"lora_rank": kw["lora_rank"]} if "lora_rank" in kw else {})
        rows.append(
            {
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
        )
        shown = "n/a" if real is None else f"{rows[-1]['sim_vs_real']:+.4%}"
        print(
            f"{arch:15s} {prec:9s} {knobs.checkpointing:12s} {recipe} b{mb} s{seq}: sim/real {shown} "
            f"analytic/sim {rows[-1]['analytic_vs_sim']:+.2%}",
            flush=True,
        )

    def p95(xs):
        xs = sorted(abs(x) for x in xs)
        return xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))]

    recipe_rows = [r for r in rows if r["recipe_row"]]
    summary = {
        "configs": len(rows),
        "sim_vs_real_max_abs": max(abs(r["sim_vs_real"]) for r in rows if r["sim_vs_real"] is not None),
        "analytic_vs_sim_p95_abs": p95([r["analytic_vs_sim"] for r in rows]),
        "analytic_vs_sim_max_abs": max(abs(r["analytic_vs_sim"]) for r in rows),
    }
    if recipe_rows:
        summary.update(
            recipe_configs=len(recipe_rows),
            recipe_analytic_vs_sim_p95_abs=p95([r["analytic_vs_sim"] for r in recipe_rows]),
            recipe_analytic_vs_sim_max_abs=max(abs(r["analytic_vs_sim"]) for r in recipe_rows),
        )
    print(json.dumps(summary))
    if args.out:
        meta = {
            "date": time.strftime("%Y-%m-%d"),
            "cpus": os.cpu_count(),
            "device": "cpu (no GPU run)",
            "torch": metadata.version("torch"),
            "transformers": metadata.version("transformers"),
        }
        if kept:  # --append: the file's own date and versions stand for its rows; the new rows say theirs
            with open(args.out) as f:
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
        save(args.out, {**meta, "summary": summary, "rows": rows}, md)


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
