"""verl's GRPO under Ulysses (actor_rollout_ref.actor.ulysses_sequence_parallel_size S; verl 0.9.1 read with a
helper, the 0.7 line's fsdp_workers.py for the deprecated keys): S ranks share each micro-batch's rows, the batch is
split over world / S data-parallel groups, each rank runs 1/S of a packed micro-batch's tokens in the update and in
the old and reference log-prob passes, and a token budget is S ranks' (workers/engine/utils.py:104-111). verl's own
tuning example for Qwen2.5-32B on 4 x H100 reads as it runs and plans; memory follows the tokens a rank holds."""

from dataclasses import replace

import pytest

from planner import checkconfig, intake
from planner.config.spec import GIB, Knobs
from planner.estimate import roles
from planner.estimate.setup import Setup
from planner.model.catalog import load_model
from tests.planner.intake.conftest import DATA

TUNING = DATA / "verl/examples/tuning_qwen2-32b_grpo-lora_4_h100_fsdp_vllm.sh"  # nproc_per_gpu=45, 4 GPUs, S 2


def test_the_tuning_example_reads_its_split_as_verl_normalizes_it():
    """ppo_mini_batch_size=180 prompts x rollout.n 5 over 2 groups of 2 ranks is 450 rows a group; the deprecated
    global ppo_micro_batch_size=180 over the 2 groups is 90 rows a micro-batch (v0.7.0 fsdp_workers.py:249-253), so 5
    micro-steps; the log-prob passes' global 180 likewise 90."""
    req = intake.read([str(TUNING)]).request
    assert (req["sequence_parallel"], req["micro_batch"], req["grad_accum"], req["gpus_per_node"]) == (2, 90, 5, 4)
    roles_ = req["workload"]["roles"]
    assert (roles_["logprob_micro_batch"], roles_["ref_logprob_micro_batch"]) == (90, 90)


def test_a_split_given_beside_the_files_keeps_the_batch_and_each_ranks_tokens():
    """--sequence-parallel beside the files splits the same 900 rows over world / S groups: the micro-batch a group
    shares grows with S while each rank's slice, and so its memory in every phase, stays the same."""
    planned = {
        sp: checkconfig.check_config([str(TUNING)], {"gpu": "h100", "sequence_parallel": sp}).plan for sp in (1, 2, 4)
    }
    assert [(p.micro_batch, p.global_batch, p.sequence_parallel) for p in planned.values()] == [
        (45, 900, 1),
        (90, 900, 2),
        (180, 900, 4),
    ]
    phases = [
        {k: v for k, v in p.memory.phases.items() if "old-logps" in k or "actor-update" in k} for p in planned.values()
    ]
    assert len(phases[0]) == 2 and all(p == pytest.approx(phases[1], rel=1e-6) for p in phases)


def _grpo(sp: int, budget: int | None = None) -> Setup:
    w = {"kind": "grpo", "num_generations": 8, "max_prompt_length": 512, "max_completion_length": 1536}
    w["roles"] = {"max_tokens_per_gpu": budget, "logprob_max_tokens_per_gpu": budget} if budget else {}
    k = Knobs.make(framework="verl", fsdp="full", attention="flash", lora_rank=32, sequence_parallel=sp, workload=w)
    return Setup(load_model("qwen2.5-7b"), k, 16, 2, k.workload.seq_len(), 8, 1)


def test_each_rank_runs_a_slice_of_the_groups_packed_rows():
    """16 rows of 2,048 tokens packed: a group of 2 runs 32,768 tokens, each rank 16,384 (padded up to a multiple of
    S); the update and the log-prob passes hold less than without the split, by about the activations' half."""
    one, two = _grpo(1), _grpo(2)
    assert roles.pass_tokens(two, None, 16) == (1, 32_768) and roles.rank_width(two, 32_768) == 16_384
    assert roles.rank_width(replace(two, knobs=two.knobs.model_copy(update={"sequence_parallel": 4})), 32_767) == 8_192
    a, b = (roles.role_phase_bytes(s, "actor", 80 * GIB) for s in (one, two))
    assert b["old-logps"] < a["old-logps"] and b["actor-update"] < a["actor-update"]
    assert b["actor-update"] > a["actor-update"] / 2  # the sharded states are the same on every rank


def test_a_token_budget_is_s_ranks_worth():
    """use_dynamic_bsz: the group packs up to budget x S tokens (workers/engine/utils.py:104-111), each rank the
    budget's worth."""
    s = _grpo(2, budget=12_288)
    rows, width = roles.pass_tokens(s, 12_288, s.micro_batch)
    assert (rows, width, roles.rank_width(s, width)) == (1, 24_576, 12_288)


def test_a_reference_split_of_its_own_is_named(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text(
        "python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo trainer.n_gpus_per_node=8 "
        "actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct actor_rollout_ref.actor.ppo_mini_batch_size=64 "
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 actor_rollout_ref.rollout.n=4 "
        "actor_rollout_ref.actor.ulysses_sequence_parallel_size=2 actor_rollout_ref.ref.ulysses_sequence_parallel_size=4\n"
    )
    r = intake.read([str(script)])
    assert r.request["sequence_parallel"] == 2 and r.request["grad_accum"] == 16  # 64 x 4 / (4 groups x 4)
    assert any("ref.ulysses_sequence_parallel_size=4 (the reference's own Ulysses size" in n for n in r.unplanned)


def test_the_plan_writes_the_actors_split_and_reads_back(tmp_path):
    from tests.planner.intake.test_round_trip import written_and_read_back

    body = {
        "model": "qwen2.5-7b",
        "gpu": "h100",
        "gpus_per_node": 8,
        "micro_batch": 4,
        "grad_accum": 4,
        "framework": "verl",
        "sequence_parallel": 2,
        "fsdp": "full",
        "attention": "flash",
        "workload": {"kind": "grpo", "num_generations": 8, "max_prompt_length": 1024, "max_completion_length": 4096},
    }
    res, files, main, back = written_and_read_back(body, tmp_path)
    assert "actor_rollout_ref.actor.ulysses_sequence_parallel_size=2 \\" in files[main]
    a, b = res.plan, back.plan
    assert (
        (b.micro_batch, b.grad_accum, b.world_size, b.sequence_parallel)
        == (4, 4, 8, 2)
        == (
            a.micro_batch,
            a.grad_accum,
            a.world_size,
            a.sequence_parallel,
        )
    )


@pytest.mark.parametrize("kind", ["rloo", "reinforce++"])
def test_the_other_critic_free_runs_split_as_grpo_does_and_ppo_is_refused(kind):
    """rloo and reinforce++ run GRPO's roles (no critic: verl 0.9.1 trainer/ppo/utils.py:96-107); OpenRLHF's split
    roles are not planned, and PPO's critic splits on its own."""
    w = {"kind": kind, "num_generations": 4}
    k = Knobs.make(framework="verl", fsdp="full", attention="flash", sequence_parallel=2, workload=w)
    assert k.sequence_parallel == 2
    with pytest.raises(ValueError, match="cannot run --sequence-parallel"):
        Knobs.make(framework="openrlhf", zero_stage=3, sequence_parallel=2, workload=w)
    with pytest.raises(ValueError, match="not planned yet"):
        Knobs.make(framework="verl", fsdp="full", attention="flash", sequence_parallel=2, workload={"kind": "ppo"})


def test_gpus_given_beside_the_files_redo_the_deprecated_global_micro_batch():
    """ppo_micro_batch_size=180 over the groups of the GPUs planned: 8 GPUs in groups of 2 is 45 rows a micro-batch
    (verl's own division, v0.7.0 fsdp_workers.py:249-253), 5 micro-steps, the same 900 rows."""
    p = checkconfig.check_config([str(TUNING)], {"gpu": "h100", "gpus_per_node": 8}).plan
    assert (p.micro_batch, p.grad_accum, p.world_size, p.global_batch) == (45, 5, 8, 900)
