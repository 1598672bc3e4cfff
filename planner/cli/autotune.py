"""`planner autotune`: plan for this host's GPUs (NVML), probe the chosen plan on them, then run it:
the bundled trainer, or your own HF-Trainer-style command with the plan's arguments written into it.

    planner autotune [--model M] [--global-batch 256] [--seq-len 4096] [--workload grpo --images 1 ...] \\
        [--dry-run] [--emit DIR] -- torchrun --nproc_per_node 8 train.py --model_name_or_path ...

Everything after `--` is your command, nothing before it is. The command is read as `check --config` reads a launch
script (planner.cli.autotune_command); autotune tunes its batch split, checkpointing and sharding, and writes only
the arguments whose value the plan changes. A dry run writes nothing unless `--emit DIR` names where.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

from planner.cli import (
    advising,
    argtypes,
    autotune_command,
    autotune_slurm,
    extras,
    knobargs,
    printout,
    targetargs,
    workloadargs,
)
from planner.config.spec import Plan
from planner.errors import BadInput
from planner.model.modelspec import ModelSpec

DS_JSON = "memplan_ds_config.json"
PLAN_JSON = "memplan_plan.json"
COMMAND_SH = "memplan_command.sh"


def register(p) -> None:
    """The subcommand's flags on its parser (planner.cli.build_parser makes it)."""
    p.add_argument("--model", default=None, help="catalog name, config.json or folder (default: your command's)")
    p.add_argument(
        "--gpu",
        default="local",
        help="the GPU kind to plan for (default: this host's, through NVML); name the closest catalog "
        "kind for a GPU outside the catalog. The count is this host's (see --gpus-per-node for a dry run).",
    )
    p.add_argument(
        "--gpus-per-node",
        type=argtypes.positive_int("--gpus-per-node"),
        default=None,
        help="GPUs on this host (default: NVML's count); with --dry-run and --gpu KIND no local GPU is "
        "needed, so a launch can be prepared on a login node (default then: your command's "
        "--nproc_per_node, else this host's count, else 1)",
    )
    p.add_argument(
        "--global-batch",
        type=argtypes.positive_int("--global-batch"),
        default=None,
        help="sequences per optimizer step (default: your command's, micro-batch x accumulation x processes)",
    )
    p.add_argument("--seq-len", type=argtypes.positive_int("--seq-len"), default=None, help="as check's")
    targetargs.add_image_args(p)
    targetargs.add_video_args(p)
    workloadargs.add_workload_args(p)
    p.set_defaults(workload=None)  # not given: your command's workload (else sft)
    knobargs.add_knob_args(p, ("optimizer", "lora_rank"))
    p.add_argument("--margin", type=argtypes.margin, default=None)
    p.add_argument("--max-steps", type=argtypes.positive_int("--max-steps"), default=100, help="bundled trainer only")
    p.add_argument("--dry-run", action="store_true", help="plan and print the command; launch nothing")
    p.add_argument(
        "--emit",
        metavar="DIR",
        default=None,
        help=f"write the command ({COMMAND_SH}) and the files it names there; a dry run writes nothing without it",
    )
    advising.add_store_arg(p)
    autotune_slurm.add_args(p)
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- your launch command (HF Trainer arguments)")
    p.set_defaults(run=run)


def gpu_count(args: Namespace, user: list[str]) -> int | None:
    """The GPUs a node to plan for: --gpus-per-node, else NVML's (a dry run for a named kind needs no GPU: your
    command's --nproc_per_node, else this host's count, else 1); Slurm's are --gpus-per-node."""
    from planner.model.hardware import local_gpu_count, nvml_devices

    count = args.gpus_per_node
    if args.executor == "slurm":
        return count
    if args.dry_run and args.gpu.strip().lower() != "local":
        return count or launcher_count(user) or local_gpu_count() or 1
    hint = (
        "; --gpu KIND prepares the command without one"
        if args.dry_run
        else "; --dry-run --gpu KIND --gpus-per-node N prepares the command without one"
    )
    try:
        found = len(nvml_devices())
    except BadInput as e:
        why = str(e).removeprefix("--gpu local: ").split(";")[0]
        raise BadInput(f"autotune needs local NVIDIA GPUs: {why}{hint}", "gpu") from None
    if not found:
        raise BadInput(f"autotune needs local NVIDIA GPUs: NVML sees none{hint}", "gpu")
    return count or found


def choose(args: Namespace, user: list[str]) -> tuple[Plan, dict, ModelSpec, Plan | None]:
    """advise.suggest for this host's GPU count on your command's settings (read as check --config reads it) and
    autotune's flags, verified on the GPUs; (plan, result JSON, model, your command's own plan)."""
    from planner import advise
    from planner.cli.suggest import result_json

    probes = autotune_slurm.cluster_probes(args) if args.executor == "slurm" else advising.probe_functions()
    count = gpu_count(args, user)
    reading = autotune_command.read(user) if user else None
    before = autotune_command.as_written(args, reading, count)[0] if reading else None
    batch = args.global_batch or (before.global_batch if before else None)
    if batch is None or (reading is None and args.model is None):
        need = "--global-batch" if batch is None else "--model"
        raise BadInput(f"{need} is required (or a command after -- that sets it)", need[2:].replace("-", "_"))
    fields = autotune_command.suggest_fields(args, reading)
    body = {**fields, "gpus_per_node": count, "global_batch": batch, "top": 5, "verify": not args.dry_run}
    req = advise.parse(advise.SuggestRequest, body)
    result = advise.suggest(req, store=args.store, probes=probes, status=printout.status)
    if not result.plans:
        err = printout.err_console()
        printout.say_line(
            f"autotune: nothing fits {result.model['name']} on {req.gpu} at global batch "
            f"{batch}"
            + (f" x {req.seq_len} tokens" if req.seq_len else "")
            + (f" ({result.rejected[0].reason})" if result.rejected else ""),
            err,
        )
        printout.print_nearest(result.nearest, err)
        raise SystemExit(3)
    return result.plans[0], result_json(result), result._context[0], before


def run(args: Namespace) -> int:
    if args.command and args.command[0] != "--":
        raise BadInput(
            f"{args.command[0]!r} is not autotune's: your command goes after -- (everything after -- is your "
            "command, nothing before it is)",
            "command",
        )
    user = args.command[1:]
    if args.executor == "slurm":
        autotune_slurm.check(args)
    elif args.nodes != 1 or args.partition or args.account or args.time:
        raise BadInput("--nodes, --partition, --account and --time are for --executor slurm", "executor")
    if args.emit:
        from planner.export.launch import check_emit_dir

        check_emit_dir(args.emit)
    if not args.dry_run:  # the probe that verifies the plan, then the bundled trainer or your command
        extras.require("planner autotune", extras.steps(lora=bool(args.lora_rank)))
    plan, out, model, before = choose(args, user)
    err = printout.err_console()
    printout.say_line(
        f"plan: {plan.split_text} = {plan.global_batch}, "
        f"{plan.precision}, checkpointing {plan.checkpointing}, {plan.sharding}, offload {plan.offload} "
        f"({plan.evidence}, {plan.memory.device_total_bytes / 2**30:.1f} GiB of {plan.memory.capacity_bytes / 2**30:.1f})",
        err,
    )
    dest = Path(args.emit).expanduser() if args.emit else None if args.dry_run else Path(".")
    if args.executor == "slurm":
        return _on_slurm(args, plan, out, model, user, before, dest)
    cmd, files = material(args, plan, out, model, user, before, dest)
    if args.emit:
        files[COMMAND_SH] = f"#!/usr/bin/env bash\ncd {shlex.quote(str(Path.cwd()))}\n{shlex.join(cmd)}\n"
    wrote = write(files, dest)
    print(shlex.join(cmd))
    if args.dry_run:
        said = (
            f"wrote {', '.join(wrote)}"
            if wrote
            else f"wrote nothing (--emit DIR writes the command{' and ' if files else ''}{', '.join(files)})"
        )
        printout.say_line(f"dry run: {said}; nothing launched", err)
        return 0
    return subprocess.run(cmd, check=False).returncode


def material(
    args: Namespace, plan: Plan, out: dict, model: ModelSpec, user: list[str], before: Plan | None, dest: Path | None
) -> tuple[list[str], dict[str, str]]:
    """The command to run and {file name: text} of the files it names: your command with the plan's arguments, or
    the bundled trainer on the plan file. The files' paths in the command are under `dest` (--emit DIR)."""
    where = (lambda name: str(dest.resolve() / name)) if args.emit else (lambda name: name)
    if not user:
        cmd = [sys.executable, "-m", "planner.cli", "train", "--plan", where(PLAN_JSON)]
        return cmd + ["--max-steps", str(args.max_steps)], {PLAN_JSON: json.dumps(out, indent=1) + "\n"}
    from planner.export.launch import command_files

    extra = autotune_command.image_args(user, out.get("images"))
    cmd, written = autotune_command.inject(list(user), plan, before, model, DS_JSON, extra)
    named = {v for values in written.values() for v in values}
    files = {n: t for n, t in command_files(plan, model, DS_JSON).items() if n in named}
    return [where(w) if w in files else w for w in cmd], files


def write(files: dict[str, str], dest: Path | None) -> list[str]:
    """Write the files into `dest` (made if missing; None: nowhere); the paths written."""
    if dest is None:
        return []
    wrote = []
    for name, text in files.items():
        path = dest / name
        try:
            dest.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        except OSError as e:
            raise BadInput(f"autotune: cannot write {path} ({e})") from None
        wrote.append(str(path))
    return wrote


def _on_slurm(
    args: Namespace, plan: Plan, out: dict, model: ModelSpec, user: list[str], before: Plan | None, dest: Path | None
) -> int:
    """The plan's multi-node job: its sbatch script and files written, then submitted (not on a dry run, which
    prints the script unless --emit DIR names where to write it)."""
    files, program = {}, None
    if user:
        program, files = material(args, plan, out, model, user, before, dest)
    where = str(dest.resolve() / PLAN_JSON) if args.emit else PLAN_JSON
    text, more = autotune_slurm.script(args, plan, out, program, where)
    files |= more
    files[autotune_slurm.SCRIPT] = text
    wrote = write(files, dest)
    err = printout.err_console()
    if out.get("verified"):
        v = out["verified"]
        printout.say_line(f"probed on the partition: {v['backend']} {v['status']} on {v['device']}", err)
    if dest is None:
        sys.stdout.write(text)
        printout.say_line("dry run: wrote nothing (--emit DIR writes the script and its files); nothing submitted", err)
        return 0
    script = str(dest / autotune_slurm.SCRIPT) if args.emit else autotune_slurm.SCRIPT
    print(f"sbatch {script}")
    if args.dry_run:
        printout.say_line(f"dry run: wrote {', '.join(wrote)}; nothing submitted (run the command above)", err)
        return 0
    job = autotune_slurm.submit(script)
    printout.say_line(f"submitted the training job {job} ({args.nodes} x {args.gpus_per_node} GPUs)", err)
    return 0


def launcher_count(cmd: list[str]) -> int | None:
    """The processes per node a torchrun or deepspeed command starts (--nproc_per_node, --nproc-per-node,
    --num_gpus), or None where it names no number."""
    for i, a in enumerate(cmd):
        flag, eq, value = a.partition("=")
        if flag in ("--nproc_per_node", "--nproc-per-node", "--num_gpus"):
            value = value if eq else (cmd[i + 1] if i + 1 < len(cmd) else "")
            return int(value) if value.isdigit() and int(value) > 0 else None
    return None
