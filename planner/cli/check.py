"""`planner check`: one configuration's breakdown, whether it fits, and fitting alternatives."""

from __future__ import annotations

import argparse

from planner import advise, checkconfig
from planner.advise import CheckRequest, CheckResult
from planner.cli import advising, argtypes, knobargs, printout, targetargs, workloadargs
from planner.cli.suggest import result_json
from planner.config.knobfields import SEARCHED
from planner.errors import BadInput


def register(p) -> None:
    """The subcommand's flags on its parser (planner.cli.build_parser makes it)."""
    p.add_argument(
        "--config",
        nargs="+",
        metavar="FILE",
        help="your own run: a launch script or command line (torchrun, deepspeed, accelerate, llamafactory-cli, "
        "swift), a LLaMA-Factory / axolotl / TRL YAML, a DeepSpeed JSON, an accelerate config, or a Python training "
        "script; every field is read from it, and a flag given here overrides it (docs/frameworks.md)",
    )
    targetargs.add_target_args(p, model_required=False)
    p.add_argument(
        "--micro-batch", type=argtypes.positive_int("--micro-batch"), default=None, help="required without --config"
    )
    p.add_argument("--grad-accum", type=argtypes.positive_int("--grad-accum"), default=None, help="default 1")
    knobargs.add_knob_args(p, SEARCHED)
    p.add_argument(
        "--plot", metavar="PNG", help="write the memory charts (this plan and alternatives, memory vs micro-batch)"
    )
    p.add_argument(
        "--brief",
        action="store_true",
        help="the verdict, each phase's peak and the nearest settings in the framework's keys (no tables)",
    )
    advising.add_evidence_args(p)
    # --nodes and --workload None where not given: beside --config every flag given overrides its field
    p.set_defaults(run=run, nodes=None, workload=None, parser_defaults=lambda: {a.dest: a.default for a in p._actions})


def open_length_line(o: dict) -> str:
    """The condition of a verdict whose length the files leave open."""
    n, context, what = o["fits_up_to_tokens"], o["context"], o.get("what", "rows")
    head = "the files set no length (max_length, cutoff_len)"
    head += ": " if what == "rows" else ", so the prompt's limit is the model's context: "
    if n == 0:
        return head + f"this configuration does not fit at any length (shown at {o['planned_at']:,} tokens)"
    whole = " (the model's whole context)" if n == context else f" of the model's {context:,}"
    flag = "--max-prompt-length" if what == "prompts" else "--seq-len"
    return head + f"this configuration fits {what} up to {n:,} tokens{whole}; your data decides (--data, or {flag})"


def capped_length_line(o: dict) -> str:
    """The condition of a verdict at a length the files set as a cap, rows padded per micro-batch, that does not fit."""
    n, cap, key = o["fits_up_to_tokens"], o["cap"], o["key"]
    head = f"{key} {cap:,} is a cap (each micro-batch padded to its longest row): "
    if n == 0:  # a VLM's row holds its planned image: no shorter row sheds it
        held = f" holding its {o['image_tokens']:,} image tokens" if o.get("image_tokens") else ""
        return head + f"no row{held} fits at any length: shorter rows cannot make it fit"
    # --data reads SFT rows; a DPO or KTO row is planned at --max-length (check refuses --data beside those)
    how = "--data reads it" if o["field"] == "seq_len" else "--max-length plans a shorter cap"
    return (
        head + f"does not fit rows of the full {cap:,} tokens; fits rows up to {n:,} tokens: your data decides, {how}"
    )


def overrides(args: argparse.Namespace) -> dict:
    """The request fields given as flags (each differs from its flag's default), which override --config's."""
    defaults = args.parser_defaults()
    out = {
        f: getattr(args, f)
        for f in CheckRequest.model_fields
        if f != "workload" and getattr(args, f, None) is not None and getattr(args, f) != defaults.get(f)
    }
    work = workloadargs.workload_fields(args).get(
        "workload", {}
    )  # field by field: --beta alone overrides the beta read
    work.pop("kind", None)
    if args.workload is not None:  # given, whatever its value: --workload sft beside a GRPO run's files plans SFT
        work["kind"] = args.workload
    return {**out, **({"workload": work} if work else {})}


def gather(args: argparse.Namespace) -> tuple[dict, CheckResult]:
    """advise.check on the flags, or checkconfig.check_config on --config's files and the flags; (JSON object, result)."""
    kw = {
        "store": args.store,
        "probes": advising.asked_probes(args),
        "status": printout.status,
        "scanner": advising.scanner,
    }
    if args.config:
        result = checkconfig.check_config(args.config, overrides(args), **kw)
        return result_json(result), result
    for flag, value in (("--model", args.model), ("--micro-batch", args.micro_batch)):
        if value is None:
            raise BadInput(
                f"{flag} is required (or --config FILE: your own run's configuration)", flag[2:].replace("-", "_")
            )
    result = advise.check(advising.request(CheckRequest, args), **kw)
    return result_json(result), result


def run(args: argparse.Namespace) -> int:
    out, result = gather(args)
    plan, alternatives, (model, hw, goal) = result.plan, result.suggestions, result.context
    from planner.cli.data import budget_line, data_lines
    from planner.cli.speedline import step_line
    from planner.estimate.activation_terms import tower_adapters_uncounted
    from planner.estimate.overheads import rests_on_the_prior
    from planner.search import imagefit, videofit

    data = out.get("data")
    if plan.fits and rests_on_the_prior(plan.memory, int(plan.memory.capacity_bytes * (1 - goal.margin))):
        out["reserve_decides"] = True
    uncounted = tower_adapters_uncounted(plan.knobs, model.vision, goal.image_tokens or goal.tower_tokens)
    if uncounted:
        out["uncounted"] = uncounted
    if args.plot:
        from planner.cli import plot

        plot.write(args.plot, [plan, *alternatives], plan, model, hw, goal)
        out["plot"] = args.plot
    if args.json:
        printout.print_json(out)
    elif args.brief:
        brief(result, out)
    else:
        from planner.cli import render, render_inputs

        if result.config:
            render.console.print(render_inputs.config_table(result.config))
            for line in render_inputs.config_lines(result.config):
                printout.say_line(line)
        verdict = _verdict(result)
        printout.say_line(
            f"{out['model']['name']}{printout.approximate(model, goal)}{printout.text_only_mark(model, goal)}"
            f"{printout.media_mark(out.get('media'))}: {plan.split_text} = "
            f"{plan.global_batch}, {plan.precision}, "
            f"checkpointing {plan.checkpointing}, {plan.sharding}, offload {plan.offload}"
            + (f", {plan.recipe}" if plan.recipe != "-" else "")
            + f" ({plan.evidence}): {verdict}"
        )
        printout.say_line(f"speed: {plan.tokens_per_s:,.0f} tokens/s, {plan.step_time_s:.2f} s a step (predicted)")
        if step := step_line(plan):
            printout.say_line(step)
        for line in data_lines(data) if data else []:
            printout.say_line(line)
        if out.get("open_length"):
            printout.say_line(open_length_line(out["open_length"]))
        if out.get("capped_length"):
            printout.say_line(capped_length_line(out["capped_length"]))
        if out.get("media"):
            printout.say_line(out["media"]["condition"])
        for line in imagefit.lines(out["images"]) if out.get("images") else []:
            printout.say_line(line)
        for line in videofit.lines(out["videos"]) if out.get("videos") else []:
            printout.say_line(line)
        if plan.token_batches is not None:
            printout.say_line(budget_line(plan.token_batches))
        if plan.workload.rl:
            printout.say_line(plan.workload.summary(plan.knobs.role_run))
            _release_line(plan)
        if model.text.moe is not None:
            from planner.estimate.moe import routing_line

            printout.say_line(routing_line(model, plan.knobs, plan.micro_batch * goal.seq_len))
        if model.text.linear is not None:  # Qwen3-Next / Qwen3.5: what the hybrid layers are planned as
            printout.say_line("linear attention: " + model.summary()["linear_attention"])
        render.console.print(render.breakdown_table(plan))
        if out.get("limits"):
            printout.say_line(render.limits_line(out["limits"]))
        printout.say_line(render.overheads_line(plan, goal.margin))
        if out.get("reserve_decides"):
            printout.say_line(render.reserve_line())
        if out.get("uncounted"):
            printout.say_line(out["uncounted"])
        if not plan.fits:
            printout.print_nearest(result.nearest)
        if alternatives:
            render.console.print(
                render.plans_table(
                    alternatives, "fitting alternatives with the same global batch", approximate=not model.exact
                )
            )
    return 0 if plan.fits else 3


def _verdict(result: CheckResult) -> str:
    """fits / does NOT fit, naming the release that decides it where the files leave it open."""
    from planner.config.release import choice_text

    config = result.config or {}
    mark = choice_text(config.get("framework", ""), config.get("releases"))
    return f"fits{mark}" if result.plan.fits else f"does NOT fit{mark}: {result.plan.reason}"


def _release_line(plan) -> None:
    from planner.config.release import release_line
    from planner.estimate.lora import dropout_zeroed

    line = release_line(plan.knobs.framework, plan.knobs.release, plan.workload, plan.micro_batch)
    if line:
        printout.say_line(line)
    zeroed = dropout_zeroed(plan.knobs) if plan.knobs.lora_rank and plan.knobs.lora_dropout else ""
    if zeroed:  # the trainer zeroes it: its masks are not planned (planner.estimate.lora.dropout_runs)
        printout.say_line(f"LoRA dropout {plan.knobs.lora_dropout:g} runs at 0: {zeroed}")


def brief(result: CheckResult, out: dict) -> None:
    """`--brief`: what was not planned, the verdict, each phase's peak in one line, and where it does not fit the
    nearest settings as the framework's keys."""
    plan, (model, _, goal) = result.plan, result.context
    for line in (result.config or {}).get("unplanned", []):
        printout.say_line(f"not planned: {line}")
    verdict = _verdict(result)
    printout.say_line(
        f"{out['model']['name']}{printout.approximate(model, goal)}{printout.text_only_mark(model, goal)}"
        f"{printout.media_mark(out.get('media'))}: {plan.split_text} = {plan.global_batch}: {verdict}"
    )
    if out.get("media"):
        printout.say_line(out["media"]["condition"])
    for key, line in (("open_length", open_length_line), ("capped_length", capped_length_line)):
        if out.get(key):  # the verdict's condition on the rows' length, as the full output says it
            printout.say_line(line(out[key]))
    if out.get("uncounted"):
        printout.say_line(out["uncounted"])
    if plan.workload.rl:
        printout.say_line(plan.workload.summary(plan.knobs.role_run))
        _release_line(plan)
    peaks = plan.memory.phases or {}
    if plan.knobs.role_run:  # "group: phase" keys, one line a GPU group
        for group in dict.fromkeys(k.split(": ")[0] for k in peaks):
            parts = [f"{k.split(': ', 1)[1]} {v / 2**30:.1f}" for k, v in peaks.items() if k.startswith(group + ": ")]
            printout.say_line(f"{group}, GiB allocated a GPU: {', '.join(parts)}")
        kv, longest = plan.memory.detail.get("rollout_kv_cache_tokens", 0), plan.workload.seq_len()
        printout.say_line(f"rollout KV cache: {kv:,} tokens a GPU, {kv // longest:,} of the longest sequences at once")
    elif peaks:
        printout.say_line("phases, GiB allocated a GPU: " + ", ".join(f"{k} {v / 2**30:.1f}" for k, v in peaks.items()))
    from planner.cli import render_search

    for line in [] if plan.fits else render_search.nearest_lines(result.nearest):
        printout.say_line(line)
