"""OpenRLHF's key table (planner.frameworks.keys): memplan field (or the role's own name where memplan has none) <->
`openrlhf.cli.train_ppo_ray`'s dotted flag at 0.11.2, its default cited at that release's cli/train_ppo_ray.py, and
the flat name 0.10.1 and before took (the 0.10.2 rename; "0.9" where 0.9.x named it otherwise). reader.py reads the
flat names through `renamed`, writer.py writes the dotted ones, the adapter's Release lines show the flat ones.
bucket_text: the zero_buckets text of the DeepSpeed defaults its "auto" sizes become."""

from planner.frameworks.keys import Key, Table

T = "cli/train_ppo_ray.py"
OLD = ("0.8", "0.9", "0.10")  # the flat-flag lines


def _flat(name: str, **other: str) -> dict[str, str]:
    """The flat name both flat lines took, or per line where `other` says."""
    return {line: name for line in OLD} | other


def _role_rows() -> tuple[Key, ...]:
    out = []
    for role in ("actor", "critic", "ref", "reward"):
        out.append(Key(f"{role}.num_nodes", f"{role}.num_nodes", 1, f"{T}:213", renames=_flat(f"{role}_num_nodes")))
        out.append(
            Key(
                f"{role}.num_gpus_per_node",
                f"{role}.num_gpus_per_node",
                8,
                f"{T}:214",
                renames=_flat(f"{role}_num_gpus_per_node"),
            )
        )
    return tuple(out)


KEYS = Table(
    # the one-trainer entry points' (cli/train_dpo.py, train_sft.py) own names of the policy and its checkpointing;
    # first, so that the PPO actor's rows below win a flat name both took (Table.renamed: the last row's)
    Key("policy_model", "model.model_name_or_path", renames=_flat("pretrain")),
    Key("policy_checkpointing", "model.gradient_checkpointing_enable", renames=_flat("gradient_checkpointing")),
    Key("dataset", "data.dataset", renames=_flat("dataset")),  # train_dpo / train_sft (v0.10.1 train_dpo.py)
    Key("prompt_data", "data.prompt_dataset", renames=_flat("prompt_data")),  # v0.10.1 train_ppo_ray.py:480
    Key("output_dir", "ckpt.output_dir", renames=_flat("save_path")),  # v0.10.1 train_ppo_ray.py:363
    Key("workload.kind", "algo.advantage.estimator", "gae", f"{T}:515", renames=_flat("advantage_estimator")),
    Key("workload.beta", "algo.kl.init_coef", 0.01, f"{T}:438", renames=_flat("init_kl_coef")),
    Key("kl_loss", "algo.kl.use_loss", renames=_flat("use_kl_loss")),
    Key("kl_estimator", "algo.kl.estimator", renames=_flat("kl_estimator")),
    Key("model", "actor.model_name_or_path", renames=_flat("pretrain")),
    Key("critic_model", "critic.model_name_or_path", renames=_flat("critic_pretrain")),
    Key("reward_model", "reward.model_name_or_path", renames=_flat("reward_pretrain")),
    Key("reward_url", "reward.remote_url", renames=_flat("remote_rm_url")),
    Key("colocate_all", "train.colocate_all", renames=_flat("colocate_all_models")),
    Key("colocate_actor_ref", "train.colocate_actor_ref", renames=_flat("colocate_actor_ref")),
    Key("colocate_critic_reward", "train.colocate_critic_reward", renames=_flat("colocate_critic_reward")),
    Key("ds_sleep", "ds.enable_sleep", renames=_flat("deepspeed_enable_sleep")),
    Key("vllm_sleep", "vllm.enable_sleep", renames=_flat("vllm_enable_sleep")),
    Key("zero_stage", "ds.zero_stage", 2, f"{T}:327", renames=_flat("zero_stage")),
    Key("offload", "ds.adam_offload", renames=_flat("adam_offload")),
    # <= 0.10's --bf16 (its DeepSpeed config's bf16.enabled: 0.11.2's bf16), --param_dtype by 0.9.10 and in 0.10
    Key("precision", "ds.param_dtype", renames={"0.8": "bf16", "0.9": "bf16", "0.10": "param_dtype"}),
    # sdpa, eager as named; through 0.8.9 the --flash_attn switch (v0.8.9 cli/train_ppo_ray.py:282, off: eager), from
    # 0.8.10 --attn_implementation (v0.8.10 :283-287, flash_attention_2 by default)
    Key(
        "attention",
        "ds.attn_implementation",
        to_value={"flash": "flash_attention_2"},
        renames={"0.8": "flash_attn", "0.9": "attn_implementation", "0.10": "attn_implementation"},
    ),
    Key("packing", "ds.packing_samples", renames=_flat("packing_samples")),
    Key("dynamic_batch", "train.dynamic_batch_enable", renames=_flat("use_dynamic_batch")),
    Key("checkpointing", "actor.gradient_checkpointing_enable", renames=_flat("gradient_checkpointing")),
    Key("micro_batch", "train.micro_batch_size", 1, f"{T}:412", renames=_flat("micro_train_batch_size")),
    Key("rollout_micro_batch", "rollout.micro_batch_size", 1, f"{T}:396", renames=_flat("micro_rollout_batch_size")),
    Key("global_batch", "train.batch_size", 128, f"{T}:413", renames=_flat("train_batch_size")),
    Key("rollout_batch", "rollout.batch_size", 1024, f"{T}:392", renames=_flat("rollout_batch_size")),
    Key(
        "workload.num_generations",
        "rollout.n_samples_per_prompt",
        1,
        f"{T}:433",
        renames=_flat("n_samples_per_prompt"),
    ),
    Key("workload.num_iterations", "train.max_epochs", 1, f"{T}:397", renames=_flat("max_epochs")),
    Key("seq_len", "data.max_len", 2048, f"{T}:398", renames=_flat("max_len")),
    Key("workload.max_completion_length", "rollout.max_new_tokens", renames=_flat("max_new_tokens")),
    Key("entropy", "actor.entropy_coef", renames=_flat("entropy_loss_coef")),
    Key("lora_rank", "ds.lora.rank", renames=_flat("lora_rank")),
    Key("lora_alpha", "ds.lora.alpha", renames=_flat("lora_alpha")),  # v0.10.1 train_ppo_ray.py:358
    Key("lora_targets", "ds.lora.target_modules", renames=_flat("target_modules")),  # nargs="*": reader_flags
    Key("max_tokens_per_gpu", "train.max_tokens_per_gpu", 16192, f"{T}:380", renames=_flat("train_max_tokens_per_gpu")),
    Key("logprob_max_tokens_per_gpu", "rollout.max_tokens_per_gpu", renames=_flat("rollout_max_tokens_per_gpu")),
    Key(
        "rollout_memory",
        "vllm.gpu_memory_utilization",
        0.95,
        f"{T}:252",
        renames=_flat("vllm_gpu_memory_utilization"),
    ),
    Key("rollout_tp", "vllm.tensor_parallel_size", 1, f"{T}:236", renames=_flat("vllm_tensor_parallel_size")),
    Key("engines", "vllm.num_engines", renames=_flat("vllm_num_engines")),
    Key("rollout_eager", "vllm.enforce_eager", renames=_flat("enforce_eager")),  # v0.9.0 :236, v0.10.1 :241
    # the flat lines' one switch offloads both (v0.10.1 cli/train_ppo_ray.py:476, trainer/ray/launcher.py:113-120 the
    # reference's and :167-175 the reward model's DeepSpeed eval config; v0.8.9 :414, launcher.py:113-120, :157-165)
    Key("ref_offload", "ref.offload", renames=_flat("ref_reward_offload")),
    Key("reward_offload", "reward.offload", renames=_flat("ref_reward_offload")),
    *_role_rows(),
    prefix="--",
)
# older flat names of the same flags, before the names above: --enable_sleep (vLLM's), --generate_max_len
ALIASES = {"enable_sleep": KEYS.key("vllm_sleep"), "generate_max_len": KEYS.key("workload.max_completion_length")}
# a flat name several dotted flags split from -> them all (the reader sets each; Table.renamed keeps the last row's)
SHARED = {"ref_reward_offload": (KEYS.key("ref_offload"), KEYS.key("reward_offload"))}


def bucket_text(stage: int, overlap: bool) -> str:
    """The zero_buckets knob's text (planner.config.zerobuckets, in its canonical order) of an OpenRLHF run at ZeRO
    `stage`: DeepSpeed's defaults (deepspeed 0.19.8 runtime/zero/config.py:113, :222, :228; v0.15.0 :106, :205, :211)
    for the sizes OpenRLHF's DeepSpeed config leaves "auto" (reader_flags.zero_buckets): reduce_bucket_size 5e8 at
    every stage, stage3_prefetch_bucket_size 5e7 and stage3_param_persistence_threshold 1e5 at stage 3; overlap_comm
    at stages 1 and 2 (ZeRO-3 keeps one reduce bucket whatever it says)."""
    if stage == 3:
        return "stage=3,reduce_bucket_size=500000000,stage3_prefetch_bucket_size=50000000,stage3_param_persistence_threshold=100000"
    return f"stage={stage},reduce_bucket_size=500000000,overlap_comm={str(overlap).lower()}"


BUCKETS = tuple(dict.fromkeys(bucket_text(stage, o) for stage in (1, 2, 3) for o in (False, True)))
