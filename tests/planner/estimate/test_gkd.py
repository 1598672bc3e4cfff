"""GKD's plan (planner.estimate.gkd, its phases in planner.estimate.rl): the teacher's weights by sharding, the loss by
framework and beta, the on-policy generation, and the refusals (the loss terms themselves are pinned against the
frameworks' code in test_gkd_loss.py)."""

import pytest

from planner.config.spec import GIB, Knobs
from planner.config.workload import Workload
from planner.estimate import gkd, rl
from planner.estimate.setup import Setup
from planner.frameworks import adapter
from planner.model.catalog import load_model

STUDENT, TEACHER = "qwen2.5-0.5b", "qwen2.5-1.5b"


def plan(framework="trl", micro=2, gpus=2, **knobs):
    fields = {"kind": "gkd", "teacher_model": TEACHER, "max_length": 1024, "max_completion_length": 256}
    w = Workload(**fields | knobs.pop("workload", {}))
    s = Setup(load_model(STUDENT), Knobs(framework=framework, workload=w, **knobs), micro, 4, w.seq_len(), gpus)
    return s, rl.breakdown(s, 80 * GIB)


def test_the_teachers_weights_are_resident_whole_below_zero3_and_sharded_under_it():
    teacher = load_model(TEACHER).params * 2
    for zero, share in ((2, teacher), (3, teacher // 2)):
        s, b = plan(zero_stage=zero)
        _, alone = plan(zero_stage=zero, workload={"teacher_model": None})
        assert gkd.teacher_params_bytes(s) == share
        assert b.peak_allocated_bytes - alone.peak_allocated_bytes == share
        assert all(terms["teacher_params_bytes"] == share for terms in rl.phase_terms(s, 80 * GIB, b).values())


def test_the_loss_follows_the_framework_and_beta():
    """TRL's JSD over every token's logits against ms-swift's over the completion's; a mixture over either KL."""
    trl, swift = plan()[0], plan("swift")[0]
    assert gkd.loss_bytes(trl, 2) > 3 * gkd.loss_bytes(swift, 2)  # 1,024 tokens against 257
    mixed, kl = plan(workload={"jsd_beta": 0.5})[0], plan(workload={"jsd_beta": 0.0})[0]
    assert gkd.loss_bytes(mixed, 2) > 1.8 * gkd.loss_bytes(kl, 2)
    assert plan()[1].peak_term == "logprobs"  # the loss moment is the largest term of TRL's peak


def test_on_policy_generation_is_a_phase_only_with_lmbda_and_trl_caches_nothing_under_checkpointing():
    s, b = plan(checkpointing="full")
    phases = rl.phase_terms(s, 80 * GIB, b)
    assert "teacher-forward" in phases and phases["generation"]["kv_cache_bytes"] == 0
    swift, sb = plan("swift", checkpointing="full")
    assert rl.phase_terms(swift, 80 * GIB, sb)["generation"]["kv_cache_bytes"] > 0
    off, b0 = plan(workload={"lmbda": 0.0})
    assert "generation" not in rl.phase_terms(off, 80 * GIB, b0)


def test_frameworks_that_do_not_run_gkd_refuse_it_in_one_line():
    knobs = dict(Knobs(framework="trl", workload=Workload(kind="gkd")))
    for name in ("llamafactory", "axolotl", "verl", "memplan", "trl-0"):
        field, why = adapter(name).cannot(knobs)
        assert field == "workload" and "gkd" in why and "\n" not in why
    assert adapter("trl").cannot(knobs) is None and adapter("swift").cannot(knobs) is None


@pytest.mark.parametrize(
    "fields, bad",
    [
        ({"kind": "dpo", "lmbda": 0.2}, "lmbda"),
        ({"kind": "sft", "teacher_model": TEACHER}, "teacher_model"),
        ({"kind": "gkd", "max_length": 256, "max_completion_length": 512}, "max_completion_length"),
        ({"kind": "gkd", "num_iterations": 2}, "num_iterations"),
    ],
)
def test_gkds_inputs_are_refused_outside_it_and_when_they_do_not_fit_a_row(fields, bad):
    with pytest.raises(ValueError, match=f"--{bad.replace('_', '-')} "):  # the BadInput inside pydantic's error
        Workload(**fields)
