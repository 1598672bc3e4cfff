"""`planner check`: one configuration's breakdown, whether it fits, and fitting alternatives."""
from __future__ import annotations

import argparse

from planner.cli import common
from planner.cli.verify import refine, verify
from planner.errors import BadInput
from planner.search import Space, make_plan, search
from planner.spec import CHECKPOINTING, OFFLOADS, PRECISIONS, ZERO_STAGES, Knobs, Plan

MAX_SUGGESTIONS = 5


def register(sub) -> None:
    p = sub.add_parser("check", help="will this configuration fit? and what to run instead")
    common.add_target_args(p)
    p.add_argument("--micro-batch", type=common.positive_int("--micro-batch"), required=True)
    p.add_argument("--grad-accum", type=common.positive_int("--grad-accum"), required=True)
    p.add_argument("--precision", type=common.one_of("--precision", PRECISIONS), required=True)
    p.add_argument("--checkpointing", type=common.one_of("--checkpointing", CHECKPOINTING), required=True)
    p.add_argument("--zero", type=common.one_of("--zero", ZERO_STAGES, int), default=0)
    p.add_argument("--offload", type=common.one_of("--offload", OFFLOADS), default="none")
    p.add_argument("--plot", metavar="PNG", help="write the memory charts (this plan and alternatives, memory vs micro-batch)")
    common.add_evidence_args(p)
    p.set_defaults(run=run)


def knobs_from(args: argparse.Namespace) -> Knobs:
    if args.offload != "none" and args.zero == 0:
        raise BadInput(f"--offload {args.offload} needs DeepSpeed: use --zero 1, 2 or 3")
    if args.offload == "optimizer+params" and args.zero != 3:
        raise BadInput("--offload optimizer+params needs --zero 3 (parameter offload is a ZeRO-3 feature)")
    if args.precision == "bf16-pure" and args.zero != 0:
        raise BadInput("--precision bf16-pure runs without DeepSpeed (--zero 0); DeepSpeed keeps fp32 master weights")
    return Knobs(precision=args.precision, checkpointing=args.checkpointing, zero_stage=args.zero,
                 offload=args.offload, optimizer=args.optimizer, lora_rank=args.lora_rank)


def gather(args: argparse.Namespace) -> tuple[dict, Plan, list[Plan], tuple]:
    knobs = knobs_from(args)
    world = (args.gpus_per_node or 1) * args.nodes
    model, hw, goal = common.resolve(args, args.micro_batch * args.grad_accum * world)
    cal = common.calibrator(args, model)
    if cal is not None:
        cal.exact = True
    with common.status(f"checking with {args.evidence} evidence"):
        plan = refine(make_plan(model, hw, goal, knobs, args.micro_batch, cal), model, hw, goal, cal)
    verified = None
    if args.verify:
        plan, verified = verify(plan, model, hw, goal, cal)
    space = Space(optimizer=args.optimizer, lora_rank=args.lora_rank)
    alt_cal = cal.with_mode("auto") if cal is not None else None   # alternatives: stored evidence only
    alternatives = [p for p in search(model, hw, goal, space, top=MAX_SUGGESTIONS + 1, calibrate=alt_cal).plans
                    if (p.micro_batch, p.knobs) != (plan.micro_batch, plan.knobs)][:MAX_SUGGESTIONS]
    out = {"model": model.summary(), "hardware": common.hardware_json(hw), "goal": goal.model_dump(),
           "plan": plan.model_dump(), "suggestions": [p.model_dump() for p in alternatives]}
    if verified:
        out["verified"] = verified
    return out, plan, alternatives, (model, hw, goal)


def run(args: argparse.Namespace) -> int:
    out, plan, alternatives, (model, hw, goal) = gather(args)
    if args.plot:
        from planner.cli import plot

        plot.write(args.plot, [plan, *alternatives], plan, model, hw, goal)
        out["plot"] = args.plot
    if args.json:
        common.print_json(out)
    else:
        from planner.cli import render

        verdict = "fits" if plan.fits else f"does NOT fit: {plan.reason}"
        render.console.print(f"{out['model']['name']}: micro {plan.micro_batch} x accum {plan.grad_accum} x "
                             f"world {plan.world_size} = {plan.global_batch}, {plan.precision}, checkpointing "
                             f"{plan.checkpointing}, zero {plan.zero_stage}, offload {plan.offload} ({plan.evidence}): {verdict}")
        render.console.print(render.breakdown_table(plan))
        if alternatives:
            render.console.print(render.plans_table(alternatives, "fitting alternatives with the same global batch"))
    return 0 if plan.fits else 3
