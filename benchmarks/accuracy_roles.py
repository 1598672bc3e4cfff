"""The verl / OpenRLHF role rows of benchmarks/accuracy.py (`--rl`): each role's phases, analytic
(planner.estimate.roles.role_phase_bytes) against the sim at the model's real depth (probes/roles_sim.py), at two
shapes a framework. Target (issue 35): within 3%, role by role and phase by phase.

Each role runs alone on one rank without sharding (its own states and transient: what the group's phases add up);
FSDP's and ZeRO's sharding of those states is pinned by benchmarks/fsdp_sharding.py and zero_sharding.py. The
rollout engines (vLLM, SGLang), verl's reward model (a vLLM engine) and the weight sync run CUDA-only code and are
analytic (planner.estimate.rollout), with no row here.

    python benchmarks/accuracy.py --rl --out benchmarks/results/accuracy-rl.json
"""

from __future__ import annotations

# (arch, precision, framework, the update's entropy, update tokens, no-grad pass tokens)
ROLE_GRID = [
    ("qwen2.5-0.5b", "bf16-pure", "verl", "off", 4096, 8192),
    ("llama-3.2-1b", "fp32", "verl", "checkpointed", 2048, 4096),
    ("qwen2.5-0.5b", "bf16-pure", "openrlhf", "off", 4096, 8192),
    ("llama-3.2-1b", "bf16-pure", "openrlhf", "on", 2048, 4096),
]


def roles_of(framework: str) -> tuple[str, ...]:
    return ("actor", "ref", "critic") if framework == "verl" else ("actor", "ref", "critic", "reward")


def rows(config) -> list[dict]:
    from planner.estimate import roles
    from planner.estimate.setup import Setup
    from planner.model.families import from_config
    from probes.roles_sim import role_knobs, simulate_roles
    from probes.step import Case

    out = []
    for arch, prec, fw, entropy, update, passes in ROLE_GRID:
        cfg = config(arch)
        k = role_knobs(prec, fw, update, passes, entropy)  # one rank, no sharding: as the sim runs them
        s = Setup(from_config(cfg, arch), k, 4, 2, 1024)
        r = roles.roles_of(s)
        analytic = {}
        for role in roles_of(fw):
            model = roles.value_model(s.model) if role == "reward" else r.models[role]
            analytic.update(roles.role_phase_bytes(replace_model(s, model), role, 80 << 30))
        tokens = role_tokens(fw, update, passes)
        sim = simulate_roles(Case(cfg, k, 4, 2, 1024), tokens, entropy=entropy, beta=0.001)
        for phase, got in sim.items():
            row = {
                "arch": arch,
                "precision": prec,
                "framework": fw,
                "entropy": entropy,
                "phase": phase,
                "update_tokens": update,
                "pass_tokens": passes,
                "sim": got,
                "analytic": analytic[phase],
                "analytic_vs_sim": round(analytic[phase] / got - 1, 4),
            }
            out.append(row)
            print(f"{arch:14s} {prec:9s} {fw:8s} {phase:18s} analytic/sim {row['analytic_vs_sim']:+.2%}", flush=True)
    return out


def role_tokens(framework: str, update: int, passes: int) -> dict[str, tuple[int, int]]:
    """Each role's (update, no-grad pass) tokens as planner.estimate.roles cuts them (critic_budgets): the critic's
    values by its own budget under verl, with the experience passes under OpenRLHF; the reward model's with them."""
    out = {"actor": (update, passes), "ref": (0, passes), "critic": (update, update if framework == "verl" else passes)}
    if framework != "verl":
        out["reward"] = (0, passes)
    return out


def replace_model(s, model):
    from dataclasses import replace

    return replace(s, model=model)


def markdown(rows_: list[dict]) -> list[str]:
    md = [
        "| arch | precision | framework | update entropy | phase | tokens | sim MiB | analytic MiB | analytic/sim |",
        "|" + "---|" * 9,
    ]
    md += [
        f"| {r['arch']} | {r['precision']} | {r['framework']} | {r['entropy']} | {r['phase']} | "
        f"{r['update_tokens'] if r['phase'].endswith('update') else r['pass_tokens']:,} | {r['sim'] / 2**20:.1f} | "
        f"{r['analytic'] / 2**20:.1f} | {r['analytic_vs_sim']:+.2%} |"
        for r in rows_
    ]
    return md


def main() -> None:
    """`--report JSON`: the role rows' table of a stored accuracy-rl.json (what docs/rl.md shows); run them with
    `benchmarks/accuracy.py --rl`."""
    import argparse
    import json

    ap = argparse.ArgumentParser()
    ap.add_argument("--report", required=True, help="a benchmarks/accuracy.py --rl JSON")
    args = ap.parse_args()
    with open(args.report) as f:
        data = json.load(f)
    print("\n".join(markdown(data["role_rows"])))
    s = data["summary"]
    print(
        f"\n{data['date']}, {data['cpus']} CPUs, torch {data['torch']}: {s['role_rows']} rows, largest |analytic/sim - 1| "
        f"{s['role_analytic_vs_sim_max_abs']:.2%}"
    )


if __name__ == "__main__":
    main()
