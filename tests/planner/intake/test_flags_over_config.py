"""Issue 47 item 7: every flag `planner check` takes, given beside `--config`, overrides that one field of the
reading, whatever its value (a flag equal to its parser default, `--workload sft`, and a switch turned off, `--no-X`,
included), and the fields table shows it as the field's source. Parsed by the real CLI parser, over a user's posted
VLM-R1 GRPO script (tests/field)."""

import argparse

import pytest

from planner import intake
from planner.advise import CheckRequest
from planner.checkconfig import config_body, flat
from planner.cli import build_parser, check, workloadargs
from planner.config import knobfields
from tests.planner.intake.conftest import DATA

SCRIPT = DATA.parents[1] / "field" / "vlmr1-151-qwen25vl3b-grpo-4x4090" / "train.sh"
NOT_FIELDS = {"help", "config", "gpu", "json", "plot", "brief", "store"}  # what no reading sets
# values the parser takes for flags whose type names its choices (each differs from what the script says)
SAMPLES = {
    "framework": "trl@0.14",
    "workload": "sft",
    "generation": "vllm-server",
    "logprobs": "fused",
    "image_rule": "qwen3-vl",
    "evidence": "analytic",
    "role_sleep_level": "1",
    "role_offload": "ref",
    "teacher_sharding": "zero3",
}


def _check_parser() -> argparse.ArgumentParser:
    p = build_parser()
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["check"]


def _field(dest: str) -> str:
    if dest == "workload":
        return "workload.kind"
    if dest in workloadargs.WORKLOAD_FLAGS:
        return f"workload.{dest}"
    return f"workload.roles.{dest[5:]}" if dest.startswith("role_") else dest


def _sample(action: argparse.Action) -> tuple[list[str], object]:
    """The words giving the flag a value, and the value the request gets."""
    if isinstance(action, argparse.BooleanOptionalAction):
        return [next(o for o in action.option_strings if o.startswith("--no-"))], False
    if action.nargs == 0:
        return [action.option_strings[0]], True
    dest = action.dest
    tries = [SAMPLES[dest]] if dest in SAMPLES else []
    if dest in knobfields.KnobFields.model_fields:
        tries += [str(v) for v in reversed(knobfields.choices(dest) or ())]
    for text in [*tries, "3", "0.25", "true", "x"]:
        try:
            return [action.option_strings[0], text], action.type(text) if action.type else text
        except (argparse.ArgumentTypeError, ValueError, TypeError):
            continue
    raise AssertionError(f"no sample value for {action.dest}")


FLAGS = [a for a in _check_parser()._actions if a.option_strings and a.dest not in NOT_FIELDS]


def test_every_flag_is_a_request_field():
    fields = set(CheckRequest.model_fields) | {f"workload.{f}" for f in ("kind", *workloadargs.WORKLOAD_FLAGS)}
    assert all(_field(a.dest) in fields or _field(a.dest).startswith("workload.roles.") for a in FLAGS), [
        a.dest for a in FLAGS if _field(a.dest) not in fields
    ]


@pytest.mark.parametrize("action", FLAGS, ids=lambda a: a.option_strings[0])
def test_each_flag_beside_config_overrides_its_field(action):
    words, value = _sample(action)
    args = build_parser().parse_args(["check", "--config", str(SCRIPT), "--gpu", "h100", *words])
    overrides = check.overrides(args)
    reading = intake.read([str(SCRIPT)], given=overrides)
    b = config_body(reading, overrides)
    field, given = _field(action.dest), flat(overrides)
    shown = {r["field"]: r for r in b.rows(reading)}
    assert field in given, (words, given)
    value = given[field]  # as the request types it (a role's "true" is True)
    assert flat(b.body).get(field, value if isinstance(value, (list, tuple)) else None) == value, (words, field)
    read = flat(reading.request)
    if field == "framework":  # the reading itself took the release given
        assert "--framework trl@0.14, given" in shown[field]["source"]
    elif read.get(field) != value:
        assert shown[field]["source"].startswith("a flag"), shown[field]
