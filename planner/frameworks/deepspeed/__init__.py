"""HF Trainer with a DeepSpeed JSON (`--deepspeed ds.json`; deepspeed 0.19.8): ZeRO, no FSDP.

`RELEASES`: one line, since nothing memplan plans moved. Compared at the tags v0.9.0, v0.10.0, v0.12.0, v0.14.0,
v0.15.0, v0.16.0, v0.17.0, v0.18.0 and v0.19.5 of github.com/deepspeedai/DeepSpeed, deepspeed/runtime/zero/config.py
(v0.9.0 :99 .. v0.19.5 :113 reduce_bucket_size 5e8; :111 .. :132 allgather_bucket_size 5e8; :181 .. :215
stage3_prefetch_bucket_size 5e7; :187 .. :221 stage3_param_persistence_threshold 1e5; :204 .. :238
stage3_max_live_parameters 1e9; stage3_max_reuse_distance and sub_group_size 1e9; overlap_comm None, True at stage 3
only, v0.9.0 :259-263 .. v0.19.5 :383-386): the same at every tag. HF's Trainer fills "auto" with reduce_bucket_size
h*h, stage3_prefetch_bucket_size 0.9*h*h, stage3_param_persistence_threshold 10*h (transformers 5.6.0
integrations/deepspeed.py:229-238 .. 5.24.0 :232-241), what memplan plans and exports (planner.estimate.zero) where
the JSON says "auto"; a value the JSON sets, or a key it leaves out (DeepSpeed's default then, since HF fills only
"auto"), is read into the zero_buckets knob (reader._buckets, planner.config.zerobuckets). What
came, planned as a note only (deepspeed reader): ZeRO++'s zero_hpz_partition_size, zero_quantized_weights and
zero_quantized_gradients (v0.10.0 :254-263), use_multi_rank_bucket_allreduce (v0.12.4, PR #4695 2afa1c7f2: how a
bucket is reduced, not its size)."""

from planner.frameworks.base import Framework, Release
from planner.frameworks.hf import HF_DEFAULTS, HF_EVERY, HF_KEYS, HF_RUNS, HF_SPLIT_RULES
from planner.frameworks.tool import Signs
from planner.frameworks.trl import TRL_ZEROES_DROPOUT

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
        "fsdp_load": ("sharded",),  # its FSDP loads shards or a unit at a time (Knobs.fsdp_load)
        "device_map": ("off",),  # one process a GPU
        **HF_RUNS,
        "dataparallel": (False,),  # a process a GPU
        "fsdp": ("off",),
        "batching": ("padded", "packed"),
        "workload": ("sft", "dpo", "grpo"),
        "context_parallel": ("off",),
        "lora_dropout_kept": (False, True),  # its DPO script's DPOConfig disable_dropout false
    },
    defaults=HF_DEFAULTS,
    keys={**HF_KEYS, "zero_stage": "zero_optimization.stage", "offload": "zero_optimization.offload_optimizer"},
    notes=(('HF resolves "auto" buckets from the hidden size (transformers integrations/deepspeed.py)'),),
    rules=HF_SPLIT_RULES,
    zeroes_dropout={"dpo": TRL_ZEROES_DROPOUT["dpo"]},  # its DPO is TRL's DPOTrainer
    releases=(
        Release("0.9", (0, 9), "deepspeed v0.9.0 .. v0.19.5 (runtime/zero/config.py: the defaults memplan plans)"),
    ),
)
