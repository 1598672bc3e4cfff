"""`planner autotune --executor slurm` (issue 36 item 5): plan for the partition's GPUs, verify the plan with a probe
on one node of the partition (an sbatch job of one task, waited for; its record goes to the store the planner reads
next, so the answer rests on it), then submit the chosen plan's multi-node job with the generated sbatch script.

The probe job is the API's Slurm executor's (api/executors/slurm.py): `python -m probes.run job.json result.json` in a
folder under the working directory, which a cluster's nodes share. Its GPU probe is a cuda one for a plan whose ranks
each hold the whole model (ZeRO 0), else the sim, as `--verify` chooses on a GPU host (planner.verification.verify).
"""

from __future__ import annotations

import shlex
import sys
import time
import uuid
from argparse import Namespace
from pathlib import Path

from planner.errors import BadInput

SCRIPT = "memplan_train.sbatch"
LAUNCHERS = {"torchrun", "deepspeed", "accelerate", "srun", "python", "python3"}


def add_args(p) -> None:
    p.add_argument(
        "--executor",
        choices=["local", "slurm"],
        default="local",
        help="local: this host's GPUs; slurm: probe on one node of --partition, then sbatch the plan's job",
    )
    p.add_argument("--partition", default=None, help="slurm: the partition to probe and train on")
    p.add_argument("--account", default=None, help="slurm: the account to charge")
    p.add_argument("--nodes", type=int, default=1, help="slurm: nodes of the training job (default 1)")
    p.add_argument("--time", default=None, help="slurm: the training job's time limit (sbatch --time)")
    p.add_argument(
        "--probe-backend",
        choices=["auto", "sim", "cpu"],
        default="auto",
        help="slurm: auto (cuda on the node for a ZeRO-0 plan, else sim), or sim/cpu on the node",
    )


def check(args: Namespace) -> None:
    """One-line refusals before anything is planned or submitted."""
    if args.gpu.strip().lower() == "local":
        raise BadInput("--executor slurm: name the partition's GPU kind with --gpu (this host is not its node)", "gpu")
    if not args.gpus_per_node:
        raise BadInput("--executor slurm: give --gpus-per-node, the GPUs of one node of the partition", "gpus_per_node")
    if args.nodes < 1:
        raise BadInput(f"--nodes {args.nodes}: at least 1", "nodes")
    user = args.command[1:] if args.command[:1] == ["--"] else args.command
    if user and Path(user[0]).name in LAUNCHERS:
        raise BadInput(
            f"--executor slurm: give your script and its arguments (-- train.py ...), not a launcher "
            f"({user[0]}): the sbatch script starts torchrun on every node",
            "command",
        )
    if not args.dry_run:
        from api.executors.slurm import Slurm

        why = Slurm.available()
        if why:
            raise BadInput(f"--executor slurm: {why}", "executor")


class _Settings:
    """What api.executors.slurm.Slurm reads, for one probe job on one node of the partition."""

    def __init__(self, args: Namespace) -> None:
        self.slurm_partition, self.slurm_account = args.partition, args.account
        self.probe_gpus = 1 if args.probe_backend == "auto" else 0  # a sim or cpu probe needs no GPU of the node
        self.slurm_args = ["--nodes=1"]
        self.probe_python = sys.executable


def cluster_probes(args: Namespace):
    """planner.verification.Probes whose isolated probe runs as a Slurm job on one node of the partition."""
    from dataclasses import replace

    from planner.cli import advising

    local = advising.probe_functions()
    if local is None:
        return None
    gpus = 1 if args.probe_backend == "auto" else 0  # verify picks cuda for a ZeRO-0 plan when the node has a GPU

    def isolated(model, config, knobs, shapes, backend, timeout_s):
        chosen = backend if args.probe_backend == "auto" else args.probe_backend
        return probe_on_node(args, model, config, knobs.for_probe(chosen), shapes, chosen, int(timeout_s))

    return replace(local, isolated=isolated, local_gpus=lambda: gpus)


def probe_on_node(args: Namespace, model, config, knobs, shapes, backend: str, timeout_s: int):
    """One probe as a Slurm job: submitted, its state polled until it ends, its record read back."""
    from api.executors import Submission
    from api.executors.slurm import Slurm
    from probes.run import outcome, write_job

    jid = uuid.uuid4().hex[:12]
    folder = Path("memplan-autotune").resolve() / jid
    spec = {"model": model, "config": config, "knobs": knobs.model_dump(), "shapes": shapes.model_dump()}
    write_job(folder, {**spec, "request": {"backend": backend}}, None, True)
    slurm = Slurm(_Settings(args))
    try:
        sid = slurm.submit([Submission(jid, folder, timeout_s)], f"memplan-{jid}")[0]
    except RuntimeError as e:
        raise BadInput(f"--partition {args.partition}: sbatch refused the probe job ({e})", "partition") from None
    while True:
        st = slurm.states([sid]).get(sid)
        if st is not None and st.terminal:
            break
        time.sleep(1)
    if st.lost and not (folder / "result.json").is_file():
        raise BadInput(f"the probe job {sid} ended {st.state} ({st.reason}): nothing was measured", "partition")
    stopped = "timeout" if st.timeout else None
    rec = outcome(folder, model, config, knobs, shapes, backend, st.returncode, stopped, None, timeout_s)
    rec.detail["scheduler"] = {"executor": "slurm", "id": sid, "state": st.state}
    import shutil

    shutil.rmtree(folder, ignore_errors=True)
    return rec


def script(
    args: Namespace, plan, out: dict, program: list[str] | None, plan_path: str = "memplan_plan.json"
) -> tuple[str, dict[str, str]]:
    """The training job's sbatch script and the plan file it needs: your script with the plan's arguments (`program`,
    made by planner.cli.autotune.material), or the bundled trainer on the plan file at `plan_path` (`planner train
    --launcher slurm`: one srun task per node, torchrun in each)."""
    import json

    from planner.export import commands
    from planner.model.hardware import resolve

    hw = resolve(args.gpu, args.gpus_per_node, args.nodes)
    head = [f"#SBATCH --partition={args.partition}"] if args.partition else []
    head += [f"#SBATCH --account={args.account}"] if args.account else []
    head += [f"#SBATCH --time={args.time}"] if args.time else []
    if program:
        return commands.sbatch(plan, hw, words=program, header=head), {}
    train = [sys.executable, "-m", "planner.cli", "train", "--plan", plan_path]
    train += ["--max-steps", str(args.max_steps), "--launcher", "slurm"]
    files = {"memplan_plan.json": json.dumps(out, indent=1) + "\n"}
    return commands.sbatch(plan, hw, header=head, driver=shlex.join(train)), files


def submit(path: str) -> str:
    import subprocess

    r = subprocess.run(["sbatch", "--parsable", path], capture_output=True, text=True, check=False, timeout=60)
    if r.returncode != 0:
        last = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"
        raise BadInput(f"sbatch {path}: {last}", "partition")
    return r.stdout.strip().split(";")[0]
