"""HF Trainer with a DeepSpeed JSON (`--deepspeed ds.json`; deepspeed 0.19.8): ZeRO, no FSDP."""

from planner.frameworks.base import Framework
from planner.frameworks.hf import HF_DEFAULTS, HF_KEYS, HF_RUNS, HF_SPLIT_RULES

FRAMEWORK = Framework(
    name="deepspeed",
    label="HF Trainer + DeepSpeed JSON",
    version="deepspeed 0.19.8",
    every=(  # every value of these (closed by default: planner.frameworks.base.Framework.runs)
        "num_labels",
        "negatives",
        "precision",
        "zero_stage",
        "offload",
        "attention",
        "optimizer",
        "lora_rank",
        "quant",
        "quant_absmax",
        "lora_targets",
        "lora_train_embeddings",
        "lora_dropout",
        "lora_vision",
        "lora_base_fp32",
        "frozen",
        "tensor_parallel",
        "sequence_parallel",
        "eval_batch",
        "eval_logits_steps",
        "save_weights",
    ),
    runs={
        **HF_RUNS,
        "fsdp": ("off",),
        "batching": ("padded", "packed"),
        "workload": ("sft", "dpo", "grpo"),
        "context_parallel": ("off",),
    },
    defaults=HF_DEFAULTS,
    keys={**HF_KEYS, "zero_stage": "zero_optimization.stage", "offload": "zero_optimization.offload_optimizer"},
    notes=(('HF resolves "auto" buckets from the hidden size (transformers integrations/deepspeed.py)'),),
    rules=HF_SPLIT_RULES,
)
