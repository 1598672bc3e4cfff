"""`planner train`: run a plan with the bundled trainer (trainer/), in this process or under a launcher.

The plan is `--plan FILE` (what `suggest --json` or `check --json` printed: its best plan) or the same
flags as `check`. With one process (world 1, or already started by a launcher) it trains here;
otherwise it prints and runs the launch command: torchrun (also multi-node with --nnodes/--node-rank/
--rdzv-endpoint), the deepspeed launcher, or srun + torchrun inside a Slurm allocation.

This module owns the flags and the order of the steps; train_plan.py reads the plan, train_runfile.py makes and
checks the run file, train_launch.py starts the processes (train_rl.py: the RL workloads' run file).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from planner.advise import CheckRequest
from planner.cli import advising, argtypes, extras, printout
from planner.cli.probe import add_config_args
from planner.cli.train_launch import launch_command, train_here_or_launch
from planner.cli.train_plan import plan_from
from planner.cli.train_runfile import check_data_and_resume, run_config, run_file_dir, write_run_file
from planner.errors import BadInput

LAUNCHERS = ("auto", "none", "torchrun", "deepspeed", "slurm")


def register(p) -> None:
    """The subcommand's flags on its parser (planner.cli.build_parser makes it)."""
    p.add_argument("--plan", help="plan JSON as printed by `suggest --json` (best plan) or `check --json`")
    add_config_args(p, required=False)  # --model may also be a local HF folder with weights
    p.add_argument("--gpu", default="h100", help="GPU kind of the plan (with --gpus-per-node: the world size)")
    p.add_argument("--gpus-per-node", type=argtypes.positive_int("--gpus-per-node"), default=1)
    p.add_argument("--nodes", type=argtypes.positive_int("--nodes"), default=1)
    p.add_argument(
        "--data", default="synthetic", help="synthetic | a JSONL file ({'text': ...} or {'input_ids': [...]})"
    )
    p.add_argument("--tokenizer", help="local tokenizer folder, for a JSONL of text")
    p.add_argument(
        "--processor",
        help="a VLM's local processor folder, for a JSONL of {'text', 'images'} rows (image paths relative to the file)",
    )
    p.add_argument("--max-steps", type=argtypes.positive_int("--max-steps"), default=100)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--max-tokens-per-micro-batch",
        type=argtypes.positive_int("--max-tokens-per-micro-batch"),
        default=None,
        help="cut each rank's samples into micro-batches of samples x padded width <= this "
        "(the global batch stays micro-batch x accumulation x world samples)",
    )
    p.add_argument("--log", help="metrics JSONL, one object per optimizer step")
    p.add_argument("--device", choices=("cpu", "cuda"), default=None, help="default: cuda when available")
    p.add_argument("--save-dir", help="checkpoints (atomic; also saved on SIGTERM)")
    p.add_argument("--save-every", type=argtypes.nonneg_int("--save-every"), default=0)
    p.add_argument("--resume", action="store_true", help="continue from the newest checkpoint in --save-dir")
    p.add_argument(
        "--eval-every",
        type=argtypes.nonneg_int("--eval-every"),
        default=0,
        help="evaluate on a held-out 5%% every N steps (0: never), --eval-batch rows a rank (8 when not given; an "
        "OOM there halves the evaluation batch only)",
    )
    p.add_argument("--launcher", type=argtypes.one_of("--launcher", LAUNCHERS), default="auto")
    p.add_argument("--nnodes", type=argtypes.positive_int("--nnodes"), default=None)
    p.add_argument("--node-rank", type=argtypes.nonneg_int("--node-rank"), default=0)
    p.add_argument("--rdzv-endpoint", help="host:port of the rendezvous (multi-node torchrun)")
    p.add_argument("--dry-run", action="store_true", help="print the command, run nothing")
    p.add_argument("--reward", help="--workload grpo: reward as module:function (default: the built-in format reward)")
    advising.add_store_arg(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from trainer.data import check_source

    model, req, knobs = plan_from(args)
    if knobs.expert_parallel > 1:
        raise BadInput(
            f"--expert-parallel {knobs.expert_parallel}: the bundled trainer runs data parallelism only "
            "(DDP, ZeRO, FSDP); expert-parallel plans are launched with transformers' DistributedConfig "
            "(ep_size) in your own script",
            "expert_parallel",
        )
    if not args.dry_run:  # a dry run writes the run file and prints its command: no step is run here
        what = f"planner train --workload {knobs.workload.kind}" if knobs.workload.rl else "planner train"
        extras.require(what, extras.for_knobs(knobs, trainer=True))
    if knobs.workload.rl:
        from planner.cli import train_rl

        if args.dry_run:
            cfg = train_rl.run_config(args, model, req, knobs)
            return dry_run(args, req, cfg, Path(args.save_dir or ".") / "memplan-rl-run.json", "trainer.rl")
        return train_rl.run(args, model, req, knobs, launch_command)
    check_source(args.data, args.tokenizer, args.processor)
    cfg = run_config(args, model, req, knobs)
    check_data_and_resume(args, cfg, (req.gpus_per_node or 1) * req.nodes)
    if args.dry_run:
        return dry_run(args, req, cfg, Path(args.save_dir or ".") / "memplan-run.json", "trainer.main")
    where, temporary = run_file_dir(args, req)
    config_path = where / "memplan-run.json"
    cmd = launch_command(args, req, str(config_path))
    write_run_file(config_path, cfg)
    shown = " ".join(shlex.quote(x) for x in cmd) if cmd else f"{sys.executable} -m trainer.main {config_path}"
    printout.say_line(f"running: {shown}", printout.err_console())
    try:
        return train_here_or_launch(args, cfg, cmd)
    finally:
        if temporary:
            import shutil

            shutil.rmtree(where, ignore_errors=True)


def dry_run(args: argparse.Namespace, req: CheckRequest, cfg: dict, path: Path, module: str) -> int:
    """Write the run file (to --save-dir, else the working directory) and print the command that runs it;
    launch nothing. The command on stdout, what was written on stderr."""
    write_run_file(path, cfg)
    cmd = launch_command(args, req, str(path), module) or [sys.executable, "-m", module, str(path)]
    print(shlex.join(cmd))
    printout.say_line(
        f"dry run: wrote {path}; nothing launched (run the command above to train)", printout.err_console()
    )
    return 0
