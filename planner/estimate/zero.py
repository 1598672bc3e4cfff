"""DeepSpeed ZeRO as it allocates: the settings a plan assumes (the values its exported DeepSpeed JSON states) and
the terms they decide, per rank. Read in DeepSpeed 0.19.8 (deepspeed/runtime/zero/{config,stage3,
stage_1_and_2,partitioned_param_coordinator}.py) and transformers 5.25 (integrations/deepspeed.py); every term is
pinned to DeepSpeed's own state during real ZeRO steps on CPU ranks (probes/zero.py, tests/probes/test_zero.py).

Element counts are a rank's; bytes use the model dtype DeepSpeed casts to (2 for bf16/fp16, 4 for fp32); L is the
largest single parameter (ModelSpec.largest_matrix_params: an embedding, the head, or stacked experts)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from math import ceil, prod

from planner.config import zerobuckets
from planner.estimate import quant
from planner.estimate.nograd import compute_dtype_bytes  # DeepSpeed casts the module to bf16/fp16; fp32 stays
from planner.estimate.quant_modules import dense_names
from planner.estimate.setup import Setup
from planner.estimate.trained import (
    FOREACH_TEMPS,
    largest_trainable_matrix_params,
    trainable_params,
    trainable_tensor_sizes,
)
from planner.frameworks import FRAMEWORKS, adapter
from planner.frameworks.rules import runs_transformers_5
from planner.model.moespec import quant_layout


@dataclass(frozen=True)
class ZeroSettings:
    """zero_optimization values that decide memory. The three HF fills from "auto" follow the hidden size h
    (transformers/integrations/deepspeed.py:234-244: reduce_bucket_size h*h, stage3_prefetch_bucket_size
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
    contiguous_gradients: bool = True


@lru_cache(maxsize=64)
def settings(hidden: int, buckets: str = "", stage: int = 3) -> ZeroSettings:
    """What HF's Trainer resolves "auto" to for a model of this hidden size (and what memplan exports), with the
    values a DeepSpeed JSON sets itself for ZeRO `stage` (`buckets`: the zero_buckets knob, planner.config.zerobuckets)
    in their place; one frozen object per size and text (the search asks three times a candidate)."""
    z = ZeroSettings(hidden * hidden, int(0.9 * hidden * hidden), 10 * hidden)
    given = {zerobuckets.KEYS[k]: v for k, v in zerobuckets.applied(buckets, stage).items()}
    return replace(z, **given) if given else z


def of(s: Setup) -> ZeroSettings:
    """The ZeRO settings of this plan: its model's "auto" sizes and its DeepSpeed JSON's own values."""
    return settings(s.model.text.hidden, s.knobs.zero_buckets, s.knobs.zero_stage)


def persistent_param_elements(s: Setup) -> int:
    """ZeRO-3 keeps parameters of at most stage3_param_persistence_threshold elements whole on every rank and never
    releases them in forward or backward (parameter_offload.py:317-335, partitioned_param_coordinator.py:638-640):
    norm weights and biases under HF's 10*h, and LoRA factors as small (a 7B's rank-16 B factors of k_proj and
    v_proj, 512 x 16). Measured (probes/zero.py, ds_persist): exact."""
    limit = of(s).param_persistence_threshold
    adapters = sum(n * c for n, c in trainable_tensor_sizes(s) if n <= limit) if s.lora else 0
    return s.model.elements_of_tensors_at_most(limit) + adapters


def zero3_param_elements(s: Setup) -> int:
    """Every parameter element ZeRO-3 partitions: the base as stored (a 4-bit base's linears as the elements of
    their packed storage, 4 weights an element in bf16: planner.estimate.quant, as DeepSpeed's ds_numel counts them)
    and LoRA's adapters."""
    base = s.model.params - quant.storage_elements_saved(s.model, s.knobs.quant, compute_dtype_bytes(s), dense_names(s))
    return base + (trainable_params(s) if s.lora else 0)


def zero3_gathered_param_elements(s: Setup, z: ZeroSettings | None = None) -> int:
    """Parameter elements ZeRO-3 holds gathered at once while modules run, persistent ones included.
    Prefetch stops at stage3_max_live_parameters but overshoots by up to one parameter (L)
    (partitioned_param_coordinator.py:452-476); a module's parameters whose next use lies within
    stage3_max_reuse_distance elements of the trace stay gathered, and at the turn from forward to backward a
    module's next use is about twice the elements after it, so about half that distance is held, plus the module
    being fetched (:653-662). With the defaults (1e9 and 1e9) a model under about 1e9 elements stays gathered
    whole. Measured (probes/zero.py, debug-llama on 2 ranks): an upper bound within 3% where prefetch decides
    (max_live <= 1e6 with reuse 0 or 2e6), 19% with max_live 3e6, exact for the defaults; reuse 6 x max_live
    1.6 x (the half-distance rule is loose on a 4-layer model). Qwen2.5-7B at 1/16 width (28 layers, every matrix
    1/256 of its elements, max live and reuse distance 1e9/256) under full checkpointing: LoRA rank 1 (the 7B's
    rank 16 scaled) within 0.01%, rank 16 0.6% over, full fine-tuning 2.5% over: a 7B LoRA holds 1e9 + L
    elements, not one layer's: its frozen base is gathered for the recomputation and the backward like a
    trained one (the recomputed frozen parameters are released with the backward module that asked for them,
    :388-393, 500-505)."""
    z = z or of(s)
    persistent = persistent_param_elements(s)
    held = max(z.max_live_parameters, z.max_reuse_distance // 2) + fetched_past_live_elements(s)
    return persistent + min(zero3_param_elements(s) - persistent, held)


def fetched_past_live_elements(s: Setup) -> int:
    """What ZeRO-3 holds gathered beyond stage3_max_live_parameters: one parameter prefetch overshoots by (L), or a
    module's own parameters, which its pre-forward hook fetches together whatever the limit (partitioned_param_
    coordinator.py:310-419 fetch_sub_module: iter_params(module, recurse=False); prefetch only below the limit,
    :452-476): stacked experts (transformers 5's gate_up_proj and down_proj, and their biases, one module a layer),
    with the head, which stays gathered from the first backward on. Whether routed and dense layers alternate does
    not matter: the limits count elements, not layers. Measured (probes/zero.py, a tiny Llama-4 text model, 2 ranks,
    max live 1e4, reuse 0): 214,592 elements at the experts, interleave_moe_layer_step 2 (215,616 at step 1: the
    persistent norms of the routed layers) = persistent + the experts' 196,608 + the head's 16,384, against 142,672
    planned with L alone (-33%); planned now 224,592 (4.7% over)."""
    if not stacked_experts(s):
        return s.model.largest_matrix_params()
    vocab = max((prod(t.shape) for t in s.model.tensors if t.role == "head"), default=0) or max(
        (prod(t.shape) for t in s.model.tensors if t.role == "embed"), default=0
    )
    return max(s.model.largest_matrix_params(), s.model.expert_params_per_layer() + vocab)


def stacked_experts(s: Setup) -> bool:
    """Whether the plan's transformers builds a routed layer's experts as one module of stacked parameters:
    transformers 5 every MoE family, 4.57.1 the families moespec.QUANT_LAYOUTS marks (Llama-4's Llama4TextExperts,
    gpt-oss's, Qwen3-VL-MoE's); elsewhere on 4 an nn.ModuleList of one MLP an expert, each Linear its own fetch."""
    k = s.knobs
    return runs_transformers_5(k.framework, k.release) or quant_layout(s.model.model_type).stacked_at_4


def zero3_staging_elements(s: Setup, z: ZeroSettings | None = None) -> int:
    """A prefetch batch's flat all-gather buffer, beside the copies its wait made of each parameter, from its first
    parameter's use to its last (partition_parameters.py:1343-1371, 795; the inflight registry holds the handle for
    each parameter: partitioned_param_coordinator.py:404-405). A batch takes parameters until it reaches
    stage3_prefetch_bucket_size (:452-476), so one of several parameters is under the bucket plus the one that
    crosses it. Without LoRA that is a layer's small projections (k, v) and o_proj: about the bucket. LoRA's factors
    above the persistence threshold sit before every base matrix in the trace, so a batch of them ends in one: up
    to the largest decoder matrix (one ending in the head or the embedding is used up before the head runs, or
    after the last layer's backward). Measured (probes/zero.py, the 1/16-width Qwen2.5-7B), the largest gathered
    set and the buffers alive at the same moment under zero3_gathered_param_elements plus this: 1.2% (LoRA rank
    16), 0.7% (rank 1, every factor persistent), 3.3% (full fine-tuning); the head's batch (rank 16: 2.13M
    elements) never coincides with the largest set."""
    z = z or of(s)
    gathered_factors = s.lora and any(n > z.param_persistence_threshold for n, _ in trainable_tensor_sizes(s))
    return z.prefetch_bucket_size + (largest_layer_matrix_params(s) if gathered_factors else 0)


def largest_layer_matrix_params(s: Setup) -> int:
    """Elements of the largest parameter outside the embedding and the head (a decoder's MLP matrix, stacked
    experts, a tower's matrix)."""
    memo = s.model.memo
    if "largest layer matrix" not in memo:
        memo["largest layer matrix"] = max(
            (prod(t.shape) for t in s.model.tensors if t.role not in ("embed", "head")), default=0
        )
    return memo["largest layer matrix"]


def largest_trained_param_elements(s: Setup) -> int:
    """The largest parameter that takes a gradient: a LoRA factor under LoRA (a frozen base takes none), the
    largest parameter otherwise. In ZeRO-3's backward its full gradient waits for its hook to copy it into the
    reduce bucket (stage3.py:1508-1525, 1621-1642: one hook a trainable parameter, right after its gradient is
    accumulated); the step takes the fp64 norm of its gradient piece. Measured (probes/zero.py, the largest
    gradient DeepSpeed's reduce hook took): exact, LoRA rank 1 and 16 and full fine-tuning."""
    return largest_trainable_matrix_params(s) if s.lora else s.model.largest_matrix_params()


def zero3_live_params_bytes(s: Setup) -> int:
    """ZeRO-3's gathered parameters while modules run (zero3_gathered_param_elements), a prefetch batch's all-gather
    buffer (zero3_staging_elements) and in backward the full gradient before the reduce bucket takes it
    (largest_trained_param_elements), in the model dtype."""
    if s.knobs.zero_stage != 3:
        return 0
    elements = zero3_gathered_param_elements(s) + zero3_staging_elements(s) + largest_trained_param_elements(s)
    return compute_dtype_bytes(s) * elements


def reduce_buckets_bytes(s: Setup) -> int:
    """DeepSpeed's contiguous reduce (IPG) buckets of reduce_bucket_size in the model dtype: one at stage 3, for the
    whole run (stage3.py:780-784); at stages 1 and 2 one, or two with overlap_comm as exported, from the first
    gradient hook of a backward to its reduction (stage_1_and_2.py:3256-3280); none with contiguous_gradients false
    (both allocate under `if self.contiguous_gradients`: stage3.py:780-782, stage_1_and_2.py:3260-3275)."""
    z, k = of(s), s.knobs
    if k.zero_stage == 0 or k.fsdp != "off" or not z.contiguous_gradients:
        return 0
    buffers = 1 if k.zero_stage == 3 or not z.overlap_comm else 2
    return buffers * z.reduce_bucket_size * compute_dtype_bytes(s)


def offload_staging_bytes(s: Setup) -> int:
    """ZeRO-1/2 with the optimizer on the host (offload_optimizer cpu: engine.py:1567-1570 zero_cpu_offload) keep, for
    the whole run, a buffer on the GPU the size of the largest trained parameter in the model dtype, through which
    gradients are staged for the host (DeepSpeed 0.19.8 runtime/zero/stage_1_and_2.py:626-661
    temp_grad_buffer_for_gpu_offload, largest_param_numel over the optimizer's parameters; v0.15.0 :445-478 the
    same): a Llama-3-8B's embedding, 1.0 GB in bf16. ZeRO-3 offloads through its own buffers. Measured (probes/zero.py,
    DeepSpeed's own buffer in a ZeRO-2 run with the optimizer offloaded): exact."""
    k = s.knobs
    if k.zero_stage not in (1, 2) or k.offload == "none" or k.fsdp != "off":
        return 0
    return largest_trained_param_elements(s) * compute_dtype_bytes(s)


def offload_norm_copy_bytes(s: Setup) -> int:
    """ZeRO-1/2 with the optimizer on the host hand each gradient of the rank's partition to the host inside backward
    at the accumulation boundary: first an fp64 copy of its piece to take its norm (DeepSpeed v0.15.0
    runtime/zero/stage_1_and_2.py:1252-1265 set_norm_for_param_grad_in_gpu, `.double().norm(2)`, called by
    copy_grads_in_partition :1328-1339 from reduce_ipg_grads :1405-1414; 0.19.8 :1873-1886 the same through
    get_norm_dtype, fp64 wherever the device has it), then an fp32 copy for the host (v0.15.0 :1267-1283), one after
    the other: 8 bytes an element of the largest piece (the largest parameter, or the partition where that is
    smaller) beside the gradient itself, a Llama-3-8B's embedding 4.2 GB. Measured (probes/zero.py, the live bytes of
    a boundary backward in a ZeRO-2 run with the optimizer offloaded): the gradient and this copy within 2%."""
    k = s.knobs
    if k.zero_stage not in (1, 2) or k.offload == "none" or k.fsdp != "off":
        return 0
    return 8 * min(largest_trained_param_elements(s), ceil(trainable_params(s) / s.world_size))


def step_group_elements(s: Setup, trainable: int, z: ZeroSettings | None = None) -> int:
    """Elements of the largest group the optimizer step converts at once. ZeRO-3 steps sub-groups closed once their
    partitions reach sub_group_size (stage3.py:1210-1233: at most sub_group_size + ceil(L/N)); ZeRO-1/2 a whole
    parameter group's partition (stage_1_and_2.py:3101-3146). HF gives DeepSpeed one group of them all."""
    partition = ceil(trainable / s.world_size)
    if s.knobs.zero_stage != 3:
        return partition
    z = z or of(s)
    return min(partition, z.sub_group_size + ceil(largest_trained_param_elements(s) / s.world_size))


def zero_step_temp_bytes(s: Setup, trainable: int, z: ZeroSettings | None = None) -> int:
    """Bytes the ZeRO optimizer step allocates beside the states: per group a flat model-dtype copy of its gradient
    partition and that copy in fp32 (stage3.py:2683-2693, stage_1_and_2.py:3112-3118; fp32 runs need no second
    copy), or the fp64 norm of the largest gradient (stage3.py:2454-2457), whichever is larger. DeepSpeed's fused
    Adam steps without temporaries; a client torch optimizer (knob client_optimizer) steps the fp32 partition with the
    fp32 gradient beside it (the flat copy freed: stage_1_and_2.py:3119 del flat_grad_partition, :3139
    _optimizer_step), plus its own temporaries (client_step_temp_bytes_per_element). With optimizer offload the step
    runs on the host. Measured with the live-bytes tracker around engine.step() (bf16, debug-llama on 2 ranks, ZeRO-1,
    2 and 3, and sub_group_size 1e6): within 0.02%."""
    if s.knobs.offload != "none":
        return 0
    b = compute_dtype_bytes(s)
    group, partition = step_group_elements(s, trainable, z), ceil(trainable / s.world_size)
    large = largest_trained_param_elements(s)
    norm = 8 * (ceil(large / s.world_size) if s.knobs.zero_stage == 3 else min(large, partition))
    client = group * (4 + client_step_temp_bytes_per_element(s.knobs.optimizer)) if s.knobs.client_optimizer else 0
    return max(group * (b + (4 if b != 4 else 0)), client, norm)


def client_step_temp_bytes_per_element(optimizer: str) -> int:
    """Bytes per element of the fp32 partition that a client torch optimizer's step allocates while DeepSpeed runs
    it. HF's Trainer builds its `optim` and hands it over when the DeepSpeed config names no optimizer (transformers
    4.45.2 integrations/deepspeed.py:320,336; 5.6 :542,553); ZeRO-1/2 step it on each group's flat fp32 partition
    (stage_1_and_2.py:2967-2983 _optimizer_step, one group at a time; v0.14.2 :1800-1809, :1881-1903), ZeRO-3 on
    each sub-group's (stage3.py:1235-1262; v0.14.2 :932-947): one tensor the step group's size. torch's foreach AdamW
    (adamw_torch, the default optim before transformers 4.54) allocates exp_avg_sq.sqrt() over it
    (torch 2.13 optim/adam.py:762,790 in _multi_tensor_adam, which AdamW runs), 4 bytes an element; the fused kernel
    (adamw_torch_fused) and SGD none. Measured in a real ZeRO-2 step of DeepSpeed 0.19.8 on 2 CPU ranks (torch 2.13,
    the live-bytes tracker, tests/probes/test_zero.py::test_zero2_steps_a_client_torch_adamw_on_the_fp32_partition):
    foreach 8 bytes an element beside the states (fp32 gradient + sqrt), fused 6 (the copies), within 0.1%.
    Adafactor and the 8-bit optimizers on a flat partition are not modelled here (0). torch's RMSprop and Adagrad
    allocate their foreach temporaries alike (trained.FOREACH_TEMPS: one and two)."""
    return 4 * FOREACH_TEMPS.get(optimizer, 0)


def fp32_grad_accum(s: Setup) -> bool:
    """DeepSpeed accumulates half weights' gradients in fp32: the framework's release writes data_types.
    grad_accum_dtype fp32 (Framework.zero_grad_accum) under ZeRO with bf16/fp16 weights."""
    k = s.knobs
    if k.fsdp != "off" or k.zero_stage < 1 or compute_dtype_bytes(s) == 4 or k.framework not in FRAMEWORKS:
        return False
    return adapter(k.framework, k.release).zero_grad_accum == "fp32"


def fp32_accum_grads_bytes(s: Setup, trainable: int, grad_bytes: int) -> int | None:
    """The gradients a rank holds when DeepSpeed accumulates them in fp32 (fp32_grad_accum; None otherwise, or where
    memplan reads no such buffer). DeepSpeed 0.14.4 (OpenRLHF v0.3.8-v0.4.x's pin; 0.15.0's the same): ZeRO-3's
    gradient partition buffer is allocated in the accumulation dtype (runtime/zero/stage3.py:498-501), ZeRO-2's
    averaged partition too (stage_1_and_2.py:771-784); ZeRO-1 under bf16 without offload runs BF16_Optimizer
    (engine.py:1180-1182), which keeps an fp32 buffer of every gradient, unpartitioned (bf16_optimizer.py:148),
    beside the bf16 gradients backward writes. With an offloaded optimizer, and fp16 under ZeRO-1, not read."""
    k = s.knobs
    if not fp32_grad_accum(s) or k.offload != "none":
        return None
    if k.zero_stage >= 2:
        return 4 * trainable // s.world_size
    return trainable * grad_bytes + 4 * trainable if k.precision.startswith("bf16") else None
