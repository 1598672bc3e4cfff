"""Hugging Face Trainer (transformers 5.23.0) with PEFT and bitsandbytes in the user's script: full-layer
checkpointing, Liger's fused loss, no packing, supervised fine-tuning only (DPO and GRPO are TRL's)."""

from planner.frameworks.base import Default, Framework, Rule, autotp_rule

TF = "transformers 5.23.0 training_args.py"
HF_RUNS = {
    "checkpointing": ("off", "full"),
    "loss": ("standard", "fused"),
    "batching": ("padded",),
    "optimizer_in_backward": (False,),
    # transformers' own FSDP2 with DistributedConfig(fsdp_size, ep_size) in the user's script (transformers 5.25
    # distributed/configuration_utils.py:64-79: ep_size divides fsdp_size x tp_size, all-to-all dispatch)
    "expert_parallel": ("off", "on"),
    "workload": ("sft",),
    "vit_checkpointing": ("on",),  # gradient_checkpointing_enable reaches the tower's layers; no flag leaves them out
    "cp_attention": ("ring", "all-gather"),  # accelerate's cp_comm_strategy alltoall and allgather
}
ACCELERATE = "accelerate 1.15.0"
# accelerate's ParallelismConfig, which HF's Trainer (and TRL's) takes: sp_size on DeepSpeed (ALST), cp_size on FSDP2,
# not both; tensor parallel through DeepSpeed's AutoTP (accelerate 1.15's FSDP2 + TP path imports transformers'
# ReplicateParallel, which transformers 5.24 no longer has: accelerator.py:1618)
HF_SPLIT_RULES = (
    Rule(
        "sequence_parallel",
        f"--sequence-parallel is accelerate's sp_size, which runs on DeepSpeed only ({ACCELERATE} accelerator.py:"
        "2394-2405): give --zero 1, 2 or 3",
        lambda k: k["sequence_parallel"] > 1 and (k["zero_stage"] == 0 or k["fsdp"] != "off"),
    ),
    Rule(
        "context_parallel",
        f"--context-parallel is accelerate's cp_size, which needs FSDP2 ({ACCELERATE} state.py:998-1008): give --fsdp "
        "full or grad-op",
        lambda k: k["context_parallel"] > 1 and k["fsdp"] == "off",
    ),
    Rule(
        "context_parallel",
        f"--context-parallel with --sequence-parallel: accelerate runs one or the other ({ACCELERATE} "
        "parallelism_config.py:329-334)",
        lambda k: k["context_parallel"] > 1 and k["sequence_parallel"] > 1,
    ),
    autotp_rule("transformers' deepspeed integration; accelerate's FSDP2 + TP path is broken at 1.15"),
)
HF_KEYS = {
    "micro_batch": "per_device_train_batch_size",
    "grad_accum": "gradient_accumulation_steps",
    "checkpointing": "gradient_checkpointing",
    "zero_stage": "deepspeed",
    "offload": "deepspeed",
    "fsdp": "fsdp",
    "optimizer": "optim",
    "loss": "use_liger_kernel",
    "attention": "attn_implementation",
    "precision": "bf16",
    "lora_rank": "LoraConfig(r=...)",
    "quant": "BitsAndBytesConfig(load_in_4bit=True)",
    "seq_len": "max_length",
    "model": "model_name_or_path",
    "sequence_parallel": "parallelism_config_sp_size",
    "context_parallel": "parallelism_config_cp_size",
    "tensor_parallel": "tensor_parallel.autotp_size",
}
HF_DEFAULTS = {
    "checkpointing": Default("off", f"{TF}: gradient_checkpointing=False"),
    "optimizer": Default("adamw-fused", f"{TF}:806-812: optim adamw_torch_fused on torch >= 2.8"),
    "micro_batch": Default(8, f"{TF}: per_device_train_batch_size=8"),
    "grad_accum": Default(1, f"{TF}: gradient_accumulation_steps=1"),
    "precision": Default("fp32", f"{TF}: bf16=False, fp16=False"),
}
FRAMEWORK = Framework(
    name="hf",
    label="Hugging Face Trainer",
    version="transformers 5.23.0",
    runs=HF_RUNS,
    defaults=HF_DEFAULTS,
    keys=HF_KEYS,
    notes=("checkpointing off by default; no packing; freezing modules is the script's job",),
    rules=HF_SPLIT_RULES,
)
