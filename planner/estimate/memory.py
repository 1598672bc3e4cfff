"""Per-rank memory of a training step: one small function per term, in bytes, then the peak.

Model states follow the ZeRO paper (Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward
Training Trillion Parameter Models", section 5) as DeepSpeed 0.19 really implements them:
- stages 1-2 keep an fp32 master partition even in fp32 runs, and build an fp32 gradient
  partition at step time (`single_partition_of_fp32_groups[i].grad`): DeepSpeed's own
  `estimate_zero2_model_states_mem_needs` counts 2 + 18/N bytes per parameter where the paper says
  2 + 14/N;
- stage 3 gathers whole modules while they run (DeepSpeed's estimate: 4 x largest layer params);
- the optimizer is DeepSpeed's fused Adam (no full-size temporaries), see export.py, unless the user's DeepSpeed
  config names none (knob client_optimizer: zero.client_step_temp_bytes_per_element).
Without DeepSpeed (zero 0) the optimizer is torch's: `adamw` is the foreach implementation torch
uses on CUDA by default, whose step allocates a full-size temporary (exp_avg_sq.sqrt()), while
`adamw-fused` does not (torch/optim/adamw.py, `_multi_tensor_adamw` vs `_fused_adamw`).

The peak is the largest of three moments of a steady-state step (after the first optimizer step):
- "backward": the larger of two moments. The start of backward: all saved activations, logits/loss,
  masks, autocast weight copies. The last layer's backward, after the logits are freed: its saved
  (under full checkpointing, recomputed) activations and the MLP's gradient transient, every other
  layer's, the head's gradients. Gradients of all layers count only when accumulating (HF zeroes
  them with set_to_none after each step). The sim probe showed the two moments never overlap
  (benchmarks/accuracy.py: counting the recomputed layer on top of the logits over-estimated
  full-checkpointing peaks by 9-23%);
- "end-of-backward": all gradients, one layer's activations (recomputed under checkpointing), one
  gradient-sized transient of the largest matrix;
- "optimizer-step": all gradients plus the optimizer's temporaries.
"""

from __future__ import annotations

from dataclasses import replace
from functools import wraps

from planner.config.spec import Knobs, MemoryBreakdown
from planner.config.tasks import NO_VOCABULARY
from planner.estimate import activations as act
from planner.estimate import (
    dataparallel,
    devicemap,
    frozen_lm,
    fsdp,
    gkd,
    heads,
    lifecycle,
    lora,
    nograd,
    parallel,
    quant,
    recipe_terms,
    role_heads,
    vision,
    zero,
)
from planner.estimate.overheads import (  # noqa: F401 - re-exported: callers and tests name them memory.X
    CUDA_CONTEXT_BYTES,
    FRAGMENTATION_FRACTION,
    FRAGMENTATION_FRACTION_EXPANDABLE,
    fragmentation_fraction,
    measured_fragmentation,
    overhead_bytes,
    overhead_source,
)
from planner.estimate.overheads import terms as overhead_terms
from planner.estimate.setup import Setup
from planner.estimate.trained import (  # re-exported: the terms' callers and tests name them memory.X
    embedding_copy_overcount_bytes,
    frozen_bytes,
    frozen_modules,
    frozen_params,
    frozen_weight_bytes_per_param,
    largest_trainable_matrix_params,
    optimizer_state_bytes_per_param,
    trainable_params,
    trainable_tensor_sizes,
    trainable_weight_bytes_per_param,
)
from planner.frameworks import FRAMEWORKS, adapter
from planner.model import xcomposer
from planner.model.modelspec import IDLE_HEAD

ADAMW_8BIT_MIN_SIZE = 4096  # bitsandbytes keeps 32-bit states for tensors smaller than this
PAGED_MIN_ELEMENTS = 100_000  # bitsandbytes 0.50.2 optim/optimizer.py:383: smaller tensors' states stay in torch


def activation_profile(k: Knobs) -> str:
    if k.precision == "fp32":
        return "fp32"
    if k.fsdp != "off":  # MixedPrecisionPolicy casts the unsharded parameters: the module runs in bf16
        return "half"
    return "amp" if k.zero_stage == 0 and k.precision in ("fp16", "bf16") and k.lora_rank == 0 else "half"


def params_bytes(s: Setup) -> int:
    """Model weights resident on the GPU (ZeRO-3: this rank's partition; with param offload: none)."""
    k = s.knobs
    total = (
        trainable_params(s) * trainable_weight_bytes_per_param(k)
        + frozen_bytes(s)
        - embedding_copy_overcount_bytes(s, trainable_weight_bytes_per_param(k))
    )
    whole = quant.replicated_bytes(s.model, k.quant, k.quant_absmax)  # a quantized base's constants: on every rank
    if k.fsdp != "off":
        return fsdp.sharded(s, total - whole) + whole
    if k.zero_stage == 3:
        return whole if k.offload == "optimizer+params" else (total - whole) // s.world_size + whole
    return total


def adafactor_state_elements(s: Setup) -> int:
    """Adafactor (Shazeer & Stern 2018) keeps row and column statistics for a matrix, a full second
    moment for a vector; HF's default has no first moment. LoRA: the A (r x d_in) and B (d_out x r)
    factors of every adapted weight."""
    r = s.knobs.lora_rank
    if s.lora:
        return sum(
            (2 * r + t.shape[0] + t.shape[1]) * t.count for t in s.model.tensors if t.adapted(s.knobs.lora_targets)
        ) + lora.embedding_copy_params(s.model, s.knobs)
    return sum(
        (sum(t.shape[:-1]) + t.shape[-1] if len(t.shape) >= 2 else t.shape[0]) * t.count for t in s.model.tensors
    )


def adamw_8bit_state_bytes(s: Setup) -> int:
    """bitsandbytes 8-bit AdamW: 1-byte moments plus absmax per block; 32-bit states for tensors
    under ADAMW_8BIT_MIN_SIZE elements."""
    per_big = optimizer_state_bytes_per_param("adamw-8bit", 4)
    if s.lora:
        return int(trainable_params(s) * per_big)
    total = 0.0
    for t in s.model.tensors:
        n = t.numel // t.count
        total += t.numel * (8 if n < ADAMW_8BIT_MIN_SIZE else per_big)
    return int(total)


def optimizer_bytes(s: Setup) -> int:
    """Optimizer states on the GPU, in torch's allocator. zero 0: torch keeps states in the parameter dtype (paged
    ones apart: paged_optimizer_bytes); ZeRO keeps an fp32 master copy plus fp32 states, partitioned over the world;
    offloaded states live on the host."""
    k, T = s.knobs, trainable_params(s)
    if k.zero_stage == 0:
        sb = trainable_weight_bytes_per_param(k)
        if k.optimizer == "adafactor":
            whole = adafactor_state_elements(s) * sb
        elif k.optimizer in ("adamw-8bit", "paged-adamw-8bit"):
            whole = adamw_8bit_state_bytes(s)
        elif k.optimizer == "paged-adamw":  # bitsandbytes' 32-bit states are fp32 whatever the parameters
            whole = 8 * T
        else:
            whole = int(T * optimizer_state_bytes_per_param(k.optimizer, sb))
            whole -= embedding_copy_overcount_bytes(s, int(optimizer_state_bytes_per_param(k.optimizer, sb)))
        return fsdp.sharded(s, whole) if k.fsdp != "off" else whole - paged_optimizer_bytes(s)
    if k.offload != "none":
        return 0
    return int(T * (4 + optimizer_state_bytes_per_param(k.optimizer, 4))) // s.world_size


def paged_optimizer_bytes(s: Setup) -> int:
    """bitsandbytes' paged optimizers keep the states of tensors of 1e5 elements or more in CUDA unified memory
    (bitsandbytes 0.50.2 optim/optimizer.py:383-390 get_state_buffer -> functional.py:91-99 get_paged:
    cudaMallocManaged through cget_managed_ptr), outside torch's caching allocator: max_memory_allocated does not
    see them, and the driver pages them to host memory when the card is full, so they never cause an OOM. They are
    counted apart from the device peak. 32-bit states are fp32 whatever the parameters (optimizer.py:495-503);
    8-bit ones as adamw_8bit_state_bytes. torch DDP or one GPU only (ZeRO and FSDP keep their own states)."""
    k = s.knobs
    if not k.optimizer.startswith("paged") or k.zero_stage or k.fsdp != "off":
        return 0
    per = 8 if k.optimizer == "paged-adamw" else optimizer_state_bytes_per_param("adamw-8bit", 4)
    return int(sum(n * c * per for n, c in trainable_tensor_sizes(s) if n >= PAGED_MIN_ELEMENTS))


def grad_bytes_per_param(k: Knobs) -> int:
    return trainable_weight_bytes_per_param(k)


def gradients_bytes(s: Setup) -> int:
    """All gradients this rank holds once backward is done (zero 0/1: full; 2/3: its partition)."""
    k, T, g = s.knobs, trainable_params(s), grad_bytes_per_param(s.knobs)
    if k.optimizer_in_backward:  # each gradient is stepped and freed as it arrives: one at a time
        return largest_trainable_matrix_params(s) * g
    if k.zero_stage == 0 and k.fsdp == "off":
        return T * g - embedding_copy_overcount_bytes(s, g)
    if k.fsdp != "off":
        return fsdp.sharded(s, T * g)
    if k.zero_stage == 0:
        return T * g
    if k.zero_stage == 1:
        return T * g + (0 if k.offload != "none" else T * g // s.world_size)
    return 0 if k.offload != "none" else T * g // s.world_size


def comm_bucket_bytes(s: Setup) -> int:
    """Persistent gradient communication buffers: DDP buckets (a copy of every gradient, since HF
    does not set gradient_as_bucket_view) for world > 1, DeepSpeed's contiguous reduce buckets
    (zero.reduce_buckets_bytes) and ZeRO-1/2's GPU staging buffer for an offloaded optimizer
    (zero.offload_staging_bytes)."""
    k, g = s.knobs, grad_bytes_per_param(s.knobs)
    if k.fsdp != "off":  # reduce-scatter buffers are per unit, in backward: fsdp.backward_temp_bytes
        return 0
    if k.zero_stage == 0:  # nn.DataParallel has no DDP buckets (planner.estimate.dataparallel)
        return trainable_params(s) * g if s.world_size > 1 and not k.dataparallel else 0
    return zero.reduce_buckets_bytes(s) + zero.offload_staging_bytes(s)


def model_states_bytes(s: Setup) -> int:
    """Parameters, every gradient, the communication buckets and the optimizer states a rank holds (on its view:
    parallel.view), whatever the micro-batch: the end of backward holds them all (_breakdown's detail of the same
    name), so no plan of these knobs needs less (planner.search.ranked.cannot_fit)."""
    return params_bytes(s) + gradients_bytes(s) + comm_bucket_bytes(s) + optimizer_bytes(s)


def backward_grads_bytes(s: Setup, grads_full: int) -> int:
    """Gradients held while backward runs (its activations still live): with accumulation, what earlier micro-steps
    left; ZeRO-3 allocates its gradient partition buffer at init whatever the accumulation (stage3.py:789-801),
    and ZeRO-2 its partition buffer at the first reduction of every backward, a second one beside the kept sum
    from the second micro-step on (stage_1_and_2.py:2184-2194, 1038-1045); FSDP2 without synchronisation every
    trainable parameter's unsharded gradient (fsdp.accumulated_grads_bytes)."""
    k = s.knobs
    if k.fsdp != "off" and s.grad_accum > 1 and FRAMEWORKS[k.framework].fsdp_no_sync:  # unsharded until the last
        return fsdp.accumulated_grads_bytes(s, trainable_params(s))
    if k.fsdp == "off" and k.offload == "none" and k.zero_stage == 3:
        return grads_full
    if k.fsdp == "off" and k.offload == "none" and k.zero_stage == 2:
        return grads_full * (2 if s.grad_accum > 1 else 1)
    return grads_full if s.grad_accum > 1 else 0


def once_per_setup(term):
    """A term of the setup alone, computed once per Setup (its memo): the breakdown and its phases ask for several
    terms two or three times a candidate."""

    @wraps(term)
    def cached(s: Setup) -> int:
        memo = s.memo
        if term not in memo:
            memo[term] = term(s)
        return memo[term]

    return cached


@once_per_setup
def gathered_params_bytes(s: Setup) -> int:
    """Parameters gathered while their module runs: ZeRO-3's, or FSDP's unsharded units."""
    return fsdp.unsharded_params_bytes(s) if s.knobs.fsdp != "off" else zero.zero3_live_params_bytes(s)


def optimizer_step_temp_bytes(s: Setup) -> int:
    """Temporaries of the optimizer step: torch foreach AdamW one full-size tensor (sqrt of the
    second moment); Adafactor per tensor (about three of the largest); ZeRO the flat and fp32 copies of the
    gradient group it steps (zero.zero_step_temp_bytes); fused, SGD and 8-bit kernels none."""
    k, T = s.knobs, trainable_params(s)
    if k.zero_stage >= 1:
        return zero.zero_step_temp_bytes(s, T)
    sb = trainable_weight_bytes_per_param(k)
    if k.optimizer_in_backward:  # one parameter's step at a time, inside backward
        return largest_trainable_matrix_params(s) * sb if k.optimizer == "adamw" else 0
    if k.fsdp != "off":  # the step runs on the shards (on the host with offload)
        return 0 if k.offload != "none" or k.optimizer != "adamw" else fsdp.sharded(s, T * sb)
    if k.optimizer == "adamw":
        return T * sb
    if k.optimizer == "adafactor":
        return 3 * 4 * largest_trainable_matrix_params(s)
    return 0


def autocast_weight_copy_bytes(s: Setup, layers_live: int) -> int:
    """torch.autocast caches a bf16 copy of every fp32 weight a matmul uses, and the matmul saves it
    for backward: without checkpointing every layer's copy lives until its backward; with it only
    the lm_head's and the recomputed layer's."""
    fp32_base = s.knobs.lora_base_fp32 and s.knobs.fsdp == "off"  # LoRA on an fp32 base: autocast copies it too
    if activation_profile(s.knobs) != "amp" and not fp32_base:
        return 0
    m = s.model
    per_layer = sum(t.numel for t in m.tensors if t.role == "layer" and len(t.shape) == 2) // m.text.layers
    head = m.text.vocab * m.text.hidden
    return 2 * (per_layer * layers_live + head + (tower_matrices_run(s) if layers_live == m.text.layers else 0))


def tower_is_trained(s: Setup) -> bool:
    """The tower is trained in full, or carries LoRA adapters (which need its inputs saved)."""
    return s.knobs.lora_vision if s.lora else "vision" not in s.knobs.frozen


def tower_matrices_run(s: Setup) -> int:
    """The tower's and projector's matrices whose autocast copies a step with images saves: the trained parts' (a
    frozen tower's forward records no graph), the tower's live layers only (planner.estimate.vision)."""
    v = s.model.vision
    if v is None or not s.tower_image_tokens:
        return 0
    tower_trained = tower_is_trained(s)
    projector_trained = not s.lora and "projector" not in s.knobs.frozen
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
    return recipe_terms.text_spec(t, s.knobs, adapted), rows, width, activation_profile(s.knobs)


def live_weight_copy_layers(s: Setup) -> int:
    """Layers whose autocast weight copies stay saved until their backward (not under a checkpoint or offload)."""
    k, n = s.knobs, text_shape(s)[0].layers
    return 1 if k.checkpointing == "offload" else max(1, n - recipe_terms.checkpointed_layers(k, n))


@once_per_setup
def activations_bytes(s: Setup) -> int:
    """Saved activations at the start of backward: text layers, vision tower, final norm."""
    t, rows, width, p = text_shape(s)
    total = recipe_terms.text_activations_bytes(t, s.knobs, rows, width, p)
    if s.knobs.checkpointing != "offload":  # LoRA's own tensors and Ulysses', in the layers not under a checkpoint
        total += (t.layers - recipe_terms.checkpointed_layers(s.knobs, t.layers)) * (
            lora_layer_bytes(s) + ulysses_layer_bytes(s) + plora_layer_bytes(s)
        )
    total += int8_retained_inputs_bytes(s) - frozen_ends_bytes(s)
    v = s.model.vision
    if v is not None:
        off = s.knobs.checkpointing == "off" or s.knobs.vit_checkpointing == "off" or not v.checkpointed
        ckpt = "off" if off else "full"
        trained = tower_is_trained(s)
        eager = s.knobs.attention == "eager"
        total += vision.vision_activations_bytes(v, s.micro_batch, s.tower_image_tokens, p, ckpt, trained, eager)
        if trained and ckpt == "off" and masked_tower(s):  # each block's N x N softmax stays for its backward
            total += vision.masked_tower_saved_bytes(v, tower_patches(s), p)
        live = t.cross_layers * (t.layers - recipe_terms.checkpointed_layers(s.knobs, t.layers)) // t.layers
        total += act.cross_attention_bytes(t, v, s.micro_batch, s.image_tokens, s.seq_len, p, live)
    return total


def whole_logits(s: Setup) -> bool:
    """A GRPO step scored from the model's whole logits: the framework's release does it for a multimodal model
    (Framework.vlm_logprobs "whole": ms-swift 3.2-3.6, recipe_terms.whole_logits_logps_bytes) and the model has a
    tower (ms-swift's model_meta.is_multimodal is the model's, whether the rows hold images or not)."""
    k = s.knobs
    if k.workload.kind != "grpo" or s.model.vision is None or k.framework not in FRAMEWORKS:
        return False
    return adapter(k.framework, k.release).vlm_logprobs == "whole"


masked_tower = nograd.masked_tower  # where the no-grad passes ask too; tests and callers name it memory.masked_tower


def tower_patches(s: Setup) -> int:
    """The patches one tower call runs: every image of the micro-batch."""
    return s.micro_batch * vision.encoder_tokens(s.model.vision, s.tower_image_tokens)


def masked_tower_phase(s: Setup, accumulated: int, grads_full: int, opt: int) -> tuple[int, int, int, int] | None:
    """The tower's moment where its blocks run masked_tower: a trained tower's backward, after the decoder's (its
    gradients all but made, the tower's checkpointed inputs kept); a frozen tower's forward, before the decoder's
    (the gradients accumulated so far, nothing saved). None where the tower does not run it."""
    if not masked_tower(s):
        return None
    v, trained, p = s.model.vision, tower_is_trained(s), text_shape(s)[3]
    off = s.knobs.checkpointing == "off" or s.knobs.vit_checkpointing == "off" or not v.checkpointed
    saved = vision.vision_activations_bytes(v, s.micro_batch, s.tower_image_tokens, p, "off" if off else "full", True)
    temp = gathered_params_bytes(s) + vision.masked_tower_bytes(v, tower_patches(s), p, trained)
    return (grads_full, opt, saved, temp) if trained else (accumulated, opt, 0, temp)


def tower_detail(s: Setup, tower: tuple[int, int, int, int]) -> dict[str, int]:
    """The breakdown's detail where the tower's masked moment is the peak: its scores' bytes (what a smaller image
    or fewer of them shrink, planner.search.advice) and the knob that sizes its call (vision.tower_knob)."""
    v, p = s.model.vision, text_shape(s)[3]
    scores = vision.masked_tower_bytes(v, tower_patches(s), p, tower_is_trained(s))
    return {"vision_tower_bytes": scores, "vision_knob": vision.tower_knob(v)}


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
    - gptq saves every linear's dequantized weight."""
    k, (_, rows, width, p) = s.knobs, text_shape(s)
    if k.quant != quant.INT8:
        return quant.saved_weights_layer_bytes(s.model, k.quant)
    shares = p == "fp32" or k.zero_stage > 0

    def saved(name: str, group: list) -> bool:
        return name == "o_proj" or (shares and any(x.adapted(k.lora_targets) for x in group))

    return quant.retained_inputs_bytes(s.model, k.quant, rows * width, act.saved_dtype_bytes(p)[1], saved)


@once_per_setup
def lora_layer_bytes(s: Setup) -> int:
    """What LoRA changes in one layer's saved tensors: dropout masks, the adapters' own input copies and outputs, the
    inputs the frozen linears and norms do not save (planner/estimate/lora.py), a quantized base's; or what a frozen
    language model does not save (planner/estimate/frozen_lm.py)."""
    _, rows, width, p = text_shape(s)
    tokens = rows * width
    if frozen_lm.language_frozen(s.knobs):
        return -frozen_lm.layer_dropped_bytes(s.model, p, tokens)
    out = lora.dropout_layer_bytes(s.model, s.knobs, tokens, p) + quant_layer_bytes(s)
    out += lora.dora_saved_layer_bytes(s.model, s.knobs, tokens)
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
    if frozen_lm.language_frozen(k):  # a frozen language model: its final norm and head (planner/estimate/frozen_lm.py)
        return frozen_lm.ends_dropped_bytes(s.model, p, rows * width)
    if k.checkpointing == "offload":  # the final norm's tensors are on the host (activations_bytes counts none)
        return 0
    if k.task == "embedding":  # the identity lm_head (planner.estimate.heads) keeps no input: the RMSNorm output
        return act.saved_dtype_bytes(p)[1] * rows * width * t.hidden
    if not lora.layer_examined(s.model, k) or k.checkpointing != "off" or k.lora_train_embeddings:
        # a frozen head keeps no input: the RMSNorm output final_norm_bytes counts for a trained head (under AMP it
        # counts the bf16 copy, as the sim found for LoRA too)
        frozen_head = s.lora and not k.lora_train_embeddings and not t.traits.layernorm and p != "amp"
        return act.saved_dtype_bytes(p)[1] * rows * width * t.hidden if frozen_head else 0
    return act.final_norm_bytes(t, rows, width, p)


@once_per_setup
def logits_loss_bytes(s: Setup) -> int:
    t, rows, width, p = text_shape(s)
    head_trainable = (not s.lora or s.knobs.lora_train_embeddings) and not frozen_lm.language_frozen(s.knobs)
    head_grad = grad_bytes_per_param(s.knobs) if head_trainable else 0
    w = s.knobs.workload
    if s.knobs.role_run or (
        w.rl and role_heads.upcasts(s.knobs.framework)
    ):  # verl / OpenRLHF (DPO too) heads  # verl's / OpenRLHF's actor (a critic: its one-output head, vocab 1)
        entropy = w.roles.entropy if t.vocab > 1 else "off"
        c = act.saved_dtype_bytes(p)[1]
        up = role_heads.upcasts(s.knobs.framework) and t.vocab > 1
        return role_heads.update_head_bytes(rows * width, t.vocab, t.hidden, c, entropy, head_grad, up)
    if w.kind == "gkd":  # both models' logits and the generalized JSD's temporaries
        return gkd.loss_bytes(s, rows)
    if whole_logits(s):  # ms-swift 3.2-3.6's GRPO on a multimodal model
        return recipe_terms.whole_logits_logps_bytes(t, rows, width, min(width, w.scored_tokens()), p)
    if w.rl and w.logprobs == "full":
        return recipe_terms.full_logprob_bytes(t, rows, width, p) + recipe_terms.packed_row_grad_bytes(
            t, s.knobs, rows * width, p
        )
    if w.rl:  # TRL scores the completion tokens with its fused log-prob head (a packed row: each row it packs)
        scored = rows * width // s.seq_len * max(1, min(s.seq_len, w.scored_tokens()))
        return recipe_terms.logprob_head_bytes(t, scored, p, head_grad)
    if s.knobs.task in NO_VOCABULARY:  # a score head or none (planner.estimate.heads)
        k, dp = s.knobs, s.knobs.data_parallel_of(s.world_size)
        c = act.saved_dtype_bytes(p)[1]
        return heads.task_head_bytes(k.task, rows, rows * width, t.hidden, k.num_labels, k.negatives, c, dp)
    head = adapter(s.knobs.framework, s.knobs.release).sft_head
    if head == "swift-sp" and s.knobs.sequence_parallel > 1 and s.knobs.loss != "fused":  # ms-swift's own SP loss
        return recipe_terms.swift_sp_loss_bytes(t, s.knobs, rows * width, p)
    if head == "fused-logprob":  # TRL's SFT: the same head, every next token
        return recipe_terms.logprob_head_bytes(t, rows * max(1, width - 1), p, head_grad)
    return recipe_terms.loss_bytes(t, s.knobs, rows * width, p, head_grad)


def backward_start_temp_bytes(s: Setup) -> int:
    t, rows, width, p = text_shape(s)
    return (
        logits_loss_bytes(s)
        + act.attention_mask_bytes(t, rows, width, p)
        + autocast_weight_copy_bytes(s, live_weight_copy_layers(s))
        + gathered_params_bytes(s)
        + dequantized_bytes(s)
    )


def dequantized_bytes(s: Setup) -> int:
    """A quantized base: the weight dequantized for the matmul running (planner.estimate.quant)."""
    bf16 = s.knobs.precision in ("bf16", "bf16-pure")
    return quant.dequantized_weight_bytes(s.model, s.knobs.quant, act.saved_dtype_bytes(text_shape(s)[3])[1], bf16)


def last_layer_activations_bytes(s: Setup) -> int:
    """During the last layer's backward: every layer's saved activations (under checkpointing, what each
    checkpointed layer keeps plus the recomputed layer's whole set; under offload, the layer brought back),
    the vision tower's; the final norm's saved tensors are freed by then."""
    t, rows, width, p = text_shape(s)
    recomputed = recipe_terms.recomputed_layer_bytes(t, s.knobs, rows, width, p)
    if recomputed and s.knobs.checkpointing != "offload":  # the recomputed layer holds LoRA's and Ulysses' tensors too
        recomputed += lora_layer_bytes(s) + ulysses_layer_bytes(s) + plora_layer_bytes(s)
    final = 0 if s.knobs.checkpointing == "offload" else act.final_norm_bytes(t, rows, width, p) - frozen_ends_bytes(s)
    return activations_bytes(s) - final + recomputed


def head_grad_bytes(s: Setup) -> int:
    """Gradients that exist once backward has passed the lm_head and the final norm (the head's
    gradient, or the tied embedding's), counted when gradients are not already all live."""
    if s.knobs.zero_stage >= 2 or s.knobs.fsdp != "off" or s.knobs.optimizer_in_backward:
        return 0
    if s.lora:  # the trained copy of the head, in the base's dtype
        return (
            s.model.text.vocab * s.model.text.hidden * frozen_weight_bytes_per_param(s.knobs)
            if s.knobs.lora_train_embeddings
            else 0
        )
    m = s.model
    idle = frozen_modules(s).endswith(IDLE_HEAD)  # an embedding run's head takes none (trained.frozen_modules)
    head = sum(t.numel for t in m.tensors if t.role == "norm" or (t.role == "head" and not idle))
    if not any(t.role == "head" for t in m.tensors):  # tied: the embedding's gradient (none without a head: vocab 0)
        head += sum(t.numel for t in m.tensors if t.role == "embed" and t.shape[0] == m.text.vocab)
    return head * grad_bytes_per_param(s.knobs)


def last_layer_temp_bytes(s: Setup) -> int:
    """During the last layer's backward: the mask, autocast weight copies, ZeRO-3 gathers, the
    gradient flowing into the layer (residual-stream width), the MLP's gradient transient or, where larger, eager
    attention's softmax backward (act.eager_softmax_backward_extra_bytes)."""
    t, rows, width, p = text_shape(s)
    r, _ = act.saved_dtype_bytes(p)
    return (
        act.attention_mask_bytes(t, rows, width, p)
        + autocast_weight_copy_bytes(s, live_weight_copy_layers(s))
        + gathered_params_bytes(s)
        + fsdp.backward_temp_bytes(s, end=False)
        + r * rows * width * t.hidden
        + dequantized_bytes(s)
        + max(
            act.mlp_backward_transient_bytes(t, rows, width, p),
            act.eager_softmax_backward_extra_bytes(t, rows, width, p),
        )
        + parallel_attention_temp_bytes(s)
    )


def parallel_attention_temp_bytes(s: Setup) -> int:
    """In the last layer's attention backward: Ulysses' all-to-all copy of the q, k and v gradients, ring attention's
    key/value blocks and their gradients in flight (planner.estimate.parallel; 0 without them)."""
    _, c = act.saved_dtype_bytes(text_shape(s)[3])
    return parallel.ulysses_all_to_all_bytes(s, c) + parallel.ring_kv_blocks_bytes(s, c, backward=True)


def tied_embedding_grad_transient_bytes(s: Setup) -> int:
    """A tied embedding's last moment: autograd holds the head's gradient in the weight's input buffer
    until the embedding's gradient arrives, then sums the two, so two vocab x hidden gradients live
    beside the gradients already counted (sim probe, Gemma-2 and Llama-3.2 at the end of backward:
    grads 1.2 GiB + temporaries 3 x 2.2 GiB where one gradient of the head was counted before)."""
    m = s.model
    if s.lora or not m.text.tied:
        return 0
    return 2 * m.text.vocab * m.text.hidden * grad_bytes_per_param(s.knobs)


def end_of_backward_temp_bytes(s: Setup) -> int:
    """The larger of the last layer's backward (its activations, the largest trainable matrix's gradient
    transient or eager attention's softmax backward, its autocast weight copies) and a tied embedding's gradient sum (when the head's bf16
    copy is already freed); ZeRO-3 gathers on top."""
    t, rows, width, p = text_shape(s)
    transient = largest_trainable_matrix_params(s) * grad_bytes_per_param(s.knobs)
    # eager attention's softmax backward: no weight gradient, and the MLP's and o_proj's autocast copies freed
    eager = act.eager_softmax_backward_extra_bytes(t, rows, width, p)
    layer = act.layer_bytes(t, rows, width, p) + max(transient + autocast_weight_copy_bytes(s, 1), eager)
    if t.moe:  # the gate-up output's gradient, beside the experts' weight gradient it makes
        layer += act.mlp_backward_transient_bytes(t, rows, width, p)
    return (
        max(layer, tied_embedding_grad_transient_bytes(s))
        + gathered_params_bytes(s)
        + fsdp.backward_temp_bytes(s, end=True)
        + dequantized_bytes(s)
    )


def host_offload_bytes_per_node(s: Setup) -> int:
    """Host RAM for offload, per node: per rank the fp32 master, states and fp32 gradient partition
    (16 bytes per parameter for AdamW, as DeepSpeed's estimate), plus half-precision parameter
    partitions with param offload; pinned, so it must fit in RAM."""
    k, T = s.knobs, trainable_params(s)
    if k.offload == "none":
        return 0
    if k.fsdp != "off":
        unsharded = replace(s, knobs=k.model_copy(update={"fsdp": "off", "offload": "none"}))
        states = params_bytes(unsharded) + gradients_bytes(unsharded) + optimizer_bytes(unsharded)
        return fsdp.host_offload_bytes_per_rank(s, states) * s.node_ranks
    per_rank = int(T * (4 + optimizer_state_bytes_per_param(k.optimizer, 4) + 4)) // s.world_size
    if k.offload == "optimizer+params":
        per_rank += (T * 2 + frozen_params(s) * frozen_weight_bytes_per_param(k)) // s.world_size
    return per_rank * s.node_ranks


def breakdown(s: Setup, capacity_bytes: int, activation_side: tuple[int, int] | None = None) -> MemoryBreakdown:
    """The per-rank breakdown at the peak moment; its terms add up to peak_allocated_bytes.
    activation_side: (activations, temporaries) at the backward peak as a probe measured them
    (the sim traces DeepSpeed plans without DeepSpeed), replacing the analytic ones. Under tensor, sequence or
    context parallelism every term runs on one rank's view (planner.estimate.parallel.view); under a device_map on
    the GPU whose share of the model needs most (planner.estimate.devicemap)."""
    s = parallel.view(s)
    if s.knobs.device_map > 1:
        return max(
            (_breakdown(d, capacity_bytes, None) for d in devicemap.setups(s, capacity_bytes)),
            key=lambda b: b.device_total_bytes,
        )
    return _breakdown(s, capacity_bytes, activation_side)


def _breakdown(s: Setup, capacity_bytes: int, activation_side: tuple[int, int] | None) -> MemoryBreakdown:
    params, opt, buckets = params_bytes(s), optimizer_bytes(s), comm_bucket_bytes(s)
    grads_full = gradients_bytes(s)
    acts = activations_bytes(s)
    backward_temp = backward_start_temp_bytes(s)
    if activation_side is not None:
        acts, backward_temp = (
            activation_side[0],
            (activation_side[1] + gathered_params_bytes(s) + fsdp.backward_temp_bytes(s, end=False)),
        )
    accumulated = backward_grads_bytes(s, grads_full)
    phases = {  # phase -> (gradients, optimizer states, activations, temporaries) beside the parameters and buckets
        "backward": (accumulated, opt, acts, backward_temp),
        "end-of-backward": (grads_full, opt, 0, end_of_backward_temp_bytes(s)),
        "optimizer-step": (grads_full, opt, 0, optimizer_step_temp_bytes(s)),
    }
    if activation_side is None:
        last_layer = (accumulated or head_grad_bytes(s), opt, last_layer_activations_bytes(s), last_layer_temp_bytes(s))
        if sum(last_layer) > sum(phases["backward"]):
            phases["backward"] = last_layer
    if lora.dora(s.knobs):  # DoRA's weight norm: in the last layer's forward, or in a layer recomputed in backward
        norm = lora.dora_norm_temp_bytes(s.model, s.knobs) + gathered_params_bytes(s)  # ZeRO-3's or FSDP's
        if s.knobs.checkpointing == "off":
            phases["forward"] = (accumulated, opt, acts, norm)
        elif norm + grads_full + acts > sum(phases["backward"]) - opt:
            phases["backward"] = (grads_full, opt, acts, norm)
    tower = masked_tower_phase(s, accumulated, grads_full, opt)  # a trained tower's runs in the backward
    name = "backward" if tower_is_trained(s) else "forward"
    if tower is not None and sum(tower) > sum(phases.get(name, (0,))):
        phases[name] = tower
    held = eval_grads_bytes(s, grads_full)  # between steps
    if s.knobs.eval_batch:
        phases["evaluation"] = (held, opt, 0, gathered_params_bytes(s) + nograd.eval_forward_bytes(s))
    if s.knobs.dataparallel:  # GPU 0's gathers and gradient sum (planner.estimate.dataparallel)
        others, end = backward_start_temp_bytes(s) - logits_loss_bytes(s), phases["end-of-backward"]
        states, shape = (accumulated, opt, acts), text_shape(s)[1:]
        dp = dataparallel.phases(s, shape, states, end, others, gradients_bytes(s), phases.get("evaluation"))
        phases |= {n: t for n, t in dp.items() if sum(t) >= sum(phases.get(n, (0,)))}  # a DoRA or tower forward
    phases["load"] = (held, 0, 0, lifecycle.load_gpu_transient_bytes(s))
    phases["checkpoint-save"] = (held, opt, 0, lifecycle.save_gpu_transient_bytes(s))
    phase = max(phases, key=lambda p: sum(phases[p]))
    grads, opt_at_peak, acts_at_peak, temp = phases[phase]
    peak = params + grads + buckets + opt_at_peak + acts_at_peak + temp
    overheads = overhead_terms(s, peak)
    overhead = sum(t.bytes for t in overheads)
    total = peak + overhead
    detail = {
        "gradient_buffers_bytes": buckets,
        "logits_loss_bytes": logits_loss_bytes(s),
        **({"whole_logits_bytes": logits_loss_bytes(s)} if whole_logits(s) else {}),  # render's name for the head
        **(tower_detail(s, tower) if tower is not None and phases[phase] is tower else {}),
        "saved_activations_bytes": acts,
        "zero3_live_params_bytes": zero.zero3_live_params_bytes(s),
        "fsdp_unsharded_params_bytes": fsdp.unsharded_params_bytes(s),
        "optimizer_step_temp_bytes": optimizer_step_temp_bytes(s),
        "eval_logits_kept_bytes": nograd.eval_logits_kept_bytes(s),
        "model_states_bytes": params + grads_full + buckets + opt,  # model_states_bytes(s), its terms at hand
    }
    host = lifecycle.host_phases(s, host_offload_bytes_per_node(s) + host_activation_bytes_per_node(s))
    return MemoryBreakdown(
        params_bytes=params,
        grads_bytes=grads + buckets,
        optimizer_bytes=opt_at_peak,
        activations_bytes=acts_at_peak,
        temp_bytes=temp,
        peak_allocated_bytes=peak,
        overhead_bytes=overhead,
        overhead_source=overhead_source(s),
        overheads=overheads,
        device_total_bytes=total,
        capacity_bytes=capacity_bytes,
        headroom_bytes=capacity_bytes - total,
        peak_phase=phase,
        host_bytes_per_node=max(host.values()),
        host_phases=host,
        paged_bytes=paged_optimizer_bytes(s),
        detail=detail,
        phases={p: params + buckets + sum(terms) for p, terms in phases.items()},
    )


def eval_grads_bytes(s: Setup, grads_full: int) -> int:
    """Gradients while evaluation runs, after an optimizer step: HF's zero_grad sets them to None (torch 2's
    default), DeepSpeed ZeRO-3 keeps its gradient partition buffer (zero.py: allocated at init)."""
    k = s.knobs
    return grads_full if k.zero_stage == 3 and k.fsdp == "off" and k.offload == "none" else 0


def host_activation_bytes_per_node(s: Setup) -> int:
    """--checkpointing offload: every rank's saved activations in pinned host memory."""
    if s.knobs.checkpointing != "offload":
        return 0
    t, rows, width, p = text_shape(s)
    return recipe_terms.host_activation_bytes(t, rows, width, p) * s.node_ranks
