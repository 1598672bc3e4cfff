"""TRL before 1.0 (read at 0.29.1, the last 0.x; VLM-R1 and many recipes pin a 0.x): the same trainers and defaults
(trl/trainer/base_config.py:61-62 gradient_checkpointing True), but SFT's loss is HF's, from the full logits
(trl/trainer/sft_trainer.py:1234-1236 super().compute_loss), with the entropy metric taken from those logits in
chunks of 128 rows under no_grad (:1238-1241, trainer/utils.py:572) and Liger's fused loss allowed (:1212-1232).
Where the defaults and memory moved at 1.0 (the fused log-prob head), this is the adapter for the older runs."""

from planner.frameworks.base import NO_SPLITS, Default, Framework
from planner.frameworks.hf import HF_KEYS
from planner.frameworks.trl import TRL_DEFAULTS, TRL_RUNS

FRAMEWORK = Framework(
    name="trl-0",
    label="TRL 0.x (before the fused head)",
    version="trl 0.29.1",
    runs={**TRL_RUNS, **NO_SPLITS},  # ParallelismConfig reached HF's Trainer after (transformers PR#40205, 2025-08)
    defaults={
        **TRL_DEFAULTS,
        "checkpointing": Default("full", "trl 0.29.1 trl/trainer/base_config.py:61-62: gradient_checkpointing=True"),
    },
    keys={**HF_KEYS, "batching": "packing", "lora_rank": "lora_r"},
    notes=("as trl, but SFT's loss from the full logits (and Liger's loss allowed)",),
)
