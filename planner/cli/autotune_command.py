"""`planner autotune`'s view of the command it wraps (everything after `--`): read with `check --config`'s reader
(planner.intake.read_command), so a VLM-R1 command is TRL's GRPO with its DeepSpeed JSON; its fields are the base of
the plan's request (autotune's flags override them, as check's flags override --config's); its own plan is check's
answer on it as written; and the plan goes into it as the arguments whose value the plan changes (commands.script_args
of the plan against those of the command's own plan), with, for a VLM-R1 command, the image settings the plan assumed.
"""

from __future__ import annotations

from argparse import Namespace
from pathlib import Path

from planner.cli import printout, workloadargs
from planner.config.knobfields import SEARCHED
from planner.config.spec import Plan
from planner.errors import BadInput
from planner.intake import Reading
from planner.model.modelspec import ModelSpec

# what autotune tunes: the split (by the global batch) and the memory knobs; the command's other settings are kept
TUNED = ("micro_batch", "grad_accum", "checkpointing", "zero_stage", "offload", "fsdp")
# what HF's Trainer runs of the searched lists (export.bundled_only)
HF_RUNS = {"checkpointing": ["off", "full"], "loss": ["standard"]}


def read(user: list[str]) -> Reading:
    """The command as `check --config` reads a launch script holding it, run in the working directory (a bare
    `train.py ...`, what --executor slurm takes, as `python train.py ...`)."""
    from planner import intake

    where = Path.cwd().resolve() / "command"
    try:
        return intake.read_command(["python", *user] if user[0].endswith(".py") else user, Path.cwd())
    except BadInput as e:
        raise BadInput(str(e).replace(f"--config {where}", "the command after --"), e.field) from None


def given(args: Namespace, fields) -> dict:
    """Autotune's flags given (None: not given), named as the request's fields."""
    skip = {"workload", "gpus_per_node", "global_batch"}
    return {f: getattr(args, f) for f in fields if f not in skip and getattr(args, f, None) is not None}


def workload(args: Namespace, reading: Reading | None) -> dict:
    """The request's workload: the command's, with autotune's workload flags over it (a --workload of another kind
    than the command's replaces it)."""
    read = dict((reading.request.get("workload") if reading else None) or {})
    kind = args.workload or read.get("kind", "sft")
    flags = workloadargs.workload_fields(Namespace(**{**vars(args), "workload": kind})).get("workload", {})
    base = read if read.get("kind", "sft") == kind else {}
    roles = {**base.get("roles", {}), **flags.get("roles", {})}
    w = {**base, **flags} | ({"roles": roles} if roles else {})
    return {"workload": w} if w else {}


def suggest_fields(args: Namespace, reading: Reading | None) -> dict:
    """The suggest request's fields: the command's (the tuned knobs left to search, the others a one-value list where
    suggest searches them) and autotune's flags over them."""
    from planner import intake
    from planner.advise import SuggestRequest

    out = {}
    flags = given(args, SuggestRequest.model_fields)
    dropped = intake.replaced(reading, flags) if reading else set()
    for field, value in (reading.request if reading else {}).items():
        if field in TUNED or field == "workload" or field in dropped:
            continue
        out[field] = [value] if field in SEARCHED else value
    for field, value in flags.items():
        out[field] = [value] if field in SEARCHED else value
    runs = {k: v for k, v in out.items() if k not in HF_RUNS or v[0] in HF_RUNS[k]}
    return {**HF_RUNS, **runs, **workload(args, reading)}


def as_written(args: Namespace, reading: Reading, count: int):
    """check's answer on the command as written (its plan, model), with autotune's flags over it: the global batch a
    command sets, and what the plan's arguments are compared with."""
    from planner import advise, intake

    if "model" not in reading.request and args.model is None:
        raise BadInput("--model is required (the command after -- names no model_name_or_path)", "model")
    flags = given(args, advise.CheckRequest.model_fields)
    dropped = intake.replaced(reading, flags)
    read = {k: v for k, v in reading.request.items() if k not in dropped}
    body = {**read, **flags, **workload(args, reading)}
    result = advise.check(advise.parse(advise.CheckRequest, {**body, "gpus_per_node": count}), status=printout.status)
    return result.plan, result.context[0]


def is_vlm_r1(user: list[str]) -> bool:
    from planner.frameworks.trl.reader_vlmr1 import VLM_R1

    return any(mark in word for word in user for mark in VLM_R1)


def image_args(user: list[str], images: dict | None) -> dict[str, tuple[str, ...]]:
    """The pixel budget the plan assumed for each image (its rule's settings, the checkpoint's processor bounds where
    none was given: planner.model.images.PIXEL_RULES), as a VLM-R1 command's --min_pixels and --max_pixels, so that the
    command runs the bounds planned. None for other commands (their processor settings are the script's) or a rule
    without a budget."""
    from planner.model.images import PIXEL_RULES

    if not images or images["rule"] not in PIXEL_RULES or not is_vlm_r1(user):
        return {}
    _, low, high = PIXEL_RULES[images["rule"]]
    return {"--min_pixels": (str(images["min_pixels"] or low),), "--max_pixels": (str(images["max_pixels"] or high),)}


def _groups(words: list[str]) -> dict[str, tuple[str, ...]]:
    """script_args' words by flag: {--flag: its values}."""
    out: dict[str, tuple[str, ...]] = {}
    flag = ""
    for w in words:
        if w.startswith("--"):
            flag, out[w] = w, ()
        else:
            out[flag] += (w,)
    return out


def _name(word: str) -> str:
    return word.split("=", 1)[0].lstrip("-").replace("-", "_")


def _strip(cmd: list[str], flags) -> list[str]:
    """cmd without each of `flags` (either spelling, `--flag=value` too) and the values that follow it."""
    names, out, dropping = {_name(f) for f in flags}, [], False
    for w in cmd:
        if w.startswith("--"):
            dropping = _name(w) in names
            if dropping and "=" in w:
                dropping = False
                continue
        if not dropping:
            out.append(w)
    return out


def inject(
    cmd: list[str], plan: Plan, before: Plan | None, model: ModelSpec, ds_path: str, extra: dict
) -> tuple[list[str], dict]:
    """The command with the plan's arguments that differ from what it says (its own plan's arguments: `before`), and
    the arguments the plan no longer sets removed; (the command, {flag: values} written)."""
    from planner.export.commands import script_args
    from planner.export.configs import deepspeed_config
    from planner.export.keys import deepspeed_keys

    ours = _groups(script_args(plan, ds_path, model)) | extra
    theirs: dict[str, tuple[str, ...]] = {}
    if before is not None:  # the command's DeepSpeed JSON stays where the plan's ZeRO settings are its own
        zero = [deepspeed_keys(deepspeed_config(p, model) or {}) for p in (plan, before)]
        same = zero[0] == zero[1]
        theirs = _groups(script_args(before, ds_path if same else "", model))
    write = {f: v for f, v in ours.items() if theirs.get(f) != v}
    gone = [f for f in theirs if f not in ours]
    out = _strip(cmd, [*write, *gone])
    return out + [w for f, v in write.items() for w in (f, *v)], write
