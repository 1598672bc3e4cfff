"""What a training step saves for backward, one small function per term, in bytes: the text layers' activations as
the knobs run them (text_shape: the shape every activation term takes), the vision tower's, what LoRA, Ulysses, a
quantized base, InternLM-XComposer2's Partial LoRA and a frozen language model change in a layer, autocast's weight
copies, and what --checkpointing offload pins on the host. planner.estimate.activations holds the per-layer
formulas; planner.estimate.memory assembles the peak."""

from __future__ import annotations

from dataclasses import replace

from planner.config.spec import Knobs
from planner.estimate import activations as act
from planner.estimate import (
    boft,
    bottleneck,
    freeze,
    frozen_lm,
    lora,
    lora_ends,
    nograd,
    oft,
    parallel,
    peft_tuners,
    quant,
    recipe_terms,
    tower_lora,
    vision,
)
from planner.estimate.quant_modules import dense_names
from planner.estimate.setup import Setup
from planner.frameworks import FRAMEWORKS, adapter
from planner.model import xcomposer


def activation_profile(k: Knobs) -> str:
    if k.precision == "fp32":
        return "fp32"
    if k.fsdp != "off":  # MixedPrecisionPolicy casts the unsharded parameters: the module runs in bf16
        return "half"
    return "amp" if k.zero_stage == 0 and k.precision in ("fp16", "bf16") and k.lora_rank == 0 else "half"


def torch_autocast(k: Knobs) -> bool:
    """torch's autocast runs the step: mixed precision without DeepSpeed's or FSDP's own casts of the module."""
    return k.precision in ("bf16", "fp16") and k.zero_stage == 0 and k.fsdp == "off"


def autocast_weight_copy_bytes(s: Setup, layers_live: int) -> int:
    """torch.autocast caches a bf16 copy of every fp32 weight a matmul uses, and the matmul saves it
    for backward: without checkpointing every layer's copy lives until its backward; with it only
    the lm_head's and the recomputed layer's."""
    fp32_base = s.knobs.lora_base_fp32 and s.knobs.fsdp == "off"  # LoRA on an fp32 base: autocast copies it too
    if activation_profile(s.knobs) != "amp" and not fp32_base:
        return 0
    m = s.model
    per_layer = sum(t.numel for t in m.tensors if t.role == "layer" and len(t.shape) == 2) // m.text.layers
    head = 0 if freeze.freeze_tuned(s.knobs) else m.text.vocab * m.text.hidden  # a frozen head stays in half
    return 2 * (per_layer * layers_live + head + (tower_matrices_run(s) if layers_live == m.text.layers else 0))


def tower_is_trained(s: Setup) -> bool:
    """The tower is trained in full, or carries LoRA adapters (which need its inputs saved)."""
    return s.knobs.lora_vision or s.knobs.lora_tower_full if s.lora else "vision" not in s.knobs.frozen


def projector_is_trained(s: Setup) -> bool:
    """The projector's weights train: in full fine-tuning and not frozen, or beside LoRA with --lora-tower-full."""
    return s.knobs.lora_tower_full if s.lora else "projector" not in s.knobs.frozen


def tower_matrices_run(s: Setup) -> int:
    """The tower's and projector's matrices whose autocast copies a step with images saves: the trained parts' (a
    frozen tower's forward records no graph), the tower's live layers only (planner.estimate.vision)."""
    v = s.model.vision
    if v is None or not s.tower_image_tokens:
        return 0
    tower_trained = tower_is_trained(s)
    projector_trained = projector_is_trained(s)
    mats = {
        r: sum(t.numel for t in s.model.tensors if t.role == r and len(t.shape) == 2) for r in ("vision", "projector")
    }
    tower = mats["vision"] * (v.layers - v.unused_layers) // v.layers if tower_trained else 0
    return tower + (mats["projector"] if projector_trained or tower_trained else 0)


def text_shape(s: Setup):
    """(text spec as the knobs run it, rows, tokens per row, profile): the arguments of every activation term."""
    if "text_shape" not in s.memo:  # asked for many times a candidate: computed once (Setup.memo)
        s.memo["text_shape"] = _text_shape(s)
    return s.memo["text_shape"]


def _text_shape(s: Setup):
    rows, width = recipe_terms.row_shape(s.knobs, s.micro_batch, s.seq_len)
    adapted = (
        any(x.experts and x.adapted(s.knobs.lora_targets) for x in s.model.tensors) if s.knobs.lora_rank else False
    )
    t = s.model.text
    if t.cross_layers and not s.image_tokens:  # Llama-3.2-Vision skips its cross-attention layers without images
        t = replace(t, layers=t.layers - t.cross_layers, cross_layers=0)
    elif t.first_cross_layer and frozen_lm.language_frozen(s.knobs):  # no gradient reaches the layers below the image
        t = replace(t, layers=t.layers - t.first_cross_layer)
    elif freeze.below_trained_layers_idle(s.knobs):  # freeze tuning: nothing below the lowest trained layer
        t = replace(t, layers=s.knobs.trained_layers)
    if t.dropout and t.traits.conv1d and lora.dropout_zeroed(s.knobs):  # GPT-2's own nn.Dropout zeroed too
        t = replace(t, dropout=0.0)
    return recipe_terms.text_spec(t, s.knobs, adapted), rows, width, activation_profile(s.knobs)


def live_weight_copy_layers(s: Setup) -> int:
    """Layers whose autocast weight copies stay saved until their backward (not under a checkpoint or offload)."""
    k, n = s.knobs, text_shape(s)[0].layers
    return 1 if k.checkpointing == "offload" else max(1, n - recipe_terms.checkpointed_layers(k, n))


def activations_bytes(s: Setup) -> int:
    """Saved activations at the start of backward: text layers, vision tower, final norm."""
    if "activations_bytes" not in s.memo:  # asked for several times a candidate: computed once (Setup.memo)
        s.memo["activations_bytes"] = _activations_bytes(s)
    return s.memo["activations_bytes"]


def _activations_bytes(s: Setup) -> int:
    t, rows, width, p = text_shape(s)
    total = recipe_terms.text_activations_bytes(t, s.knobs, rows, width, p)
    if s.knobs.checkpointing != "offload":  # LoRA's own tensors and Ulysses', in the layers not under a checkpoint
        total += (t.layers - recipe_terms.checkpointed_layers(s.knobs, t.layers)) * (
            lora_layer_bytes(s) + ulysses_layer_bytes(s) + plora_layer_bytes(s)
        )
    total += int8_retained_inputs_bytes(s) - frozen_ends_bytes(s) + lora_ends_bytes(s)
    if bottleneck.bottleneck(s.knobs):  # no graph below the first layer's adapter
        layer = act.layer_bytes(t, rows, width, p) + lora_layer_bytes(s)
        total -= bottleneck.first_layer_idle_bytes(s.model, s.knobs, layer, rows * width)
    if freeze.below_trained_layers_idle(s.knobs):  # LLaMA-Pro's frozen layers between its trained blocks
        layer = act.layer_bytes(t, rows, width, p)
        total += freeze.path_frozen_bytes(s.model, s.knobs, layer, p, rows * width)
    v = s.model.vision
    if v is not None:
        ckpt = "off" if tower_unchecked(s.knobs, v) else "full"
        trained = tower_is_trained(s)
        eager = s.knobs.attention == "eager"
        vp = tower_profile(s, p, ckpt)
        if ckpt == "off" and tower_lora.examined(s.knobs) and s.tower_image_tokens:  # LoRA on the frozen tower
            total += lora_tower_bytes(s) + (
                vision.eager_attention_bytes(v, s.image_rows, s.tower_image_tokens, p) if eager else 0
            )
        else:
            total += vision.vision_activations_bytes(v, s.image_rows, s.tower_image_tokens, vp, ckpt, trained, eager)
        if not off_by_knobs(s) and frozen_tower_in_graph(s):  # a frozen tower records a graph all the same
            total += frozen_tower_hooked_bytes(s)
        if trained and ckpt == "off" and nograd.masked_tower(s):  # each block's N x N softmax stays for its backward
            total += vision.masked_tower_saved_bytes(v, tower_patches(s), p)
        live = t.cross_layers * (t.layers - recipe_terms.checkpointed_layers(s.knobs, t.layers)) // t.layers
        frozen = frozen_lm.language_frozen(s.knobs)
        total += act.cross_attention_bytes(t, v, s.micro_batch, s.image_tokens, s.seq_len, p, live, frozen)
        total += tiled_tower_bytes(s)
    return total


def lora_tower_bytes(s: Setup) -> int:
    """What --lora-vision's tower and projector save without a checkpoint (planner.estimate.tower_lora)."""
    patches = tower_patches(s)
    image_tokens = patches // s.model.vision.patches_per_token
    return tower_lora.tower_saved_bytes(s.model, s.knobs, patches, image_tokens, lora.dropout_runs(s.knobs))


def tower_unchecked(k: Knobs, v) -> bool:
    """The tower's blocks run without a checkpoint: none at all, ms-swift's --vit_gradient_checkpointing false, or a
    tower that never checkpoints (VisionSpec.checkpointed)."""
    return k.checkpointing == "off" or k.vit_checkpointing == "off" or not v.checkpointed


# --lora-vision's tower not checkpointed is traced at zero 0 under AMP and bf16-pure (planner.estimate.tower_lora:
# before it, planned as a trained tower's, analytic peak / sim - 1 was -9.6% / -20% on gemma-3-4b, AMP / bf16-pure);
# elsewhere its adapters' tensors are planned as a fully trained tower's, not traced
UNCOUNTED_TOWER_ADAPTERS = (
    "--lora-vision with the tower not checkpointed in fp32, under ZeRO or FSDP, or with another LoRA variant: the "
    "tower's adapters' saved tensors are planned as a fully trained tower's, not traced (at zero 0 under AMP and "
    "bf16-pure they are, within 1% of the sim)"
)


def tower_adapters_uncounted(k: Knobs, v, images: int) -> str:
    """The line saying what a plan with LoRA on an unchecked tower leaves out (UNCOUNTED_TOWER_ADAPTERS), or ""."""
    if not (k.lora_rank and k.lora_vision and v and images and tower_unchecked(k, v)) or tower_lora.examined(k):
        return ""
    return UNCOUNTED_TOWER_ADAPTERS


def tower_profile(s: Setup, profile: str, ckpt: str) -> str:
    """The tower's activation profile: the language model's, but torch AMP's for a LayerNorm tower trained in full
    beside LoRA (--lora-tower-full) under autocast and not checkpointed: its half weights' LayerNorms run in fp32 on
    an fp32 cast of their input, which they save, as an fp32 tower's do on its fp32 stream. A Qwen tower's RMSNorm
    upcasts in Python whatever autocast says, and a checkpointed tower keeps its blocks' half inputs: the language
    model's profile (the sim of qwen2.5-vl-3b, gemma-3-4b, qwen3-vl-8b and internvl2.5-8b under bf16 AMP:
    tests/probes/test_tower_full.py)."""
    k, v = s.knobs, s.model.vision
    layernorm = v.block != "rmsnorm-rotary"
    return "amp" if s.lora and k.lora_tower_full and torch_autocast(k) and ckpt == "off" and layernorm else profile


def tiled_tower_bytes(s: Setup) -> int:
    """Llama-3.2-Vision's tower beside its blocks (planner.estimate.vision: tile_mask_bytes, tile_norm_inputs_bytes,
    tile_embedding_bytes) where it records a graph (trained, or hooked while frozen: frozen_tower_in_graph), and its
    projector's input where the projector trains (projector_input_bytes). 0 for the other towers."""
    v, p = s.model.vision, text_shape(s)[3]
    images = s.image_rows * s.tower_image_tokens  # one <|image|> token an image (planner/model/mllama.py)
    if v is None or not v.cross_tokens_per_token or not images:
        return 0
    total = vision.projector_input_bytes(v, images, p) if projector_is_trained(s) else 0
    weights = tower_is_trained(s) and not s.lora
    hooked = not tower_is_trained(s) and not off_by_knobs(s) and frozen_tower_in_graph(s)
    if not (tower_is_trained(s) or hooked):
        return total
    total += 0 if s.knobs.attention == "eager" else vision.tile_mask_bytes(v, images, p)
    total += vision.tile_norm_inputs_bytes(v, images, p, weights or hooked)
    return total + (vision.tile_embedding_bytes(v, images, p) if weights else 0)


def frozen_tower_in_graph(s: Setup) -> bool:
    """A frozen tower that records a graph all the same: the framework's release makes its input require a gradient
    under checkpointing (Framework.frozen_tower_input_grads) and the tower's class takes the hook
    (VisionSpec.input_embeddings). Its blocks un-checkpointed (--vit-checkpointing off) are not examined."""
    v, k = s.model.vision, s.knobs
    if v is None or not v.input_embeddings or tower_is_trained(s) or k.framework not in FRAMEWORKS:
        return False
    return adapter(k.framework, k.release).frozen_tower_input_grads


def off_by_knobs(s: Setup) -> bool:
    """The tower's checkpointing turned off by the knobs (--checkpointing off, --vit-checkpointing off)."""
    return s.knobs.checkpointing == "off" or s.knobs.vit_checkpointing == "off"


def frozen_tower_hooked_bytes(s: Setup) -> int:
    """What a hooked frozen tower (frozen_tower_in_graph) keeps under checkpointing: its blocks' inputs where its
    layers checkpoint at the line's newest transformers (VisionSpec.checkpointed, checkpointed_until: Mllama's up to
    4.53), else its whole input-gradient graph (ms-swift's find_module_list wraps no layers of a tower holding a
    `gradient_checkpointing` attribute, v3.12.6 swift/llm/utils.py:90-99)."""
    v, p = s.model.vision, text_shape(s)[3]
    if v.checkpointed or _older(adapter(s.knobs.framework, s.knobs.release).transformers_newest, v.checkpointed_until):
        return vision.frozen_tower_checkpoint_bytes(v, tower_patches(s), p)
    return vision.frozen_tower_graph_bytes(v, tower_patches(s), p)


def _older(newest: tuple, until: tuple) -> bool:
    """A line whose newest transformers pin (() where it pins below 4.48: ms-swift 2.x) comes before `until`."""
    return bool(until) and (not newest or tuple(newest) < tuple(until))


def tower_patches(s: Setup) -> int:
    """The patches one tower call runs: every image of the micro-batch (of its packed rows: Setup.image_rows)."""
    return s.image_rows * vision.encoder_tokens(s.model.vision, s.tower_image_tokens)


def ulysses_layer_bytes(s: Setup) -> int:
    """What Ulysses adds to a layer's saved tensors: its attention output saved twice, KV heads repeated to the group
    (parallel.ulysses_layer_saved_bytes; 0 without the split). `s`: the rank's view."""
    t, rows, width, p = text_shape(s)
    return parallel.ulysses_layer_saved_bytes(s.knobs, t, rows * width, act.saved_dtype_bytes(p)[1])


def int8_retained_inputs_bytes(s: Setup) -> int:
    """An int8 base's linears keep their inputs in ctx.tensors (planner.estimate.quant): in a layer under full or
    every-N checkpointing, or offloaded, every one of them stays, where the checkpoint (or the offload hooks) would
    have dropped it. Selective-op is not examined (none counted)."""
    k, (t, rows, width, p) = s.knobs, text_shape(s)
    if k.quant != quant.INT8 or k.checkpointing in ("off", "selective-op"):
        return 0
    kept = t.layers if k.checkpointing == "offload" else recipe_terms.checkpointed_layers(k, t.layers)
    return kept * quant.retained_inputs_bytes(s.model, k.quant, rows * width, act.saved_dtype_bytes(p)[1])


def quant_layer_bytes(s: Setup) -> int:
    """What a quantized base adds to the saved tensors of a layer not under a checkpoint:
    - int8 keeps each linear's input (ctx.tensors), beyond what the layer saves when no adapter saves the same
      tensor: o_proj's input is the attention output its kernel saves anyway; where PEFT casts
      the adapters' input to fp32 (zero 0 in half precision) each lora_A saves a copy of its own, so every other
      input stays too; in fp32 or under DeepSpeed (adapters in the module's dtype) lora_A saves the input itself,
      so only the inputs of groups left unadapted stay;
    - hqq saves each linear's input as int8 keeps it (HQQMatmulNoCacheMul's save_for_backward), dropped by a
      checkpoint as every saved tensor is;
    - gptq saves every linear's dequantized weight."""
    k, (_, rows, width, p) = s.knobs, text_shape(s)
    if k.quant not in (quant.INT8, quant.HQQ):
        return quant.saved_weights_layer_bytes(s.model, k.quant, dense_names(s))
    shares = p == "fp32" or k.zero_stage > 0

    def saved(name: str, group: list) -> bool:
        return name == "o_proj" or (shares and any(x.adapted(k.lora_targets) for x in group))

    return quant.retained_inputs_bytes(s.model, k.quant, rows * width, act.saved_dtype_bytes(p)[1], saved)


def lora_layer_bytes(s: Setup) -> int:
    """What LoRA changes in one layer's saved tensors: dropout masks, the adapters' own input copies and outputs, the
    inputs the frozen linears and norms do not save (planner/estimate/lora.py), a quantized base's; or what a frozen
    language model does not save (planner/estimate/frozen_lm.py)."""
    if "lora_layer_bytes" not in s.memo:  # asked for several times a candidate: computed once (Setup.memo)
        s.memo["lora_layer_bytes"] = _lora_layer_bytes(s)
    return s.memo["lora_layer_bytes"]


def _lora_layer_bytes(s: Setup) -> int:
    _, rows, width, p = text_shape(s)
    tokens = rows * width
    if frozen_lm.language_frozen(s.knobs):
        return -frozen_lm.layer_dropped_bytes(s.model, p, tokens)
    out = lora.dropout_layer_bytes(s.model, s.knobs, tokens, p) + quant_layer_bytes(s)
    out += lora.dora_saved_layer_bytes(s.model, s.knobs, tokens)
    if oft.oft(s.knobs):  # on the layers lora.layer_examined names (spec_lora.oft_model_error), any sharding
        return out + oft.layer_delta_bytes(s.model, s.knobs, tokens)
    if boft.boft(s.knobs):  # on the layers lora.layer_examined names (spec_lora.oft_model_error), one GPU or DDP
        return out + boft.layer_delta_bytes(s.model, s.knobs, tokens)
    if bottleneck.bottleneck(s.knobs):  # planned where lora.layer_examined holds (spec_lora.oft_model_error)
        return out + bottleneck.layer_delta_bytes(s.model, s.knobs, tokens)
    if lora.cast_layer_examined(s.model, s.knobs):
        return out + lora.cast_layer_delta_bytes(s.model, s.knobs, tokens)
    wide = s.knobs.precision in ("fp32", "bf16-pure") and not s.knobs.zero_stage  # fp32 adapters, no autocast
    # in half (autocast, bf16-pure's fp32 adapters, DeepSpeed's half ones: the sim's trace under ZeRO-2 agrees) each
    # lora_A keeps its own input; in fp32 LoRA's adapters share the layer's inputs
    shared = None if p == "half" else lora.shared_inputs_width(s.model, s.knobs)
    out += peft_tuners.vera_saved_layer_bytes(s.model, s.knobs, tokens, 4 if wide else 2, shared)
    examined = lora.layer_examined(s.model, s.knobs)
    if examined and p == "half":
        return out + lora.half_layer_delta_bytes(s.model, s.knobs, tokens)
    if examined:
        out += lora.adapter_outputs_bytes(s.model, s.knobs, tokens)
    return (
        out
        - lora.unadapted_inputs_bytes(s.model, s.knobs, tokens, p)
        + lora.adapter_input_bytes(s.model, s.knobs, tokens, p)
    )


def plora_layer_bytes(s: Setup) -> int:
    """InternLM-XComposer2's own Partial LoRA in one layer (planner/model/xcomposer.py): each PLoRA's dropout mask
    over the image tokens, whatever the tuner (its Plora weights frozen or trained alike keep it)."""
    if not s.model.text.traits.image_lora_rank or not s.image_tokens:
        return 0
    _, rows, _, p = text_shape(s)
    per = xcomposer.plora_saved_bytes_per_image_token(s.model.text, not s.lora, act.saved_dtype_bytes(p)[1])
    return rows * s.image_tokens * per


def frozen_ends_bytes(s: Setup) -> int:
    """A LoRA run with a frozen embedding and head, no checkpointing: the first layer's input needs no gradient, so
    its first norm keeps nothing (4 bytes an element less), while the final norm keeps only its fp32 input (4
    bytes): together nothing of what final_norm_bytes counts (sim trace, Llama-3.2-1B and Qwen2.5-0.5B)."""
    k, (t, rows, width, p) = s.knobs, text_shape(s)
    if not t.final_norm:  # a device_map GPU before the head's (planner.estimate.devicemap): neither end's tensors
        return 0
    if frozen_lm.language_frozen(k) or freeze.freeze_tuned(k):  # a frozen final norm and head (frozen_lm.py)
        return frozen_lm.ends_dropped_bytes(s.model, p, rows * width)
    if k.checkpointing == "offload":  # the final norm's tensors are on the host (activations_bytes counts none)
        return 0
    if k.task == "embedding":  # the identity lm_head (planner.estimate.heads) keeps no input: the RMSNorm output
        return act.saved_dtype_bytes(p)[1] * rows * width * t.hidden
    examined = lora.layer_examined(s.model, k) or lora.cast_layer_examined(s.model, k)
    if not examined or k.checkpointing != "off" or k.lora_train_embeddings:
        # a frozen head keeps no input: the RMSNorm output final_norm_bytes counts for a trained head (under AMP it
        # counts the bf16 copy, as the sim found for LoRA too)
        frozen_head = s.lora and not k.lora_train_embeddings and not t.traits.layernorm and p != "amp"
        return act.saved_dtype_bytes(p)[1] * rows * width * t.hidden if frozen_head else 0
    return act.final_norm_bytes(t, rows, width, p)


def lora_ends_bytes(s: Setup) -> int:
    """LoRA on the embedding and the head (planner.estimate.lora_ends): what their adapters save; with the
    embedding's, the first layer's input where frozen_ends_bytes took its norm's tensors away."""
    k, (_, rows, width, _) = s.knobs, text_shape(s)
    if not lora_ends.ends(k) or k.checkpointing == "offload":  # offload: on the host with every saved tensor
        return 0
    examined = lora.layer_examined(s.model, k) or lora.cast_layer_examined(s.model, k)
    first = examined and k.checkpointing == "off" and not k.lora_train_embeddings
    tokens = rows * width
    return lora_ends.head_saved_bytes(s.model, k, tokens) + lora_ends.embed_saved_bytes(s.model, k, tokens, first)


def host_activation_bytes_per_node(s: Setup) -> int:
    """--checkpointing offload: every rank's saved activations in pinned host memory; offload-inputs: its layers'
    inputs."""
    t, rows, width, p = text_shape(s)
    if s.knobs.checkpointing == "offload-inputs":
        return recipe_terms.host_layer_inputs_bytes(t, rows, width, p) * s.node_ranks
    if s.knobs.checkpointing != "offload":
        return 0
    return recipe_terms.host_activation_bytes(t, rows, width, p) * s.node_ranks
