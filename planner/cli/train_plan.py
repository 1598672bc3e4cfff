"""The plan `planner train` runs: `--plan FILE` (the best plan `suggest --json` or `check --json` printed, its shape
and batch invariant checked) or check's own flags, as check's request and its knobs, every rule checked as for
check itself."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pydantic import ValidationError

from planner import advise
from planner.advise import CheckRequest
from planner.cli import knobargs, workloadargs
from planner.config.knobfields import KNOBS
from planner.config.spec import Knobs, Plan, bad_input
from planner.errors import BadInput


def _plan_file(path: str) -> dict:
    """The plan file's fields as check's request, after checking its shape and its batch invariant."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise BadInput(f"--plan {path!r}: not a readable JSON file ({e})", "plan") from None
    if not isinstance(data, dict):
        raise BadInput(f"--plan {path!r}: expected the JSON object `suggest --json` or `check --json` prints", "plan")
    plans = data.get("plans")
    plan = data.get("plan") or (plans[0] if isinstance(plans, list) and plans else None)
    if plan is None:
        raise BadInput(f"--plan {path!r}: no plan in it (suggest found nothing that fits?)", "plan")
    try:
        plan, hw, goal = Plan.model_validate(plan), data["hardware"], data["goal"]
        model = data["model"]["name"]
        world = hw["gpus_per_node"] * hw["nodes"]
    except (ValidationError, KeyError, TypeError) as e:
        what = bad_input(e) if isinstance(e, ValidationError) else f"missing or malformed {e}"
        raise BadInput(f"--plan {path!r}: not a plan file ({what})", "plan") from None
    if not (isinstance(world, int) and world == plan.world_size):
        raise BadInput(
            f"--plan {path!r}: the plan's world size {plan.world_size} is not the hardware's "
            f"gpus_per_node x nodes ({world!r})",
            "plan",
        )
    return {
        "model": model,
        "gpu": str(hw.get("gpu", "h100")),
        "gpus_per_node": hw["gpus_per_node"],
        "nodes": hw["nodes"],
        "seq_len": goal.get("seq_len") if isinstance(goal, dict) else None,
        "micro_batch": plan.micro_batch,
        "grad_accum": plan.grad_accum,
        **{f: getattr(plan, f) for f in KNOBS},
        "max_tokens_per_micro_batch": plan.token_batches.max_tokens_per_micro_batch if plan.token_batches else None,
    }


def plan_from(args: argparse.Namespace) -> tuple[str, CheckRequest, Knobs]:
    """(model reference, the run as check's request, its knobs) from --plan or the check-like flags; every
    value bounded and every knob rule checked, as for check itself."""
    if args.plan:
        fields = _plan_file(args.plan)
        fields["model"] = args.model or fields["model"]
        fields["seq_len"] = args.seq_len or fields["seq_len"]
        fields["max_tokens_per_micro_batch"] = args.max_tokens_per_micro_batch or fields["max_tokens_per_micro_batch"]
    else:
        rl = getattr(args, "workload", "sft") != "sft"
        missing = [
            f for f in ("model", "micro_batch", "seq_len") if getattr(args, f) is None and not (rl and f == "seq_len")
        ]
        if missing:
            raise BadInput(
                "give --plan FILE, or --model, --micro-batch and --seq-len (missing: "
                + ", ".join("--" + m.replace("_", "-") for m in missing)
                + ")"
            )
        fields = {
            "model": args.model,
            "gpu": args.gpu,
            "gpus_per_node": args.gpus_per_node,
            "nodes": args.nodes,
            "seq_len": args.seq_len,
            "micro_batch": args.micro_batch,
            "grad_accum": args.grad_accum,
            "max_tokens_per_micro_batch": args.max_tokens_per_micro_batch,
            **knobargs.knob_values(args),
            **workloadargs.workload_fields(args),
        }
    req = advise.parse(advise.CheckRequest, fields)
    return str(req.model), req, advise.knobs_of(req, req.precision or "bf16")
