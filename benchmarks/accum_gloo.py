"""What accumulation costs on 2 CPU ranks (gloo): one global batch (debug-llama, 8 rows of 64 tokens a rank) split into
1, 2, 4 and 8 micro-steps under DDP and FSDP2 (HF's no_sync, and without it) and DeepSpeed ZeRO-2/3
(probes/accum.py). Per row: the median seconds of an optimizer step and of its collectives (steps after the first), their ratio to accumulation 1,
and the ratio planner.estimate.microstep predicts for the collectives (their bytes per rank, ring algorithms).

Timings on a loaded 2-core machine are noisy: the exact counts are pinned in tests/probes/test_accum.py; here a
collectives' ratio within TOLERANCE of the prediction is marked ok. DDP's all-reduces run asynchronously in gloo's
thread (only their launch is timed), so DDP's time shows in the step (without no_sync against with it).

    python benchmarks/accum_gloo.py --out benchmarks/results/accum_gloo.json
    python benchmarks/accum_gloo.py --report benchmarks/results/accum_gloo.json
"""

from __future__ import annotations

import argparse
import statistics

from results_io import cpu_meta, meta_line, publish, report_or_out

ACCUMS = [1, 2, 4, 8]
MODES = [("ddp", 0), ("ddp-sync", 0), ("fsdp", 0), ("fsdp-sync", 0), ("zero2", 2), ("zero3", 3)]
TOLERANCE = 0.35  # of the collectives' time ratio to accumulation 1, against the bytes' ratio


def _case(stage: int, mode: str):
    from planner.config.spec import Knobs
    from planner.model.catalog import model_config
    from probes.step import Case

    knobs = Knobs(precision="bf16", zero_stage=stage, optimizer="sgd", fsdp="full" if "fsdp" in mode else "off")
    return Case(model_config("debug-llama"), knobs, 1, 8, 64)


def predicted_volume(case, mode: str, accum: int) -> float:
    """Bytes each rank sends in one optimizer step, as planned."""
    from planner.estimate import microstep
    from planner.estimate.setup import Setup
    from planner.model.families import from_config

    rows = case.micro_batch * case.grad_accum
    s = Setup(from_config(case.config, "probe"), case.knobs, rows // accum, accum, case.seq_len, 2, 1)
    return microstep.volume_and_calls(microstep.collectives(s, no_sync=not mode.endswith("-sync")), accum)[0]


def rows_of(mode: str, stage: int, steps: int) -> list[dict]:
    from probes.accum import measure_accum

    case, out = _case(stage, mode), []
    runs = measure_accum(case, mode, ACCUMS, steps=steps)[0]["runs"]
    for run in runs:
        later = run["steps"][1:]
        step = statistics.median(s["seconds"] for s in later)
        comm = statistics.median(sum(v["seconds"] for v in s["collectives"].values()) for s in later)
        calls = {op: v["calls"] for op, v in later[-1]["collectives"].items()}
        out.append({"mode": mode, "accum": run["accum"], "step_s": step, "comm_s": comm, "calls": calls})
    for r in out:
        r["step_ratio"] = r["step_s"] / out[0]["step_s"]
        r["comm_ratio"] = r["comm_s"] / out[0]["comm_s"]
        r["predicted_ratio"] = predicted_volume(case, mode, r["accum"]) / predicted_volume(case, mode, 1)
        r["ok"] = mode.startswith("ddp") or abs(r["comm_ratio"] / r["predicted_ratio"] - 1) <= TOLERANCE
    return out


def markdown(data: dict) -> list[str]:
    md = [
        (
            "| mode | accum | step s | step / accum 1 | collectives s | collectives / accum 1 "
            "| planned bytes / accum 1 | within 35% | calls a step |"
        ),
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in data["rows"]:
        calls = ", ".join(f"{op} {n}" for op, n in sorted(r["calls"].items()))
        ok = "(async)" if r["mode"].startswith("ddp") else "yes" if r["ok"] else "no"
        md.append(
            f"| {r['mode']} | {r['accum']} | {r['step_s']:.3f} | {r['step_ratio']:.2f} | {r['comm_s']:.4f} | "
            f"{r['comm_ratio']:.2f} | {r['predicted_ratio']:.2f} | {ok} | {calls} |"
        )
    md.append(
        f"\n{meta_line(data['meta'])}; 2 gloo ranks, medians of {data['meta']['steps'] - 1} steps after the first"
    )
    return md


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--report")
    ap.add_argument("--steps", type=int, default=4)
    args = ap.parse_args()
    if report_or_out(ap, args, markdown):
        return
    rows = [r for mode, stage in MODES for r in rows_of(mode, stage, args.steps)]
    meta = cpu_meta(("torch", "transformers", "deepspeed")) | {"steps": args.steps}
    publish(args.out, rows, meta, markdown)


if __name__ == "__main__":
    main()
