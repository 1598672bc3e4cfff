"""FSDP2 (torch.distributed.fsdp.fully_shard) memory terms per rank, as torch 2.13's _fully_shard runs it: every
decoder layer and the root are FSDP units; each parameter is sharded on dim 0 over the shard group.

- Sharded state: parameters, gradients and optimizer states, 1/N each, in the sharded parameters' dtype (fp32
  under `bf16`: param_dtype bf16, reduce_dtype fp32 in the bundled trainer, bf16 in accelerate's default policy,
  which HF's Trainer and the frameworks on it run; bf16 under `bf16-pure`, as torchtune and litgpt run it, with
  the optimizer states in bf16 too).
- Unsharded while a unit runs, in the compute dtype: the layer being computed plus the next one, all-gathered
  ahead (forward: implicit prefetch; backward: `_backward_prefetch`, one unit ahead): the largest two adjacent
  layers (a routed and a dense one where they alternate, gathered_layer_units), and the root unit
  (embeddings, final norm, head), which FSDP2 does not reshard after forward (_fsdp_state.py: "for the root, do
  not reshard after forward since for training, the parameters would be freed and all-gathered immediately").
  `grad-op` (reshard_after_forward=False) keeps every layer unsharded from its forward to its backward.
- In backward, a unit's unsharded gradient (compute dtype) and, when the reduce dtype differs, its copy in the
  reduce dtype that the reduce-scatter reads (_fsdp_collectives.py foreach_reduce).
- `hybrid` (HSDP): sharded within a node, replicated across nodes; `optimizer+params` offload
  (CPUOffloadPolicy): the sharded parameters, gradients and optimizer states live in host memory.
"""

from __future__ import annotations

from planner.config.spec import Knobs
from planner.estimate import lora, quant
from planner.estimate.quant_modules import EXPERTS, dense_names
from planner.estimate.trained import trainable_params
from planner.frameworks import FRAMEWORKS


def on(k: Knobs) -> bool:
    return k.fsdp != "off"


def shard_group_size(s) -> int:
    """Ranks a parameter is sharded over: the world, or one node's GPUs under hybrid."""
    return s.gpus_per_node if s.knobs.fsdp == "hybrid" else s.world_size


def compute_bytes_per_param(k: Knobs) -> int:
    """MixedPrecisionPolicy's param_dtype: the unsharded parameters and gradients, the activations."""
    return 4 if k.precision == "fp32" else 2


def reduce_bytes_per_param(k: Knobs) -> int:
    """The reduce-scatter's dtype: fp32 in fp32 runs; under bf16 the framework's (fp32 in the bundled trainer, the
    param dtype bf16 in accelerate's default policy); bf16 under bf16-pure (no policy)."""
    if k.precision == "fp32":
        return 4
    if k.precision == "bf16" and FRAMEWORKS[k.framework].fsdp_reduce == "fp32":
        return 4
    return 2


def accumulated_grads_bytes(s, trainable: int) -> int:
    """Gradients held between micro-steps. HF's Trainer wraps every micro-step but the last in accelerator.no_sync
    (transformers/trainer.py:1897-1909), which for FSDP2 is set_requires_gradient_sync(False)
    (accelerate/accelerator.py:1166-1171), as the bundled trainer does (trainer/step.py): no reduce-scatter, so every
    rank keeps every trainable parameter's unsharded gradient, in the reduce dtype when it differs from the
    compute dtype (torch 2.13 _fsdp_param.py:802-821 unsharded_accumulated_grad) or summed in place in the compute
    dtype (:592-593), until the last micro-step's backward reduces it unit by unit (_fsdp_param_group.py:621-630).
    accelerate's sync_each_batch (off by default, accelerate/utils/dataclasses.py:1024-1029) would keep the
    sharded form instead."""
    if not on(s.knobs) or s.grad_accum == 1:
        return 0
    return trainable * max(compute_bytes_per_param(s.knobs), reduce_bytes_per_param(s.knobs))


def layer_params(s, quantized: bool = False) -> int:
    """Parameters of one decoder layer, the unit every layer is wrapped as (an MoE model's largest, routed one);
    `quantized`: only its decoder linears' weights, which a quantized base stores packed."""
    n = s.knobs.expert_parallel  # each rank's unit holds only its own experts
    dense = dense_names(s) if quantized else ()  # stacked experts and routers a quantized base leaves dense
    experts = 0 if EXPERTS[0] in dense else s.model.expert_params_per_layer()
    return s.model.layer_unit_params(quantized, dense) - experts * (n - 1) // n


def dense_layer_params(s, quantized: bool = False) -> int:
    """Parameters of one dense decoder layer of an MoE model whose other layers are routed (its routed layer's
    where every layer is routed); `quantized` as layer_params."""
    return s.model.layer_unit_params(quantized, dense_names(s) if quantized else (), routed=False)


def gathered_layer_units(s, quantized: bool = False) -> list[int]:
    """Parameters of each decoder unit all-gathered at once (`quantized` as layer_params): the running layer and
    the next in execution order, the largest such adjacent pair, forward and backward alike: a routed and a dense
    layer where they alternate (Llama-4 Maverick), else two of the largest; grad-op every layer.
    FSDP2 (torch 2.13 _fully_shard/_fsdp_param_group.py:795-831): backward prefetches the unit before it in
    post-forward order, one ahead. FSDP1 (torch 2.13 _runtime_utils.py): BACKWARD_PRE prefetches the next unit
    in the pre-backward hook (:690-693, :1262-1271); with no prefetch (HF's Trainer passes NO_PREFETCH when
    fsdp_config names none: transformers 4.53 training_args.py:2007-2008, accelerate 1.6.0
    utils/dataclasses.py:1731-1734) the reshard's free waits for the running unit's kernels (_flat_param.py:1817-1821,
    record_stream) while the next unit is gathered, and limit_all_gathers lets two frees be in flight
    (_limiter_utils.py:15-23, _runtime_utils.py:297-303): the same pair on the device.
    Measured (tests/probes/test_fsdp1.py, FSDP1 on a tiny Llama-4 with alternating layers, 2 gloo ranks):
    BACKWARD_PRE's backward holds exactly one routed plus one dense unit, not two routed ones."""
    L, m = s.model.text.layers, s.model.text.moe
    routed = layer_params(s, quantized)
    if s.knobs.fsdp == "grad-op":
        n = m.moe_layers if m is not None and m.moe_layers else L
        return [routed] * n + [dense_layer_params(s, quantized)] * (L - n)
    if m is not None and 0 < m.moe_layers < L and not m.routed_adjacent:
        return [routed, dense_layer_params(s, quantized)]
    return [routed] * min(2, L)


def layer_grad_params(s) -> int:
    """Parameters of one unit that receive a gradient in its backward: the whole layer in full fine-tuning; under
    LoRA the adapters alone (a frozen parameter gets no .grad, so FSDP allocates no unsharded gradient for it:
    measured, tests/probes/test_dist.py), spread evenly over the layers."""
    if not s.lora:
        return layer_params(s)
    copies = lora.embedding_copy_params(s.model, s.knobs)  # the root unit's, not a layer's (root_grad_params)
    return (trainable_params(s) - copies) // max(1, s.model.text.layers)


def root_grad_params(s) -> int:
    """The root unit's parameters that receive a gradient: all of it in full fine-tuning; under LoRA only the
    trained embedding copies (--lora-train-embeddings)."""
    return lora.embedding_copy_params(s.model, s.knobs) if s.lora else root_params(s)


def root_params(s) -> int:
    """The root unit: everything outside the decoder layers (embeddings, final norm, head, a vision tower)."""
    return s.model.params - sum(t.numel for t in s.model.tensors if t.role == "layer")


def root_gathered_params(s) -> int:
    """Parameters the root unit all-gathers: root_params and, under --lora-train-embeddings, PEFT's trained copies
    of the embedding and the head beside the frozen originals it keeps (modules_to_save: both are parameters of the
    root unit, so FSDP2 gathers both, in the compute dtype). Measured (probes.fsdp_cast.measure_fsdp_peak,
    tests/probes/test_fsdp_peak.py): debug-llama LoRA r16 on two gloo ranks, 2 x 512, the step's peak 22,548,488 B
    above plain LoRA's: the copies' shards 4,194,304, optimizer states 8,388,608 and saved tensors 1,585,152, and
    8,380,424 beside them, the copies' gathered bf16 (2 x 8192 x 256 x 2 = 8,388,608)."""
    return root_params(s) + lora.embedding_copy_params(s.model, s.knobs)


def head_params(s) -> int:
    """The parameters whose gradients backward reaches first: the output head (the embedding when tied)."""
    return s.model.text.vocab * s.model.text.hidden


def sharded(s, total_bytes: int) -> int:
    """This rank's shard of a sharded state (parameters, gradients, optimizer states); none on the GPU with
    CPUOffloadPolicy. Parameters are sharded on dim 0 (padded to equal shards): total / N."""
    if s.knobs.offload == "optimizer+params":
        return 0
    return total_bytes // shard_group_size(s)


def unsharded_params_bytes(s) -> int:
    """All-gathered parameters alive while a layer computes: the root unit, and two adjacent layers (the current
    one and the next, prefetched: gathered_layer_units), or under grad-op every layer (the peak is at the start of
    backward). A 4-bit base's linears are gathered as their packed storage (planner.estimate.quant)."""
    if not on(s.knobs):
        return 0
    b = compute_bytes_per_param(s.knobs)
    packed = gathered_layer_units(s, quantized=True)  # the units' 4-bit linears, gathered packed
    per = b - quant.packed_bytes_per_weight(s.knobs.quant) if s.knobs.quant != "none" else 0
    return (root_gathered_params(s) + sum(gathered_layer_units(s))) * b - sum(int(p * per) for p in packed)


def backward_temp_bytes(s, end: bool) -> int:
    """Backward's gradient transients: a layer's unsharded gradient (compute dtype) and its reduce-dtype copy that
    the reduce-scatter reads; the root's unsharded gradients, reduced only when its backward ends (the head's
    from the first backward op; at the end, every root parameter's, with its reduce-dtype copy). Under LoRA only
    the trained parameters' (layer_grad_params, root_grad_params)."""
    k = s.knobs
    if not on(k):
        return 0
    cb, rb = compute_bytes_per_param(k), reduce_bytes_per_param(k)
    copy = rb if rb != cb else 0
    if end:
        return root_grad_params(s) * (cb + copy)
    head = head_params(s) if not s.lora or s.knobs.lora_train_embeddings else 0
    return layer_grad_params(s) * (cb + copy) + head * cb


def traced_backward_temp_bytes(s, traced_grads_bytes: int | None) -> int:
    """backward_temp_bytes beside a one-rank trace's backward peak (the sim's activation side): none where the
    trace's peak came before its first gradient (`traced_grads_bytes` 0: in the loss's backward, where a real
    FSDP2 step's peak lies too, before the head's or any unit's gradient exists); else, or unknown (None),
    backward_temp_bytes. Measured (tests/probes/test_fsdp_peak.py, debug-llama 2 x 512 on two gloo ranks): the real
    step's peak in log_softmax's backward; the plan on the sim's side with these transients +0.98% to +4.81% over
    it (full fine-tuning 8,547,328 B of them), without them +0.67% to +0.76%."""
    return 0 if traced_grads_bytes == 0 else backward_temp_bytes(s, end=False)


def host_offload_bytes_per_rank(s, states_bytes: int) -> int:
    """CPUOffloadPolicy: the sharded parameters, gradients and optimizer states (`states_bytes` unsharded, in
    total) in pinned host memory."""
    return states_bytes // shard_group_size(s)
