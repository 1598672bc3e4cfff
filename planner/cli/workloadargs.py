"""The workload flags: --workload and TRL's GRPOConfig / DPOConfig / GKDConfig inputs (with the RL roles' flags,
planner.cli.roleargs), and the request's `workload` made from the flags given."""

from __future__ import annotations

import argparse

from planner.cli.argtypes import number, one_of, positive_int
from planner.cli.roleargs import add_role_args, role_fields
from planner.config.workload import WORKLOAD_FLAGS


def add_workload_args(p: argparse.ArgumentParser) -> None:
    """--workload and TRL's GRPOConfig / DPOConfig inputs (planner.config.workload.Workload); DPO's max_length is
    --max-length."""
    from planner.config.workload import WORKLOADS

    p.add_argument(
        "--workload",
        type=one_of("--workload", WORKLOADS),
        default="sft",
        help=(
            "sft, TRL's dpo (global batch in pairs) / grpo (global batch in completions), or with --framework verl or "
            "openrlhf: ppo, grpo, rloo, reinforce++ by their roles (global batch: the actor's mini-batch in samples); gkd: "
            "distillation from --teacher-model (TRL's GKDTrainer, ms-swift's rlhf gkd); kto: TRL's KTOTrainer (global "
            "batch in rows, one completion each)"
        ),
    )
    add_grpo_args(p)
    p.add_argument(
        "--logprobs",
        type=one_of("--logprobs", ("fused", "full")),
        default=None,
        help="dpo/grpo: fused (TRL 1.16's log-prob head, default) or full (whole logits, as TRL before "
        "its fused head and VLM-R1's trainer)",
    )
    p.add_argument(
        "--precompute-ref-log-probs",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="dpo / kto: reference log-probs computed before training (no reference model kept)",
    )
    p.add_argument(
        "--teacher-model",
        default=None,
        help="gkd, or grpo with ms-swift 4's OPD-RL: the teacher (catalog name or config.json; gkd's default: the student)",
    )
    p.add_argument(
        "--teacher-sharding",
        type=one_of("--teacher-sharding", ("as-student", "whole", "zero3", "zero3-offload")),
        default=None,
        help="the teacher's weights: as-student (sharded as the student, default), whole, zero3 or zero3-offload "
        "(ms-swift's --teacher_deepspeed)",
    )
    p.add_argument("--lmbda", type=number("--lmbda"), default=None, help="gkd: share of on-policy steps (default 0.5)")
    p.add_argument("--jsd-beta", type=number("--jsd-beta"), default=None, help="gkd: the JSD's beta (default 0.5)")
    p.add_argument(
        "--chord-sft-batch",
        type=positive_int("--chord-sft-batch"),
        default=None,
        help="grpo: CHORD's SFT rows a device each micro-step (ms-swift's --chord_sft_per_device_train_batch_size)",
    )
    add_role_args(p)


def workload_fields(args: argparse.Namespace) -> dict:
    """The request's `workload` from the flags given (DPO's max_length is --max-length)."""
    kind = getattr(args, "workload", None) or "sft"
    w = {f: getattr(args, f) for f in WORKLOAD_FLAGS if getattr(args, f, None) is not None} | role_fields(args)
    if kind in ("dpo", "kto", "gkd") and getattr(args, "max_length", None) is not None:
        w["max_length"] = args.max_length
    return {"workload": {"kind": kind, **w}} if kind != "sft" or w else {}


def add_grpo_args(p: argparse.ArgumentParser) -> None:
    """GRPO's generation settings (TRL's GRPOConfig)."""
    from planner.config.workload import GENERATIONS

    p.add_argument(
        "--num-generations",
        type=positive_int("--num-generations"),
        default=None,
        help="grpo: completions per prompt (default 8)",
    )
    p.add_argument(
        "--max-prompt-length",
        type=positive_int("--max-prompt-length"),
        default=None,
        help="grpo: longest prompt, image tokens included (default 512); dpo: the prompt part of a row",
    )
    p.add_argument(
        "--max-completion-length",
        type=positive_int("--max-completion-length"),
        default=None,
        help="grpo: longest completion (default 512)",
    )
    p.add_argument(
        "--beta", type=number("--beta"), default=None, help="grpo: KL coefficient; > 0 keeps a reference model"
    )
    p.add_argument(
        "--generation",
        type=one_of("--generation", GENERATIONS),
        default=None,
        help="grpo: hf generate on the training GPU (default), vllm-colocate or vllm-server",
    )
    p.add_argument(
        "--vllm-gpu-memory-utilization",
        type=number("--vllm-gpu-memory-utilization"),
        default=None,
        help="grpo with vllm-colocate: vLLM's share of the card (default 0.3)",
    )
    p.add_argument(
        "--steps-per-generation",
        type=positive_int("--steps-per-generation"),
        default=None,
        help="grpo: micro-steps one generation batch feeds (default: --grad-accum)",
    )
    p.add_argument(
        "--num-iterations",
        type=positive_int("--num-iterations"),
        default=None,
        help="grpo: optimisation passes per generation batch (default 1)",
    )
