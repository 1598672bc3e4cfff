"""axolotl's key table (planner.frameworks.keys): memplan field <-> its config YAML's top-level key, with axolotl's
defaults cited in the 0.19.0 wheel (axolotl/utils/schemas/...). Both reader.py and writer.py use it; the sections
(bnb_config_kwargs, fsdp_config, trl, vllm) and what a value implies beyond one key stay code there."""

from planner.frameworks.keys import Key, Table

A = "axolotl/utils/schemas/"
ATTN = {"flash": "flash_attention_2", "sdpa": "sdpa", "eager": "eager"}  # config.py:845

KEYS = Table(
    Key("model", "base_model"),  # model.py:17
    Key("lora", "adapter", None, f"{A}peft.py:41"),  # lora | qlora; None: full fine-tuning
    Key("lora_rank", "lora_r"),  # peft.py:31-80, no default
    Key("lora_alpha", "lora_alpha"),
    Key("lora_dropout", "lora_dropout", 0.0, f"{A}peft.py:80"),
    Key("lora_targets", "lora_target_modules"),
    Key("lora_target_linear", "lora_target_linear"),
    Key("lora_target_parameters", "lora_target_parameters"),
    Key("lora_train_embeddings", "lora_modules_to_save"),  # peft.py:62
    Key("lora_variant", "peft_use_dora", to_value={"dora": True}),  # peft.py:89
    Key("quant_4bit", "load_in_4bit"),  # nf4 by default, loaders/model.py:806-824
    Key("quant_8bit", "load_in_8bit"),
    Key("quant_gptq", "gptq"),  # loaders/model.py:768
    Key("quant_kwargs", "bnb_config_kwargs"),  # peft.py:149
    Key("workload.kind", "rl"),  # enums.py:31-41
    Key("workload.precompute_ref_log_probs", "precompute_ref_log_probs"),  # config.py:317
    Key("micro_batch", "micro_batch_size", 1, f"{A}training.py:77"),
    Key("grad_accum", "gradient_accumulation_steps", 1, f"{A}training.py:71"),
    Key("eval_batch", "eval_batch_size"),  # core/builders/base.py:680-682
    Key("seq_len", "sequence_len", 512, f"{A}config.py:671"),
    Key("batching", "sample_packing", to_value={"packed": True}),  # config.py:694
    Key("optimizer", "optimizer", "adamw_torch_fused", f"{A}training.py:122"),
    Key("bf16", "bf16", "auto", f"{A}config.py:561"),
    Key("fp16", "fp16"),
    Key("bfloat16", "bfloat16"),  # half weights without autocast (config.py:561-598)
    Key("checkpointing", "gradient_checkpointing", False, f"{A}config.py:606"),
    Key("activation_offloading", "activation_offloading"),  # config.py:629
    Key("attention", "attn_implementation", to_value=ATTN),
    Key("loss_chunked", "chunked_cross_entropy"),  # config.py:997
    Key("loss_fused", "liger_fused_linear_cross_entropy"),  # integrations/liger/args.py:35-69
    Key("plugins", "plugins"),
    Key("zero_stage", "deepspeed"),  # config.py:1051
    Key("fsdp", "fsdp_config"),  # config.py:1068-1071
    Key("fsdp_version", "fsdp_version"),
    Key("context_parallel", "context_parallel_size"),
    Key("tensor_parallel", "tensor_parallel_size"),
    Key("frozen", "freeze_mm_modules"),  # config.py:649
    # reward modelling: a one-label score head over chosen and rejected rows (reader_task.py; v0.18.0 config.py:282)
    Key("task", "reward_model", to_value={"seq-cls": True}),
    Key("num_labels", "num_labels"),  # v0.18.0 config.py:305, loaders/utils.py:178-180
)

# axolotl's own optimizer names memplan plans (0.19.0 utils/schemas/enums.py:86-105 CustomSupportedOptimizers, built
# in core/builders/base.py:374-378) -> memplan's optimizer; transformers' names go through planner.intake.vocab
OWN_OPTIMIZERS = {"adopt_adamw": "adopt"}
OWN_OPTIMS = {ours: name for name, ours in OWN_OPTIMIZERS.items()}
