"""What LoRA on the embedding and the head (Knobs.lora_ends, planner.estimate.lora_ends) is planned with, and the
one-line refusal of the rest: plain LoRA on a causal language model's SFT step whose head runs as a module, one
process a model copy, and a model whose ends are PEFT's embed_tokens and lm_head (a VLM's too, where the framework
takes PEFT's own target list: planner.frameworks.rules.VLM_LORA_ENDS refuses it elsewhere)."""

from __future__ import annotations

from planner.config.knobfields import KnobFields
from planner.errors import BadInput

WHAT = {"embed": "the embedding", "head": "the head", "both": "the embedding and the head"}


def ends_rules(k: KnobFields) -> None:
    """Refused in one line: another tuner (PEFT's DoRA, OFT, VeRA and AdaLoRA on an embedding are other layers,
    unmeasured), trained copies of the same modules (PEFT's modules_to_save beside an adapter on them), a device
    map (the ends on the first and last GPUs, unplanned), a task head; and LoRA on the head beside a fused head and
    loss (Liger's and the recipe's read lm_head.weight, so the adapter would never run) or in a step other than SFT
    (the RL and preference heads' moments were not traced with it)."""
    if k.lora_ends == "none":
        return
    what = f"--lora-ends {k.lora_ends} (LoRA on {WHAT[k.lora_ends]})"
    checks = (
        (k.lora_variant != "lora", f"--lora-variant {k.lora_variant}", "give --lora-variant lora"),
        (k.lora_train_embeddings, "--lora-train-embeddings", "PEFT trains either a copy or an adapter of a module"),
        (k.device_map > 1, f"--device-map {k.device_map}", "plan it with one process a model copy"),
        (k.task != "causal-lm", f"--task {k.task}", "a task head has no vocabulary head"),
    )
    head = k.lora_ends in ("head", "both")
    checks += (
        (head and k.loss == "fused", "--loss fused", "a fused head reads lm_head.weight and never runs the adapter"),
        (head and k.workload.kind != "sft", f"--workload {k.workload.kind}", "the head's adapter is planned for SFT"),
    )
    for bad, flag, why in checks:
        if bad:
            raise BadInput(f"{what} with {flag} is not planned: {why}", "lora_ends")


def ends_model_error(k: KnobFields, spec) -> BadInput | None:
    """GPT-2's Conv1D blocks (wte, no lm_head module of its own weight) or a model with no vocabulary head: refused
    in one line."""
    if k.lora_ends == "none" or not k.lora_rank or spec is None:
        return None
    t = spec.text
    if t.traits.conv1d or not t.vocab:
        return BadInput(
            f"--lora-ends {k.lora_ends}: LoRA on {spec.name}'s embedding or head is not planned (planned on models "
            "whose ends are PEFT's embed_tokens and lm_head)",
            "lora_ends",
        )
    return None
