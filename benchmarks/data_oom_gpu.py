"""Issue 19 on a real GPU: does a run run out of memory at the step `check --data` names, and does a token budget
the planner says fits run the same data without one?

1. Writes a pre-tokenized dataset: most rows short, a fifth of them long (seeded).
2. `check --data` for a fixed plan (micro-batch M): the longest row it fits, and the first step at which the
   trainer's sampler draws a longer one.
3. Runs the bundled trainer (in this process, on the GPU) with that plan: the step of its first real
   out-of-memory error (the trainer catches it, halves the micro-batch and redoes the step), and each step's
   padded width and measured peak allocated, against the planner's prediction at that width.
4. `check --data --max-tokens-per-micro-batch T` for the largest T in a ladder that the planner says fits, and the
   next rung; runs the trainer with each: out-of-memory errors, peak allocated against the prediction.

    python benchmarks/data_oom_gpu.py --out benchmarks/results/gpu/data_oom.json
    python benchmarks/data_oom_gpu.py --report benchmarks/results/gpu/data_oom.json     # the table, from the file
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import random
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from results_io import report_or_out, save

LADDER = (2048, 3072, 4096, 6144, 8192, 12288, 16384, 20480, 24576, 32768)


def write_data(path: str, rows: int, vocab: int, seed: int = 0) -> list[int]:
    rng = random.Random(seed)
    lengths = [rng.randint(1200, 6000) if rng.random() < 0.2 else rng.randint(100, 1200) for _ in range(rows)]
    with open(path, "w") as f:
        f.writelines(json.dumps({"input_ids": [rng.randrange(vocab) for _ in range(n)]}) + "\n" for n in lengths)
    return lengths


def check(
    a,
    data: str,
    budget: int | None = None,
    seq_len: int | None = None,
    micro_batch: int | None = None,
    grad_accum: int = 1,
):
    from planner import advise
    from scan.plan import data_fit

    fields = {
        "model": a.model,
        "gpu": a.gpu,
        "micro_batch": micro_batch or a.micro_batch,
        "grad_accum": grad_accum,
        "evidence": "analytic",
        "precision": a.precision,
        "max_tokens_per_micro_batch": budget,
    }
    fields.update({"seq_len": seq_len} if seq_len else {"data": data})
    return advise.check(advise.parse(advise.CheckRequest, fields), scanner=data_fit)


def train(a, data: str, seq_len: int, steps: int, budget: int | None, store: str) -> list[dict]:
    import torch

    from planner.config.spec import Knobs
    from trainer.runconfig import RunConfig
    from trainer.step import Trainer

    knobs = Knobs.make(precision=a.precision, checkpointing="off", optimizer="adamw")
    cfg = RunConfig(
        model=a.model,
        micro_batch=a.micro_batch,
        grad_accum=1,
        seq_len=seq_len,
        knobs=knobs,
        data=data,
        max_steps=steps,
        lr=1e-5,
        device=a.device,
        store=store,
        max_tokens_per_micro_batch=budget,
    )
    t = Trainer(cfg)
    out = []
    for _ in range(steps):
        row = t.train_step()
        row["events"] = [e for e in t.events if e.get("step") == row["step"]]
        out.append(row)
    del t
    if a.device == "cuda":
        torch.cuda.empty_cache()
    return out


def fixed_run(a, data: str) -> dict:
    res = check(a, data)
    d = res.data
    first = d.get("first_too_long")
    steps = min(first["step"] + 2, a.max_steps) if first else a.max_steps
    log = train(a, data, res.context[2].seq_len, steps, None, a.store)
    rows = []
    for r in log:
        w = r["longest_sample_tokens"]
        # at the trainer's accumulation: with more than one micro-step, the gradients of the last are held
        pred = check(
            a, data, seq_len=w, micro_batch=r["micro_batch"], grad_accum=r["grad_accum"]
        ).plan.memory.peak_allocated_bytes
        rows.append(
            {
                "step": r["step"],
                "width": w,
                "micro_batch": r["micro_batch"],
                "grad_accum": r["grad_accum"],
                "oom": bool(r["events"]),
                "measured_peak_allocated_bytes": r["peak_allocated_bytes"],
                "predicted_peak_allocated_bytes": pred,
            }
        )
    oom_steps = [r["step"] for r in rows if r["oom"]]
    ran = [r["width"] for r in rows if not r["oom"] and r["micro_batch"] == a.micro_batch]
    return {
        "fits_up_to_tokens": d.get("fits_up_to_tokens"),
        "named": first,
        "first_oom_step": oom_steps[0] if oom_steps else None,
        "widest_ran_at_full_micro_batch": max(ran, default=None),
        "oom_width": next((r["width"] for r in rows if r["oom"]), None),
        "steps": rows,
    }


def budget_runs(a, data: str, longest: int) -> list[dict]:
    verdicts = [(t, check(a, data, budget=t)) for t in LADDER if t >= longest]  # a sample is never split
    fitting = [i for i, (_, r) in enumerate(verdicts) if r.plan.fits]
    pick = fitting[-1:] + [i + 1 for i in fitting[-1:] if i + 1 < len(verdicts)]
    out = []
    for i in pick:
        t, r = verdicts[i]
        log = train(a, data, r.context[2].seq_len, a.budget_steps, t, a.store)
        ooms = [e for row in log for e in row["events"]]
        peak = max((row["peak_allocated_bytes"] or 0 for row in log if not row["events"]), default=None)
        out.append(
            {
                "max_tokens_per_micro_batch": t,
                "planner_fits": r.plan.fits,
                "predicted_peak_allocated_bytes": r.plan.memory.peak_allocated_bytes,
                "predicted_device_total_bytes": r.plan.memory.device_total_bytes,
                "planned_shapes": r.plan.token_batches.shapes,
                "measured_peak_allocated_bytes": peak,
                "oom_events": ooms,
                "micro_steps": [row.get("micro_steps") for row in log],
            }
        )
    return out


def markdown(res: dict) -> list[str]:
    f = res["fixed"]
    lines = [
        f"# Data-aware planning on a real GPU ({res['device']}, torch {res['torch']}, {res['date']})",
        "",
        f"{res['model']}, micro-batch {res['micro_batch']}, {res['precision']}, {res['rows']} rows",
        "",
        "| what | planner | GPU |",
        "|---|---|---|",
        (
            f"| longest row that fits at micro-batch {res['micro_batch']} | {f['fits_up_to_tokens']} | ran up to "
            f"{f['widest_ran_at_full_micro_batch']}, out of memory at {f['oom_width']} |"
        ),
        (
            f"| first step that runs out of memory | {f['named']['step'] if f['named'] else '-'} | "
            f"{f['first_oom_step'] or '-'} |"
        ),
        "",
        "| token budget | planner | predicted peak GiB | measured peak GiB | OOMs |",
        "|---|---|---|---|---|",
    ]
    for b in res["budget"]:
        lines.append(
            f"| {b['max_tokens_per_micro_batch']} | {'fits' if b['planner_fits'] else 'does not fit'} | "
            f"{b['predicted_peak_allocated_bytes'] / 2**30:.2f} | {(b['measured_peak_allocated_bytes'] or 0) / 2**30:.2f}"
            f" | {len(b['oom_events'])} |"
        )
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="qwen2.5-0.5b")
    p.add_argument("--gpu", default="h100")
    p.add_argument("--micro-batch", type=int, default=8)
    p.add_argument("--precision", default="bf16")
    p.add_argument("--rows", type=int, default=400)
    p.add_argument("--max-steps", type=int, default=50)
    p.add_argument("--budget-steps", type=int, default=25)
    p.add_argument("--device", default="cuda", help="cpu: a rehearsal of the script (nothing runs out of memory)")
    p.add_argument("--out", help="where the results go (JSON, and its markdown beside it)")
    p.add_argument("--report", metavar="JSON", help="print the markdown of stored results, run nothing")
    a = p.parse_args()
    if report_or_out(p, a, markdown):
        return
    import torch

    from planner.model.catalog import load_model

    tmp = tempfile.mkdtemp()
    a.store = os.path.join(tmp, "store.sqlite")
    data = os.path.join(tmp, "data.jsonl")
    lengths = write_data(data, a.rows, load_model(a.model).text.vocab)
    res = {
        "model": a.model,
        "micro_batch": a.micro_batch,
        "precision": a.precision,
        "rows": a.rows,
        "device": torch.cuda.get_device_name(0) if a.device == "cuda" else "cpu",
        "torch": torch.__version__,
        "python": platform.python_version(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    res["fixed"] = fixed_run(a, data)
    res["budget"] = budget_runs(a, data, max(lengths))
    save(a.out, res, markdown(res))
    print(
        json.dumps(
            {k: v for k, v in res.items() if k != "fixed"}
            | {"fixed": {k: v for k, v in res["fixed"].items() if k != "steps"}},
            indent=1,
        )
    )
    print("\n".join(markdown(res)))


if __name__ == "__main__":
    main()
