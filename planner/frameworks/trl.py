"""TRL (1.16.0): HF's Trainer with packing, DPO and GRPO; its configs turn checkpointing and bf16 on by default, and its
SFT trainer computes the loss through a fused log-prob head on every model (trl/trainer/sft_trainer.py:1142-1147,
1610-1618): no full logits, and no Liger loss (refused in SFT, :1127-1140)."""

from planner.frameworks.base import Default, Framework
from planner.frameworks.hf import HF_KEYS, HF_RUNS, HF_SPLIT_RULES

BASE = "trl 1.16.0 trl/trainer/base_config.py"
TRL_RUNS = {**HF_RUNS, "batching": ("padded", "packed"), "workload": ("sft", "dpo", "grpo")}
TRL_DEFAULTS = {
    "checkpointing": Default("full", f"{BASE}:62: gradient_checkpointing=True"),
    "precision": Default("bf16", f"{BASE}:68,107-108: bf16=None becomes not fp16"),
    "optimizer": Default("adamw-fused", "transformers 5.23.0 training_args.py:806-812"),
    "seq_len": Default(1024, "trl 1.16.0 trl/trainer/sft_config.py:202: max_length=1024"),
    "batching": Default("padded", "trl 1.16.0 trl/trainer/sft_config.py:222: packing=False"),
    "micro_batch": Default(8, "transformers 5.23.0 training_args.py: per_device_train_batch_size=8"),
}
FRAMEWORK = Framework(
    name="trl",
    label="TRL (SFT, DPO, GRPO trainers)",
    version="trl 1.16.0",
    runs={**TRL_RUNS, "loss": ("standard",)},
    defaults=TRL_DEFAULTS,
    keys={**HF_KEYS, "batching": "packing", "lora_rank": "lora_r"},
    notes=("checkpointing and bf16 on by default; SFT's loss is TRL's fused log-prob head (no full logits)",),
    rules=HF_SPLIT_RULES,
    sft_head="fused-logprob",
)
