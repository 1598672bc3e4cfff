"""The roles of an RL run (planner.config.roles): placement groups, which roles each estimator has, the framework
defaults, and the one-line errors a bad request gets."""

import pytest

from planner.config.roles import Roles, check_groups, existing_roles, parse_placement
from planner.config.spec import Knobs
from planner.config.workload import Workload
from planner.errors import BadInput


def test_colocate_is_one_group_of_every_role_and_groups_parse_with_their_gpus():
    (g,) = parse_placement("colocate")
    assert g.gpus == 0 and set(g.roles) == {"actor", "critic", "ref", "reward", "rollout"}
    groups = parse_placement("actor+ref:4,critic+reward:2,rollout:2")
    assert [(x.roles, x.gpus) for x in groups] == [(("actor", "ref"), 4), (("critic", "reward"), 2), (("rollout",), 2)]


@pytest.mark.parametrize(
    "text,says",
    [
        ("actor:4,rollout", "is not role\\+role:GPUs"),
        ("actor:4,critic:0", "is not role\\+role:GPUs"),
        ("actor:4,vllm:4", "unknown role 'vllm'"),
        ("actor+ref:4,ref:4", "role 'ref' is in two groups"),
        ("critic:4,rollout:4", "no group holds the actor"),
    ],
)
def test_a_bad_placement_is_one_line_naming_the_bad_part(text, says):
    with pytest.raises(BadInput, match=says):
        parse_placement(text)
    with pytest.raises(ValueError, match=says):  # a BadInput inside pydantic's error; faces print the line
        Roles(placement=text)


def test_the_estimator_decides_the_critic_and_a_named_reward_model_its_own_role():
    assert "critic" in existing_roles("ppo", Roles()) and "critic" not in existing_roles("grpo", Roles())
    assert "reward" not in existing_roles("rloo", Roles())
    assert "reward" in existing_roles("reinforce++", Roles(reward_model="qwen2.5-0.5b"))


def test_groups_must_hold_every_role_of_the_run_and_add_up_to_its_gpus():
    r = Roles(placement="actor+ref:4,rollout:4")
    check_groups("grpo", r, beta=0.01, world=8)  # fits: no critic in GRPO
    with pytest.raises(BadInput, match="role 'critic' of this ppo run is in no group"):
        check_groups("ppo", r, beta=0.01, world=8)
    with pytest.raises(BadInput, match="role 'ref' does not exist in this grpo run"):
        check_groups("grpo", r, beta=0.0, world=8)
    with pytest.raises(BadInput, match="gives 8 GPUs .* but the run has 16"):
        check_groups("grpo", r, beta=0.01, world=16)
    with pytest.raises(BadInput, match="--rollout-tp 3 does not divide the rollout group's 4 GPUs"):
        check_groups("grpo", r.model_copy(update={"rollout_tp": 3}), beta=0.01, world=8)


def test_framework_defaults_fill_what_the_request_leaves_out():
    v = Roles().resolved("verl")  # rollout.yaml:46, vllm_async_server.py:1289-1305, critic.py:89, ref on the host
    assert (v.rollout_memory, v.sleep_level, v.critic_max_tokens_per_gpu, v.offload) == (0.5, 2, 32768, ("ref",))
    o = Roles(rollout_memory=0.7).resolved("openrlhf")  # --vllm.gpu_memory_utilization 0.95, no sleep by default
    assert (o.rollout_memory, o.sleep_level, o.offload) == (0.7, 0, ())


def test_role_runs_refuse_trls_inputs_and_need_a_role_framework():
    with pytest.raises(ValueError, match="--generation is TRL's"):
        Workload(kind="ppo", generation="vllm-colocate")
    with pytest.raises(ValueError, match="--placement and the role flags are for RL runs"):
        Workload(kind="dpo", roles={"rollout_tp": 2})
    with pytest.raises(ValueError, match="give --framework llamafactory or swift or verl or openrlhf"):
        Knobs(workload=Workload(kind="ppo"))
    assert Workload(kind="ppo", num_generations=1).num_generations == 1  # verl's PPO samples one response
    # TRL's GRPO compares 2 or more; verl's runs one (a group of one: its raw score, v0.7.0 core_algos.py:312-314)
    with pytest.raises(ValueError, match="GRPO compares 2 or more"):
        Knobs(workload=Workload(kind="grpo", num_generations=1))
    with pytest.raises(ValueError, match="GRPO compares 2 or more"):
        Knobs(workload=Workload(kind="grpo", num_generations=1), framework="openrlhf", zero_stage=2)
    assert Knobs(workload=Workload(kind="grpo", num_generations=1), framework="verl", fsdp="full").role_run


def test_only_verl_and_openrlhf_plan_grpo_by_its_roles():
    w = Workload(kind="grpo", beta=0.04)
    assert not Knobs(workload=w).role_run
    assert Knobs(workload=w, framework="verl", fsdp="full").role_run


def test_an_actor_group_of_its_own_is_the_data_parallel_size():
    w = Workload(kind="grpo", beta=0.04, roles={"placement": "actor+ref:4,rollout:4"})
    assert Knobs(workload=w, framework="openrlhf", zero_stage=3).data_parallel_of(8) == 4
    assert Knobs(workload=Workload(kind="grpo"), framework="verl", fsdp="full").data_parallel_of(8) == 8
