"""Bundled trainer tokens/s against a plain HF Trainer on the same plan (issue 4's target: >= 98%).

Both sides train the same model (same config and seeded random init), on the same full-length
token sequences (no padding, so both see exactly global batch x seq_len tokens a step), with the same
micro-batch, accumulation, precision, checkpointing and optimizer (recipe.make_optimizer, passed
to HF's Trainer through `optimizers=`), gradient clipping at 1.0 and a constant learning rate. Each
run is its own subprocess; the sides alternate for --repeats rounds and each side's best round counts.
The clock is the same on both sides: a timestamp after every optimizer step (after a CUDA
synchronize on a GPU); tokens/s is over the steps after --warmup.

    python benchmarks/trainer_speed.py --out benchmarks/results/trainer_speed_cpu.json      # 2-CPU default
    python benchmarks/trainer_speed.py --device cuda --model qwen2.5-0.5b --precision bf16 \\
        --micro-batch 8 --grad-accum 2 --seq-len 1024 --out benchmarks/results/trainer_speed_cuda.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata

from results_io import save

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def write_data(path: str, n: int, seq_len: int, vocab: int) -> None:
    rng = random.Random(0)
    with open(path, "w") as f:
        f.writelines(json.dumps({"input_ids": [rng.randrange(vocab) for _ in range(seq_len)]}) + "\n" for _ in range(n))


def _sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def run_bundled(a: argparse.Namespace, data: str) -> list[float]:
    from planner.config.spec import Knobs
    from trainer.runconfig import RunConfig
    from trainer.step import Trainer

    knobs = Knobs.make(precision=a.precision, checkpointing=a.checkpointing, optimizer=a.optimizer)
    cfg = RunConfig(
        model=a.model,
        micro_batch=a.micro_batch,
        grad_accum=a.grad_accum,
        seq_len=a.seq_len,
        knobs=knobs,
        data=data,
        max_steps=a.steps,
        lr=1e-5,
        device=a.device,
    )
    t = Trainer(cfg)
    stamps = []
    for _ in range(a.steps):
        t.train_step()
        _sync(a.device)
        stamps.append(time.perf_counter())
    return stamps


def run_hf(a: argparse.Namespace, data: str) -> list[float]:
    import torch
    from transformers import Trainer, TrainerCallback, TrainingArguments

    from recipe import make_optimizer
    from trainer.model import build_model
    from trainer.runconfig import RunConfig

    model = build_model(
        RunConfig(model=a.model, micro_batch=a.micro_batch, grad_accum=a.grad_accum, seq_len=a.seq_len)
    ).to(a.device)  # checkpointing: HF's own switch below
    with open(data) as f:
        rows = [json.loads(line)["input_ids"] for line in f]
    ds = [
        {
            "input_ids": torch.tensor(r),
            "attention_mask": torch.ones(len(r), dtype=torch.long),
            "labels": torch.tensor(r),
        }
        for r in rows
    ]
    opt = make_optimizer([p for p in model.parameters() if p.requires_grad], a.optimizer, 1e-5)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    stamps: list[float] = []

    class Clock(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            _sync(a.device)
            stamps.append(time.perf_counter())

    names = {f.name for f in dataclasses.fields(TrainingArguments)}
    ckpt = "activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing"  # v5 name
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(
            output_dir=out,
            per_device_train_batch_size=a.micro_batch,
            gradient_accumulation_steps=a.grad_accum,
            max_steps=a.steps,
            max_grad_norm=1.0,
            bf16=a.precision == "bf16",
            fp16=a.precision == "fp16",
            **{ckpt: a.checkpointing == "full", f"{ckpt}_kwargs": {"use_reentrant": False}},
            report_to="none",
            save_strategy="no",
            logging_steps=10**9,
            disable_tqdm=True,
            use_cpu=a.device == "cpu",
            seed=0,
            dataloader_drop_last=True,
            remove_unused_columns=False,
        )
        Trainer(model=model, args=args, train_dataset=ds, optimizers=(opt, sched), callbacks=[Clock()]).train()
    return stamps


def one(a: argparse.Namespace, side: str, data: str) -> dict:
    """tokens/s and median step time of one side, in its own process."""
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--side",
        side,
        "--data",
        data,
        *[
            x
            for k, v in vars(a).items()
            if k not in ("side", "data", "out", "repeats")
            for x in (f"--{k.replace('_', '-')}", str(v))
        ],
    ]
    p = subprocess.run(
        cmd, cwd=ROOT, capture_output=True, text=True, check=False, env={**os.environ, "PYTHONPATH": ROOT}
    )
    if p.returncode:
        raise SystemExit(f"{side} failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="debug-llama")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="fp32")
    ap.add_argument("--checkpointing", choices=["off", "full"], default="off")
    ap.add_argument("--optimizer", default="adamw")
    ap.add_argument("--micro-batch", type=int, default=4)
    ap.add_argument("--grad-accum", type=int, default=2)
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--side", choices=["bundled", "hf"], help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    tokens_per_step = a.micro_batch * a.grad_accum * a.seq_len
    if a.side:
        import torch

        torch.manual_seed(0)
        stamps = (run_bundled if a.side == "bundled" else run_hf)(a, a.data)
        assert len(stamps) == a.steps, f"{a.side}: {len(stamps)} steps timed, {a.steps} asked"
        seconds = stamps[-1] - stamps[a.warmup - 1]
        steps = [y - x for x, y in zip(stamps[a.warmup - 1 :], stamps[a.warmup :])]
        print(
            json.dumps(
                {
                    "tokens_per_s": tokens_per_step * (a.steps - a.warmup) / seconds,
                    "median_step_s": statistics.median(steps),
                }
            )
        )
        return
    from planner.model.catalog import load_model

    vocab = load_model(a.model).config["vocab_size"]
    best = {"bundled": 0.0, "hf": 0.0}
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "ids.jsonl")
        write_data(data, a.micro_batch * a.grad_accum * a.steps, a.seq_len, vocab)
        for r in range(a.repeats):
            for side in ("bundled", "hf"):
                got = one(a, side, data)
                runs.append(
                    {
                        "round": r,
                        "side": side,
                        "tokens_per_s": round(got["tokens_per_s"], 1),
                        "median_step_s": round(got["median_step_s"], 4),
                    }
                )
                best[side] = max(best[side], got["tokens_per_s"])
                print(
                    f"round {r} {side}: {got['tokens_per_s']:,.0f} tokens/s, median step {got['median_step_s']:.3f} s",
                    flush=True,
                )
    ratio = best["bundled"] / best["hf"]
    print(f"bundled / HF Trainer: {ratio:.3f} (target >= 0.98)")
    if a.out:
        import torch

        device = (
            torch.cuda.get_device_name()
            if a.device == "cuda"
            else f"{platform.processor() or 'cpu'}, {os.cpu_count()} CPUs"
        )
        plan = {
            k: getattr(a, k)
            for k in (
                "model",
                "precision",
                "checkpointing",
                "optimizer",
                "micro_batch",
                "grad_accum",
                "seq_len",
                "steps",
                "warmup",
                "repeats",
            )
        }
        result = {
            "date": time.strftime("%Y-%m-%d"),
            "device": device,
            "versions": {m: metadata.version(m) for m in ("torch", "transformers")},
            "plan": plan,
            "runs": runs,
            "best_tokens_per_s": {k: round(v, 1) for k, v in best.items()},
            "ratio": round(ratio, 4),
        }
        med = {side: statistics.median(r["median_step_s"] for r in runs if r["side"] == side) for side in best}
        md = [
            f"# Bundled trainer vs HF Trainer, {result['date']}",
            "",
            (
                f"{device}; torch {result['versions']['torch']}, transformers {result['versions']['transformers']}; "
                f"`python benchmarks/trainer_speed.py {' '.join(sys.argv[1:])}`"
            ),
            "",
            (
                f"plan: {a.model} {a.precision}, checkpointing {a.checkpointing}, {a.optimizer}, micro {a.micro_batch}"
                f" x accum {a.grad_accum}, seq {a.seq_len}; {a.steps} steps ({a.warmup} warm-up), best of {a.repeats}"
            ),
            "",
            "| side | best tokens/s | median step s |",
            "|---|---|---|",
            f"| bundled | {best['bundled']:,.0f} | {med['bundled']:.3f} |",
            f"| HF Trainer | {best['hf']:,.0f} | {med['hf']:.3f} |",
            "",
            f"ratio bundled / HF: **{ratio:.3f}** (target >= 0.98)",
        ]
        save(a.out, result, md)


if __name__ == "__main__":
    main()
