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

from planner.cli import common
from planner.errors import BadInput
from planner.spec import OPTIMIZERS, Plan

DS_JSON = "memplan_ds_config.json"
VALUE_FLAGS = ("--per_device_train_batch_size", "--gradient_accumulation_steps", "--deepspeed", "--torch_dtype")
BOOL_FLAGS = ("--gradient_checkpointing", "--bf16", "--fp16")
BOOL_WORDS = {"true", "false", "1", "0", "yes", "no"}


def register(sub) -> None:
    p = sub.add_parser("autotune", help="plan for the local GPUs, probe, and launch (bundled trainer or your command)")
    p.add_argument("--model", required=True)
    p.add_argument("--gpu", default="local",
                   help="the GPU kind to plan for (default: this host's, through NVML); name the closest catalog "
                        "kind for a GPU outside the catalog. The count is always this host's.")
    p.add_argument("--gpus-per-node", type=common.positive_int("--gpus-per-node"), default=None,
                   help="GPUs on this host (default: NVML's count); with --dry-run and --gpu KIND no local GPU is "
                        "needed, so a launch can be prepared on a login node")
    p.add_argument("--global-batch", type=common.positive_int("--global-batch"), required=True)
    p.add_argument("--seq-len", type=common.positive_int("--seq-len"), required=True)
    p.add_argument("--optimizer", type=common.one_of("--optimizer", OPTIMIZERS), default="adamw")
    p.add_argument("--lora-rank", type=common.nonneg_int("--lora-rank"), default=0)
    p.add_argument("--margin", type=common.margin, default=None)
    p.add_argument("--max-steps", type=common.positive_int("--max-steps"), default=100,
                   help="bundled trainer only")
    p.add_argument("--dry-run", action="store_true", help="print the final command, run nothing")
    common.add_store_arg(p)
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
    from planner.export import script_args

    ours = script_args(plan, ds_path or DS_JSON)
    for f in {a for a in ours if a.startswith("--")} | set(VALUE_FLAGS):
        cmd = _strip(cmd, f, f in VALUE_FLAGS or f in ("--optim", "--lora_r", "--lora_target_modules"))
    for f in BOOL_FLAGS:
        cmd = _strip(cmd, f, False)
    return cmd + ours


def choose(args: Namespace) -> tuple[Plan, dict]:
    """advise.suggest for this host's GPU count (suggest's own defaults for the knobs), verified on them."""
    from planner import advise
    from planner.cli.suggest import result_json
    from planner.hardware import nvml_devices

    count = args.gpus_per_node
    if not (args.dry_run and count and args.gpu != "local"):     # a dry run for a named kind needs no GPU
        hint = "" if args.dry_run else "; --dry-run --gpu KIND --gpus-per-node N prepares the command without one"
        try:
            found = len(nvml_devices())
        except BadInput as e:
            why = str(e).removeprefix("--gpu local: ").split(";")[0]
            raise BadInput(f"autotune needs local NVIDIA GPUs: {why}{hint}", "gpu") from None
        if not found:
            raise BadInput(f"autotune needs local NVIDIA GPUs: NVML sees none{hint}", "gpu")
        count = count or found
    req = advise.parse(advise.SuggestRequest, {
        "model": args.model, "gpu": args.gpu, "gpus_per_node": count, "global_batch": args.global_batch,
        "seq_len": args.seq_len, "optimizer": args.optimizer, "lora_rank": args.lora_rank, "margin": args.margin,
        "top": 5, "verify": not args.dry_run,
        # the user's HF script runs the plan: only what HF's Trainer can run (export.bundled_only)
        "checkpointing": ["off", "full"], "loss": ["standard"]})
    result = advise.suggest(req, store=args.store, probes=common.probe_functions(), status=common.status)
    if not result.plans:
        raise SystemExit(3)
    return result.plans[0], result_json(result)


def run(args: Namespace) -> int:
    plan, out = choose(args)
    err = common.err_console()
    err.print(f"plan: micro {plan.micro_batch} x accum {plan.grad_accum} x world {plan.world_size} = {plan.global_batch}, "
              f"{plan.precision}, checkpointing {plan.checkpointing}, zero {plan.zero_stage}, offload {plan.offload} "
              f"({plan.evidence}, {plan.memory.device_total_bytes / 2**30:.1f} GiB of {plan.memory.capacity_bytes / 2**30:.1f})")
    user = args.command[1:] if args.command[:1] == ["--"] else args.command
    if user:
        ds_path = None
        if plan.launch.deepspeed_config is not None:
            ds_path = DS_JSON
            if not args.dry_run:
                Path(ds_path).write_text(json.dumps(plan.launch.deepspeed_config, indent=2) + "\n")
        final = inject(list(user), plan, ds_path)
        print(shlex.join(final))
        return 0 if args.dry_run else subprocess.run(final, check=False).returncode
    plan_file = Path("memplan_plan.json")
    cmd = [sys.executable, "-m", "planner.cli", "train", "--plan", str(plan_file), "--max-steps", str(args.max_steps)]
    print(shlex.join(cmd))
    if args.dry_run:
        return 0
    plan_file.write_text(json.dumps(out, indent=1))
    return subprocess.run(cmd, check=False).returncode
