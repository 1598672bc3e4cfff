"""verl's key table for its RL runs (planner.frameworks.keys): memplan field (or the role's own name where memplan has
none) <-> `verl.trainer.main_ppo`'s Hydra key over ppo_trainer.yaml, with verl 0.9.1's default and where it is set
(paths under verl/trainer/config/ unless said). reader.py reads the keys through it, writer_rl.py writes them; the
SFT trainer's keys (writer.py, sft_trainer_engine.yaml) have no reader and stay there."""

from planner.frameworks.keys import Key, Table

A = "actor_rollout_ref."  # the actor, rollout and reference worker's section


def short(key: str) -> str:
    """A key as the reading names it: without the actor/rollout/ref section."""
    return key.removeprefix(A)


KEYS = Table(
    Key("workload.kind", "algorithm.adv_estimator", "gae", "ppo_trainer.yaml:78"),
    Key("rollout_batch", "data.train_batch_size", 1024, "data/legacy_data.yaml:42"),
    Key("workload.max_prompt_length", "data.max_prompt_length", 512, "data/legacy_data.yaml:35"),
    Key("workload.max_completion_length", "data.max_response_length", 512, "data/legacy_data.yaml:39"),
    Key("workload.num_generations", A + "rollout.n", 1, "rollout/rollout.yaml:127"),
    Key("mini_batch", A + "actor.ppo_mini_batch_size", 256, "actor/actor.yaml:18"),
    Key("workload.num_iterations", A + "actor.ppo_epochs", 1, "actor/actor.yaml:119"),
    Key("micro_batch", A + "actor.ppo_micro_batch_size_per_gpu"),
    # the deprecated global form, divided by the data-parallel groups (v0.7.0 workers/fsdp_workers.py:249-253)
    Key("global_micro_batch", A + "actor.ppo_micro_batch_size"),
    # the actor's Ulysses size (deprecated for fsdp_config's at 0.9.1, actor/dp_actor.yaml:32-34, still read: workers/
    #   config/actor.py:327-329), which the reference follows (ref/dp_ref.yaml:39); 0.9.1's engine form beside it
    Key("sequence_parallel", A + "actor.ulysses_sequence_parallel_size", 1, "actor/dp_actor.yaml:34"),
    Key("engine_sequence_parallel", A + "actor.fsdp_config.ulysses_sequence_parallel_size"),
    Key("ref_sequence_parallel", A + "ref.ulysses_sequence_parallel_size"),
    Key("critic_sequence_parallel", "critic.ulysses_sequence_parallel_size"),
    Key("dynamic_batch", A + "actor.use_dynamic_bsz", False, "actor/actor.yaml:28"),
    Key("max_tokens_per_gpu", A + "actor.ppo_max_token_len_per_gpu", 16384, "actor/actor.yaml:33"),
    Key("kl_loss", A + "actor.use_kl_loss", False, "actor/actor.yaml:103"),
    Key("kl_loss_coef", A + "actor.kl_loss_coef", 0.001, "actor/actor.yaml:113"),
    Key("entropy", A + "actor.entropy_coeff", 0, "actor/actor.yaml:93"),
    Key("entropy_checkpointing", A + "actor.entropy_checkpointing", False, "actor/dp_actor.yaml:43"),
    Key("calculate_entropy", A + "actor.calculate_entropy"),
    Key("strategy", A + "actor.strategy"),
    # what each role keeps on the host (workload.roles.offload; reader.py OFFLOADS reads every one back), at every line
    #   in _generated_ppo_trainer.yaml, actor param/optimizer/policy, ref param, critic param/optimizer/policy: v0.5.0
    #   :55-57, :69, :272-274; v0.6.0 :27-29, :144, :325-327; v0.6.1 :30-32, :148, :346-348; v0.7.0 :30-32, :167,
    #   :383-385; 0.9.1 :31-33, :239, :558-560 (critic.fsdp)
    Key("actor_param_offload", A + "actor.fsdp_config.param_offload"),
    Key("actor_optimizer_offload", A + "actor.fsdp_config.optimizer_offload"),
    Key("offload", A + "actor.fsdp_config.offload_policy"),
    # the reference's parameters sit on the host whatever its key says (the forward-only engine's CPUOffload /
    #   CPUOffloadPolicy: v0.6.1 workers/fsdp_workers.py:490-492,518, 0.9.1 workers/engine/fsdp/transformer_impl.py
    #   :432-433,459-462; ROLES.offloads), so the key carries the plan's "ref" both ways and moves no memory
    Key("ref_param_offload", A + "ref.fsdp_config.param_offload"),
    Key("fsdp", A + "actor.fsdp_config.reshard_after_forward"),
    Key("model", A + "model.path"),
    Key("checkpointing", A + "model.enable_gradient_checkpointing", True, "model/hf_model.yaml:34"),
    Key("remove_padding", A + "model.use_remove_padding", True, "model/hf_model.yaml:40"),
    Key("lora_rank", A + "model.lora_rank"),
    Key("workload.roles.fused_kernels", A + "model.use_fused_kernels", False, "model/hf_model.yaml:61"),
    Key("fused_backend", A + "model.fused_kernel_options.impl_backend", "torch", "model/hf_model.yaml:67"),
    Key("rollout_engine", A + "rollout.name", "vllm", "rollout/rollout.yaml:5 (required; vllm assumed)"),
    Key("rollout_memory", A + "rollout.gpu_memory_utilization", 0.5, "rollout/rollout.yaml:46"),
    Key("rollout_tp", A + "rollout.tensor_model_parallel_size", 2, "rollout/rollout.yaml:64"),
    Key("sleep_level", A + "rollout.free_cache_engine", True, "rollout/rollout.yaml:61"),
    Key("rollout_eager", A + "rollout.enforce_eager", False, "rollout/rollout.yaml:52"),
    # vLLM's images a prompt (no key in the YAML: written with "+"; None leaves the engine kwargs' limit_mm_per_prompt,
    #   workers/rollout/vllm_rollout/vllm_async_server.py:287-290); the same field at v0.6.0 workers/config/rollout.py:177
    Key("images", A + "rollout.limit_images", None, "workers/config/rollout.py:257"),
    Key("logprob_max_tokens_per_gpu", A + "rollout.log_prob_max_token_len_per_gpu"),
    Key("logprob_micro_batch", A + "rollout.log_prob_micro_batch_size_per_gpu"),
    Key("ref_logprob_max_tokens_per_gpu", A + "ref.log_prob_max_token_len_per_gpu"),
    Key("ref_logprob_micro_batch", A + "ref.log_prob_micro_batch_size_per_gpu"),
    # the deprecated global forms, divided by the data-parallel ranks (v0.7.0 workers/fsdp_workers.py:266-274)
    Key("logprob_global_micro_batch", A + "rollout.log_prob_micro_batch_size"),
    Key("ref_logprob_global_micro_batch", A + "ref.log_prob_micro_batch_size"),
    Key("kl_in_reward", "algorithm.use_kl_in_reward", False, "ppo_trainer.yaml:102"),
    Key("kl_coef", "algorithm.kl_ctrl.kl_coef", 0.001, "ppo_trainer.yaml:117"),
    Key(
        "critic_max_tokens_per_gpu",
        "critic.ppo_infer_max_token_len_per_gpu",
        32768,
        "workers/config/critic.py:89, the v1 trainer's critic budget",
    ),
    Key("critic_model", "critic.model.path"),
    Key("critic_micro_batch", "critic.ppo_micro_batch_size_per_gpu"),
    Key("critic_max_tokens", "critic.ppo_max_token_len_per_gpu"),
    Key("critic_dynamic_batch", "critic.use_dynamic_bsz"),
    Key("critic_checkpointing", "critic.model.enable_gradient_checkpointing"),
    # 0.6.x's critic engine sits under critic.model.fsdp_config (v0.6.1 trainer/config/critic/dp_critic.yaml:14
    #   `../engine@model.fsdp_config: fsdp`), 0.7's under critic.fsdp
    Key("critic_param_offload", "critic.fsdp.param_offload", renames={"0.6": "critic.model.fsdp_config.param_offload"}),
    Key(
        "critic_optimizer_offload",
        "critic.fsdp.optimizer_offload",
        renames={"0.6": "critic.model.fsdp_config.optimizer_offload"},
    ),
    Key("critic_offload", "critic.fsdp.offload_policy", renames={"0.6": "critic.model.fsdp_config.offload_policy"}),
    Key("critic_strategy", "critic.strategy"),
    Key("reward_enable", "reward.reward_model.enable"),
    Key("reward_model", "reward.reward_model.model_path"),
    Key("reward_memory", "reward.reward_model.rollout.gpu_memory_utilization"),
    Key("gpus_per_node", "trainer.n_gpus_per_node", 8, "ppo_trainer.yaml:171"),
    Key("nodes", "trainer.nnodes", 1, "ppo_trainer.yaml:168"),
)

# the main_ppo keys only some release lines take (Framework.key_spans["ppo"]: key -> (the first version taking it,
# the first no longer taking it)), which narrow the lines a run's files allow (planner.intake.releases). The critic's
# engine and the reward model moved after v0.7.0: v0.7.0 (and main at b178a3cd, 2026-01-29) keep the critic's engine
# under critic.model.fsdp_config (trainer/config/critic/dp_critic.yaml:14 `../engine@model.fsdp_config: fsdp`) and
# the reward model under reward_model.* (ppo_trainer.yaml:34 `reward_model@reward_model: dp_reward_loop`); the 0.9.1
# wheel has critic.fsdp (dp_critic.yaml:14 `../engine@fsdp: fsdp`) and reward.reward_model (ppo_trainer.yaml:37
# `reward@reward: reward`, reward/reward.yaml), reward_model.* kept as legacy keys (legacy_reward_impl.yaml). The
# first release taking the new names lies between them: (0, 7, 1), which meets the 0.7 line alone. The old critic
# names (renames["0.6"]) are taken from v0.2 (ppo_trainer.yaml critic.model.fsdp_config) through v0.7.0: every line.
AFTER_070 = (0, 7, 1)
NEW_AFTER_070 = ("critic_param_offload", "critic_optimizer_offload", "critic_offload", "reward_enable", "reward_model")
SPANS = {KEYS.key(name): (AFTER_070, None) for name in (*NEW_AFTER_070, "reward_memory")}
