"""LLaMA-Factory's key table (planner.frameworks.keys): memplan field <-> its training YAML's key, with LF's defaults
cited at v0.9.5 (src/llamafactory/hparams/...) and HF TrainingArguments' where LF leaves a key to them. Both
reader.py and writer.py use it; what a value implies beyond one key (checkpointing off/offload-inputs, neat packing,
pure_bf16) stays code there."""

from planner.frameworks.keys import Key, Table

H = "src/llamafactory/hparams/"
HF_ARGS = "transformers 5.6 training_args.py"
OLD = ("0.5", "0.6", "0.7", "0.7.1")  # the llmtuner release lines (planner.frameworks.llamafactory.RELEASES)
RES = ("0.8", "0.9.1")  # the lines whose pixel cap is image_resolution
FLASH_ATTN = {"sdpa": "sdpa", "flash": "fa2", "eager": "disabled"}  # model_args.py:117; attention.py:31-101
# flash_attn at the older lines, {line: {memplan attention: the value the line's YAML takes}}: the one table of both
# directions (the writer's Key.values; reader.py reads a value through OLD_FLASH_WORDS, this table inverted). A bool
# through v0.6.3: True is FlashAttention-2, False is eager (v0.5.3 src/llmtuner/hparams/model_args.py:56-59 default
# False, model/patcher.py:105-114 attn_implementation "eager" unless flash_attn; v0.6.3 model_args.py:64-67,
# patcher.py:64-76 _attn_implementation "eager"; the same at v0.5.2 and v0.6.0-v0.6.2), never transformers' own sdpa
# (v0.5.0 alone left False to transformers: patcher.py:261-262). off/sdpa/fa2/auto at v0.7.0 .. v0.8.2 (v0.7.0
# model_args.py:68, model/utils/attention.py:17-36 compare the strings and raise on any other value, a bool
# included), disabled for off from v0.8.3. The 0.8 line (v0.8.0 .. v0.9.0) has no one word for eager; v0.7.0 (the 0.7 line)
# takes no bool at all (the bools are the 0.6 line's, v0.6.0-v0.6.3).
OLD_FLASH_ATTN = {
    "0.5": {"flash": True, "eager": False},
    "0.6": {"flash": True, "eager": False},
    "0.7": {"flash": "fa2", "sdpa": "sdpa", "eager": "off"},
    "0.7.1": {"flash": "fa2", "sdpa": "sdpa", "eager": "off"},
    "0.8": {"flash": "fa2", "sdpa": "sdpa"},
}


# the same table read back: {a flash_attn value as text, lowercased: its newest word (FLASH_ATTN)}, whichever older line
# spelled it (the lines never spell one value two ways: "off" at 0.8 and a bool at the later lines read as they meant)
OLD_FLASH_WORDS = {
    str(v).lower(): FLASH_ATTN[word] for spelled in OLD_FLASH_ATTN.values() for word, v in spelled.items()
}

KEYS = Table(
    Key("model", "model_name_or_path"),
    Key("workload.kind", "stage", "sft", f"{H}finetuning_args.py:460"),
    Key("lora", "finetuning_type", "lora", f"{H}finetuning_args.py:464"),
    Key("lora_rank", "lora_rank", 8, f"{H}finetuning_args.py:77"),
    Key("lora_alpha", "lora_alpha"),  # finetuning_args.py:69, :568: 2 x rank when unset
    Key("lora_dropout", "lora_dropout", 0.0, f"{H}finetuning_args.py:73"),
    Key("lora_targets", "lora_target", "all", f"{H}finetuning_args.py:81"),
    Key("lora_variant", "use_dora", to_value={"dora": True}),  # finetuning_args.py:103
    Key("lora_train_embeddings", "additional_target"),  # finetuning_args.py:59; model/adapter.py:241
    # freeze tuning (finetuning_type freeze): num_layer_trainable / name_module_trainable through v0.7.0
    # (v0.6.3 src/llmtuner/hparams/finetuning_args.py:12-27)
    Key(
        "trained_layers",
        "freeze_trainable_layers",
        2,
        f"{H}finetuning_args.py:23-24",
        renames=dict.fromkeys(OLD[:3], "num_layer_trainable"),
    ),
    Key(
        "freeze_modules",
        "freeze_trainable_modules",
        "all",
        f"{H}finetuning_args.py:33-34",
        renames=dict.fromkeys(OLD[:3], "name_module_trainable"),
    ),
    Key("freeze_extra", "freeze_extra_modules"),  # finetuning_args.py:43-44: none
    # finetuning_args.py:468-470: LLaMA-Pro's interleaved blocks (from v0.5.2; v0.5.0 has no such key)
    Key("trained_layout", "use_llama_pro", to_value={"interleaved": True}),
    # OFT (finetuning_type oft from v0.9.4, #8623): PEFT's OFTConfig(r=oft_rank, oft_block_size, target_modules=
    # oft_target, module_dropout) at v0.9.5 model/adapter.py:243-250, :278-283
    Key("oft_block_size", "oft_block_size", 32, f"{H}finetuning_args.py:147"),
    Key("oft_rank", "oft_rank", 0, f"{H}finetuning_args.py:143"),
    Key("oft_targets", "oft_target", "all", f"{H}finetuning_args.py:151"),
    Key("oft_dropout", "module_dropout", 0.0, f"{H}finetuning_args.py:139"),
    Key("quant", "quantization_bit"),  # model_args.py:279-291
    Key("quant_method", "quantization_method"),
    Key("quant_type", "quantization_type", "nf4", f"{H}model_args.py:287"),
    Key("quant_absmax", "double_quantization"),  # model_args.py:291: True
    Key("attention", "flash_attn", "auto", f"{H}model_args.py:117", to_value=FLASH_ATTN, values=OLD_FLASH_ATTN),
    Key("checkpointing", "disable_gradient_checkpointing", False, f"{H}model_args.py:145"),
    Key("checkpointing_offload", "use_unsloth_gc"),  # model_args.py:133
    Key("loss", "enable_liger_kernel", to_value={"fused": True}),  # model_args.py:137
    Key("micro_batch", "per_device_train_batch_size", 8, f"{HF_ARGS}:782"),
    Key("grad_accum", "gradient_accumulation_steps", 1, f"{HF_ARGS}:854"),
    Key("eval_batch", "per_device_eval_batch_size", 8, f"{HF_ARGS}:1111"),
    Key("seq_len", "cutoff_len", 2048, f"{H}data_args.py:46"),
    Key("packing", "packing", renames={"0.5": "sft_packing"}),  # data_args.py:108; v0.5.3 data_args.py sft_packing
    Key("neat_packing", "neat_packing"),  # data_args.py:112
    Key("optimizer", "optim", "adamw_torch_fused", f"{HF_ARGS}:811-816"),
    Key("pure_bf16", "pure_bf16"),  # finetuning_args.py:456
    Key("bf16", "bf16"),
    Key("fp16", "fp16"),
    Key("zero_stage", "deepspeed"),
    Key("fsdp", "fsdp"),
    Key("frozen_vision", "freeze_vision_tower", True, f"{H}finetuning_args.py:527"),
    Key("frozen_projector", "freeze_multi_modal_projector", True, f"{H}finetuning_args.py:531"),
    Key("frozen_language", "freeze_language_model", False, f"{H}finetuning_args.py:535"),
    # image_resolution at v0.9.0 (a side: model_args.py:59-60, data/mm_plugin.py:58-60) and v0.9.1 (pixels, :61-62)
    Key(
        "max_pixels",
        "image_max_pixels",
        589824,
        f"{H}model_args.py:305",
        renames=dict.fromkeys(RES, "image_resolution"),
    ),
    Key("min_pixels", "image_min_pixels", 1024, f"{H}model_args.py:309"),
    # a video's frames (data/mm_plugin.py:237-247 _get_video_sample_indices: min(frames, video_maxlen, duration x
    # video_fps)), each resized within video_max_pixels (_regularize_images); video_resolution, a side, at v0.9.0
    Key(
        "video_max_pixels",
        "video_max_pixels",
        65536,
        f"{H}model_args.py:321-322",
        renames=dict.fromkeys(RES, "video_resolution"),
    ),
    Key("video_min_pixels", "video_min_pixels", 256, f"{H}model_args.py:325-326"),
    Key("fps", "video_fps", 2.0, f"{H}model_args.py:329-330"),
    Key("max_frames", "video_maxlen", 128, f"{H}model_args.py:333-334"),
    # finetuning_args.py:171; dpo_beta, dpo_loss through v0.7.1 (src/llmtuner/hparams/finetuning_args.py)
    Key("pref_beta", "pref_beta", renames=dict.fromkeys(OLD, "dpo_beta")),
    Key("pref_loss", "pref_loss", renames=dict.fromkeys(OLD, "dpo_loss")),
)
