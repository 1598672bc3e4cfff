"""Atomic checkpoints: everything is written into `<save_dir>/.tmp-step-N`, which is then renamed to
`step-N`, and `latest` (a one-line file, itself replaced atomically) names it. A run killed at any
moment leaves either the previous checkpoint or the new one, never half of one.

Held: model, optimizer, scheduler and grad-scaler states (DeepSpeed's own checkpoint for zero >= 1; FSDP's
shards through torch.distributed.checkpoint),
every rank's RNG states, the sampler position, the step, and the micro-batch/accumulation in force
(after an OOM they differ from the plan's), and what it belongs to (model, knobs, world, global batch).

Each checkpoint has a `manifest.json`: every file's size and SHA-256. Resuming takes the newest intact
checkpoint (the one `latest` names, else the next older `step-N`), saying which it skipped and why, and
refuses (BadInput, one line) a checkpoint of another model or plan, naming what differs, before loading
anything (DeepSpeed would otherwise fail an assertion deep inside its load)."""

from __future__ import annotations

import hashlib
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
    elif t.fsdp:  # every rank writes its shards (torch distributed checkpoint)
        _dcp_save(t, tmp)
    elif t.rank == 0:
        torch.save(
            {
                "model": t.model.state_dict(),
                "optimizer": t.opt.state_dict(),
                "scheduler": t.sched.state_dict(),
                "scaler": t.scaler.state_dict(),
            },
            tmp / "state.pt",
        )
    rng = {
        "torch": torch.get_rng_state(),
        "python": random.getstate(),
        "cuda": torch.cuda.get_rng_state(t.device) if t.device.type == "cuda" else None,
    }
    torch.save(rng, tmp / f"rng-{t.rank}.pt")
    if t.rank == 0:
        (tmp / "trainer.json").write_text(
            json.dumps(
                {
                    "step": t.step,
                    "micro_batch": t.micro,
                    "grad_accum": t.accum,
                    "max_tokens_per_micro_batch": t.budget,
                    "sampler": asdict(t.sampler.pos),
                    "events": t.events,
                    **identity(t.cfg, t.world),
                }
            )
        )
    _barrier(t)
    if t.rank == 0:
        (tmp / "manifest.json").write_text(json.dumps(manifest(tmp), indent=1))
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        latest = root / ".latest.tmp"
        latest.write_text(final.name + "\n")
        os.replace(latest, root / "latest")
    _barrier(t)
    return final


def identity(cfg, world: int) -> dict:
    """What a checkpoint belongs to: resuming with any of it changed is refused."""
    k = cfg.knobs
    return {
        "model": cfg.model,
        "world": world,
        "global_batch": cfg.micro_batch * cfg.grad_accum * world,
        "precision": k.precision,
        "zero": k.zero_stage,
        "offload": k.offload,
        "optimizer": k.optimizer,
        "lora_rank": k.lora_rank,
        "seq_len": cfg.seq_len,
        "fsdp": k.fsdp,
    }


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def manifest(folder: Path) -> dict:
    return {
        str(p.relative_to(folder)): {"bytes": p.stat().st_size, "sha256": _sha256(p)}
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != "manifest.json"
    }


def damage(folder: Path) -> str | None:
    """Why a checkpoint folder cannot be trusted (missing manifest, a file missing, resized or changed), or
    None when it is intact."""
    try:
        listed = json.loads((folder / "manifest.json").read_text())
    except (OSError, ValueError):
        return "no readable manifest.json"
    for name, want in listed.items():
        path = folder / name
        if not path.is_file():
            return f"{name} is missing"
        if path.stat().st_size != want["bytes"]:
            return f"{name} has {path.stat().st_size} bytes, the manifest says {want['bytes']}"
        if _sha256(path) != want["sha256"]:
            return f"{name} does not match its checksum"
    return None


def newest_intact(root: Path) -> tuple[Path | None, list[str]]:
    """(the newest intact checkpoint under root, or None; the ones skipped, each with its reason)."""
    named = (root / "latest").read_text().strip() if (root / "latest").is_file() else None
    steps = sorted(
        (p for p in root.glob("step-*") if p.is_dir() and p.name[5:].isdigit()),
        key=lambda p: int(p.name[5:]),
        reverse=True,
    )
    order = [root / named] if named else []
    order += [p for p in steps if p.name != named]
    skipped = []
    for d in order:
        why = damage(d) if d.is_dir() else "missing"
        if why is None:
            return d, skipped
        skipped.append(f"{d.name}: {why}")
    return None, skipped


def check_resume(root: Path, cfg, world: int, max_steps: int) -> tuple[Path | None, dict | None, list[str]]:
    """The checkpoint a resume would load, its trainer.json and the skipped ones; BadInput for another
    model or plan, or --max-steps not past its step. Runs in the CLI before launch and in every rank."""
    from planner.errors import BadInput

    d, skipped = newest_intact(root)
    if d is None:
        if skipped:
            raise BadInput(f"--resume: no intact checkpoint in {str(root)!r} ({'; '.join(skipped)})", "resume")
        return None, None, []
    meta = json.loads((d / "trainer.json").read_text())
    mine = identity(cfg, world)
    there = {"fsdp": "off", **meta}  # checkpoints from before FSDP plans: off
    differs = [f"{k} {there.get(k)!r} there, {v!r} here" for k, v in mine.items() if there.get(k) != v]
    if differs:
        raise BadInput(f"--resume: {d} belongs to another run: " + ", ".join(differs), "resume")
    if max_steps <= meta["step"]:
        raise BadInput(
            f"--max-steps {max_steps}: the checkpoint {d} is at step {meta['step']}; "
            f"give more than {meta['step']} to train on",
            "max_steps",
        )
    return d, meta, skipped


def load_latest(t) -> dict | None:
    """Restore the newest intact checkpoint into the trainer; its trainer.json, or None when there is none."""
    d, meta, skipped = check_resume(Path(t.cfg.save_dir), t.cfg, t.world, t.cfg.max_steps)
    if d is None:
        return None
    if skipped and t.rank == 0:
        from trainer.console import err_console

        err_console().print(f"resume: skipped {'; '.join(skipped)}; resuming from {d.name}", markup=False)
    if t.ds:
        t.engine.load_checkpoint(str(d), tag="ds")
    elif t.fsdp:
        _dcp_load(t, d)
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


def _dcp_save(t, folder: Path) -> None:
    """FSDP: the sharded model and optimizer states through torch.distributed.checkpoint (each rank its shards,
    under dcp/), the scheduler and scaler by rank 0."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model, optim = get_state_dict(t.model, t.opt)
    dcp.save({"model": model, "optimizer": optim}, checkpoint_id=str(folder / "dcp"))
    if t.rank == 0:
        torch.save({"scheduler": t.sched.state_dict(), "scaler": t.scaler.state_dict()}, folder / "state.pt")


def _dcp_load(t, folder: Path) -> None:
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    model, optim = get_state_dict(t.model, t.opt)
    state = {"model": model, "optimizer": optim}
    dcp.load(state, checkpoint_id=str(folder / "dcp"))
    set_state_dict(t.model, t.opt, model_state_dict=state["model"], optim_state_dict=state["optimizer"])
    rest = torch.load(folder / "state.pt", map_location=t.device, weights_only=False)
    t.sched.load_state_dict(rest["scheduler"])
    t.scaler.load_state_dict(rest["scaler"])


def trim_log(path: Path, step: int) -> None:
    """Drop the log's rows of steps after `step` (a resumed run trains them again), atomically."""
    if not path.is_file():
        return
    keep = []
    for line in path.read_text().splitlines():
        try:
            row_step = json.loads(line).get("step", 0)
        except ValueError:
            continue  # a line cut by the kill
        if row_step <= step:
            keep.append(line)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(x + "\n" for x in keep))
    tmp.replace(path)
