"""GPU 0 of torch's nn.DataParallel (planner.estimate.dataparallel) measured on the sim: the step's trace at the model's
real depth (probes.reserved.step_events) with DataParallel's gather emulated after each training forward, then replayed
through the caching allocator (probes.allocator). It checks the analytic forward phase of a DataParallel plan and
asks whether the gather's large transient block fragments the reserve.

The gather as GPU 0 runs it (transformers 4.40 under LLaMA-Factory 0.7.x; torch nn/parallel): each replica's forward
returns fp32 logits (modeling_llama.py `logits.float()`, through 4.45) beside the loss; comm.gather allocates the
concatenation of every replica's logits on GPU 0 and copies them in; compute_loss keeps the loss and drops the outputs
(planner.estimate.dataparallel's docstring cites the lines). The installed transformers returns logits in the compute
dtype, so the emulation makes 4.40's fp32 copy, drops the output that holds the compute-dtype logits (the loss's graph
keeps cross_entropy's fp32 log-softmax, as 4.40's does), then allocates the concatenation. The other replicas' own
memory is on their GPUs and is not traced. `--ddp` traces the same step without the gather.

    python benchmarks/dataparallel_replay.py --model llama-3.1-8b --lora q_proj,v_proj --seq 8192 --world 8

About 5 minutes a trace for an 8B model on 2 cores (the sim's cost is per op, not per token).

Measured 2026-12-06 (torch 2.13 CPU, transformers 5.25), the field row lf-3612 (LLaMA-Factory 0.7.x `llamafactory-cli
train` over 8 visible GPUs, Llama-3-8B LoRA q_proj,v_proj, micro 1 x 8192, bf16, full checkpointing):
    gather, world 8: peak allocated 56.35 GiB, reserved 59.56 GiB (+5.7%); the analytic forward phase says 56.40
    --ddp:           peak allocated 28.94 GiB, reserved 32.16 GiB (+11.1%); the analytic backward phase says 29.00
The gather's 31.3 GiB block does not fragment the reserve: GPU 0 needs about 60 GiB of an 80 GB card.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GiB = 2**30


def gather_loss(world: int):
    """probes.step._loss for the standard loss with GPU 0's gather after the forward."""
    import torch

    def loss(model, batch, k):
        out = model(**batch)
        logits32 = out.logits.float()  # transformers 4.40's returned logits (replica 0's, on GPU 0)
        result = out.loss
        del out  # the compute-dtype logits go with the output
        gathered = torch.empty((world * logits32.shape[0], *logits32.shape[1:]), dtype=torch.float32)
        gathered[: logits32.shape[0]].copy_(logits32)  # comm.gather: the concatenation on GPU 0
        del logits32, gathered  # compute_loss keeps only the loss
        return result

    return loss


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="llama-3.1-8b")
    ap.add_argument("--lora", default="q_proj,v_proj", help="LoRA targets (rank 8); '' for full fine-tuning")
    ap.add_argument("--seq", type=int, default=8192)
    ap.add_argument("--world", type=int, default=8, help="the GPUs DataParallel spans")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--ddp", action="store_true", help="trace the step without the gather")
    args = ap.parse_args(argv)

    import probes.step as st
    from planner.config.spec import Knobs
    from planner.model.catalog import load_model
    from probes.allocator import replay
    from probes.reserved import step_events
    from probes.step import Case

    lora = {"lora_rank": 8, "lora_targets": args.lora} if args.lora else {}
    knobs = Knobs(precision="bf16", checkpointing="full", **lora)
    case = Case(load_model(args.model).config, knobs, 1, 8, args.seq)
    if not args.ddp:
        st._loss = gather_loss(args.world)
    t = time.time()
    a = replay(step_events(case, steps=args.steps))
    row = {
        "model": args.model,
        "lora": args.lora,
        "seq": args.seq,
        "world": None if args.ddp else args.world,
        "peak_allocated_gib": round(a.peak_allocated / GiB, 2),
        "peak_reserved_gib": round(a.peak_reserved / GiB, 2),
        "reserve_over_peak": round(a.peak_reserved / a.peak_allocated - 1, 4),
        "seconds": round(time.time() - t),
    }
    from results_io import cpu_meta, meta_line

    meta = cpu_meta(("torch", "transformers"))
    print(json.dumps({"meta": meta, "rows": [row]}))
    print("| model | world | peak allocated GiB | peak reserved GiB | reserve over peak |\n|---|---|---|---|---|")
    world = row["world"] or "DDP (no gather)"
    print(
        f"| {args.model} | {world} | {row['peak_allocated_gib']} | {row['peak_reserved_gib']} | "
        f"{row['reserve_over_peak']:+.1%} |\n\n{meta_line(meta)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
