"""An RL run's memory by GPU group and phase (planner.estimate.roles, rollout): what each group holds in each phase,
from the roles' terms; each term's own pin is where it is measured (the sim: tests/probes/test_roles_sim.py)."""

from dataclasses import replace

import pytest

from planner.config.spec import GIB, Knobs
from planner.config.workload import Workload
from planner.errors import BadInput
from planner.estimate import rl, roles, rollout, state_terms
from planner.estimate.setup import Setup
from planner.model import catalog

CAP = 80 * GIB
MODEL = catalog.load_model("qwen2.5-1.5b")


def setup(framework="verl", gpus=8, micro=4, accum=2, **roles_):
    w = Workload(kind="ppo", beta=0.001, max_prompt_length=512, max_completion_length=1024, roles=roles_)
    extra = {"fsdp": "full"} if framework == "verl" else {"zero_stage": 3}
    k = Knobs(framework=framework, checkpointing="full", attention="flash", workload=w, **extra)
    return Setup(MODEL, k, micro, accum, w.seq_len(), gpus_per_node=gpus)


def test_the_colocated_group_holds_every_phase_and_the_peak_is_the_largest():
    s = setup()
    groups = roles.group_phases(s, CAP)
    (name,) = groups
    assert name == "colocated (8 GPUs)"
    assert set(groups[name]) == set(roles.PHASE_ROLE) - {"reward-scoring"}  # no reward model named
    b = rl.breakdown(s, CAP)
    assert b.peak_allocated_bytes == max(b.phases.values())
    assert b.peak_term.startswith("colocated (8 GPUs): ")


def test_the_rollout_phase_is_the_other_roles_resident_states_and_vllms_share_of_the_total():
    s = setup(rollout_memory=0.4)
    phase = roles.group_phases(s, CAP)["colocated (8 GPUs)"]["rollout"]
    R = roles.roles_of(s)
    actor = roles.on_group(s, R.models["actor"], R.groups["actor"])
    critic = roles.on_group(s, R.models["critic"], R.groups["critic"])
    assert phase["rollout_bytes"] == int(0.4 * CAP)  # vLLM: gpu_memory_utilization of the total
    assert phase["actor_resident_bytes"] == state_terms.params_bytes(actor) + state_terms.optimizer_bytes(actor)
    assert phase["critic_resident_bytes"] == state_terms.params_bytes(critic) + state_terms.optimizer_bytes(critic)
    assert phase["ref_resident_bytes"] == 0  # verl keeps the reference on the host (FSDP CPU offload)


def test_sglang_takes_its_share_of_what_the_other_roles_leave_free():
    s = setup(rollout_engine="sglang", rollout_memory=0.5)
    phase = roles.group_phases(s, CAP)["colocated (8 GPUs)"]["rollout"]
    others = phase["actor_resident_bytes"] + phase["critic_resident_bytes"] + phase["ref_resident_bytes"]
    assert phase["rollout_bytes"] == int(0.5 * (CAP - others)) + rollout.GRAPH_POOL_BYTES


def test_sleep_frees_the_engine_between_rollouts_and_offload_frees_the_actor_between_its_phases():
    awake, asleep = setup(sleep_level=0), setup(sleep_level=2, rollout_eager=True)
    g = "colocated (8 GPUs)"
    assert roles.group_phases(awake, CAP)[g]["critic-update"]["rollout_asleep_bytes"] == int(0.5 * CAP)
    assert roles.group_phases(asleep, CAP)[g]["critic-update"]["rollout_asleep_bytes"] == 0  # eager: no graph pool
    off = roles.group_phases(setup(offload=("actor-params", "actor-optimizer")), CAP)[g]
    assert off["critic-update"]["actor_resident_bytes"] == 0
    assert off["weight-sync"]["actor_resident_bytes"] > 0  # the parameters come back for the sync


def test_separate_groups_hold_only_their_roles_and_the_actor_group_is_the_data_parallel_size():
    s = setup(framework="openrlhf", gpus=8, placement="actor+ref:4,critic:2,rollout:2")
    groups = roles.group_phases(s, CAP)
    assert set(groups) == {"actor+ref (4 GPUs)", "critic (2 GPUs)", "rollout (2 GPUs)"}
    assert set(groups["critic (2 GPUs)"]) == {"critic-values", "critic-update"}
    assert set(groups["rollout (2 GPUs)"]) == {"rollout", "weight-sync"}
    assert s.knobs.data_parallel_of(8) == 4
    R = roles.roles_of(s)
    assert roles.on_group(s, R.models["critic"], R.groups["critic"]).world_size == 2


def test_a_token_budget_is_what_the_rank_holds_at_most():
    s = setup(max_tokens_per_gpu=1 << 20)  # more than a rank's rows of the step
    held = s.micro_batch * s.grad_accum * s.knobs.workload.steps_per_gen(s.grad_accum) * s.seq_len
    assert roles.pass_tokens(s, 1 << 20, s.micro_batch) == (1, held)
    assert roles.pass_tokens(s, 4096, s.micro_batch) == (1, 4096)
    assert roles.pass_tokens(setup(framework="openrlhf"), None, 4) == (4, s.seq_len)  # padded rows: packing off


def test_the_value_model_drops_the_vocabulary_head_and_keeps_the_embedding():
    v = roles.value_model(MODEL)  # Qwen2.5-1.5B ties its head to the embedding: the embedding stays
    assert v.params == MODEL.params + MODEL.text.hidden
    assert v.text.vocab == 1 and not v.text.tied
    untied = catalog.load_model("llama-3.1-8b")
    assert (
        roles.value_model(untied).params == untied.params - untied.text.vocab * untied.text.hidden + untied.text.hidden
    )


def test_verl_reduce_scatters_every_micro_step_so_sharded_gradients_accumulate():
    s = setup(accum=4)
    hf = replace(s, knobs=s.knobs.model_copy(update={"framework": "hf", "workload": Workload()}))
    assert state_terms.backward_grads_bytes(s, state_terms.gradients_bytes(s)) == state_terms.gradients_bytes(s)
    assert state_terms.backward_grads_bytes(hf, state_terms.gradients_bytes(hf)) > state_terms.gradients_bytes(
        hf
    )  # no_sync: unsharded


# verl 0.9.1 rollout.checkpoint_engine.update_weights_bucket_megabytes 2048 (trainer/config/rollout/rollout.yaml:282)
@pytest.mark.parametrize("framework,bucket", [("verl", 2048 << 20), ("openrlhf", 0)])
def test_the_weight_sync_gathers_one_parameter_and_the_frameworks_bucket(framework, bucket):
    s = setup(framework=framework)
    per = 4 if framework == "verl" else 2  # verl sends its fp32 weights, OpenRLHF its bf16 ones
    assert roles.sync_gather_bytes(s) == MODEL.largest_matrix_params() * per + bucket


def test_an_engine_alone_on_its_gpus_fits_while_its_share_is_free_at_start():
    s = setup(framework="openrlhf", placement="actor+ref:4,critic:2,rollout:2", rollout_memory=0.95)
    b = rl.breakdown(s, CAP)
    assert not b.peak_term.startswith("rollout")  # 0.95 of the card fits where the engine is alone
    full = rl.breakdown(
        setup(framework="openrlhf", placement="actor+ref:4,critic:2,rollout:2", rollout_memory=1.0), CAP
    )
    assert full.peak_term.startswith("rollout (2 GPUs)")


def test_the_engines_kv_cache_is_its_share_less_weights_profile_and_graphs():
    from planner.config.roles import Roles

    r = Roles(rollout_memory=0.5).resolved("verl")
    share = int(0.5 * CAP)
    spent = rollout.weights_bytes(MODEL, r) + rollout.profile_bytes(MODEL, r, "verl") + rollout.GRAPH_POOL_BYTES
    per_token = 2 * MODEL.text.layers * MODEL.text.kv_heads * MODEL.text.head_dim * 2  # keys and values, bf16
    assert rollout.kv_cache_tokens(MODEL, r, CAP, 0, "verl") == (share - spent) // per_token
    sglang = r.model_copy(update={"rollout_engine": "sglang"})  # its share of what is free: weights and KV pool
    free = CAP - 10 * GIB
    assert (
        rollout.kv_cache_tokens(MODEL, sglang, CAP, 10 * GIB, "verl")
        == (int(0.5 * free) - rollout.weights_bytes(MODEL, sglang)) // per_token
    )


def test_an_engine_that_cannot_hold_one_sequence_is_refused_with_the_reason():
    from planner import advise

    body = {
        "model": "qwen2.5-7b",
        "gpu": "h100",
        "gpus_per_node": 8,
        "micro_batch": 1,
        "grad_accum": 1,
        "framework": "verl",
        "fsdp": "full",
        "checkpointing": "full",
        "attention": "flash",
        "workload": {
            "kind": "grpo",
            "num_generations": 8,
            "max_prompt_length": 1024,
            "max_completion_length": 4096,
            "beta": 0.001,
            "roles": {"rollout_memory": 0.205},
        },
    }
    plan = advise.check(advise.parse(advise.CheckRequest, body)).plan
    assert plan.memory.detail["rollout_kv_cache_tokens"] < 5120
    assert not plan.fits and "less than one 5,120-token sequence: vLLM refuses to start" in plan.reason


def test_verls_reward_model_scores_in_its_own_engines_share():
    s = setup(reward_model="qwen2.5-0.5b", reward_memory=0.3)
    phase = roles.group_phases(s, CAP)["colocated (8 GPUs)"]["reward-scoring"]
    assert phase["reward_scoring_bytes"] == int(0.3 * CAP)  # reward.reward_model.rollout.gpu_memory_utilization
    assert phase["reward_resident_bytes"] == 0  # asleep between scorings, eager


def test_verls_reward_engine_takes_half_the_card_unless_told():
    """verl 0.9.1 reward.reward_model.rollout.gpu_memory_utilization 0.5 (trainer/config/reward/reward.yaml:41-48)."""
    s = setup(reward_model="qwen2.5-0.5b")
    phase = roles.group_phases(s, CAP)["colocated (8 GPUs)"]["reward-scoring"]
    assert phase["reward_scoring_bytes"] == CAP // 2


def test_a_packed_pass_carries_every_packed_rows_images_and_padded_rows_their_own():
    """roles.packed_rows: remove-padding packs the micro-batch's rows (their images in one tower call), a token
    budget budget // seq_len full-length rows, padded rows none (micro_batch counts each row's images)."""
    packed, padded = setup(remove_padding=True), setup(remove_padding=False)
    assert roles.packed_rows(packed, None, packed.micro_batch) == packed.micro_batch == 4
    assert roles.packed_rows(packed, 3 * packed.seq_len, packed.micro_batch) == 3
    assert roles.packed_rows(padded, None, padded.micro_batch) == 0
    assert replace(padded, packed_rows=0).image_rows == padded.micro_batch


@pytest.mark.parametrize("remove_padding", [True, False])
def test_the_no_grad_passes_run_at_their_own_micro_batches(remove_padding):
    """verl's old log-probs and reference pass split the batch by rollout.log_prob_micro_batch_size_per_gpu and
    ref.log_prob_micro_batch_size_per_gpu (v0.7.0 workers/fsdp_workers.py:1014, :1054 -> dp_actor.py:357,370), not
    the update's micro-batch: each pass at its own rows is the pass of a plan whose micro-batch is those rows, and
    the update does not move. Exact (the same terms)."""
    base = setup(micro=2, remove_padding=remove_padding)
    own = setup(micro=2, remove_padding=remove_padding, logprob_micro_batch=6, ref_logprob_micro_batch=4)
    g = "colocated (8 GPUs)"

    def phase(s, name):
        return sum(roles.group_phases(s, CAP)[g][name].values())

    at6, at4 = setup(micro=6, remove_padding=remove_padding), setup(micro=4, remove_padding=remove_padding)
    assert phase(own, "old-logps") == phase(at6, "old-logps") > phase(base, "old-logps")
    assert phase(own, "reference-forward") == phase(at4, "reference-forward") > phase(base, "reference-forward")
    assert phase(own, "actor-update") == phase(base, "actor-update")
    assert phase(own, "critic-values") == phase(base, "critic-values")


def test_the_reference_runs_at_its_own_token_budget():
    """verl's ref.log_prob_max_token_len_per_gpu cuts the reference's pass (workers/actor/dp_actor.py:366-368): twice
    the old log-probs' budget holds more in the reference's forward and nothing else moves; the same budget as theirs
    is the plan without it."""
    budgets = {"max_tokens_per_gpu": 4096, "logprob_max_tokens_per_gpu": 4096}
    base, own = setup(**budgets), setup(**budgets, ref_logprob_max_tokens_per_gpu=8192)
    assert (
        roles.role_phase_bytes(own, "ref", CAP)["reference-forward"]
        > roles.role_phase_bytes(base, "ref", CAP)["reference-forward"]
    )
    assert roles.role_phase_bytes(own, "actor", CAP) == roles.role_phase_bytes(base, "actor", CAP)
    same = setup(**budgets, ref_logprob_max_tokens_per_gpu=4096)
    assert roles.role_phase_bytes(same, "ref", CAP) == roles.role_phase_bytes(base, "ref", CAP)


@pytest.mark.parametrize("field", ["logprob_micro_batch", "ref_logprob_micro_batch", "ref_logprob_max_tokens_per_gpu"])
def test_a_log_prob_pass_sized_apart_is_verls_alone(field):
    """OpenRLHF scores its experience at --rollout.micro_batch_size (planned as the log-prob budget): a pass sized apart
    from it would be planned and never written, so it is refused in one line that names verl."""
    w = Workload(kind="ppo", beta=0.001, max_prompt_length=512, max_completion_length=1024, roles={field: 4096})
    with pytest.raises(
        BadInput, match=f"--{field.replace('_', '-')} sizes a log-prob pass apart.*--framework verl"
    ) as e:
        Knobs.make(framework="openrlhf", zero_stage=3, workload=w)
    assert e.value.field == field and "\n" not in str(e.value)
