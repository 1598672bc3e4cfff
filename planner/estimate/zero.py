"""DeepSpeed ZeRO as it allocates: the settings a plan assumes (the values its exported DeepSpeed JSON states) and
the terms they decide, per rank. Read in DeepSpeed 0.19.8 (deepspeed/runtime/zero/{config,stage3,
stage_1_and_2,partitioned_param_coordinator}.py) and transformers 5.23 (integrations/deepspeed.py); every term is
pinned to DeepSpeed's own state during real ZeRO steps on CPU ranks (probes/zero.py, tests/probes/test_zero.py).

Element counts are a rank's; bytes use the model dtype DeepSpeed casts to (2 for bf16/fp16, 4 for fp32); L is the
largest single parameter (ModelSpec.largest_matrix_params: an embedding, the head, or stacked experts)."""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil

from planner.estimate import quant
from planner.estimate.nograd import compute_dtype_bytes  # DeepSpeed casts the module to bf16/fp16; fp32 stays
from planner.estimate.setup import Setup


@dataclass(frozen=True)
class ZeroSettings:
    """zero_optimization values that decide memory. The three HF fills from "auto" follow the hidden size h
    (transformers/integrations/deepspeed.py:232-242: reduce_bucket_size h*h, stage3_prefetch_bucket_size
    int(0.9*h*h), stage3_param_persistence_threshold 10*h); the rest are DeepSpeed's defaults, which HF never
    fills (deepspeed/runtime/zero/config.py:132 allgather 5e8, :182 sub_group_size 1e9, :245 max_live 1e9,
    :251 max_reuse_distance 1e9). overlap_comm is what the export writes (DeepSpeed's default is True only at
    stage 3, config.py:383-387)."""

    reduce_bucket_size: int
    prefetch_bucket_size: int
    param_persistence_threshold: int
    max_live_parameters: int = 10**9
    max_reuse_distance: int = 10**9
    sub_group_size: int = 10**9
    allgather_bucket_size: int = 5 * 10**8
    overlap_comm: bool = True


def settings(hidden: int) -> ZeroSettings:
    """What HF's Trainer resolves "auto" to for a model of this hidden size (and what memplan exports)."""
    return ZeroSettings(hidden * hidden, int(0.9 * hidden * hidden), 10 * hidden)


def persistent_param_elements(s: Setup) -> int:
    """ZeRO-3 keeps parameters of at most stage3_param_persistence_threshold elements whole on every rank and never
    releases them in forward or backward (parameter_offload.py:317-335, partitioned_param_coordinator.py:640):
    norm weights and biases under HF's 10*h."""
    limit = settings(s.model.text.hidden).param_persistence_threshold
    return s.model.elements_of_tensors_at_most(limit)


def zero3_gathered_param_elements(s: Setup, z: ZeroSettings | None = None) -> int:
    """Parameter elements ZeRO-3 holds gathered at once while modules run, persistent ones included.
    Prefetch stops at stage3_max_live_parameters but overshoots by up to one parameter (L)
    (partitioned_param_coordinator.py:452-476); a module's parameters whose next use lies within
    stage3_max_reuse_distance elements of the trace stay gathered, and at the turn from forward to backward a
    module's next use is about twice the elements after it, so about half that distance is held, plus the module
    being fetched (:653-662). With the defaults (1e9 and 1e9) a model under about 1e9 elements stays gathered
    whole. Measured (probes/zero.py, debug-llama on 2 ranks): an upper bound within 3% where prefetch decides
    (max_live <= 1e6 with reuse 0 or 2e6), 19% with max_live 3e6, exact for the defaults; reuse 6 x max_live
    1.6 x (the half-distance rule is loose on a 4-layer model). A 4-bit base's linears count as the elements of their
    packed storage (4 weights an element in bf16: planner.estimate.quant), as DeepSpeed's ds_numel counts them."""
    z = z or settings(s.model.text.hidden)
    large = s.model.largest_matrix_params()
    persistent = persistent_param_elements(s)
    held = max(z.max_live_parameters + large, z.max_reuse_distance // 2 + large)
    stored = s.model.params - quant.storage_elements_saved(s.model, s.knobs.quant, compute_dtype_bytes(s))
    return persistent + min(stored - persistent, held)


def zero3_live_params_bytes(s: Setup) -> int:
    """ZeRO-3's gathered parameters while modules run (zero3_gathered_param_elements), the prefetch batch's
    all-gather staging buffer held beside its gathered copies until its last parameter is used
    (partition_parameters.py:1336-1346, 780-801: about stage3_prefetch_bucket_size), and in backward the full
    gradients of the module being reduced before its hook copies them into the reduce bucket (stage3.py:1626-1640:
    about the largest parameter)."""
    if s.knobs.zero_stage != 3:
        return 0
    z, b = settings(s.model.text.hidden), compute_dtype_bytes(s)
    return b * (zero3_gathered_param_elements(s) + z.prefetch_bucket_size + s.model.largest_matrix_params())


def reduce_buckets_bytes(s: Setup) -> int:
    """DeepSpeed's contiguous reduce (IPG) buckets of reduce_bucket_size in the model dtype: one at stage 3, for the
    whole run (stage3.py:780-784); at stages 1 and 2 one, or two with overlap_comm as exported, from the first
    gradient hook of a backward to its reduction (stage_1_and_2.py:3256-3280)."""
    z, k = settings(s.model.text.hidden), s.knobs
    if k.zero_stage == 0 or k.fsdp != "off":
        return 0
    buffers = 1 if k.zero_stage == 3 or not z.overlap_comm else 2
    return buffers * z.reduce_bucket_size * compute_dtype_bytes(s)


def step_group_elements(s: Setup, trainable: int, z: ZeroSettings | None = None) -> int:
    """Elements of the largest group the optimizer step converts at once. ZeRO-3 steps sub-groups closed once their
    partitions reach sub_group_size (stage3.py:1210-1233: at most sub_group_size + ceil(L/N)); ZeRO-1/2 a whole
    parameter group's partition (stage_1_and_2.py:3101-3146). HF gives DeepSpeed one group of them all."""
    partition = ceil(trainable / s.world_size)
    if s.knobs.zero_stage != 3:
        return partition
    z = z or settings(s.model.text.hidden)
    return min(partition, z.sub_group_size + ceil(s.model.largest_matrix_params() / s.world_size))


def zero_step_temp_bytes(s: Setup, trainable: int, z: ZeroSettings | None = None) -> int:
    """Bytes the ZeRO optimizer step allocates beside the states: per group a flat model-dtype copy of its gradient
    partition and that copy in fp32 (stage3.py:2683-2693, stage_1_and_2.py:3112-3118; fp32 runs need no second
    copy), or the fp64 norm of the largest gradient (stage3.py:2454-2457), whichever is larger. The inner
    optimizer is DeepSpeed's fused Adam (no temporaries). With optimizer offload the step runs on the host.
    Measured with the live-bytes tracker around engine.step() (bf16, debug-llama on 2 ranks, ZeRO-1, 2 and 3, and
    sub_group_size 1e6): within 0.02%."""
    if s.knobs.offload != "none":
        return 0
    b = compute_dtype_bytes(s)
    group, partition = step_group_elements(s, trainable, z), ceil(trainable / s.world_size)
    large = s.model.largest_matrix_params()
    norm = 8 * (ceil(large / s.world_size) if s.knobs.zero_stage == 3 else min(large, partition))
    return max(group * (b + (4 if b != 4 else 0)), norm)
