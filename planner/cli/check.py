"""`planner check`: one configuration's breakdown, whether it fits, and fitting alternatives."""

from __future__ import annotations

import argparse

from planner import advise
from planner.advise import CheckRequest, CheckResult
from planner.cli import common
from planner.cli.suggest import result_json
from planner.config.knobfields import SEARCHED


def register(sub) -> None:
    p = sub.add_parser("check", help="will this configuration fit? and what to run instead")
    common.add_target_args(p)
    p.add_argument("--micro-batch", type=common.positive_int("--micro-batch"), required=True)
    p.add_argument("--grad-accum", type=common.positive_int("--grad-accum"), default=1)
    common.add_knob_args(p, SEARCHED)
    p.add_argument(
        "--plot", metavar="PNG", help="write the memory charts (this plan and alternatives, memory vs micro-batch)"
    )
    common.add_evidence_args(p)
    p.set_defaults(run=run)


def gather(args: argparse.Namespace) -> tuple[dict, CheckResult]:
    """advise.check on the flags; (JSON object, result)."""
    req = common.request(CheckRequest, args)
    result = advise.check(
        req, store=args.store, probes=common.probe_functions(), status=common.status, scanner=common.scanner
    )
    return result_json(result), result


def run(args: argparse.Namespace) -> int:
    out, result = gather(args)
    plan, alternatives, (model, hw, goal) = result.plan, result.suggestions, result.context
    from planner.cli.data import budget_line, data_lines

    data = out.get("data")
    if args.plot:
        from planner.cli import plot

        plot.write(args.plot, [plan, *alternatives], plan, model, hw, goal)
        out["plot"] = args.plot
    if args.json:
        common.print_json(out)
    else:
        from planner.cli import render

        verdict = "fits" if plan.fits else f"does NOT fit: {plan.reason}"
        common.say_line(
            f"{out['model']['name']}{common.approximate(model, goal)}: micro {plan.micro_batch} x accum "
            f"{plan.grad_accum} x world {plan.world_size} = {plan.global_batch}, {plan.precision}, "
            f"checkpointing {plan.checkpointing}, {plan.sharding}, offload {plan.offload}"
            + (f", {plan.recipe}" if plan.recipe != "-" else "")
            + f" ({plan.evidence}): {verdict}"
        )
        common.say_line(f"speed: {plan.tokens_per_s:,.0f} tokens/s, {plan.step_time_s:.2f} s a step (predicted)")
        for line in data_lines(data) if data else []:
            common.say_line(line)
        if plan.token_batches is not None:
            common.say_line(budget_line(plan.token_batches))
        if plan.workload.rl:
            common.say_line(plan.workload.summary())
        if model.text.moe is not None:
            from planner.estimate.moe import routing_line

            common.say_line(routing_line(model, plan.knobs, plan.micro_batch * goal.seq_len))
        render.console.print(render.breakdown_table(plan))
        if out.get("limits"):
            common.say_line(render.limits_line(out["limits"]))
        if not plan.fits:
            common.print_nearest(result.nearest)
        if alternatives:
            render.console.print(
                render.plans_table(
                    alternatives, "fitting alternatives with the same global batch", approximate=not model.exact
                )
            )
    return 0 if plan.fits else 3
