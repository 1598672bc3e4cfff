"""What PEFT 0.22.0 changed in the terms of a plan whose line runs it (planner.frameworks.peft.peft_of: the line's
newest pin, else 0.22.0 on transformers 5, else 0.21.2), each measured where memplan pins it:
- a merge scales B @ A in place (0.22.0 tuners/lora/layer.py:1169-1170), one matrix; 0.21.2 (:1067) made a scaled
  copy beside it (weight_sync.sync_merge_bytes; tests/probes/test_sync.py);
- on a half base AdaLoRA's ranknum stays frozen: cast_adapter_dtype keeps requires_grad (0.22.0
  tuners/tuners_utils.py:2885-2894), where 0.21's fp32 copy was a new, trained nn.Parameter (0.21.2 :2742-2750);
  0.18.1 and 0.20.0 leave it frozen too (peft_tuners.adalora_extra_params; tests/probes/test_peft_tuners.py).
probes/peft_release.py measures both in each venv that holds a PEFT (tests/planner/estimate/test_peft_release.py).
"""

from __future__ import annotations

from planner.frameworks.peft import PEFT_0_22, peft_of


def merge_copies_at(version: tuple[int, ...]) -> int:
    """B @ A matrices a LoRA merge holds at once at PEFT `version`: 1 from 0.22, 2 before (the product, its scaled copy)."""
    return 1 if version >= PEFT_0_22 else 2


def trains_ranknum_at(version: tuple[int, ...]) -> bool:
    """Whether AdaLoRA's ranknum is trained on a half base at PEFT `version`: the 0.21 line's alone."""
    return (0, 21) <= version < PEFT_0_22


def merge_copies(knobs) -> int:
    return merge_copies_at(peft_of(knobs.framework, knobs.release, knobs.peft_release))


def trains_ranknum(knobs) -> bool:
    return trains_ranknum_at(peft_of(knobs.framework, knobs.release, knobs.peft_release))
