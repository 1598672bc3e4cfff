"""`accelerate launch` with a config file over an HF/TRL script (accelerate 1.15.0): what the script's trainer runs,
sharded by the config's DeepSpeed or FSDP section."""

from planner.frameworks.base import Framework
from planner.frameworks.hf import HF_EVERY, HF_KEYS, HF_SPLIT_RULES
from planner.frameworks.tool import Signs
from planner.frameworks.trl import TRL_DEFAULTS, TRL_RUNS, TRL_ZEROES_DROPOUT

FRAMEWORK = Framework(
    name="accelerate",
    reads=("accelerate",),
    signs=(Signs("accelerate", lambda k, d: bool(k & {"distributed_type", "compute_environment"}), 30),),
    label="accelerate launch + HF/TRL script",
    supporting="launcher-yaml",
    version="accelerate 1.15.0",
    every=HF_EVERY,
    runs={**TRL_RUNS, "device_map": ("off",), "dataparallel": (False,)},  # accelerate launch: a process a GPU
    defaults=TRL_DEFAULTS,
    keys={
        **HF_KEYS,
        "zero_stage": "deepspeed_config.zero_stage",
        "fsdp": "fsdp_config",
        "offload": "deepspeed_config.offload_optimizer_device",
        "precision": "mixed_precision",
    },
    notes=("FSDP and ZeRO come from the accelerate config (distributed_type)",),
    rules=HF_SPLIT_RULES,
    zeroes_dropout={"dpo": TRL_ZEROES_DROPOUT["dpo"]},  # the script's DPO is TRL's DPOTrainer
)
