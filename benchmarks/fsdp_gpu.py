"""FSDP2 on a real GPU, one rank: the bundled trainer's steps under fully_shard (full, grad-op, pure bf16,
checkpointing), torch.cuda.max_memory_allocated per step against the planner's peak for that step's padded width.
On one rank the shards are whole, so what this measures is the rest of the FSDP model: the unsharded root and
layers in the compute dtype, grad-op's layers kept from forward to backward, the backward's gradient copies.

    python benchmarks/fsdp_gpu.py --out benchmarks/results/gpu/fsdp.json
    python benchmarks/fsdp_gpu.py --report benchmarks/results/gpu/fsdp.json     # the table, from the file
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from results_io import report_or_out, save

CASES = [("full", "bf16", "off"), ("grad-op", "bf16", "off"), ("full", "bf16-pure", "off"), ("full", "bf16", "full")]


def predict(a, fsdp: str, precision: str, ckpt: str, width: int) -> int:
    from planner import advise

    req = advise.parse(
        advise.CheckRequest,
        {
            "model": a.model,
            "gpu": a.gpu,
            "micro_batch": a.micro_batch,
            "seq_len": width,
            "precision": precision,
            "checkpointing": ckpt,
            "fsdp": fsdp,
            "evidence": "analytic",
        },
    )
    return advise.check(req).plan.memory.peak_allocated_bytes


def run_case(a, fsdp: str, precision: str, ckpt: str) -> dict:

    from planner.config.spec import Knobs
    from trainer.runconfig import RunConfig
    from trainer.step import Trainer

    knobs = Knobs.make(precision=precision, checkpointing=ckpt, fsdp=fsdp)
    cfg = RunConfig(
        model=a.model,
        micro_batch=a.micro_batch,
        grad_accum=1,
        seq_len=a.seq_len,
        knobs=knobs,
        max_steps=a.steps,
        lr=1e-5,
        device=a.device,
        store=a.store,
    )
    t = Trainer(cfg)
    steps = []
    for _ in range(a.steps):
        r = t.train_step()
        steps.append(
            {
                "step": r["step"],
                "width": r["longest_sample_tokens"],
                "measured": r["peak_allocated_bytes"],
                "predicted": predict(a, fsdp, precision, ckpt, r["longest_sample_tokens"]),
            }
        )
    last = steps[-1]  # steady state: the optimizer states exist after step 1
    err = last["measured"] / last["predicted"] - 1 if last["measured"] else None
    return {"fsdp": fsdp, "precision": precision, "checkpointing": ckpt, "steps": steps, "error": err}


def _in_own_process(a, case: tuple) -> dict:
    """One case per process: a trainer's tensors must not outlive it into the next case's peak (they did, by up to
    1.9 GiB, when the cases shared a process)."""
    import subprocess

    args = [
        sys.executable,
        os.path.abspath(__file__),
        "--one",
        ",".join(case),
        "--model",
        a.model,
        "--gpu",
        a.gpu,
        "--micro-batch",
        str(a.micro_batch),
        "--seq-len",
        str(a.seq_len),
        "--steps",
        str(a.steps),
        "--device",
        a.device,
    ]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def markdown(res: dict) -> list[str]:
    lines = [
        f"# FSDP2 on one GPU ({res['device']}, torch {res['torch']}, {res['date']})",
        "",
        (
            f"{res['model']}, micro-batch {res['micro_batch']}, synthetic rows up to {res['seq_len']} tokens, "
            f"the last of {res['steps']} steps"
        ),
        "",
        "| fsdp | precision | ckpt | width | measured GiB | predicted GiB | error |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in res["cases"]:
        s = c["steps"][-1]
        err = f"{c['error']:+.2%}" if c["error"] is not None else "-"
        lines.append(
            f"| {c['fsdp']} | {c['precision']} | {c['checkpointing']} | {s['width']} | "
            f"{(s['measured'] or 0) / 2**30:.2f} | {s['predicted'] / 2**30:.2f} | {err} |"
        )
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="qwen2.5-0.5b")
    p.add_argument("--gpu", default="h100")
    p.add_argument("--micro-batch", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=2048)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--device", default="cuda", help="cpu: a rehearsal of the script (no peaks)")
    p.add_argument("--out")
    p.add_argument("--report", metavar="JSON", help="print the markdown of stored results, run nothing")
    p.add_argument("--one", help=argparse.SUPPRESS)  # FSDP,PRECISION,CKPT: one case, its JSON on stdout
    a = p.parse_args()
    if a.one:
        import tempfile

        a.store = os.path.join(tempfile.mkdtemp(), "store.sqlite")
        print(json.dumps(run_case(a, *a.one.split(","))))
        return
    if report_or_out(p, a, markdown):
        return
    import torch

    res = {
        "model": a.model,
        "micro_batch": a.micro_batch,
        "seq_len": a.seq_len,
        "steps": a.steps,
        "device": torch.cuda.get_device_name(0) if a.device == "cuda" else "cpu",
        "torch": torch.__version__,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cases": [_in_own_process(a, c) for c in CASES],
    }
    save(a.out, res, markdown(res))
    print("\n".join(markdown(res)))


if __name__ == "__main__":
    main()
