"""The model states a rank holds, one small function per term, in bytes: its weights (params_bytes), gradients,
the gradient communication buckets, the optimizer's states and its step's temporaries, the parameters ZeRO-3 or
FSDP gathers while a module runs, the gradients held in backward and in evaluation, and the host memory offload
pins. planner.estimate.memory assembles the peak from them.

Model states follow the ZeRO paper (Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward
Training Trillion Parameter Models", section 5) as DeepSpeed 0.19 really implements them:
- stages 1-2 keep an fp32 master partition even in fp32 runs, and build an fp32 gradient
  partition at step time (`single_partition_of_fp32_groups[i].grad`): DeepSpeed's own
  `estimate_zero2_model_states_mem_needs` counts 2 + 18/N bytes per parameter where the paper says
  2 + 14/N;
- stage 3 gathers whole modules while they run (DeepSpeed's estimate: 4 x largest layer params);
- the optimizer is DeepSpeed's fused Adam (no full-size temporaries), see export/configs.py, unless the user's DeepSpeed
  config names none (knob client_optimizer: zero.client_step_temp_bytes_per_element).
Without DeepSpeed (zero 0) the optimizer is torch's: `adamw` is the foreach implementation torch
uses on CUDA by default, whose step allocates a full-size temporary (exp_avg_sq.sqrt()), while
`adamw-fused` does not (torch/optim/adamw.py, `_multi_tensor_adamw` vs `_fused_adamw`).
"""

from __future__ import annotations

from dataclasses import replace

from planner.config.knobfields import MATRIX_OPTIMIZERS
from planner.config.spec import Knobs
from planner.estimate import boft, freeze, fsdp, lora, peft_tuners, quant, zero
from planner.estimate.matrix_optim import matrix_optimizer_bytes
from planner.estimate.matrix_step import matrix_step_temp_bytes
from planner.estimate.quant_modules import dense_names
from planner.estimate.setup import Setup
from planner.estimate.torchao_optim import TORCHAO_OPTIMIZERS, torchao_low_bit_state_bytes
from planner.estimate.trained import (
    ADAMW_8BIT_MIN_SIZE,
    FOREACH_TEMPS,
    base_dtype_overcount_bytes,
    fp32_resident_extra_bytes,
    frozen_bytes,
    frozen_params,
    frozen_weight_bytes_per_param,
    largest_trainable_matrix_params,
    optimizer_state_bytes_per_param,
    tower_full_tensors,
    trainable_params,
    trainable_tensor_sizes,
    trainable_weight_bytes_per_param,
)
from planner.extras import BNB_8BIT, BNB_32BIT
from planner.frameworks import FRAMEWORKS

PAGED_MIN_ELEMENTS = 100_000  # bitsandbytes 0.50.2 optim/optimizer.py:383: smaller tensors' states stay in torch


def whole_params_bytes(s: Setup) -> int:
    """The model's weights as one process holds them before any sharding (params_bytes shards them)."""
    k = s.knobs
    total = (
        trainable_params(s) * trainable_weight_bytes_per_param(k)
        + frozen_bytes(s)
        - base_dtype_overcount_bytes(s, trainable_weight_bytes_per_param(k))
    )
    return total + tuner_buffers_bytes(s)


def params_bytes(s: Setup) -> int:
    """Model weights resident on the GPU (ZeRO-3: this rank's partition; with param offload: none)."""
    k = s.knobs
    total = whole_params_bytes(s)
    whole = quant.replicated_bytes(
        s.model, k.quant, k.quant_absmax, dense_names(s)
    )  # a quantized base's constants: on every rank
    if k.fsdp != "off":
        return fsdp.sharded(s, total - whole) + whole
    if k.zero_stage == 3:
        return whole if k.offload == "optimizer+params" else (total - whole) // s.world_size + whole
    return total


def tuner_buffers_bytes(s: Setup) -> int:
    """What AdaLoRA's rank allocator (importance buffers of lora_A, lora_E and lora_B, in their dtype) or VeRA (its
    shared projections) or BOFT (its permutation matrices) holds beside the weights (planner.estimate.peft_tuners,
    boft; planned without ZeRO-3 or FSDP)."""
    k = s.knobs
    if peft_tuners.adalora(k):
        adapters = s.model.lora_params(k.lora_rank, k.lora_targets) + peft_tuners.adalora_extra_params(
            s.model, k, False
        )
        return peft_tuners.adalora_importance_bytes(adapters, trainable_weight_bytes_per_param(k))
    return peft_tuners.vera_projection_bytes(s.model, k) + boft.permutation_buffer_bytes(s.model, k)


def adafactor_state_elements(s: Setup) -> int:
    """Adafactor (Shazeer & Stern 2018) keeps row and column statistics for a matrix, a full second
    moment for a vector; HF's default has no first moment. LoRA: the A (r x d_in) and B (d_out x r)
    factors of every adapted weight."""
    r = s.knobs.lora_rank
    if freeze.freeze_tuned(s.knobs):  # the trained layers' tensors (planner.estimate.freeze)
        tensors = [t for t in s.model.tensors if t.role == "layer"]
        per_layer = sum(
            (sum(t.shape[:-1]) + t.shape[-1] if len(t.shape) >= 2 else t.shape[0]) * t.count for t in tensors
        )
        return per_layer * s.knobs.trained_layers // s.model.text.layers
    factored = lambda t: (sum(t.shape[:-1]) + t.shape[-1] if len(t.shape) >= 2 else t.shape[0]) * t.count
    if s.lora:
        return (
            sum((2 * r + t.shape[0] + t.shape[1]) * t.count for t in s.model.tensors if t.adapted(s.knobs.lora_targets))
            + lora.embedding_copy_params(s.model, s.knobs)
            + sum(map(factored, tower_full_tensors(s)))  # --lora-tower-full: the towers' own tensors
        )
    return sum(factored(t) for t in s.model.tensors)


def bnb_8bit_state_bytes(s: Setup, optimizer: str = "adamw-8bit") -> int:
    """bitsandbytes' 8-bit optimizers (AdamW two states, Lion and RMSprop one): 1-byte states plus an fp32 absmax a
    block of 256; fp32 states for tensors under ADAMW_8BIT_MIN_SIZE elements (bitsandbytes 0.50.2 optim/optimizer.py
    :492-528 Optimizer2State.init_state, :664-695 Optimizer1State.init_state). The per-tensor 256-entry qmaps (1 KiB a
    state) are left out."""
    per_big = optimizer_state_bytes_per_param(optimizer, 4)
    small = 4 * (2 if "adamw" in optimizer else 1)
    states = lambda t: t.numel * (small if t.numel // t.count < ADAMW_8BIT_MIN_SIZE else per_big)
    if tower := tower_full_tensors(s):  # the adapters as below, the towers' and projectors' own tensors each
        return int((trainable_params(s) - sum(t.numel for t in tower)) * per_big + sum(map(states, tower)))
    if s.lora or freeze.freeze_tuned(s.knobs):
        return int(trainable_params(s) * per_big)
    return int(sum(map(states, s.model.tensors)))


def optimizer_bytes(s: Setup) -> int:
    """Optimizer states on the GPU, in torch's allocator. zero 0: torch keeps states in the parameter dtype (paged
    ones apart: paged_optimizer_bytes); ZeRO keeps an fp32 master copy plus fp32 states, partitioned over the world;
    offloaded states live on the host."""
    k, T = s.knobs, trainable_params(s)
    if k.zero_stage == 0:
        sb = trainable_weight_bytes_per_param(k)
        if k.optimizer == "adafactor":
            whole = adafactor_state_elements(s) * sb
        elif k.optimizer in MATRIX_OPTIMIZERS:
            whole = matrix_optimizer_bytes(s, sb)
        elif k.optimizer in BNB_8BIT:
            whole = bnb_8bit_state_bytes(s, k.optimizer)
        elif k.optimizer in TORCHAO_OPTIMIZERS:
            whole = torchao_low_bit_state_bytes(k.optimizer, trainable_tensor_sizes(s), sb)
        elif k.optimizer in BNB_32BIT:  # bitsandbytes' 32-bit states are fp32 whatever the parameters
            whole = int(optimizer_state_bytes_per_param(k.optimizer, 4)) * T
        else:
            whole = int(T * optimizer_state_bytes_per_param(k.optimizer, sb))
            whole -= base_dtype_overcount_bytes(s, int(optimizer_state_bytes_per_param(k.optimizer, sb)))
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
    8-bit ones as bnb_8bit_state_bytes. torch DDP or one GPU only (ZeRO and FSDP keep their own states)."""
    k = s.knobs
    if not k.optimizer.startswith("paged") or k.zero_stage or k.fsdp != "off":
        return 0
    per = optimizer_state_bytes_per_param(k.optimizer, 4)  # fp32 states, or 8-bit ones (these are all large)
    return int(sum(n * c * per for n, c in trainable_tensor_sizes(s) if n >= PAGED_MIN_ELEMENTS))


def grad_bytes_per_param(k: Knobs) -> int:
    return trainable_weight_bytes_per_param(k)


def gradients_bytes(s: Setup) -> int:
    """All gradients this rank holds once backward is done (zero 0/1: full; 2/3: its partition)."""
    k, T, g = s.knobs, trainable_params(s), grad_bytes_per_param(s.knobs)
    if k.optimizer_in_backward:  # each gradient is stepped and freed as it arrives: one at a time
        return largest_trainable_matrix_params(s) * g
    if k.zero_stage == 0 and k.fsdp == "off":
        return T * g - base_dtype_overcount_bytes(s, g)
    if k.fsdp != "off":
        return fsdp.sharded(s, T * g)
    if k.zero_stage == 0:
        return T * g
    if (fp32 := zero.fp32_accum_grads_bytes(s, T, g)) is not None:
        return fp32
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


def gathered_params_bytes(s: Setup) -> int:
    """Parameters gathered while their module runs: ZeRO-3's, or FSDP's unsharded units."""
    if "gathered_params_bytes" not in s.memo:  # asked for several times a candidate: computed once (Setup.memo)
        s.memo["gathered_params_bytes"] = _gathered_params_bytes(s)
    return s.memo["gathered_params_bytes"]


def _gathered_params_bytes(s: Setup) -> int:
    return fsdp.unsharded_params_bytes(s) if s.knobs.fsdp != "off" else zero.zero3_live_params_bytes(s)


def optimizer_step_temp_bytes(s: Setup) -> int:
    """Temporaries of the optimizer step: torch foreach AdamW one full-size tensor (sqrt of the
    second moment); Adafactor per tensor (about three of the largest); ZeRO the flat and fp32 copies of the
    gradient group it steps (zero.zero_step_temp_bytes); fused, SGD and 8-bit kernels none."""
    k, T = s.knobs, trainable_params(s)
    if k.zero_stage >= 1:
        return zero.zero_step_temp_bytes(s, T)
    sb = trainable_weight_bytes_per_param(k)
    if k.optimizer in MATRIX_OPTIMIZERS:  # one tensor at a time, in the step or (layer-wise) inside backward
        return matrix_step_temp_bytes(s, sb)
    n = FOREACH_TEMPS.get(k.optimizer, 0)
    if k.optimizer_in_backward:  # one parameter's step at a time, inside backward
        return n * largest_trainable_matrix_params(s) * sb
    if k.fsdp != "off":  # the step runs on the shards (on the host with offload)
        return 0 if k.offload != "none" else n * fsdp.sharded(s, T * sb)
    if n:  # in each parameter's dtype: the base-dtype ones' (embedding copies, a full tower) half
        return n * (T * sb - base_dtype_overcount_bytes(s, sb))
    if k.optimizer == "adafactor":
        return 3 * 4 * largest_trainable_matrix_params(s)
    return 0


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
        frozen = frozen_params(s) * frozen_weight_bytes_per_param(k) + fp32_resident_extra_bytes(s)
        per_rank += (T * 2 + frozen) // s.world_size
    return per_rank * s.node_ranks


def eval_grads_bytes(s: Setup, grads_full: int) -> int:
    """Gradients while evaluation runs, after an optimizer step: HF's zero_grad sets them to None (torch 2's
    default), DeepSpeed ZeRO-3 keeps its gradient partition buffer (zero.py: allocated at init)."""
    k = s.knobs
    return grads_full if k.zero_stage == 3 and k.fsdp == "off" and k.offload == "none" else 0
