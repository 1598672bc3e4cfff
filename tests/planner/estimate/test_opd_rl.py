"""GRPO with a teacher (ms-swift 4's OPD-RL, Framework.grpo_teacher): the teacher's weights resident as its own
--teacher_deepspeed places them (workload.teacher_sharding), its no-grad log-prob pass beside the old and reference
ones, one generation a prompt allowed; the frameworks and releases without it refuse in one line; ms-swift's own
example read, written and read back."""

from pathlib import Path

import pytest

from planner import advise, intake
from planner.config.spec import Knobs
from planner.config.workload import Workload
from planner.errors import BadInput
from planner.estimate import gkd
from planner.estimate.rl import breakdown, logps_pass_terms, phase_terms
from planner.estimate.setup import Setup
from planner.frameworks.swift import writer as swift_writer
from planner.model.catalog import load_model

CAP = 80 * 2**30
EXAMPLE = Path(__file__).parents[2] / "data/frameworks/swift/examples/train/on_policy_distillation.sh"


def _setup(sharding: str = "as-student", zero: int = 2) -> Setup:
    w = Workload(kind="grpo", teacher_model="qwen2.5-1.5b", teacher_sharding=sharding, num_generations=1,
                 max_prompt_length=512, max_completion_length=512)  # fmt: skip
    k = Knobs(workload=w, framework="swift", zero_stage=zero, checkpointing="full")
    return Setup(load_model("qwen2.5-0.5b"), k, 2, 1, w.seq_len(), gpus_per_node=4)


@pytest.mark.parametrize("sharding,share", [("as-student", 1), ("whole", 1), ("zero3", 1 / 4), ("zero3-offload", 0)])
def test_the_teachers_weights_sit_where_its_deepspeed_puts_them(sharding, share):
    whole = load_model("qwen2.5-1.5b").params * 2  # bf16
    assert gkd.teacher_params_bytes(_setup(sharding)) == (whole // 4 if share == 1 / 4 else int(whole * share))
    assert gkd.teacher_params_bytes(_setup("as-student", zero=3)) == whole // 4  # ZeRO-3 student: sharded alike


def test_its_log_prob_pass_is_a_phase_of_its_own_with_the_teacher_resident():
    s = _setup()
    phases = phase_terms(s, CAP, breakdown(s, CAP))
    assert "teacher-logps" in phases and phases["teacher-logps"]["teacher_params_bytes"] == gkd.teacher_params_bytes(s)
    assert all(p["teacher_params_bytes"] == gkd.teacher_params_bytes(s) for p in phases.values())
    student = logps_pass_terms(s)["forward_transient_bytes"]  # the student's own pass at the same rows
    assert phases["teacher-logps"]["forward_transient_bytes"] > student  # the 1.5B teacher's wider pass


@pytest.mark.parametrize("framework", ["trl", "swift@3.9"])
def test_a_grpo_without_a_teacher_refuses_one_in_one_line(framework):
    body = {"model": "qwen2.5-0.5b", "gpu": "h100", "gpus_per_node": 4, "micro_batch": 2, "framework": framework,
            "workload": {"kind": "grpo", "teacher_model": "qwen2.5-1.5b", "num_generations": 4}}  # fmt: skip
    with pytest.raises(BadInput, match="GRPO takes no teacher"):
        advise.check(advise.parse(advise.CheckRequest, body))
    with pytest.raises(ValueError, match="--teacher-sharding places a teacher's weights"):
        Workload(kind="grpo", teacher_sharding="zero3")


def test_swifts_example_is_read_as_it_runs_written_and_read_back(tmp_path):
    """examples/train/on_policy_distillation.sh (v4.5.2): Qwen3-8B-Base taught by Qwen3-32B sharded by its own
    ZeRO-3 over 7 GPUs, one generation a prompt."""
    req = intake.read([str(EXAMPLE)]).request
    w = req["workload"]
    assert (w["teacher_model"], w["teacher_sharding"], w["num_generations"]) == ("qwen3-32b", "zero3", 1)
    result = advise.check(advise.parse(advise.CheckRequest, {**req, "gpu": "h100"}))
    plan, model, hw, goal = result.plan, *result.context
    flags = dict(swift_writer.rlhf_flags(plan, 7))
    assert (flags["teacher_model"], flags["teacher_deepspeed"], flags["num_generations"]) == (
        "Qwen/Qwen3-32B",
        "zero3",
        1,
    )
    (tmp_path / "swift").mkdir()
    for name, text in swift_writer.files(plan, model, hw, goal.seq_len, goal).items():
        (tmp_path / "swift" / name).write_text(text)
    back = intake.read([str(tmp_path / "swift" / swift_writer.SCRIPT_NAME)]).request["workload"]
    assert (back["teacher_model"], back["teacher_sharding"], back["num_generations"]) == ("qwen3-32b", "zero3", 1)


def test_a_zero3_teachers_pass_holds_its_gathered_layers():
    """A sharded or offloaded teacher gathers its modules as it runs (ZeRO-3's gathered set and staging buffer, the
    student's pinned terms over the teacher's modules); a whole teacher gathers nothing."""
    from dataclasses import replace

    for sharding, gathers in (("whole", False), ("zero3", True), ("zero3-offload", True)):
        s = _setup(sharding)
        teacher = logps_pass_terms(replace(s, model=gkd.teacher_of(s)))["forward_transient_bytes"]
        phase = phase_terms(s, CAP, breakdown(s, CAP))["teacher-logps"]["forward_transient_bytes"]
        assert phase == teacher + gkd.teacher_gathered_bytes(s)
        assert (gkd.teacher_gathered_bytes(s) > 0) == gathers


def test_a_teacher_deepspeed_with_no_teacher_planned_says_so(tmp_path):
    """--teacher_deepspeed where no second model is planned (GKD's teacher the student itself with its adapter
    disabled, rlhf_args.py:409-412) is a `not planned:` line, never dropped without one."""
    script = tmp_path / "gkd.sh"
    script.write_text(
        "swift rlhf --rlhf_type gkd --model Qwen/Qwen2.5-7B-Instruct --teacher_model Qwen/Qwen2.5-7B-Instruct "
        "--tuner_type lora --teacher_deepspeed zero3 --dataset d.jsonl --max_length 2048\n"
    )
    unplanned = " ".join(str(u) for u in intake.read([str(script)]).unplanned)
    assert "--teacher_deepspeed zero3 (no teacher model planned here" in unplanned, unplanned


@pytest.mark.parametrize(
    "zero,placed",
    [
        ({"stage": 3, "offload_param": {"device": "cpu"}}, "zero3-offload"),
        ({"stage": 3}, "zero3"),
        ({"stage": 2, "offload_optimizer": {"device": "cpu"}}, "whole"),
    ],
)
def test_a_teacher_deepspeed_file_places_the_teacher(tmp_path, zero, placed):
    """--teacher_deepspeed naming a JSON file: its stage and parameter offload place the frozen teacher as ms-swift's
    bundled names do (it was a `not planned:` line); the file is among the files read."""
    import json

    folder = tmp_path / "a" / "b" / "c"
    folder.mkdir(parents=True)
    (folder / "teacher_ds.json").write_text(json.dumps({"zero_optimization": zero}))
    script = folder / "gkd.sh"
    script.write_text(
        "swift rlhf --rlhf_type gkd --model Qwen/Qwen2.5-1.5B-Instruct --teacher_model Qwen/Qwen2.5-7B-Instruct "
        "--tuner_type full --teacher_deepspeed teacher_ds.json --deepspeed zero2 --dataset d.jsonl --max_length 2048\n"
    )
    r = intake.read([str(script)])
    assert r.request["workload"]["teacher_sharding"] == placed
    assert any(str(f).endswith("teacher_ds.json") for f in r.files)
    assert not any("teacher_deepspeed" in str(u) for u in r.unplanned)
