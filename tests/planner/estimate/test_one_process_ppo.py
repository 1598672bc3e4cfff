"""PPO with every role in every process and the actor's own HF generate (rollout engine hf, placement colocate:
planner.config.roles): OpenRLHF's pre-Ray train_ppo and LLaMA-Factory's stage ppo, read from the field corpus's
files. What each process keeps resident is pinned to the parameter counts of transformers 5.25's meta-device build of
the same configs (a causal LM for the actor and reference, a one-label sequence classifier for the critic and reward
model: OpenRLHF's value head is Linear(hidden, 1, bias=False), v0.5.7 models/model.py), in bf16 bytes, exactly."""

from pathlib import Path

import pytest

from planner import checkconfig, intake
from planner.config.roles import Roles, check_groups
from planner.config.spec import GIB
from planner.errors import BadInput
from planner.estimate import roles, state_terms, zero
from planner.estimate.setup import Setup
from planner.model import catalog

FIELD = Path(__file__).parents[2] / "field"
OLD_PPO = FIELD / "openrlhf-858-llama3-8b-ppo-z2-4xa40" / "train_ppo_llama.sh"
LF_PPO = FIELD / "lf-5273-qwen2-72b-lora-ppo-z3-8xa800" / "train.yaml"


def built_params(name: str, head: str) -> int:
    """Parameters of transformers' build of catalog model `name` on the meta device (`head`: CausalLM or
    SequenceClassification with one label)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    cfg = {k: v for k, v in catalog.model_config(name).items() if v is not None}
    conf = transformers.AutoConfig.for_model(cfg.pop("model_type"), **cfg, num_labels=1)
    cls = getattr(transformers, f"AutoModelFor{head}")
    with torch.device("meta"):
        return sum(p.numel() for p in cls.from_config(conf).parameters())


def planned(path: Path, **flags):
    return checkconfig.check_config([str(path)], {"gpu": "a40", **flags}).plan


def setup_of(plan, model: str, gpus: int) -> Setup:
    k = plan.knobs
    return Setup(catalog.load_model(model), k, plan.micro_batch, plan.grad_accum, k.workload.seq_len(), gpus)


def test_openrlhfs_pre_ray_ppo_is_every_role_colocated_with_hf_generate():
    reading = intake.read([str(OLD_PPO)])
    v = {s.field: s.value for s in reading.settings}
    assert (v["workload.kind"], v["workload.roles.placement"], v["workload.roles.rollout_engine"]) == (
        "ppo",
        "colocate",
        "hf",
    )
    # --micro_rollout_batch_size 1 generates one row at a time; the reward and critic (Llama-3-8b-rm-mixture, not
    # offline) planned with the actor's shapes; ZeRO-2 with Adam on the host
    assert (v["workload.roles.generate_batch"], v["workload.roles.reward_model"], v["workload.roles.critic_model"]) == (
        1,
        "actor",
        "actor",
    )
    assert (v["zero_stage"], v["offload"], v["checkpointing"], v["workload.beta"]) == (2, "optimizer", "full", 0.01)


def test_the_launchers_gpus_given_as_a_flag_derive_the_accumulation_again():
    # --train_batch_size 4 / (micro 1 x 4 GPUs): 1, not the 4 a lone process would take
    plan = planned(OLD_PPO, model="llama-3.1-8b", gpus_per_node=4)
    assert (plan.data_parallel, plan.micro_batch, plan.grad_accum) == (4, 1, 1)


def test_each_process_holds_all_four_llama_3_8b_models_in_bf16_as_transformers_builds_them():
    causal, scorer = built_params("llama-3.1-8b", "CausalLM"), built_params("llama-3.1-8b", "SequenceClassification")
    plan = planned(OLD_PPO, model="llama-3.1-8b", gpus_per_node=4)
    s = setup_of(plan, "llama-3.1-8b", 4)
    rollout = roles.group_phases(s, 48 * GIB)["colocated (4 GPUs)"]["rollout"]
    # ZeRO-2 keeps whole bf16 weights; --adam_offload keeps the fp32 master and moments on the host, and a bf16 buffer
    # of the largest parameter (the embedding, in the actor and in the critic) on the GPU to stage gradients through
    assert state_terms.optimizer_bytes(s) == 0
    staging = 2 * s.model.text.vocab * s.model.text.hidden
    assert zero.offload_staging_bytes(s) == staging
    assert rollout["actor_resident_bytes"] == 2 * causal + staging
    assert rollout["ref_resident_bytes"] == 2 * causal  # the initial model: ZeRO stage 0 unless training with 3
    assert rollout["critic_resident_bytes"] == 2 * scorer + staging
    assert rollout["reward_resident_bytes"] == 2 * scorer
    resident = sum(v for k, v in rollout.items() if k.endswith("_resident_bytes"))
    assert resident / GIB == pytest.approx(59.8, abs=0.05)  # more than an A40's 44.99 GiB before any activation
    assert plan.memory.device_total_bytes > plan.memory.capacity_bytes


def test_hf_rollout_is_the_kv_cache_of_the_generate_batch_and_no_engine():
    plan = planned(OLD_PPO, model="llama-3.1-8b", gpus_per_node=4)
    s = setup_of(plan, "llama-3.1-8b", 4)
    t = s.model.text
    phases = roles.group_phases(s, 48 * GIB)["colocated (4 GPUs)"]
    assert "weight-sync" not in phases and "rollout_asleep_bytes" not in phases["actor-update"]
    # one row of 1,024 + 1,024 tokens: keys and values of 8 heads of 128 in each of 32 layers, bf16
    assert phases["rollout"]["kv_cache_bytes"] == t.layers * 2 * 8 * 128 * 2048 * 1 * 2
    assert phases["rollout"]["generation_weights_bytes"] == 0  # ZeRO-2: whole weights already


def test_llama_factorys_lora_ppo_gathers_the_whole_72b_policy_to_generate():
    causal = built_params("qwen2.5-72b", "CausalLM")
    plan = planned(LF_PPO, model="qwen2.5-72b", gpus_per_node=8, gpu="a800-80gb-pcie")
    s = setup_of(plan, "qwen2.5-72b", 8)
    phases = roles.group_phases(s, 80 * GIB)["colocated (8 GPUs)"]
    # LoRA: no reference (the adapter disabled), the critic a value head on the policy, an api reward: one model
    assert set(phases) == {"rollout", "old-logps", "actor-update"}
    # GatheredParameters(model.parameters()): the base weights and the rank-8 adapters on every linear of the 80
    # layers, r x (in + out) each: q and o 8192 -> 8192, k and v 8192 -> 1024, gate, up and down 8192 <-> 29568
    adapters = 80 * 8 * (2 * (8192 + 8192) + 2 * (8192 + 1024) + 3 * (8192 + 29568))
    assert phases["rollout"]["generation_weights_bytes"] == 2 * (causal + adapters)
    assert plan.memory.peak_phase == "rollout" and plan.memory.device_total_bytes > 80 * GIB


def test_hf_generate_runs_in_the_actors_processes_so_it_needs_colocate():
    r = Roles(rollout_engine="hf", placement="actor+ref:4,critic+reward:4")
    with pytest.raises(BadInput, match="--placement colocate"):
        check_groups("ppo", r, 0.01, 8)


@pytest.mark.parametrize(
    ("reward", "planned_reward"),
    [("api", None), ("lora", None), ("full", "qwen2.5-1.5b")],  # a server; an adapter on the policy; its own model
)
def test_llama_factorys_reward_model_type_decides_whether_a_reward_model_is_resident(tmp_path, reward, planned_reward):
    path = tmp_path / "ppo.yaml"
    path.write_text(
        "model_name_or_path: Qwen/Qwen2.5-1.5B-Instruct\nstage: ppo\nfinetuning_type: lora\ncutoff_len: 1024\n"
        f"reward_model: {'http://rm' if reward == 'api' else 'Qwen/Qwen2.5-1.5B-Instruct'}\nreward_model_type: {reward}\n"
    )
    plan = checkconfig.check_config([str(path)], {"gpu": "a100-80gb"}).plan
    r = plan.knobs.workload.roles
    assert (plan.knobs.workload.kind, r.rollout_engine, r.reward_model) == ("ppo", "hf", planned_reward)
    # cutoff_len cuts the prompt; max_new_tokens (default 1024) follows it
    assert plan.knobs.workload.seq_len() == 1024 + 1024
    phases = {p.split(": ")[1] for p in plan.memory.phases}
    assert ("reward-scoring" in phases) == (reward == "full") and "critic-update" not in phases


SWIFT_PPO = (
    "NPROC_PER_NODE=2 swift rlhf --rlhf_type ppo --model Qwen/Qwen2.5-1.5B-Instruct --reward_model "
    "Qwen/Qwen2.5-1.5B-Instruct --tuner_type lora --per_device_train_batch_size 1 --gradient_accumulation_steps 4 "
    "--max_length 1024 --max_completion_length 512 --deepspeed zero2\n"
)


def test_swifts_ppo_holds_a_value_and_reward_model_of_its_reward_checkpoint_and_keeps_the_scores(tmp_path):
    scorer = built_params("qwen2.5-1.5b", "SequenceClassification")
    script = tmp_path / "ppo.sh"
    script.write_text(SWIFT_PPO)
    plan = checkconfig.check_config([str(script)], {"gpu": "a100-80gb"}).plan
    r = plan.knobs.workload.roles
    assert (r.rollout_engine, r.placement, r.reward_model, r.critic_model, r.generate_batch) == (
        "hf",
        "colocate",
        "qwen2.5-1.5b",
        "qwen2.5-1.5b",
        64,  # local_rollout_forward_batch_size's default (rlhf_args.py:124)
    )
    rollout = roles.group_phases(setup_of(plan, "qwen2.5-1.5b", 2), 80 * GIB)["colocated (2 GPUs)"]["rollout"]
    assert rollout["reward_resident_bytes"] == 2 * scorer  # frozen, whole under ZeRO-2
    # the value model: the same checkpoint in bf16 with the run's LoRA adapters and their AdamW states
    assert rollout["critic_resident_bytes"] > 2 * scorer and "ref_resident_bytes" not in rollout  # LoRA: no reference
    # every step's fp32 scores for micro 1 x accumulation 4 rows, 512 steps of Qwen2.5's 151,936-token vocabulary:
    # the chunks, their padded copy, and the previous step's copy still bound (planner.estimate.trl_ppo)
    assert rollout["generation_scores_bytes"] == 3 * 4 * (1 * 4) * 512 * 151936


@pytest.mark.parametrize(
    ("micro", "mini", "accum", "mini_batches", "note"),
    [
        (1, "2", 2, 2, None),
        (1, "4", 1, 4, None),
        (1, "3", 4, 1, "TRL refuses it"),
        (2, "8", 4, 1, "not whole micro-batches"),  # 8 rows: mini-batches of 1 row, micro-batches of 2
    ],
)
def test_swifts_num_mini_batches_splits_the_ranks_batch_as_trl_does(tmp_path, micro, mini, accum, mini_batches, note):
    """--num_mini_batches N divides the rank's micro x accumulation 4 rows (trl ppo_trainer.py:461-463): N
    mini-batches of 4 / N micro-steps, not N x 4 micro-steps; the generation still samples the rank's 4 rows and
    keeps their scores (the same bytes as without it). A split TRL refuses, or one that is not whole micro-batches, is
    said and planned as one mini-batch (every micro-step's tensors alive into the next: the hungrier)."""
    script = tmp_path / "ppo.sh"
    text = SWIFT_PPO.replace("--deepspeed", f"--num_mini_batches {mini} --deepspeed")
    script.write_text(text.replace("--per_device_train_batch_size 1", f"--per_device_train_batch_size {micro}"))
    reading = intake.read([str(script)])
    v = {s.field: s.value for s in reading.settings}
    assert (v["grad_accum"], v["workload.roles.mini_batches"]) == (accum, mini_batches)
    assert (
        any(note in u for u in reading.unplanned) if note else not any("mini-batches" in u for u in reading.unplanned)
    )
    plan = checkconfig.check_config([str(script)], {"gpu": "a100-80gb"}).plan
    rollout = roles.group_phases(setup_of(plan, "qwen2.5-1.5b", 2), 80 * GIB)["colocated (2 GPUs)"]["rollout"]
    assert rollout["generation_scores_bytes"] == 3 * 4 * (micro * 4) * 512 * 151936
