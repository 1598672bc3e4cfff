"""GKD whose student generates its on-policy completions with vLLM (Framework.gkd_vllm: ms-swift's RolloutTrainerMixin
from v3.10.0): GRPO's colocated engine in every phase (asleep outside generation at --sleep_level), its generation
and weight-sync phases, the frameworks and releases that run it, and ms-swift's own example read, written and read
back."""

from pathlib import Path

import pytest

from planner import advise, intake
from planner.config.spec import Knobs
from planner.config.workload import Roles, Workload
from planner.errors import BadInput
from planner.estimate import rollout
from planner.estimate.rl import breakdown, phase_terms
from planner.estimate.setup import Setup
from planner.frameworks.swift import writer as swift_writer
from planner.model.catalog import load_model

CAP = 80 * 2**30
EXAMPLE = Path(__file__).parents[2] / "data/frameworks/swift/examples/train/rlhf/gkd/vllm_colocate.sh"


def _phases(generation: str, sleep: int = 0) -> dict:
    roles = {"sleep_level": sleep} if sleep else {}
    w = Workload(kind="gkd", teacher_model="qwen2.5-1.5b", lmbda=0.5, max_length=1024, max_completion_length=256,
                 generation=generation, roles=roles,
                 **({"vllm_gpu_memory_utilization": 0.3} if generation == "vllm-colocate" else {}))  # fmt: skip
    k = Knobs(workload=w, framework="swift", zero_stage=3, checkpointing="full")
    s = Setup(load_model("qwen2.5-0.5b"), k, 2, 1, w.seq_len(), gpus_per_node=4)
    return phase_terms(s, CAP, breakdown(s, CAP))


def test_a_colocated_engine_generates_and_syncs_as_grpos_does():
    """The engine's whole share while it generates, beside the student, teacher and optimizer; a weight-sync phase;
    no HF generation's KV cache or transient."""
    p = _phases("vllm-colocate")
    assert {"generation", "weight-sync", "teacher-forward", "training"} <= set(p)
    assert p["generation"]["vllm_reserved_bytes"] == int(0.3 * CAP)
    assert "kv_cache_bytes" not in p["generation"] and "generation_transient_bytes" not in p["generation"]
    assert p["training"]["vllm_reserved_bytes"] == int(0.3 * CAP)  # awake all the run without --sleep_level
    hf = _phases("hf")
    assert "weight-sync" not in hf and hf["generation"]["kv_cache_bytes"] > 0


def test_asleep_outside_generation_the_engine_keeps_its_graphs_alone():
    p = _phases("vllm-colocate", sleep=1)
    graphs = p["training"]["vllm_reserved_bytes"]
    assert 0 < graphs < int(0.3 * CAP) and p["generation"]["vllm_reserved_bytes"] == int(0.3 * CAP)
    assert graphs == rollout.graph_pool_bytes(Roles(sleep_level=1))


def test_a_server_generates_on_gpus_of_its_own():
    p = _phases("vllm-server")
    assert "generation" not in p and "weight-sync" in p and p["training"]["vllm_reserved_bytes"] == 0


@pytest.mark.parametrize(
    "framework,message",
    [("trl", "trl's GKD generates its on-policy completions with HF's generate"), ("swift@3.7", "give --framework")],
)
def test_frameworks_without_a_vllm_rollout_refuse_it_in_one_line(framework, message):
    body = {"model": "qwen2.5-0.5b", "gpu": "h100", "gpus_per_node": 4, "micro_batch": 2, "framework": framework,
            "workload": {"kind": "gkd", "teacher_model": "qwen2.5-1.5b", "generation": "vllm-colocate"}}  # fmt: skip
    with pytest.raises(BadInput, match=message):
        advise.check(advise.parse(advise.CheckRequest, body))


def test_swifts_example_is_read_as_it_runs_written_and_read_back(tmp_path):
    """examples/train/rlhf/gkd/vllm_colocate.sh (v4.5.2): colocated at 0.3 of the card, asleep at level 1; the
    teacher's own --teacher_deepspeed zero3_offload keeps its weights on the host. Written by the swift writer with the same engine
    flags, and read back as the same workload."""
    r = intake.read([str(EXAMPLE)])
    w = r.request["workload"]
    assert (w["generation"], w["vllm_gpu_memory_utilization"], w["roles"]["sleep_level"]) == ("vllm-colocate", 0.3, 1)
    assert w["teacher_sharding"] == "zero3-offload"  # --teacher_deepspeed zero3_offload: the teacher on the host
    result = advise.check(advise.parse(advise.CheckRequest, {**r.request, "gpu": "h100"}))
    plan, model, hw, goal = result.plan, *result.context
    flags = dict(swift_writer.rlhf_flags(plan, 4))
    assert (flags["use_vllm"], flags["vllm_mode"], flags["sleep_level"]) == (True, "colocate", 1)
    (tmp_path / "swift").mkdir()
    for name, text in swift_writer.files(plan, model, hw, goal.seq_len, goal).items():
        (tmp_path / "swift" / name).write_text(text)
    back = intake.read([str(tmp_path / "swift" / swift_writer.SCRIPT_NAME)]).request["workload"]
    assert (back["generation"], back["vllm_gpu_memory_utilization"], back["roles"]["sleep_level"]) == (
        "vllm-colocate",
        0.3,
        1,
    )
