"""ms-swift's key table (planner.frameworks.keys): memplan field <-> `swift sft|rlhf` flag, swift's defaults cited in
the 4.6.0 wheel (swift/...), and the flags' names at older release lines: v3's --train_type for v4's --tuner_type
(v3.12.0 swift/llm/argument/base_args/base_args.py:98; v4.0.0 swift/arguments/base_args/base_args.py:72) and 2.x's
names (v2.5.2 swift/llm/utils/argument.py SftArguments, cited per row). Both reader.py and writer.py use it."""

from planner.frameworks.keys import Key, Table

S = "swift/arguments/"
V3 = ("3", "3.4", "3.7", "3.9")  # the 3.x lines, which name the tuner --train_type
# the lines taking --train_type: 3.x's name and 4.0.x's deprecated alias for --tuner_type (v4.0.0
# swift/arguments/base_args/base_args.py:73, 151-153), gone at v4.1.0 (fe928a9f1), whose parser leaves it over and
# refuses it (v4.1.0 swift/pipelines/base.py:35-40: ValueError remaining_argv; the 4.6.0 wheel's SftArguments has no
# train_type): the 4 line (4.0.0 .. 4.6.0) is allowed for its 4.0.x releases
TRAIN_TYPE_LINES = (*V3, "4")
ATTN_IMPL = {"flash": "flash_attn", "sdpa": "sdpa", "eager": "eager"}  # base_args/model_args.py:75-79
DTYPE = {"bf16": "bfloat16", "bf16-pure": "bfloat16", "fp16": "float16", "fp32": "float32"}  # model_args.py:74

T = "swift/arguments/tuner_args.py"
# --tuner_type adalora | vera (memplan's --lora-variant) -> its rank flag, its default, cite (reader_tuners, writer);
# VeRA's dropout flag (AdaLoRA takes --lora_dropout: swift/pipelines/train/tuner.py:184, 258-260); the same names and
# defaults under 3.x's --train_type (v3.12.6 swift/llm/argument/tuner_args.py:186, 214; its allocator callback
# swift/llm/train/callback.py:26)
# --tuner_type adapter's length and activation (4.6.0 tuner_args.py:171-172; v3.12.6 :192-193); --tuner_type boft's
# block size (4.6.0 tuner_args.py:159-162, PEFT's BOFTConfig at swift/pipelines/train/tuner.py:307-316)
TUNER_RANK = {
    "boft": ("boft_block_size", 4, f"{T}:159"),
    "adalora": ("adalora_init_r", 12, f"{T}:176"),
    "vera": ("vera_rank", 256, f"{T}:165"),
    "adapter": ("adapter_length", 128, f"{T}:172"),
}
ADAPTER_ACT = ("adapter_act", "gelu", f"{T}:171")
VERA_DROPOUT = ("vera_dropout", 0.0, f"{T}:167")

KEYS = Table(
    Key("model", "model", renames={"2": "model_id_or_path"}),  # v2.5.2 argument.py:612
    # v2.5.2 argument.py:617 sft_type (lora by default, as 4.x); 3.x train_type, kept by 4.0.x as an alias (:73)
    Key(
        "lora",
        "tuner_type",
        "lora",
        f"{S}base_args/base_args.py:121",
        renames={"2": "sft_type", **dict.fromkeys(V3, "train_type")},
    ),
    Key("lora_rank", "lora_rank", 8, f"{S}tuner_args.py:133"),
    # freeze tuning (reader_freeze.py): every parameter frozen, the last layers' prefixes trainable (tuner_args.py:116-120)
    Key("freeze_ratio", "freeze_parameters_ratio"),
    Key("trained_layers", "trainable_parameters"),
    # LLaMA-Pro (--tuner_type llamapro; reader_freeze.read_llamapro): its new blocks and their groups, the same names
    # at every line (v2.5.2 argument.py:760-761; v3.0.0 swift/llm/argument/tuner_args.py:183-184; tuner_args.py:185-186)
    Key("llamapro_blocks", "llamapro_num_new_blocks", 4, f"{S}tuner_args.py:185"),
    Key("llamapro_groups", "llamapro_num_groups"),  # tuner_args.py:186: None, the blocks' count
    Key("lora_alpha", "lora_alpha"),  # tuner_args.py:134
    # v2.5.2 argument.py:896, 2.x's older name of target_modules (:689)
    Key("lora_targets", "target_modules", "all-linear", f"{S}tuner_args.py:126", renames={"2": "lora_target_modules"}),
    Key("lora_target_parameters", "target_parameters"),  # tuner_args.py:128
    # v2.5.2 argument.py:895, 2.x's older name of lora_dropout (:697)
    Key("lora_dropout", "lora_dropout", 0.05, f"{S}tuner_args.py:135", renames={"2": "lora_dropout_p"}),
    Key("lora_variant", "use_dora", to_value={"dora": True}),  # tuner_args.py:140
    Key("lora_train_embeddings", "modules_to_save"),  # tuner_args.py:130
    Key("frozen_vision", "freeze_vit", True, f"{S}tuner_args.py:123"),
    Key("frozen_projector", "freeze_aligner", True, f"{S}tuner_args.py:124"),
    Key("frozen_language", "freeze_llm", False, f"{S}tuner_args.py:122"),
    Key("quant_method", "quant_method"),  # base_args/quant_args.py:33
    Key("quant", "quant_bits"),  # quant_args.py:36
    Key("quant_type", "bnb_4bit_quant_type", "nf4", f"{S}base_args/quant_args.py:40"),
    Key("quant_absmax", "bnb_4bit_use_double_quant"),  # quant_args.py:42: True
    Key("quant_storage", "bnb_4bit_quant_storage"),  # quant_args.py:43
    Key("task", "task_type"),  # base_args/model_args.py:72
    Key("num_labels", "num_labels"),  # model_args.py:83
    Key("workload.kind", "rlhf_type", "dpo", f"{S}rlhf_args.py:233"),
    # v2.5.2 argument.py:787 batch_size
    Key(
        "micro_batch", "per_device_train_batch_size", 1, "swift/trainers/arguments.py:130", renames={"2": "batch_size"}
    ),
    Key("grad_accum", "gradient_accumulation_steps"),  # trainers/arguments.py:289-292: a total batch of 16
    Key("eval_batch", "per_device_eval_batch_size"),
    Key("checkpointing", "gradient_checkpointing", True, "swift/trainers/arguments.py:135"),
    Key("vit_checkpointing", "vit_gradient_checkpointing"),  # None follows --gradient_checkpointing (:297-298)
    Key("seq_len", "max_length"),
    # v2.5.2 argument.py:838 use_flash_attn (model.py:1461-1465: True flash_attention_2, False eager)
    Key("attention", "attn_impl", to_value=ATTN_IMPL, renames={"2": "use_flash_attn"}),
    # v2.5.2 argument.py:637 dtype (AUTO: the config's, as 4.x's default)
    Key("precision", "torch_dtype", cite=f"{S}base_args/model_args.py:120-125", to_value=DTYPE, renames={"2": "dtype"}),
    Key("bf16", "bf16"),
    Key("fp16", "fp16"),
    Key("packing", "packing"),  # base_args/base_args.py:133-136
    Key("padding_free", "padding_free"),
    # trainers/arguments.py:155; 2.x's use_liger from v2.4.0 (v2.5.2 argument.py:781), checked by reader_2.liger
    Key("loss", "use_liger_kernel", to_value={"fused": True}, renames={"2": "use_liger"}),
    Key("optimizer", "optim", "adamw_torch_fused", "transformers 5.19 training_args.py:804-811"),
    Key("zero_stage", "deepspeed"),  # sft_args.py:252-283
    Key("fsdp", "fsdp"),  # sft_args.py:285-360
    Key("sequence_parallel", "sequence_parallel_size"),  # base_args/template_args.py:141
    Key("tensor_parallel", "deepspeed_autotp_size"),  # sft_args.py:158-160
    Key("workload.num_generations", "num_generations", 8, f"{S}rlhf_args.py:164"),
    Key("workload.max_completion_length", "max_completion_length", 512, f"{S}rlhf_args.py:242"),
    Key("workload.num_iterations", "num_iterations"),  # rlhf_args.py:170: 1
    Key("workload.beta", "beta", 0.04, f"{S}rlhf_args.py:356-357"),
    Key("workload.use_vllm", "use_vllm"),  # rlhf_trainers/args_mixin.py:169
    Key("workload.generation", "vllm_mode"),  # args_mixin.py:170
    Key(
        "workload.vllm_gpu_memory_utilization",
        "vllm_gpu_memory_utilization",
        0.9,
        "swift/rlhf_trainers/args_mixin.py:37",
    ),
    Key("workload.roles.rollout_tp", "vllm_tensor_parallel_size"),
    Key("workload.roles.sleep_level", "sleep_level"),
    Key("workload.steps_per_generation", "steps_per_generation"),
    Key("workload.roles.move_model_batches", "move_model_batches"),
    Key("workload.teacher_model", "teacher_model"),  # rlhf_args.py:71
    Key("workload.lmbda", "lmbda", 0.5, f"{S}rlhf_args.py:263"),
    Key("workload.jsd_beta", "beta", 0.5, f"{S}rlhf_args.py:516-518"),  # gkd's --beta
    Key("workload.chord_sft_batch", "chord_sft_per_device_train_batch_size"),  # rlhf_trainers/args_mixin.py:388
    prefix="--",
)
