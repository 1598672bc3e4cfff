"""DeepSpeed as it allocates, against planner.estimate.zero: ZeRO-3's gathered working set under several
stage3_max_live_parameters / stage3_max_reuse_distance settings, and the bytes the optimizer step allocates at
ZeRO-1, 2 and 3 (sub_group_size too), read from DeepSpeed's own state during real steps on CPU ranks
(probes/zero.py; debug-llama, bf16, SGD as the client optimizer, micro 2 x 64 tokens). Then Qwen2.5-7B at 1/16 of
its width (probes.zero.narrowed: HF's "auto" buckets the size of its matrices, DeepSpeed's limits 1e9/256) under
full checkpointing, LoRA rank 16, rank 1 (the 7B's 16 scaled) and full fine-tuning, micro 1 x 64 tokens: the
gathered set, the gathered set with the all-gather buffers alive at once, the largest full gradient.

    python benchmarks/zero_alloc.py --out benchmarks/results/zero_alloc.json
"""

from __future__ import annotations

import argparse
import json
import time

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
NARROW, LORA_RANKS = 16, (16, 1, 0)


def row(stage: int, world: int, overrides: dict) -> dict:
    from planner.config.spec import Knobs
    from planner.estimate import zero
    from planner.model.catalog import model_config
    from probes.step import Case
    from probes.zero import measure_zero, planned

    case = Case(model_config("debug-llama"), Knobs(precision="bf16", zero_stage=stage, optimizer="sgd"), 2, 1, 64)
    ranks = measure_zero(case, overrides, world=world)
    s, z = planned(case, overrides, world)
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


def narrowed_row(rank: int) -> dict:
    from planner.estimate import zero
    from planner.estimate.trained import trainable_params
    from probes.zero import measure_zero, narrowed_case, planned

    case, limits = narrowed_case("qwen2.5-7b", rank, NARROW)
    ranks = measure_zero(case, limits)
    s, z = planned(case, limits)
    gathered = zero.zero3_gathered_param_elements(s, z)

    def measured(key: str) -> int:
        return max(r[key][-1] for r in ranks)

    out = {
        "model": f"qwen2.5-7b/{NARROW}",
        "lora_rank": rank,
        "settings": limits,
        "gathered_elements": {"measured": measured("gathered_numel"), "analytic": gathered},
        "held_elements": {"measured": measured("held_numel"), "analytic": gathered + zero.zero3_staging_elements(s, z)},
        "full_grad_elements": {
            "measured": measured("full_grad_numel"),
            "analytic": zero.largest_trained_param_elements(s),
        },
        "step_bytes": {
            "measured": measured("step_peak_bytes"),
            "analytic": zero.zero_step_temp_bytes(s, trainable_params(s), z),
        },
    }
    for key in ("gathered_elements", "held_elements", "full_grad_elements", "step_bytes"):
        out[key]["error"] = round(out[key]["analytic"] / out[key]["measured"] - 1, 5)
    return out


def _pair(v: dict, digits: int = 1) -> str:
    return f"{v['measured']:,} / {v['analytic']:,} ({v['error']:+.{digits}%})"


def narrowed_markdown(rows: list[dict]) -> list[str]:
    head = "gathered elements | gathered + all-gather buffers at once | largest full gradient | step bytes"
    md = [f"\n| model | LoRA rank | {head} |", "|---|---|---|---|---|---|"]
    for r in rows:
        md.append(
            f"| {r['model']} | {r['lora_rank'] or 'full'} | {_pair(r['gathered_elements'], 2)} | "
            f"{_pair(r['held_elements'])} | {_pair(r['full_grad_elements'])} | {_pair(r['step_bytes'], 2)} |"
        )
    md.append(
        "\nEach cell: measured / analytic (error); 28 layers, every matrix 1/256 of the 7B's, full checkpointing."
    )
    return md


def markdown(data: dict) -> list[str]:
    md = [
        "| stage | ranks | settings | gathered elements (measured / analytic) | step bytes (measured / analytic) |",
        "|---|---|---|---|---|",
    ]
    for r in (r for r in data["rows"] if "lora_rank" not in r):
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
    return md + narrowed_markdown([r for r in data["rows"] if "lora_rank" in r])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    rows = []
    for stage, world, overrides in GRID:
        t0 = time.perf_counter()
        rows.append(row(stage, world, overrides))
        print(f"{json.dumps(rows[-1])} ({time.perf_counter() - t0:.1f} s)", flush=True)
    for rank in LORA_RANKS:
        t0 = time.perf_counter()
        rows.append(narrowed_row(rank))
        print(f"{json.dumps(rows[-1])} ({time.perf_counter() - t0:.1f} s)", flush=True)
    publish(args.out, rows, cpu_meta(("torch", "transformers", "deepspeed")), markdown)


if __name__ == "__main__":
    main()
