"""DeepSpeed as it allocates, against planner.estimate.zero: ZeRO-3's gathered working set under several
stage3_max_live_parameters / stage3_max_reuse_distance settings, and the bytes the optimizer step allocates at
ZeRO-1, 2 and 3 (sub_group_size too), read from DeepSpeed's own state during real steps on CPU ranks
(probes/zero.py; debug-llama, bf16, SGD as the client optimizer, micro 2 x 64 tokens).

    python benchmarks/zero_alloc.py --out benchmarks/results/zero_alloc.json
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace

from results_io import cpu_meta, meta_line, publish

M = 10**6
GRID = [  # (stage, world, zero_optimization overrides)
    (3, 2, {}),
    (3, 2, {"stage3_max_live_parameters": M, "stage3_max_reuse_distance": 0}),
    (3, 2, {"stage3_max_live_parameters": M // 10, "stage3_max_reuse_distance": M // 10}),
    (3, 2, {"stage3_max_live_parameters": 3 * M, "stage3_max_reuse_distance": 0, "sub_group_size": M}),
    (3, 2, {"stage3_max_live_parameters": M, "stage3_max_reuse_distance": 6 * M}),
    (2, 2, {}),
    (2, 4, {}),
    (1, 2, {}),
]
NAMES = {"stage3_max_live_parameters": "max_live_parameters", "stage3_max_reuse_distance": "max_reuse_distance"}


def row(stage: int, world: int, overrides: dict) -> dict:
    from planner.config.spec import Knobs
    from planner.estimate import zero
    from planner.estimate.setup import Setup
    from planner.model.catalog import load_model, model_config
    from probes.step import Case
    from probes.zero import measure_zero

    knobs = Knobs(precision="bf16", zero_stage=stage, optimizer="sgd")
    ranks = measure_zero(Case(model_config("debug-llama"), knobs, 2, 1, 64), overrides, world=world)
    s = Setup(load_model("debug-llama"), knobs, 2, 1, 64, world, 1)
    z = replace(zero.settings(s.model.text.hidden), **{NAMES.get(k, k): v for k, v in overrides.items()})
    out = {
        "stage": stage,
        "world": world,
        "settings": overrides,
        "step_bytes": {
            "measured": max(r["step_peak_bytes"][-1] for r in ranks),
            "analytic": zero.zero_step_temp_bytes(s, s.model.params, z),
        },
    }
    if stage == 3:
        out["gathered_elements"] = {
            "measured": max(max(r["gathered_numel"][1:]) for r in ranks),
            "analytic": zero.zero3_gathered_param_elements(s, z),
        }
        out["sub_group_max"] = max(max(r["sub_group_numels"]) for r in ranks)
    for v in (out["step_bytes"], out.get("gathered_elements")):
        if v:
            v["error"] = round(v["analytic"] / v["measured"] - 1, 5)
    return out


def markdown(data: dict) -> list[str]:
    md = [
        "| stage | ranks | settings | gathered elements (measured / analytic) | step bytes (measured / analytic) |",
        "|---|---|---|---|---|",
    ]
    for r in data["rows"]:
        g = r.get("gathered_elements")
        gathered = f"{g['measured']:,} / {g['analytic']:,} ({g['error']:+.1%})" if g else "-"
        st = r["step_bytes"]
        md.append(
            f"| {r['stage']} | {r['world']} | {json.dumps(r['settings']) if r['settings'] else 'defaults'} | "
            f"{gathered} | {st['measured']:,} / {st['analytic']:,} ({st['error']:+.2%}) |"
        )
    md.append(
        f"\n{meta_line(data['meta'])}. Step bytes at ZeRO-3 with sub_group_size 1e6 are bounded by sub_group_size "
        "+ ceil(L/N); the largest sub-group DeepSpeed formed is in the JSON (sub_group_max)."
    )
    return md


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    rows = []
    for stage, world, overrides in GRID:
        t0 = time.perf_counter()
        rows.append(row(stage, world, overrides))
        print(f"{json.dumps(rows[-1])} ({time.perf_counter() - t0:.1f} s)", flush=True)
    publish(args.out, rows, cpu_meta(("torch", "transformers", "deepspeed")), markdown)


if __name__ == "__main__":
    main()
