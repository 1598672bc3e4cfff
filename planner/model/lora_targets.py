"""PEFT's targets for --lora-targets (the probes, the trainer and the exports adapt the same linears): the
target_modules pattern or list, and the stacked experts' target_parameters."""

from __future__ import annotations

from planner.model import (
    minicpmv,
    vila,
    vlm,
    xcomposer,
)
from planner.model.modelspec import ModelSpec
from planner.model.shapes import ATTENTION_LINEARS


def peft_target_modules(targets: str, model: ModelSpec | None = None, vision: bool = False) -> str | list[str] | None:
    """PEFT's target_modules for --lora-targets (the probes, the trainer and the exports adapt the same linears);
    stacked experts named there go to target_parameters instead. A VLM's are a pattern over its language model's
    linears alone: PEFT's all-linear, or a bare name such as gate_proj, also adapts the vision tower and the projector
    (PEFT 0.21 on Qwen2.5-VL and InternVL: tests/planner/model/test_vlm_lora.py), which the plan keeps frozen; PEFT
    matches a string target_modules as a regular expression over the whole module name (and TRL passes a single
    --lora_target_modules value as that string: trl/trainer/model_config.py:177-178). `vision` (--lora-vision, with
    all-linear): PEFT's all-linear itself, over the tower and projector too."""
    if vision:
        return "all-linear"
    if model is not None and model.vision is not None:
        names = sorted({t.name for t in model.tensors if t.role == "layer" and t.lora and t.adapted(targets)})
        modules = {**vlm.TEXT_MODULE, **vila.TEXT_MODULE, **minicpmv.TEXT_MODULE, xcomposer.MODEL_TYPE: "model"}
        text = modules.get(model.model_type, "language_model")
        return rf"(?:.*\.)?{text}\..*\.(?:{'|'.join(names)})" if names else None
    if targets == "all-linear":
        return "all-linear"
    names = list(ATTENTION_LINEARS) if targets == "attention" else targets.split(",")
    return [n for n in names if not n.startswith("experts")] or None


# PEFT's module names of the language model's ends (Knobs.lora_ends); GPT-2's embedding is wte
END_MODULES = {"embed": ("embed_tokens",), "head": ("lm_head",), "both": ("embed_tokens", "lm_head")}


def with_ends(targets: str | list[str] | None, ends: str, model: ModelSpec | None = None) -> str | list[str] | None:
    """target_modules with LoRA on the embedding and/or the head too (Knobs.lora_ends): PEFT's all-linear leaves the
    output layer out and takes no other name beside it, so it becomes the model's linear names (what it matches on a
    text model) and the ends'."""
    names = end_modules(ends)
    if not names:
        return targets
    if isinstance(targets, str) and targets != "all-linear":  # a VLM's pattern over its language model's linears
        return rf"(?:{targets})|(?:.*\.)?(?:{'|'.join(names)})"
    if targets == "all-linear":
        if model is None:
            raise ValueError("LoRA on the embedding or head beside all-linear needs the model's linear names")
        targets = linear_module_names(model)
    return [*(targets or []), *names]


def linear_module_names(model: ModelSpec) -> list[str]:
    """all-linear as the decoder linears' module names (a framework or PEFT list that cannot say all-linear beside
    other names); stacked experts are PEFT's target_parameters, not modules."""
    return sorted(n for n in model.linear_names() if not n.startswith("experts"))


def end_modules(ends: str) -> list[str]:
    """The ends' PEFT module names (Knobs.lora_ends), [] for none."""
    return list(END_MODULES.get(ends, ()))


def peft_target_parameters(targets: str) -> list[str] | None:
    """PEFT's target_parameters: the stacked expert weights --lora-targets names (experts.gate_up_proj,
    experts.down_proj), one LoRA pair per expert (PEFT's ParamWrapper)."""
    names = [n for n in targets.split(",") if n.startswith("experts")]
    return names or None
