"""Hugging Face Trainer (transformers 5.23.0) with PEFT and bitsandbytes in the user's script: full-layer
checkpointing, Liger's fused loss, no packing, supervised fine-tuning only (DPO and GRPO are TRL's)."""

from planner.frameworks.base import Default, Framework

TF = "transformers 5.23.0 training_args.py"
HF_RUNS = {
    "checkpointing": ("off", "full"),
    "loss": ("standard", "fused"),
    "batching": ("padded",),
    "optimizer_in_backward": (False,),
    "expert_parallel": ("off",),
    "workload": ("sft",),
    "vit_checkpointing": ("on",),  # gradient_checkpointing_enable reaches the tower's layers; no flag leaves them out
}
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
)
