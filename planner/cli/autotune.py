"""`planner autotune`: plan for this host's GPUs (NVML), probe the chosen plan on them, then run it:
the bundled trainer, or your own HF-Trainer-style command with the plan's arguments injected.

    planner autotune --model M --global-batch 256 --seq-len 4096 [--dry-run] \\
        -- torchrun --nproc_per_node 8 train.py --model_name_or_path ...
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

from planner.cli import autotune_slurm, common, extras
from planner.config.spec import Plan
from planner.errors import BadInput
from planner.model.modelspec import ModelSpec

DS_JSON = "memplan_ds_config.json"
VALUE_FLAGS = ("--per_device_train_batch_size", "--gradient_accumulation_steps", "--deepspeed", "--torch_dtype")
BOOL_FLAGS = ("--gradient_checkpointing", "--bf16", "--fp16")
BOOL_WORDS = {"true", "false", "1", "0", "yes", "no"}


def register(sub) -> None:
    p = sub.add_parser("autotune", help="plan for the local GPUs, probe, and launch (bundled trainer or your command)")
    p.add_argument("--model", required=True)
    p.add_argument(
        "--gpu",
        default="local",
        help="the GPU kind to plan for (default: this host's, through NVML); name the closest catalog "
        "kind for a GPU outside the catalog. The count is this host's (see --gpus-per-node for a dry run).",
    )
    p.add_argument(
        "--gpus-per-node",
        type=common.positive_int("--gpus-per-node"),
        default=None,
        help="GPUs on this host (default: NVML's count); with --dry-run and --gpu KIND no local GPU is "
        "needed, so a launch can be prepared on a login node (default then: your command's "
        "--nproc_per_node, else this host's count, else 1)",
    )
    p.add_argument("--global-batch", type=common.positive_int("--global-batch"), required=True)
    p.add_argument("--seq-len", type=common.positive_int("--seq-len"), required=True)
    common.add_knob_args(p, ("optimizer", "lora_rank"))
    p.add_argument("--margin", type=common.margin, default=None)
    p.add_argument("--max-steps", type=common.positive_int("--max-steps"), default=100, help="bundled trainer only")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="write the files the command needs (DeepSpeed config or plan), print it, launch nothing",
    )
    common.add_store_arg(p)
    autotune_slurm.add_args(p)
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- your launch command (HF Trainer arguments)")
    p.set_defaults(run=run)


def _strip(cmd: list[str], flag: str, takes_value: bool) -> list[str]:
    """cmd without `flag` (and its value: always for value flags, a true/false word for booleans)."""
    out, i = [], 0
    while i < len(cmd):
        a = cmd[i]
        if a == flag:
            nxt = cmd[i + 1] if i + 1 < len(cmd) else ""
            i += 2 if takes_value or nxt.lower() in BOOL_WORDS else 1
        elif a.startswith(flag + "="):
            i += 1
        else:
            out.append(a)
            i += 1
    return out


def inject(cmd: list[str], plan: Plan, ds_path: str | None) -> list[str]:
    """The user's command with the plan's HF Trainer arguments (export.script_args) added, or
    replacing theirs."""
    from planner.export.export import script_args

    ours = script_args(plan, ds_path or DS_JSON)
    for f in {a for a in ours if a.startswith("--")} | set(VALUE_FLAGS):
        cmd = _strip(cmd, f, f in VALUE_FLAGS or f in ("--optim", "--lora_r", "--lora_target_modules"))
    for f in BOOL_FLAGS:
        cmd = _strip(cmd, f, False)
    return cmd + ours


def choose(args: Namespace) -> tuple[Plan, dict, ModelSpec]:
    """advise.suggest for this host's GPU count (suggest's own defaults for the knobs), verified on them."""
    from planner import advise
    from planner.cli.suggest import result_json
    from planner.model.hardware import local_gpu_count, nvml_devices

    count = args.gpus_per_node
    probes = common.probe_functions()
    if args.executor == "slurm":  # the partition's GPUs, probed on one of its nodes
        probes = autotune_slurm.cluster_probes(args)
    elif args.dry_run and args.gpu.strip().lower() != "local":  # a dry run for a named kind needs no GPU
        count = count or launcher_count(args.command) or local_gpu_count() or 1
    else:
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
        count = count or found
    req = advise.parse(
        advise.SuggestRequest,
        {
            "model": args.model,
            "gpu": args.gpu,
            "gpus_per_node": count,
            "nodes": args.nodes,
            "global_batch": args.global_batch,
            "seq_len": args.seq_len,
            **common.knob_values(args, ("optimizer", "lora_rank")),
            "margin": args.margin,
            "top": 5,
            "verify": not args.dry_run,
            # the user's HF script runs the plan: only what HF's Trainer can run (export.bundled_only)
            "checkpointing": ["off", "full"],
            "loss": ["standard"],
        },
    )
    result = advise.suggest(req, store=args.store, probes=probes, status=common.status)
    if not result.plans:
        err = common.err_console()
        common.say_line(
            f"autotune: nothing fits {result.model['name']} on {req.gpu} at global batch "
            f"{args.global_batch} x {args.seq_len} tokens"
            + (f" ({result.rejected[0].reason})" if result.rejected else ""),
            err,
        )
        common.print_nearest(result.nearest, err)
        raise SystemExit(3)
    return result.plans[0], result_json(result), result._context[0]


def run(args: Namespace) -> int:
    if args.executor == "slurm":
        autotune_slurm.check(args)
    elif args.nodes != 1 or args.partition or args.account or args.time:
        raise BadInput("--nodes, --partition, --account and --time are for --executor slurm", "executor")
    if not args.dry_run:  # the probe that verifies the plan, then the bundled trainer or your command
        extras.require("planner autotune", extras.steps(lora=bool(args.lora_rank)))
    plan, out, model = choose(args)
    err = common.err_console()
    common.say_line(
        f"plan: {plan.split_text} = {plan.global_batch}, "
        f"{plan.precision}, checkpointing {plan.checkpointing}, {plan.sharding}, offload {plan.offload} "
        f"({plan.evidence}, {plan.memory.device_total_bytes / 2**30:.1f} GiB of {plan.memory.capacity_bytes / 2**30:.1f})",
        err,
    )
    user = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.executor == "slurm":
        return _on_slurm(args, plan, out, model, user)
    if user:
        from planner.export.launch import command_files

        ds_path = DS_JSON if plan.zero_stage >= 1 else None
        files = command_files(plan, model, DS_JSON)  # every file the injected arguments name (DeepSpeed, FSDP)
        cmd = inject(list(user), plan, ds_path)
    else:
        files = {"memplan_plan.json": json.dumps(out, indent=1) + "\n"}
        cmd = [
            sys.executable,
            "-m",
            "planner.cli",
            "train",
            "--plan",
            "memplan_plan.json",
            "--max-steps",
            str(args.max_steps),
        ]
    for path, text in files.items():  # a dry run writes them too: the command it prints needs them
        try:
            Path(path).write_text(text)
        except OSError as e:
            raise BadInput(f"autotune: cannot write {path} in the working directory ({e})") from None
    print(shlex.join(cmd))
    if args.dry_run:
        common.say_line(
            f"dry run: wrote {', '.join(files) or 'no file'}; nothing launched (run the command above)", err
        )
        return 0
    return subprocess.run(cmd, check=False).returncode


def _on_slurm(args: Namespace, plan: Plan, out: dict, model: ModelSpec, user: list[str]) -> int:
    """The plan's multi-node job: its sbatch script and files written, then submitted (not on a dry run)."""
    files, program = {}, None
    if user:
        from planner.export.launch import command_files

        files = command_files(plan, model, DS_JSON)
        program = inject(list(user), plan, DS_JSON if plan.zero_stage >= 1 else None)
    text, more = autotune_slurm.script(args, plan, out, program)
    files |= more
    files[autotune_slurm.SCRIPT] = text
    for path, body in files.items():
        try:
            Path(path).write_text(body)
        except OSError as e:
            raise BadInput(f"autotune: cannot write {path} in the working directory ({e})") from None
    err = common.err_console()
    if out.get("verified"):
        v = out["verified"]
        common.say_line(f"probed on the partition: {v['backend']} {v['status']} on {v['device']}", err)
    print(f"sbatch {autotune_slurm.SCRIPT}")
    if args.dry_run:
        common.say_line(f"dry run: wrote {', '.join(files)}; nothing submitted (run the command above)", err)
        return 0
    job = autotune_slurm.submit(autotune_slurm.SCRIPT)
    common.say_line(f"submitted the training job {job} ({args.nodes} x {args.gpus_per_node} GPUs)", err)
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
