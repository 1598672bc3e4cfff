"""Run the bundled trainer in real processes (torchrun over gloo for several ranks) and read its log."""

import json
import os
import subprocess
import sys
from pathlib import Path

from planner.config import knobfields
from recipe.dist import free_port

ROOT = Path(__file__).resolve().parents[2]
TINY = {"model": "debug-llama", "seq_len": 48, "lr": 1e-3}
# a cfg key that names a knob goes to the run file's knobs; eval_batch is the run's own (RunConfig.eval_batch)
KNOBS = tuple(k for k in knobfields.KNOBS if k != "eval_batch")


def launch(tmp: Path, name: str, ranks: int, wait: bool = True, env: dict | None = None, **cfg):
    """Start one run; returns (Popen, log path). cfg: RunConfig fields, and the knobs by name (fp32 unless given)."""
    log = tmp / f"{name}.jsonl"
    conf = tmp / f"{name}.json"
    knobs = {"precision": "fp32", **{k: cfg.pop(k) for k in KNOBS if k in cfg}}
    conf.write_text(json.dumps({**TINY, "log": str(log), "knobs": knobs, **cfg}))
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        str(ranks),
        "--master_addr",
        "127.0.0.1",
        "--master_port",
        str(free_port()),
        "-m",
        "trainer.main",
        str(conf),
    ]
    penv = {**os.environ, "OMP_NUM_THREADS": "1", "DS_ACCELERATOR": "cpu", **(env or {})}
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=penv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    if wait:
        _out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
    return proc, log


def losses(log: Path) -> list[float]:
    return [json.loads(line)["loss"] for line in log.read_text().splitlines()]


def rows(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def signal_tree(pid: int, sig) -> None:
    """Send sig to a process and all its descendants (torchrun starts its workers in sessions of their own)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    todo, tree = [pid], []
    while todo:
        p = todo.pop()
        tree.append(p)
        todo += children.get(p, [])
    for p in reversed(tree):  # workers first, the launcher last
        try:
            os.kill(p, sig)
        except ProcessLookupError:
            pass


def run_losses(log: Path, steps: int, micro: int = 4, accum: int = 1, grad_clip: float = 1.0, **knobs) -> list[float]:
    """One rank of the bundled trainer in this process (nothing to launch): TINY's model and rows, fp32 unless the
    knobs say otherwise; each step's loss."""
    from planner.config.spec import Knobs
    from trainer.loop import run
    from trainer.runconfig import RunConfig

    cfg = RunConfig(
        **TINY,
        micro_batch=micro,
        grad_accum=accum,
        max_steps=steps,
        knobs=Knobs.make(**{"precision": "fp32", **knobs}),
        device="cpu",
        grad_clip=grad_clip,
        log=str(log),
    )
    return [r["loss"] for r in run(cfg)]
