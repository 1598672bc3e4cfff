"""Starting `planner train`'s processes: the launch command (torchrun, also over nodes; the deepspeed launcher; srun
+ torchrun in a Slurm allocation), or none to train in this process, and running it with the allocator's
environment set."""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys

from planner.advise import CheckRequest
from planner.cli import printout
from planner.errors import BadInput


def launch_command(
    args: argparse.Namespace, req: CheckRequest, config_path: str, module: str = "trainer.main"
) -> list[str] | None:
    """The command that starts every process (running `module` on the run file), or None to train in this one."""
    gpn, nodes = req.gpus_per_node or 1, args.nnodes or req.nodes
    launcher = args.launcher
    if launcher == "auto":
        if "LOCAL_RANK" in os.environ or gpn * nodes == 1:
            launcher = "none"
        else:
            launcher = "slurm" if "SLURM_JOB_ID" in os.environ and nodes > 1 else "torchrun"
    if launcher == "none":
        return None
    entry = ["-m", module, config_path]
    if launcher == "deepspeed":
        cmd = ["deepspeed", "--num_gpus", str(gpn)]
        if nodes > 1:
            cmd += ["--num_nodes", str(nodes), "--hostfile", "hostfile"]
        return [*cmd, "--module", module, config_path]
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(gpn)]
    if launcher == "slurm":  # one srun task per node; MASTER_ADDR/PORT from the allocation (see run)
        inner = (
            f'{shlex.join(torchrun)} --nnodes "$SLURM_NNODES" --rdzv_id "$SLURM_JOB_ID" --rdzv_backend c10d '
            f'--rdzv_endpoint "$MASTER_ADDR:$MASTER_PORT" {shlex.join(entry)}'
        )
        return ["srun", "--kill-on-bad-exit=1", "--ntasks-per-node=1", "bash", "-c", inner]
    if nodes > 1:
        if not args.rdzv_endpoint:
            raise BadInput(f"--nnodes {nodes}: give --rdzv-endpoint HOST:PORT (and --node-rank on each node)")
        torchrun += [
            "--nnodes",
            str(nodes),
            "--node_rank",
            str(args.node_rank),
            "--rdzv_backend",
            "c10d",
            "--rdzv_endpoint",
            args.rdzv_endpoint,
        ]
    else:
        from recipe.dist import free_port

        torchrun += ["--master_addr", "127.0.0.1", "--master_port", str(free_port())]
    return [*torchrun, *entry]


def train_here_or_launch(args: argparse.Namespace, cfg: dict, cmd: list[str] | None) -> int:
    """Train in this process (cmd None) or run the launch command; third-party deprecation noise is
    filtered in every rank unless MEMPLAN_VERBOSE=1 (trainer.console.quiet_third_party)."""
    from planner.config.spec import Knobs
    from planner.export.commands import alloc_env

    os.environ.update(alloc_env(Knobs(**cfg["knobs"])))  # before CUDA starts here or in a rank (they inherit it)
    if cmd is None:
        from trainer.console import quiet_third_party
        from trainer.loop import run as train
        from trainer.runconfig import RunConfig

        quiet_third_party()
        rows = train(RunConfig(**cfg))
        if args.json:
            printout.print_json({"steps": len(rows), "metrics": rows})
        return 0
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    if cmd[0] == "srun" and "MASTER_ADDR" not in env:
        hosts = subprocess.run(
            ["scontrol", "show", "hostnames", env.get("SLURM_JOB_NODELIST", "")],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        env.update(MASTER_ADDR=hosts[0], MASTER_PORT=env.get("MASTER_PORT", "29500"))
    if cfg["device"] == "cpu":
        env["DS_ACCELERATOR"] = "cpu"
    return subprocess.run(cmd, env=env, check=False).returncode
