"""transformers' TrainingArguments and TRL's config key table (planner.frameworks.keys): memplan field <-> the key a
training script takes as `--key` and a TRL / HF config file as `key:`, with the defaults cited at transformers 5.23
(transformers/training_args.py) and TRL 1.16 (trl/trainer/...). hf/reader.py and the TRL readers look keys and
defaults up here; the HF material (planner/export/export.py: hf_args, trl_args; planner/export/commands.py: script_args) names keys and maps values
through it. A release's other defaults stay in its Release line (hf/__init__.py, trl/__init__.py); what a value
implies beyond one key (bf16-pure as a load dtype, an FSDP plan's own checkpointing) stays code."""

from planner.frameworks.keys import Key, Table

ARGS = "transformers/training_args.py"
BASE = "trl/trainer/base_config.py"
HF_OPTIM = {  # memplan's optimizer -> TrainingArguments.optim (transformers' OptimizerNames)
    "adamw": "adamw_torch",
    "adamw-fused": "adamw_torch_fused",
    "sgd": "sgd",
    "adafactor": "adafactor",
    "adamw-8bit": "adamw_bnb_8bit",
    "paged-adamw": "paged_adamw_32bit",
    "paged-adamw-8bit": "paged_adamw_8bit",
    "galore-adamw": "galore_adamw",  # transformers 5.25 training_args.py:144-157
    # GaLoreAdamW8bit: 5.25 training_args.py:145, trainer_optimizer.py:362 (and :365 its _layerwise); 4.53.0
    # training_args.py:176, trainer.py:1569
    "galore-adamw-8bit": "galore_adamw_8bit",
    "apollo-adamw": "apollo_adamw",
    "adamw-torchao-4bit": "adamw_torch_4bit",  # 5.25 training_args.py:124-125
    "adamw-torchao-8bit": "adamw_torch_8bit",
    "lion": "lion_32bit",  # 5.25 training_args.py:132-143
    "lion-8bit": "lion_8bit",
    "paged-lion": "paged_lion_32bit",
    "paged-lion-8bit": "paged_lion_8bit",
    "rmsprop": "rmsprop",
    "rmsprop-bnb": "rmsprop_bnb",
    "rmsprop-bnb-8bit": "rmsprop_bnb_8bit",
    "adagrad": "adagrad",
}
HF_FSDP = {"full": "full_shard auto_wrap", "grad-op": "shard_grad_op auto_wrap", "hybrid": "hybrid_shard auto_wrap"}
HF_ATTENTION = {"flash": "flash_attention_2", "eager": "eager"}

KEYS = Table(
    Key("model", "model_name_or_path"),
    Key("micro_batch", "per_device_train_batch_size", 8, f"{ARGS}:777"),
    Key("grad_accum", "gradient_accumulation_steps", 1, f"{ARGS}:849"),
    Key("eval_batch", "per_device_eval_batch_size", 8, f"{ARGS}:1128"),
    Key("eval_logits_steps", "eval_accumulation_steps"),
    Key("checkpointing", "gradient_checkpointing", False, f"{ARGS}:926"),  # TRL's configs: True (base_config.py:62)
    Key("optimizer", "optim", "adamw_torch_fused", f"{ARGS}:806-812", to_value=HF_OPTIM),
    Key("optimizer_targets", "optim_target_modules"),  # GaLore's and APOLLO's linears (training_args.py:845)
    Key("optimizer_rank", "optim_args"),  # "rank=N" (trainer_optimizer.py:369-375: 128 by default)
    Key("loss", "use_liger_kernel", to_value={"chunked": True, "fused": True}),  # Liger's fused linear CE
    Key("attention", "attn_implementation", to_value=HF_ATTENTION),  # TRL's ModelConfig; model_init_kwargs in a config
    Key("packing", "packing"),  # TRL's SFTConfig
    Key("padding_free", "padding_free"),
    Key("bf16", "bf16"),
    Key("fp16", "fp16"),
    # TRL 1.16 ModelConfig.dtype (trl/trainer/model_config.py:89): the load dtype (bf16-pure: bfloat16 without
    # autocast); older TRL named it torch_dtype, which hf/reader.py reads too
    Key("dtype", "dtype"),
    Key("zero_stage", "deepspeed"),  # the DeepSpeed JSON's path
    Key("fsdp", "fsdp", to_value=HF_FSDP),
    Key("fsdp_config", "fsdp_config"),
    Key("lora", "use_peft"),  # TRL's ModelConfig (trl/trainer/model_config.py)
    Key("lora_rank", "lora_r"),
    Key("lora_alpha", "lora_alpha"),
    Key("lora_targets", "lora_target_modules"),
    Key("lora_dropout", "lora_dropout"),
    Key("lora_train_embeddings", "lora_modules_to_save"),
    Key("lora_variant", "use_dora", to_value={"dora": True}),  # trl/trainer/model_config.py:142
    Key("workload.num_generations", "num_generations"),  # GRPOConfig
    Key("workload.max_completion_length", "max_completion_length"),
    Key("workload.beta", "beta"),
    Key("workload.steps_per_generation", "steps_per_generation"),
    Key("workload.num_iterations", "num_iterations"),
    Key("use_vllm", "use_vllm"),
    Key("workload.generation", "vllm_mode", "colocate", "trl/trainer/grpo_config.py:594"),
    Key("workload.vllm_gpu_memory_utilization", "vllm_gpu_memory_utilization"),
    Key("workload.roles.rollout_tp", "vllm_tensor_parallel_size"),
    Key("workload.max_length", "max_length"),  # DPOConfig, GKDConfig
    Key("workload.precompute_ref_log_probs", "precompute_ref_log_probs"),
    prefix="--",
)
