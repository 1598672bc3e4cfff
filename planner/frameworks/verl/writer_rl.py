"""An RL plan as verl 0.9.1 runs it: `verl_ppo.sh`, `python3 -m verl.trainer.main_ppo` with one Hydra override a
line over its config ppo_trainer.yaml (the hybrid engine: actor, rollout, reference and critic on one GPU pool).

Keys and defaults read from the 0.9.1 wheel (paths under verl/): trainer/config/ppo_trainer.yaml:78 (adv_estimator),
:168,171 (trainer.nnodes, n_gpus_per_node); data/legacy_data.yaml:35,39,42 (max_prompt_length, max_response_length,
train_batch_size in prompts); actor/actor.yaml:18,24,28,33,93,103,113,119 (ppo_mini_batch_size in prompts,
ppo_micro_batch_size_per_gpu in samples, use_dynamic_bsz, ppo_max_token_len_per_gpu, entropy_coeff, use_kl_loss,
kl_loss_coef, ppo_epochs); actor/dp_actor.yaml:26,43 (strategy, entropy_checkpointing); engine/fsdp.yaml:12,16
(param_offload, optimizer_offload); rollout/rollout.yaml:5,46,52,61,64,106-117,127 (name, gpu_memory_utilization,
enforce_eager, free_cache_engine, tensor_model_parallel_size, log-prob micro-batches and budget, n); ref/ref.yaml:16,24;
critic/dp_critic.yaml:14 (the critic's engine under critic.fsdp), critic/critic.yaml:40; workers/config/critic.py:89
(ppo_infer_max_token_len_per_gpu, the budget the v1 trainer uses for the critic, trainer/ppo/v1/trainer_base.py:267-268,
set with +); reward/reward.yaml:29,37 (reward.reward_model.enable, model_path). trainer_base.py:1829-1830: the actor's
mini-batch is ppo_mini_batch_size x rollout.n samples, split over world / Ulysses ranks.
"""

from __future__ import annotations

from planner.config.spec import Hardware, Plan
from planner.frameworks import check_plan
from planner.model import catalog
from planner.model.modelspec import ModelSpec

VERSION = "verl 0.9.1"
SCRIPT_NAME = "verl_ppo.sh"
ENTRY = "verl.trainer.main_ppo"
ESTIMATOR = {"ppo": "gae", "grpo": "grpo", "rloo": "rloo", "reinforce++": "reinforce_plus_plus"}
ENTROPY_COEFF = 0.001  # an entropy term's coefficient when the plan computes one (verl's examples)

Override = tuple[str, object]


def files(plan: Plan, model: ModelSpec, hw: Hardware) -> dict[str, str]:
    return {SCRIPT_NAME: script(plan, model, hw)}


def command(plan: Plan, hw: Hardware) -> str:
    check(plan)
    return f"bash {SCRIPT_NAME}"


def check(plan: Plan) -> None:
    """ValueError for what verl's hybrid engine cannot run as planned (its rules: planner/frameworks/verl/__init__.py)."""
    check_plan("verl", plan)


def word(value: object) -> str:
    """A Hydra override's value as verl's examples write it (true/false, numbers without trailing zeros)."""
    if isinstance(value, bool):
        return str(value).lower()
    return f"{value:g}" if isinstance(value, float) else str(value)


def headline(plan: Plan, hw: Hardware) -> str:
    m = plan.memory
    return (
        f"# memplan plan for {VERSION} ({plan.workload.kind.upper()}): {m.device_total_bytes / 2**30:.1f} of "
        f"{m.capacity_bytes / 2**30:.1f} GiB per GPU at its peak ({m.peak_term.split(': ')[0]}, {m.peak_phase}), "
        f"{hw.gpu.name}"
    )


def script(plan: Plan, model: ModelSpec, hw: Hardware) -> str:
    check(plan)
    pairs = overrides(plan, model, hw)
    lines = [
        "#!/bin/bash",
        (
            f"# memplan plan for {VERSION} ({plan.workload.kind.upper()}): {plan.memory.device_total_bytes / 2**30:.1f} of "
            f"{plan.memory.capacity_bytes / 2**30:.1f} GiB per GPU at its peak ({plan.memory.peak_phase}), {hw.gpu.name}"
        ),
        "# model paths: the Hugging Face ids; give your local paths. data.train_files: your parquet of prompts",
        "python3 -m " + ENTRY + " \\",
    ]
    lines += [f"    {k}={word(v)}" + (" \\" if i < len(pairs) - 1 else "") for i, (k, v) in enumerate(pairs)]
    return "\n".join(lines) + "\n"


def overrides(plan: Plan, model: ModelSpec, hw: Hardware) -> list[Override]:
    w, r, a = plan.workload, plan.workload.roles, "actor_rollout_ref."
    n = w.num_generations
    spg = w.steps_per_gen(plan.grad_accum)
    out: list[Override] = [
        ("algorithm.adv_estimator", ESTIMATOR[w.kind]),
        ("data.train_files", "YOUR_TRAIN.parquet"),
        ("data.train_batch_size", plan.micro_batch * plan.data_parallel * spg // n),
        ("data.max_prompt_length", w.prompt_tokens()),
        ("data.max_response_length", w.max_completion_length),
        (a + "model.path", catalog.model_path(model)),
        (a + "model.enable_gradient_checkpointing", plan.checkpointing == "full"),
        (a + "model.use_remove_padding", r.resolved("verl").remove_padding),
        (a + "actor.strategy", "fsdp2"),
        (a + "actor.ppo_mini_batch_size", plan.global_batch // n),
        (a + "actor.ppo_epochs", w.num_iterations),
        (a + "actor.use_kl_loss", w.beta > 0),
        (a + "actor.kl_loss_coef", w.beta if w.beta > 0 else 0.001),
        (a + "actor.entropy_coeff", ENTROPY_COEFF if r.entropy != "off" else 0),
        (a + "actor.entropy_checkpointing", r.entropy == "checkpointed"),
        (a + "actor.fsdp_config.param_offload", "actor-params" in r.offload),
        (a + "actor.fsdp_config.optimizer_offload", "actor-optimizer" in r.offload),
        (a + "actor.fsdp_config.offload_policy", plan.offload != "none"),
        (a + "actor.fsdp_config.reshard_after_forward", plan.fsdp != "grad-op"),
    ]
    out += budget_overrides(plan) + rollout_overrides(plan) + critic_overrides(plan, model) + reward_overrides(plan)
    return out + [
        ("trainer.nnodes", hw.nodes),
        ("trainer.n_gpus_per_node", hw.gpus_per_node),
        ("trainer.logger", "[console]"),
    ]


def budget_overrides(plan: Plan) -> list[Override]:
    r, a = plan.workload.roles, "actor_rollout_ref."
    dynamic = bool(r.max_tokens_per_gpu or r.logprob_max_tokens_per_gpu)
    out: list[Override] = [(a + "actor.use_dynamic_bsz", dynamic)]
    if dynamic:  # micro-batches cut by tokens: verl reads no micro-batch size (workers/engine/utils.py:108-121)
        longest = plan.workload.seq_len()
        out.append((a + "actor.ppo_max_token_len_per_gpu", r.max_tokens_per_gpu or longest * plan.micro_batch))
        logprob = r.logprob_max_tokens_per_gpu or longest * plan.micro_batch
        return out + [
            (a + "rollout.log_prob_max_token_len_per_gpu", logprob),
            (a + "ref.log_prob_max_token_len_per_gpu", logprob),
        ]
    return out + [
        (a + "actor.ppo_micro_batch_size_per_gpu", plan.micro_batch),
        (a + "rollout.log_prob_micro_batch_size_per_gpu", plan.micro_batch),
        (a + "ref.log_prob_micro_batch_size_per_gpu", plan.micro_batch),
    ]


def rollout_overrides(plan: Plan) -> list[Override]:
    r, a = plan.workload.roles.resolved("verl"), "actor_rollout_ref.rollout."
    return [
        (a + "name", r.rollout_engine),
        (a + "n", plan.workload.num_generations),
        (a + "tensor_model_parallel_size", r.rollout_tp),
        (a + "gpu_memory_utilization", r.rollout_memory),
        (a + "free_cache_engine", r.sleep_level != 0),
        (a + "enforce_eager", r.rollout_eager),
    ]


def critic_overrides(plan: Plan, model: ModelSpec) -> list[Override]:
    if plan.workload.kind != "ppo":
        return []
    r = plan.workload.roles.resolved("verl")
    path = r.critic_model or catalog.hf_id(model.name) or model.name
    return [
        ("critic.model.path", catalog.hf_id(path) or path),
        *(
            []
            if r.max_tokens_per_gpu or r.logprob_max_tokens_per_gpu
            else [("critic.ppo_micro_batch_size_per_gpu", plan.micro_batch)]
        ),
        ("+critic.ppo_infer_max_token_len_per_gpu", r.critic_max_tokens_per_gpu),
        ("critic.model.enable_gradient_checkpointing", plan.checkpointing == "full"),
        ("critic.fsdp.param_offload", "critic-params" in r.offload),
        ("critic.fsdp.optimizer_offload", "critic-optimizer" in r.offload),
        ("critic.fsdp.offload_policy", plan.offload != "none"),
        ("critic.strategy", "fsdp2"),
    ]


def reward_overrides(plan: Plan) -> list[Override]:
    r = plan.workload.roles
    if not r.reward_model:
        return []
    share = [("reward.reward_model.rollout.gpu_memory_utilization", r.reward_memory)] if r.reward_memory else []
    return share + [
        ("reward.reward_model.enable", True),
        ("reward.reward_model.model_path", catalog.hf_id(r.reward_model) or r.reward_model),
    ]
