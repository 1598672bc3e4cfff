"""GRPO, DPO and KTO rows of benchmarks/accuracy.py (`--rl`): each phase's peak, analytic vs sim vs real steps.

Real steps are TRL 1.16's own GRPOTrainer / DPOTrainer / KTOTrainer on CPU, every allocation counted by the tracker
(probes/rl.py); `--logprobs full` has no TRL 1.16 code path, so its real steps are the sim's loop on real CPU
tensors (probes/rl_sim.py). As for the supervised rows: the sim with CPU code paths against the real CPU steps,
and the analytic model (which plans CUDA's paths: TRL's Triton folds, no tile temporaries) against the sim with
CUDA's. Target (issue 17): within 5%, phase by phase.

    python benchmarks/accuracy.py --rl --out benchmarks/results/accuracy-rl.json
"""

from __future__ import annotations

RL_GRID = [  # (arch, precision, workload fields, micro-batch, accumulation)
    (
        "debug-llama",
        "fp32",
        {"kind": "grpo", "num_generations": 4, "max_prompt_length": 64, "max_completion_length": 128, "beta": 0.04},
        4,
        2,
    ),
    (
        "debug-llama",
        "bf16-pure",
        {"kind": "grpo", "num_generations": 4, "max_prompt_length": 64, "max_completion_length": 128, "beta": 0.04},
        4,
        2,
    ),
    (
        "debug-llama",
        "fp32",
        {
            "kind": "grpo",
            "num_generations": 4,
            "max_prompt_length": 64,
            "max_completion_length": 128,
            "num_iterations": 2,
        },
        2,
        2,
    ),
    (
        "qwen-tiny-tied",
        "fp32",
        {"kind": "grpo", "num_generations": 4, "max_prompt_length": 64, "max_completion_length": 128, "beta": 0.04},
        4,
        1,
    ),
    ("debug-llama", "fp32", {"kind": "dpo", "max_length": 192, "max_prompt_length": 64}, 2, 2),
    ("qwen-tiny-tied", "bf16-pure", {"kind": "dpo", "max_length": 192, "max_prompt_length": 64}, 2, 1),
    (
        "debug-llama",
        "fp32",
        {
            "kind": "grpo",
            "num_generations": 4,
            "max_prompt_length": 64,
            "max_completion_length": 128,
            "beta": 0.04,
            "logprobs": "full",
        },
        4,
        2,
    ),
    ("debug-llama", "fp32", {"kind": "dpo", "max_length": 192, "max_prompt_length": 64, "logprobs": "full"}, 2, 2),
    # KTO (TRL's KTOTrainer, planned under --framework trl; whole logits: ms-swift's head, the sim's real steps)
    ("debug-llama", "fp32", {"kind": "kto", "max_length": 192, "max_prompt_length": 64}, 2, 2),
    ("debug-llama", "fp32", {"kind": "kto", "max_length": 192, "max_prompt_length": 64, "logprobs": "full"}, 2, 2),
]


def rows(config) -> list[dict]:
    """One row per (grid entry, phase); `config(arch)` gives the HF config dict."""
    from planner.config.spec import Knobs
    from planner.config.workload import Workload
    from planner.estimate.rl import breakdown
    from planner.estimate.setup import Setup
    from planner.export.export import trl_args
    from planner.model.families import from_config
    from probes import rl as real
    from probes import rl_sim
    from probes.step import Case

    out = []
    for arch, prec, fields, mb, accum in RL_GRID:
        cfg, w = config(arch), Workload(**fields)
        knobs = Knobs(precision=prec, workload=w, **({"framework": "trl"} if w.kind == "kto" else {}))
        case = Case(cfg, knobs, mb, accum, w.seq_len())
        steps = 3 if w.num_iterations > 1 else 2
        if w.logprobs == "full":
            measured = rl_sim.simulate(case, steps=steps, real=True)
        else:
            measured = real.measure(
                w.kind,
                real.model_for(cfg, knobs),
                trl_args(knobs.workload),
                mb,
                accum,
                w.prompt_tokens(),
                w.seq_len() - w.prompt_tokens(),
                steps=steps,
                precision=prec,
            )
        sim, sim_cpu = rl_sim.simulate(case, steps=steps), rl_sim.simulate(case, steps=steps, paths="cpu")
        phases = breakdown(Setup(from_config(cfg, arch), knobs, mb, accum, w.seq_len()), 80 * 2**30).phases
        analytic = {k.split(":")[0]: v for k, v in phases.items()}
        for phase, bytes_ in measured.items():
            out.append(
                {
                    "arch": arch,
                    "precision": prec,
                    "workload": fields,
                    "micro_batch": mb,
                    "grad_accum": accum,
                    "phase": phase,
                    "real": bytes_,
                    "sim_cpu_paths": sim_cpu[phase],
                    "sim_cuda_paths": sim[phase],
                    "analytic": analytic[phase],
                    "sim_vs_real": round(sim_cpu[phase] / bytes_ - 1, 4),
                    "analytic_vs_sim": round(analytic[phase] / sim[phase] - 1, 4),
                }
            )
            r = out[-1]
            print(
                f"{arch:15s} {prec:9s} {w.summary()[:60]:60s} {phase:18s} sim/real {r['sim_vs_real']:+.2%} "
                f"analytic/sim {r['analytic_vs_sim']:+.2%}",
                flush=True,
            )
    return out


def markdown(rows_: list[dict]) -> list[str]:
    md = [
        (
            "| arch | precision | workload | micro x accum | phase | real MiB | sim (cpu paths) MiB | "
            "sim (cuda paths) MiB | analytic MiB | sim/real | analytic/sim |"
        ),
        "|" + "---|" * 11,
    ]
    md += [
        f"| {r['arch']} | {r['precision']} | {', '.join(f'{k}={v}' for k, v in r['workload'].items())} | "
        f"{r['micro_batch']} x {r['grad_accum']} | {r['phase']} | {r['real'] / 2**20:.1f} | "
        f"{r['sim_cpu_paths'] / 2**20:.1f} | {r['sim_cuda_paths'] / 2**20:.1f} | {r['analytic'] / 2**20:.1f} | "
        f"{r['sim_vs_real']:+.2%} | {r['analytic_vs_sim']:+.2%} |"
        for r in rows_
    ]
    return md
