"""Freeze tuning's rules between knobs (--trained-layers N: N decoder layers trained in full, the last, the first or
LLaMA-Pro's blocks, the rest frozen, as LLaMA-Factory's finetuning_type freeze and ms-swift's llamapro run it): what
it is planned with, each other combination refused in one line naming the knob. The model's own limits (its layer
count, a text model) are planner.config.layout's."""

from __future__ import annotations

from planner.errors import BadInput

PLANNED = (
    "full fine-tuning of the last decoder layers of a dense text model, SFT, one process a GPU under DDP, ZeRO-1 or "
    "ZeRO-2"
)
SPLITS = ("tensor_parallel", "sequence_parallel", "context_parallel", "device_map")


def freeze_rules(k) -> None:
    """--trained-layers beside knobs that already freeze or shard differently: refused, never planned as something
    else."""
    if not k.trained_layers:
        if k.trained_layout != "last":
            raise BadInput(
                f"--trained-layout {k.trained_layout} needs freeze tuning: give --trained-layers", "trained_layout"
            )
        return
    other = (
        f"LoRA (--lora-rank {k.lora_rank})"
        if k.lora_rank
        else f"--frozen {k.frozen}"
        if k.frozen != "none"
        else f"--zero {k.zero_stage}"
        if k.zero_stage == 3
        else f"--fsdp {k.fsdp}"
        if k.fsdp != "off"
        else f"--workload {k.workload.kind}"
        if k.workload.kind != "sft"
        else f"--task {k.task}"
        if k.task != "causal-lm"
        else _split(k)
    )
    if other:
        raise BadInput(
            f"--trained-layers {k.trained_layers} (freeze tuning) with {other}: not planned (memplan plans {PLANNED})",
            "trained_layers",
        )


def _split(k) -> str:
    """The first model or sequence split the run asks for ("" where none)."""
    for field in SPLITS:
        if getattr(k, field) > 1:
            return f"--{field.replace('_', '-')} {getattr(k, field)}"
    return "--dataparallel" if k.dataparallel else ""


def model_error(k, spec, name: str) -> BadInput | None:
    """--trained-layers on this model (planner.config.layout): no more layers than it has, a dense text model (a VLM's
    tower and projector, and an MoE's uneven layers, are not planned with it)."""
    if not k.trained_layers or spec is None:
        return None
    t = spec.text
    why = (
        f"{name} has {t.layers} decoder layers"
        if k.trained_layers > t.layers
        else f"{name} is a VLM"
        if spec.vision is not None
        else f"{name} is a mixture-of-experts model"
        if t.moe is not None
        else f"LLaMA-Pro's interleaved blocks need {name}'s {t.layers} layers divisible by it (LLaMA-Factory "
        "0.9.5 model/adapter.py:80-85; ms-swift 4.6.0 swift/tuners/llamapro.py:52-53 for its new blocks)"
        if k.trained_layout in ("interleaved", "inserted") and t.layers % k.trained_layers
        else ""
    )
    if not why:
        return None
    return BadInput(
        f"--trained-layers {k.trained_layers}: {why}: not planned (memplan plans {PLANNED})", "trained_layers"
    )
