"""Atomic checkpoints: everything is written into `<save_dir>/.tmp-step-N`, which is then renamed to
`step-N`, and `latest` (a one-line file, itself replaced atomically) names it. A run killed at any
moment leaves either the previous checkpoint or the new one, never half of one.

Held: model, optimizer, scheduler and grad-scaler states (DeepSpeed's own checkpoint for zero >= 1),
every rank's RNG states, the sampler position, the step, and the micro-batch/accumulation in force
(after an OOM they differ from the plan's)."""
from __future__ import annotations

import json
import os
import random
import shutil
from dataclasses import asdict
from pathlib import Path

import torch
import torch.distributed as dist

from trainer.data import Position


def _barrier(t) -> None:
    if t.world > 1:
        dist.barrier()


def save(t) -> Path:
    root = Path(t.cfg.save_dir)
    tmp, final = root / f".tmp-step-{t.step}", root / f"step-{t.step}"
    if t.rank == 0:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    _barrier(t)
    if t.ds:
        t.engine.save_checkpoint(str(tmp), tag="ds")
    elif t.rank == 0:
        torch.save({"model": t.model.state_dict(), "optimizer": t.opt.state_dict(), "scheduler": t.sched.state_dict(),
                    "scaler": t.scaler.state_dict()}, tmp / "state.pt")
    rng = {"torch": torch.get_rng_state(), "python": random.getstate(),
           "cuda": torch.cuda.get_rng_state(t.device) if t.device.type == "cuda" else None}
    torch.save(rng, tmp / f"rng-{t.rank}.pt")
    if t.rank == 0:
        (tmp / "trainer.json").write_text(json.dumps({
            "step": t.step, "micro_batch": t.micro, "grad_accum": t.accum, "world": t.world,
            "global_batch": t.global_batch, "sampler": asdict(t.sampler.pos), "events": t.events}))
    _barrier(t)
    if t.rank == 0:
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        latest = root / ".latest.tmp"
        latest.write_text(final.name + "\n")
        os.replace(latest, root / "latest")
    _barrier(t)
    return final


def load_latest(t) -> dict | None:
    """Restore the newest checkpoint into the trainer; its trainer.json, or None when there is none."""
    root = Path(t.cfg.save_dir)
    if not (root / "latest").exists():
        return None
    d = root / (root / "latest").read_text().strip()
    meta = json.loads((d / "trainer.json").read_text())
    if meta["world"] != t.world or meta["global_batch"] != t.global_batch:
        from planner.errors import BadInput

        raise BadInput(f"--resume: {d} was saved with world {meta['world']} and global batch {meta['global_batch']}, "
                       f"this run has {t.world} and {t.global_batch}")
    if t.ds:
        t.engine.load_checkpoint(str(d), tag="ds")
    else:
        state = torch.load(d / "state.pt", map_location=t.device, weights_only=False)
        t.model.load_state_dict(state["model"])
        t.opt.load_state_dict(state["optimizer"])
        t.sched.load_state_dict(state["scheduler"])
        t.scaler.load_state_dict(state["scaler"])
    rng = torch.load(d / f"rng-{t.rank}.pt", weights_only=False)
    torch.set_rng_state(rng["torch"])
    random.setstate(rng["python"])
    if rng["cuda"] is not None:
        torch.cuda.set_rng_state(rng["cuda"], t.device)
    t.sampler.pos = Position(**meta["sampler"])
    t.events = meta.get("events", [])
    return meta
