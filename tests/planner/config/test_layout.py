"""planner/config/layout.py: the rules that need the world size, the nodes or the model, each in one place."""

import re
from pathlib import Path

import pytest

from planner import advise
from planner.config.layout import Layout
from planner.config.spec import Knobs
from planner.config.workload import Workload
from planner.errors import BadInput
from planner.model import catalog, hardware

PLANNER = Path(__file__).resolve().parents[3] / "planner"
GRPO = Workload(kind="grpo", num_generations=8)


@pytest.mark.parametrize(
    "layout, knobs, field",
    [
        (Layout(8, 1), Knobs(fsdp="hybrid"), "fsdp"),
        (Layout(2, 1), Knobs(optimizer_in_backward=True), "optimizer_in_backward"),
        (Layout(8, 1), Knobs(framework="hf", fsdp="full", expert_parallel=2), "expert_parallel"),  # a dense model
        (
            Layout(6, 1, experts=8),
            Knobs(framework="hf", fsdp="full", expert_parallel=4),
            "expert_parallel",
        ),  # 4 does not divide 6
    ],
)
def test_knob_rules_name_their_field(layout, knobs, field):
    assert layout.knob_error(knobs).field == field
    with pytest.raises(BadInput):
        layout.check_knobs(knobs)


def test_the_same_knobs_pass_where_the_layout_allows_them():
    assert Layout(8, 2).knob_error(Knobs(fsdp="hybrid")) is None
    assert Layout(1, 1).knob_error(Knobs(optimizer_in_backward=True)) is None
    assert Layout(8, 1, experts=64).knob_error(Knobs(framework="hf", fsdp="full", expert_parallel=8)) is None


def test_split_and_global_batch_rules():
    assert Layout().split_error(Knobs(optimizer_in_backward=True), 4, 2).field == "optimizer_in_backward"
    assert Layout(2).split_error(Knobs(workload=GRPO), 3, 1).field == "micro_batch"  # 6 completions, groups of 8
    assert Layout(2).split_error(Knobs(workload=GRPO), 4, 1) is None
    assert "nearest valid global batches: 252, 258" in str(Layout(6).global_batch_error(Workload(), 255))
    assert Layout(4).global_batch_error(GRPO, 12).field == "global_batch"


def test_every_face_gets_the_rule_from_the_layout():
    """suggest, check and the search refuse hybrid FSDP on one node with the layout's one message."""
    message = Layout().knob_error(Knobs(fsdp="hybrid")).args[0]
    base = {"model": "llama-3.2-1b", "gpu": "h100", "gpus_per_node": 8, "seq_len": 512, "evidence": "analytic"}
    for cls, call, extra in (
        (advise.CheckRequest, advise.check, {"micro_batch": 1, "fsdp": "hybrid"}),
        (advise.SuggestRequest, advise.suggest, {"global_batch": 8, "fsdp": ["hybrid"]}),
    ):
        with pytest.raises(BadInput) as e:
            call(advise.parse(cls, {**base, **extra}))
        assert str(e.value) == message
    model = catalog.load_model("llama-3.2-1b")
    assert Layout.of(hardware.resolve("h100", 8, 1), model).experts is None


def test_no_layout_rule_is_written_outside_the_layout():
    """The rules' tests (hybrid on one node, optimizer in backward on several GPUs, experts dividing the world,
    GRPO's global batch) appear in planner/config/layout.py only."""
    patterns = [
        r'fsdp\s*==\s*"hybrid"\s+and\s+\w+\.nodes',
        r"optimizer_in_backward\s+and\s+\w+\.world_size",
        r"experts\s*%",
        r"global_batch\s*%\s*\w*\.?num_generations",
    ]
    found = []
    for path in PLANNER.rglob("*.py"):
        if path.name == "layout.py":
            continue
        text = path.read_text()
        found += [f"{path.name}: {p}" for p in patterns if re.search(p, text)]
    assert not found, found


def test_a_frozen_language_model_needs_image_tokens_in_check_and_suggest():
    """--frozen language trains the tower and projector only: samples without images train nothing."""
    base = {"model": "qwen2.5-vl-3b", "gpu": "h100", "gpus_per_node": 1, "seq_len": 2048, "frozen": "language"}
    for cls, call, extra in (
        (advise.CheckRequest, advise.check, {"micro_batch": 1}),
        (advise.SuggestRequest, advise.suggest, {"global_batch": 8}),
    ):
        with pytest.raises(BadInput) as e:
            call(advise.parse(cls, {**base, **extra}))
        assert e.value.field == "frozen" and "no image tokens" in str(e.value)
        assert call(advise.parse(cls, {**base, **extra, "image_tokens": 256}))
    assert Layout(vision=False).knob_error(Knobs(frozen="language")).field == "frozen"  # a text model
