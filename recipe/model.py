"""The plan's model, built once for the probes and the bundled trainer (one builder, so what a probe measures is
what `planner train` holds): the weights' dtype by the planner's rule, the family's model class, the attention
implementation, the LoRA adapters, the QLoRA base and the checkpointing. What only one of them needs comes in as
an argument: the trainer's local weights, the probes' recomputation context and their 4-bit stand-ins."""

from __future__ import annotations

from pathlib import Path

import torch

from recipe import HALF, hf_config, lora_config
from recipe.attention import attn_implementation
from recipe.checkpointing import apply_checkpointing
from recipe.quant import quantize_base


def deepspeed_managed(knobs) -> bool:
    """DeepSpeed runs the step (ZeRO stages 1-3): it casts the module to half under fp16/bf16."""
    return knobs.zero_stage >= 1


def amp(knobs) -> bool:
    """torch AMP: fp32 weights, autocast to half (HF --bf16/--fp16 without DeepSpeed)."""
    return knobs.precision in ("fp16", "bf16") and not deepspeed_managed(knobs)


def fsdp_policy_half(knobs) -> bool:
    """FSDP2 under bf16's MixedPrecisionPolicy (recipe.shard_fsdp): the weights stored as built (amp's), every
    floating parameter gathered and computed in bf16, no autocast."""
    return knobs.precision == "bf16" and getattr(knobs, "fsdp", "off") != "off"


def weight_dtype(knobs) -> torch.dtype:
    """The dtype the model is built in (planner.estimate.memory: frozen_weight_bytes_per_param,
    trainable_weight_bytes_per_param): fp32 for fp32 runs and torch AMP full fine-tuning; half under DeepSpeed's
    mixed precision, bf16-pure, and for a LoRA/QLoRA base. LoRA adapters are fp32 whatever this is (PEFT's
    autocast_adapter_dtype upcasts them on a half base)."""
    half = HALF.get(knobs.precision)
    tuned = knobs.lora_rank or getattr(knobs, "trained_layers", 0)  # freeze tuning loads in half, as LoRA's base
    if half is None or (amp(knobs) and (not tuned or getattr(knobs, "lora_base_fp32", False))):
        return torch.float32
    return half


def build_model(
    config: dict,
    knobs,
    *,
    layers: int | None = None,
    weights: Path | None = None,
    device_type: str = "cpu",
    recompute=None,
    quant_standin: bool = False,
    value_head: bool = False,
) -> torch.nn.Module:
    """The plan's model in train mode, on the current default device (the meta device: the sim's build).

    `config`: the model's config.json dict; `layers`: fewer decoder layers; `weights`: a local HF folder whose
    weights are loaded (else a random init under torch's current seed); `device_type`: where it will run, which
    picks the attention kernel; `recompute`: the probes' recomputation context (checkpoint's context_fn);
    `quant_standin`: QLoRA's 4-bit base as recipe.quant.Linear4bitStandIn instead of bitsandbytes (always on the
    meta device, where bitsandbytes cannot quantize); `value_head`: a one-output token-classification head in place
    of the language-model head (an RL critic or reward model: verl's AutoModelForTokenClassification, num_labels 1)."""
    import transformers

    cfg = hf_config(config, layers)
    auto = (
        transformers.AutoModelForImageTextToText
        if cfg.get_text_config() is not cfg
        else transformers.AutoModelForCausalLM
    )
    kw = {"dtype": weight_dtype(knobs)}
    impl = attn_implementation(knobs, device_type)
    if impl:
        kw["attn_implementation"] = impl
    if value_head:
        auto = transformers.AutoModelForTokenClassification
        cfg.num_labels = 1
    if weights is None:
        model = auto.from_config(cfg, **kw)
    else:
        model = auto.from_pretrained(weights, config=cfg, local_files_only=True, **kw)
    model.config.use_cache = False
    _insert_blocks(model, knobs)
    _freeze(model, config, knobs)
    if knobs.lora_rank:
        from planner.model.families import from_config

        model = _adapters(model, knobs, quant_standin, from_config(config, "model"))
        _train_tower(model, config, knobs)
    apply_checkpointing(model, knobs, recompute)
    _input_grads(model, knobs)
    _frozen_layers_unchecked(model, knobs)
    _tower_checkpointing(model, config, knobs)
    model.train()
    return model


def _insert_blocks(model, knobs) -> None:
    """--trained-layout inserted (ms-swift's LLaMA-Pro, planner.estimate.freeze.expanded_model): after every layers/N
    decoder layers a deep copy of the layer before, its o_proj and down_proj (and their biases) zeroed so that the
    new block starts as the identity, each layer's attention renumbered and layer_types extended (ms-swift 4.6.0
    swift/tuners/llamapro.py:86-113, :137-147, :202-216). Done on the built (or loaded) model, so that a local
    checkpoint's layers load where they are and the copies carry their weights; _freeze_layers then trains them."""
    n = getattr(knobs, "trained_layers", 0)
    if getattr(knobs, "trained_layout", "last") != "inserted" or not n:
        return
    text, parent = model.config.get_text_config(), model.get_decoder()
    layers, types = parent.layers, getattr(text, "layer_types", None)
    stride, blocks, kinds = len(layers) // n, [], []
    for i, layer in enumerate(layers):
        copies = [layer, _zeroed_copy(layer)] if (i + 1) % stride == 0 else [layer]
        blocks += copies
        kinds += [types[i] if types else None] * len(copies)
    for i, layer in enumerate(blocks):
        layer.self_attn.layer_idx = i
    parent.layers = torch.nn.ModuleList(blocks)
    text.num_hidden_layers = len(blocks)
    if types:
        text.layer_types = kinds


def _zeroed_copy(layer):
    """ms-swift's new block: the layer before, deep-copied, with its two output projections zeroed."""
    import copy

    block = copy.deepcopy(layer)
    for path in ("self_attn.o_proj", "mlp.down_proj"):
        linear = block.get_submodule(path)
        linear.weight.data = torch.zeros_like(linear.weight.data)
        if linear.bias is not None:
            linear.bias.data = torch.zeros_like(linear.bias.data)
    return block


def _tower_checkpointing(model, config: dict, knobs) -> None:
    """--vit-checkpointing off: the tower's layers run without a checkpoint beside a checkpointed decoder (what
    ms-swift's --vit_gradient_checkpointing false does with gradient_checkpointing_disable on the tower)."""
    if getattr(knobs, "vit_checkpointing", "on") == "on":  # Knobs refuses off without decoder checkpointing
        return
    from transformers.modeling_layers import GradientCheckpointingLayer

    from planner.model.families import from_config

    tower = from_config(config, "model").vision.tower_modules
    for name, module in model.named_modules():
        if isinstance(module, GradientCheckpointingLayer) and any(p in name + "." for p in tower):
            module.gradient_checkpointing = False


def _train_tower(model, config: dict, knobs) -> None:
    """--lora-tower-full: the tower and projector trained in full beside the adapters, in the dtype they were loaded
    in, as ms-swift's lora_llm tuner does (4.6 swift/tuner_plugin/lora_llm.py:78-80: requires_grad_(True) on
    model_arch.vision_tower and aligner after get_peft_model)."""
    if not getattr(knobs, "lora_tower_full", False):
        return
    from planner.model.families import from_config

    vision = from_config(config, "model").vision
    for name, p in model.named_parameters():
        if vision.frozen(name, "vision+projector") and "lora_" not in name:
            p.requires_grad_(True)


def _freeze(model, config: dict, knobs) -> None:
    """--frozen: the vision tower (and its projector) without gradients, by the module names the planner's model
    reader names (planner.model.modelspec.VisionSpec.frozen); --trained-layers: freeze tuning (_freeze_layers)."""
    if getattr(knobs, "trained_layers", 0):
        _freeze_layers(model, knobs)
    if knobs.frozen == "none":
        return
    from planner.model.families import from_config

    vision = from_config(config, "model").vision
    for name, p in model.named_parameters():
        if vision.frozen(name, knobs.frozen):
            p.requires_grad_(False)


def _frozen_layers_unchecked(model, knobs) -> None:
    """Freeze tuning under checkpointing as LLaMA-Factory runs it: its checkpointing function checkpoints only a
    layer with a trained parameter and runs the others plainly (0.9.5 model/model_utils/checkpointing.py:80-103),
    and its gradient_checkpointing_enable, which replaces transformers' (:170-176), never makes the embedding's
    output require a gradient (:133-134); transformers' own does for every input_ids model (5.25
    modeling_utils.py:3192-3196), so that is undone here. The frozen layers below the lowest trained one then record
    no graph; LLaMA-Pro's frozen layers above it save what their input's gradient needs (LLaMA-Factory's own step:
    probes/lf_freeze_step.py, tests/probes/test_freeze.py)."""
    from transformers.modeling_layers import GradientCheckpointingLayer

    from planner.estimate.freeze import below_trained_layers_idle

    if not below_trained_layers_idle(knobs) or knobs.checkpointing in ("off", "offload"):
        return
    model.disable_input_require_grads()
    for module in model.modules():
        if isinstance(module, GradientCheckpointingLayer) and not any(p.requires_grad for p in module.parameters()):
            module.gradient_checkpointing = False


def _input_grads(model, knobs) -> None:
    """Freeze tuning under checkpointing in a framework that makes the embedding's output require a gradient
    (ms-swift: Framework.input_grads), as it does: its frozen layers are then checkpointed and recomputed."""
    from planner.estimate.freeze import below_trained_layers_idle, freeze_tuned

    if freeze_tuned(knobs) and not below_trained_layers_idle(knobs):
        model.enable_input_require_grads()


def _freeze_layers(model, knobs) -> None:
    """LLaMA-Factory's freeze tuning (v0.9.5 src/llamafactory/model/adapter.py:89-90, :112-113, :129-136): the
    parameters whose name holds ".{i}." of one of the last N layers train, upcast to fp32 under torch AMP (:133-134,
    :316-325); every other parameter is frozen in the dtype it was loaded in."""
    from planner.estimate.freeze import trained_layer_ids

    layers = model.config.get_text_config().num_hidden_layers
    ids = trained_layer_ids(layers, knobs.trained_layers, getattr(knobs, "trained_layout", "last"))
    marks = [f".{i}." for i in ids]
    for name, p in model.named_parameters():
        if any(m in name for m in marks):
            if amp(knobs):
                p.data = p.data.to(torch.float32)
        else:
            p.requires_grad_(False)


def vocab_of(model) -> int:
    """The input embedding's rows; PEFT's lora.Embedding (LoRA on embed_tokens: Knobs.lora_ends) wraps the
    nn.Embedding as its base_layer."""
    emb = model.get_input_embeddings()
    return getattr(emb, "base_layer", emb).num_embeddings


def _adapters(model, knobs, quant_standin: bool, spec):
    """PEFT's LoRA adapters (fp32), input gradients under checkpointing (as HF's Trainer and TRL turn them on for a
    PEFT model), then --quant's 4-bit base."""
    from peft import get_peft_model

    model = get_peft_model(model, lora_config(knobs, spec))
    if knobs.checkpointing not in ("off", "offload"):
        model.enable_input_require_grads()
    meta = next(model.parameters()).device.type == "meta"
    quantize_base(model, knobs, fake=meta or quant_standin)
    return model
