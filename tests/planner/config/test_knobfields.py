"""planner/config/knobfields.py: every knob is declared once and reaches every face (issue 29, item 1). The web form's
half of the guard is tests/api/test_web.py::test_every_knob_has_a_control; the property tests' half is
tests/planner/test_advise.py::test_the_strategies_cover_every_knob."""

import json

import pytest

from planner import advise
from planner.cli import build_parser
from planner.config.knobfields import FIXED, KNOBS, SEARCHED, flag_of, name_of
from planner.config.requests import Space
from planner.config.spec import Knobs, Plan


def help_of(command: str) -> str:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return sub.choices[command].format_help()


@pytest.mark.parametrize("command", ["check", "suggest", "probe", "train"])
def test_every_knob_is_a_flag_of_each_one_configuration_face(command):
    text = help_of(command)
    missing = [flag_of(k) for k in KNOBS if flag_of(k) + " " not in text and flag_of(k) + "\n" not in text]
    assert not missing, missing


def test_searched_knobs_take_comma_lists_in_suggest_and_one_value_in_check():
    assert "a comma list to search" in help_of("suggest") and "a comma list to search" not in help_of("check")
    args = build_parser().parse_args(
        ["suggest", "--model", "m", "--gpu", "h100", "--global-batch", "8", "--zero", "2,3", "--fsdp", "off"]
    )
    assert (args.zero_stage, args.fsdp, args.offload) == ([2, 3], ["off"], None)  # None: the request's default
    args = build_parser().parse_args(["check", "--model", "m", "--gpu", "h100", "--micro-batch", "1", "--zero", "2"])
    assert args.zero_stage == 2


@pytest.mark.parametrize(
    "request_model, many", [(advise.SuggestRequest, True), (advise.CheckRequest, False), (advise.ProbeRequest, False)]
)
def test_every_knob_is_a_field_of_each_request_schema(request_model, many):
    props = request_model.model_json_schema()["properties"]
    assert {name_of(k) for k in KNOBS} <= set(props)
    for k in SEARCHED:
        assert (props[name_of(k)].get("type") == "array") == (many and request_model is advise.SuggestRequest)


def test_the_api_schemas_carry_every_knob():
    pytest.importorskip("fastapi")
    from api.main import create_app

    schemas = create_app().openapi()["components"]["schemas"]
    for model in ("SuggestRequest", "CheckRequest"):
        assert {name_of(k) for k in KNOBS} <= set(schemas[model]["properties"]), model


def test_a_plans_json_and_space_carry_every_knob_under_its_one_name():
    r = advise.suggest(
        advise.parse(
            advise.SuggestRequest,
            {"model": "debug-llama", "gpu": "h100", "global_batch": 4, "seq_len": 64, "evidence": "analytic", "top": 1},
        )
    )
    plan = json.loads(r.plans[0].model_dump_json())
    assert set(KNOBS) <= set(plan) and plan["fsdp"] == "off"  # one representation: "off", never null
    assert set(Space.model_fields) == set(KNOBS)
    assert Plan.model_validate({**plan, "fsdp": None}).fsdp == "off"  # plan files written before: null read as off


def test_defaults_are_the_declarations():
    """A request's defaults, Knobs' and suggest's searched lists all come from the one declaration."""
    req = advise.parse(advise.CheckRequest, {"model": "m", "gpu": "h100", "micro_batch": 1})
    assert {k: getattr(req, k) for k in FIXED} == {k: getattr(Knobs(), k) for k in FIXED}
    s = advise.parse(advise.SuggestRequest, {"model": "m", "gpu": "h100", "global_batch": 8})
    assert {k: getattr(s, k) for k in SEARCHED} == {k: v[0] for k, v in SEARCHED.items()}
    assert advise.parse(
        advise.SuggestRequest, {"model": "m", "gpu": "h100", "global_batch": 8, "zero_stage": [3]}
    ).zero_stage == [3]  # the name, beside the alias
