"""HF Trainer with a DeepSpeed JSON (`--deepspeed ds.json`; deepspeed 0.19.8): ZeRO, no FSDP."""

from planner.frameworks.base import Framework
from planner.frameworks.hf import HF_DEFAULTS, HF_EVERY, HF_KEYS, HF_RUNS, HF_SPLIT_RULES
from planner.frameworks.tool import Signs

# top-level keys of a DeepSpeed JSON, beside zero_optimization, that tell one from the other formats
DS_KEYS = {"train_micro_batch_size_per_gpu", "train_batch_size", "zero_allow_untested_optimizer"}
FRAMEWORK = Framework(
    name="deepspeed",
    reads=("deepspeed",),
    signs=(Signs("deepspeed", lambda k, d: "zero_optimization" in k or bool(k & DS_KEYS), 20),),
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
