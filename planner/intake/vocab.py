"""Framework words in memplan's vocabulary (planner/config/knobfields.py): optimizer names (transformers' OptimizerNames,
which every framework here passes through), attention implementations, LoRA target lists, and PEFT's default targets
where a configuration names none. None: no memplan equivalent (the caller writes the unplanned line).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache

from planner.config.knobfields import LORA_TARGETS_PATTERN
from planner.intake.collect import PEFT, PRESETS, as_names, default

OPTIMIZERS = {
    "adamw_torch": "adamw",
    "adamw_hf": "adamw",
    "adamw": "adamw",
    "adam": "adamw",
    "adamw_torch_xla": "adamw",
    "adamw_torch_fused": "adamw-fused",
    "adamw_apex_fused": "adamw-fused",
    "adamw_torch_npu_fused": "adamw-fused",
    "adamw_8bit": "adamw-8bit",
    "adamw_bnb_8bit": "adamw-8bit",
    "paged_adamw": "paged-adamw",
    "paged_adamw_32bit": "paged-adamw",
    "paged_adamw_8bit": "paged-adamw-8bit",
    "sgd": "sgd",
    "adafactor": "adafactor",
    # transformers 5.25 training_args.py:144-157 (OptimizerNames), trainer_optimizer.py:351-410
    "galore_adamw": "galore-adamw",
    "galore_adamw_8bit": "galore-adamw-8bit",
    "apollo_adamw": "apollo-adamw",
    "muon": "muon",
    # torchao's AdamW4bit / AdamW8bit (5.25 trainer_optimizer.py:450-476; training_args.py:124-125 OptimizerNames)
    "adamw_torch_4bit": "adamw-torchao-4bit",
    "adamw_torch_8bit": "adamw-torchao-8bit",  # LLaMA-Factory's use_muon, ms-swift's --optimizer muon
    # bitsandbytes' Lion and RMSprop (5.25 trainer_optimizer.py:246-293: optim_bits 8 where the name says 8bit, paged
    # where it says paged; RMSprop is never paged) and torch's RMSprop and Adagrad (:329-349); every line memplan
    # models has them (OptimizerNames at transformers 4.38.2, the oldest in tools/fwenv_old.sh, and every later one)
    "lion_32bit": "lion",
    "lion_8bit": "lion-8bit",
    "paged_lion_32bit": "paged-lion",
    "paged_lion_8bit": "paged-lion-8bit",
    "rmsprop": "rmsprop",
    "rmsprop_bnb": "rmsprop-bnb",
    "rmsprop_bnb_32bit": "rmsprop-bnb",
    "rmsprop_bnb_8bit": "rmsprop-bnb-8bit",
    "adagrad": "adagrad",
}
ATTENTION = {
    "flash_attention_2": "flash",
    "flash_attention_3": "flash",
    "flash_attn": "flash",
    "fa2": "flash",
    "fa3": "flash",
    "flash": "flash",
    "sdpa": "sdpa",
    "eager": "eager",
    "disabled": "eager",
}


def optimizer(name: object) -> str | None:
    return OPTIMIZERS.get(str(name).strip().lower())


def attention(name: object) -> str | None:
    """memplan's attention for an implementation name (a hub kernel of flash attention counts as flash)."""
    text = str(name).strip().lower()
    if text in ATTENTION:
        return ATTENTION[text]
    return "flash" if "/" in text and "flash" in text else None


def lora_targets(value: object) -> str | None:
    """`all-linear`, or the module names as memplan's comma list; None for a regex or a pattern memplan cannot take."""
    names = as_names(value)
    if not names:
        return None
    if any(n.lower() in ("all-linear", "all_linear", "all") for n in names):
        return "all-linear" if len(names) == 1 else None
    text = ",".join(names)
    return text if re.fullmatch(LORA_TARGETS_PATTERN, text) and len(text) <= 512 else None


@lru_cache(maxsize=1)
def _peft_targets() -> dict[str, str]:
    return json.loads((PRESETS / "peft_targets.json").read_text())["targets"]


def peft_default_targets(model_type: str) -> tuple[str | None, str]:
    """PEFT's targets when LoraConfig names none (presets/peft_targets.json), with the source citing PEFT."""
    return _peft_targets().get(model_type), default(
        PEFT, "peft/utils/constants.py:67", f"target_modules for {model_type}"
    )
