"""The bundled trainer's run: cfg.max_steps optimizer steps of a trainer.step.Trainer, one JSON line a step (and
each evaluation) in the log, each step in the probe store for `planner runs`, a progress bar on rank 0, checkpoints
every --save-every steps and at the end, and SIGTERM's checkpoint-and-stop. trainer.main runs it in each process."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import torch.distributed as dist

from trainer import checkpoint
from trainer.runconfig import RunConfig
from trainer.step import Trainer


def run(cfg: RunConfig) -> list[dict]:
    """Train cfg.max_steps optimizer steps (from the checkpoint with --resume); rank 0 logs one JSON
    line per step to cfg.log and shows a progress bar. SIGTERM saves a checkpoint and stops."""
    t = Trainer(cfg)
    delay = float(os.environ.get("MEMPLAN_TRAIN_STEP_DELAY_S", "0"))  # tests: time to interrupt a run
    signal.signal(signal.SIGTERM, lambda *_: setattr(t, "stop_requested", True))
    if cfg.log and t.rank == 0:
        Path(cfg.log).parent.mkdir(parents=True, exist_ok=True)
        checkpoint.trim_log(Path(cfg.log), t.step)  # rows past the checkpoint are trained again: no duplicates
    log = open(cfg.log, "a") if cfg.log and t.rank == 0 else None  # noqa: SIM115
    recorder = None
    if cfg.store:  # each step into the store for `planner runs` (trainer/runlog.py)
        from trainer.runlog import StepRecorder

        recorder = StepRecorder(cfg, t.rank)
    bar = _progress(t)
    try:
        rows = _train(t, cfg, bar, log, recorder, delay)
    finally:
        if log:
            log.close()
        if recorder:
            recorder.close()
        if dist.is_initialized():
            dist.barrier()
            dist.destroy_process_group()
    return rows


def _progress(t: Trainer):
    """The progress bar on stderr (rank 0's only): the step, the loss and tokens/s, the time left."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    from trainer.console import err_console

    return Progress(
        TextColumn("step {task.completed}/{task.total}"),
        BarColumn(),
        TextColumn("{task.description}"),
        TimeRemainingColumn(),
        console=err_console(),
        disable=t.rank != 0,
    )


def _train(t: Trainer, cfg: RunConfig, bar, log, recorder, delay: float) -> list[dict]:
    """The steps: each one's row logged and recorded, evaluations, checkpoints; the closing line on rank 0."""
    from trainer.console import err_console

    rows: list[dict] = []
    saved = t.step
    with bar:
        task = bar.add_task("", total=cfg.max_steps, completed=t.step)
        while t.step < cfg.max_steps:
            row = t.train_step()
            time.sleep(delay)
            rows.append(row)
            if recorder:
                recorder.add(row, t.device)
            if log:
                log.write(json.dumps(row) + "\n")
                log.flush()
            if cfg.eval_every and t.step % cfg.eval_every == 0:
                ev = t.evaluate()
                if log:
                    log.write(json.dumps(ev) + "\n")
                    log.flush()
            bar.update(task, completed=t.step, description=f"loss {row['loss']:.4f}, {row['tokens_per_s']:.0f} tok/s")
            stop = t._max(1.0 if t.stop_requested else 0.0)
            if cfg.save_dir and (stop or (cfg.save_every and t.step % cfg.save_every == 0) or t.step == cfg.max_steps):
                checkpoint.save(t)
                saved = t.step
            if stop:
                break
    if cfg.save_dir and saved != t.step:
        checkpoint.save(t)
    if t.rank == 0 and rows:
        err_console().print(
            f"done: {t.step} steps, last loss {rows[-1]['loss']:.4f}, "
            f"{sum(r['tokens'] for r in rows)} tokens, micro-batch {t.micro} x accum {t.accum}"
            + (f", {len(t.events)} OOM event(s)" if t.events else "")
        )
    return rows
