"""HF Trainer with a DeepSpeed JSON (`--deepspeed ds.json`; deepspeed 0.19.8): ZeRO, no FSDP."""

from planner.frameworks.base import Framework
from planner.frameworks.hf import HF_DEFAULTS, HF_EVERY, HF_KEYS, HF_RUNS, HF_SPLIT_RULES

FRAMEWORK = Framework(
    name="deepspeed",
    reads=("deepspeed",),
    label="HF Trainer + DeepSpeed JSON",
    supporting="ds-json",
    version="deepspeed 0.19.8",
    every=tuple(k for k in HF_EVERY if k not in ("fsdp", "context_parallel")),  # its runs name these
    runs={
        "device_map": ("off",),  # one process a GPU
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
