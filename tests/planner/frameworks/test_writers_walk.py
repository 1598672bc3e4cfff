"""Issue 46 item 4, the writers' side: no writer refuses what the rules pass. For every framework that writes its own
files, at every release line: the plans `suggest` ranks for a small text model and a small VLM, full and LoRA, under
each workload the framework runs (and, for the RL roles, each role offload, a named reward model, each sleep level)
are written without raising; and from the best of each, every value of every knob (planner.config.knobfields), one at
a time, is either refused by the framework's rules at that line (planner.frameworks.check_plan, what the search
prunes with) or written. LLaMA-Factory's YAML spells a key or a value only at some lines (keys.py renames, releases
SPANS): there every pair of the knobs whose key or value moved is walked too."""

import itertools

import pytest
from pydantic import ValidationError

from planner.config.knobfields import KnobFields, choices
from planner.config.roles import OFFLOADS
from planner.config.spec import Knobs
from planner.errors import BadInput
from planner.export import launch
from planner.frameworks import FRAMEWORKS, check_plan
from tests.planner.frameworks.test_rules_prune import suggested

WRITERS = tuple(n for n, f in FRAMEWORKS.items() if f.writes)
MODELS = {"torchtitan": ("llama-3.1-8b",)}  # torchtitan plans the models it defines
OWN = {"torchtitan": {"attention": ["flash"], "batching": ["packed"]}}  # what torchtitan alone runs
WORKLOADS = {
    "sft": {},
    "dpo": {"kind": "dpo", "max_length": 1024},
    "kto": {"kind": "kto", "max_length": 1024},
    "grpo": {"kind": "grpo", "num_generations": 4, "max_completion_length": 256, "beta": 0.04},
    "ppo": {"kind": "ppo", "num_generations": 4, "max_completion_length": 256, "beta": 0.04},
}
FITS = {"rollout_memory": 0.6}  # the engines' share that leaves the 0.5B model's training room on an H100
# the RL roles' own settings, one at a time (planner.config.roles)
ROLES = (
    *({"offload": [part]} for part in OFFLOADS),
    {"offload": ["ref", "reward"], "reward_model": "qwen2.5-0.5b"},
    {"offload": ["ref"], "reward_model": "qwen2.5-0.5b"},
    *({"sleep_level": level, "placement": "colocate"} for level in (0, 1, 2)),
    {"rollout_engine": "hf", "placement": "colocate"},
)
WALKED = ("framework", "release", "workload")  # set by the walk itself
# LLaMA-Factory's knobs whose key or value moved between its lines (the writer's keys_of refuses what a line lacks)
LF_SPELLED = (
    "attention",
    "batching",
    "quant",
    "quant_absmax",
    "precision",
    "checkpointing",
    "loss",
    "lora_variant",
    "lora_vision",
    "frozen",
    "fsdp",
    "zero_stage",
)


def values(knob: str) -> tuple:
    """A knob's every value: a Literal's, or both of a bool's (numbers and free text: the ranked plans' own)."""
    if knob in WALKED:
        return ()
    found = choices(knob)
    return found if found is not None else (False, True) if KnobFields.model_fields[knob].annotation is bool else ()


def lines(name: str) -> list[str]:
    """A framework's release lines as `--framework NAME@LINE` spells them ("" the newest)."""
    fw = FRAMEWORKS[name]
    return ["" if r is fw.newest else r.name for r in fw.releases] or [""]


def ranked(name: str, line: str, model: str, lora: int, workload: str, roles: dict | None = None) -> list:
    body = {
        "model": model,
        "gpu": "h100",
        "gpus_per_node": 8,
        "global_batch": 16,
        "seq_len": 1024,
        "framework": f"{name}@{line}" if line else name,
        "evidence": "analytic",
        "top": 2,
        **({"lora_rank": [lora]} if lora else {}),
        **OWN.get(name, {}),
    }
    if WORKLOADS[workload]:
        body.pop("seq_len")
        role_runs = FRAMEWORKS[name].role_engine is not None and "num_generations" in WORKLOADS[workload]
        body["workload"] = {**WORKLOADS[workload], **({"roles": {**FITS, **(roles or {})}} if role_runs else {})}
    return suggested(body)


def bases(name: str, line: str):
    """(label, ranked plan, model, hardware, sequence length) of every request the framework's line is asked."""
    runs = FRAMEWORKS[name].runs.get("workload", ("sft",))
    for model, lora, workload in itertools.product(MODELS.get(name, ("qwen2.5-0.5b", "qwen2.5-vl-3b")), (0, 16), runs):
        if workload not in WORKLOADS:
            continue
        role_runs = WORKLOADS[workload].get("num_generations") and FRAMEWORKS[name].role_engine is not None
        for roles in (None, *(ROLES if role_runs and not lora and model == "qwen2.5-0.5b" else ())):
            for i, found in enumerate(ranked(name, line, model, lora, workload, roles)):
                yield (f"{name}@{line} {model} lora {lora} {workload} {roles} #{i}", *found)


def refused_or_written(name: str, plan, model, hw, seq_len: int) -> str | None:
    """None where the rules refuse the plan or the writer writes it; else what the writer raised."""
    try:
        check_plan(name, plan, model, hw)
    except ValueError:
        return None  # a rule prunes it: the search never ranks it
    try:
        launch.framework_launch(plan, model, hw, seq_len)
    except ValueError as e:
        return str(e)
    return None


def changed(plan, update: dict):
    """`plan` with `update`'s knobs, None where the knobs themselves are invalid together (refused on input)."""
    try:
        Knobs(**{**{k: getattr(plan, k) for k in KnobFields.model_fields}, **update})
    except (ValidationError, BadInput, ValueError):
        return None
    return plan.model_copy(update=update)


def walk(name: str, line: str, knobs: tuple[str, ...], width: int) -> tuple[int, list[str]]:
    """(plans the writer wrote, holes): each ranked plan, then it with each `width` knobs' values changed."""
    wrote, holes = 0, []
    for label, plan, model, hw, seq_len in bases(name, line):
        for combo in itertools.combinations(knobs, width) if label.endswith("#0") else ():  # the best plan's knobs
            for vals in itertools.product(*(values(k) for k in combo)):
                other = changed(plan, dict(zip(combo, vals)))
                said = None if other is None else refused_or_written(name, other, model, hw, seq_len)
                holes += [f"{label} {dict(zip(combo, vals))}: {said}"] if said else []
                wrote += other is not None and not said
        try:  # the ranked plan itself: written, no rule left to refuse it
            launch.framework_launch(plan, model, hw, seq_len)
            wrote += 1
        except ValueError as e:
            holes.append(f"{label}: ranked, then refused: {e}")
    return wrote, holes


@pytest.mark.parametrize("name", WRITERS)
def test_every_knob_value_at_every_line_is_refused_by_a_rule_or_written(name):
    knobs = tuple(k for k in KnobFields.model_fields if values(k))
    wrote, holes = 0, []
    for line in lines(name):
        w, h = walk(name, line, knobs, 1)
        wrote, holes = wrote + w, holes + h
    assert wrote, "nothing written: the walk checks nothing"
    assert not holes, f"{len(holes)} plans the rules pass and the writer refuses:\n" + "\n".join(holes[:20])


@pytest.mark.parametrize("line", lines("llamafactory"))
def test_every_pair_llamafactorys_yaml_spells_is_refused_by_a_rule_or_written(line):
    wrote, holes = walk("llamafactory", line, LF_SPELLED, 2)
    assert wrote, "nothing written: the walk checks nothing"
    assert not holes, f"{len(holes)} plans the rules pass and the writer refuses:\n" + "\n".join(holes[:20])
