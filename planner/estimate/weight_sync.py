"""The weights TRL's and ms-swift's GRPO gather on the trainer's ranks: for the sync to vLLM before each generation
(the "weight-sync" phase of planner.estimate.rl), and around HF generate under ZeRO-3.

The sync, TRL 1.16.0 (trl/generation/vllm_generation.py; the same from 0.16 through 0.29.1, memplan's trl and trl-0:
v0.16.0 grpo_trainer.py:602-640, v0.29.1 vllm_generation.py:431-520):
- ZeRO-3 without PEFT: one parameter gathered at a time (:471-479; trl/distributed.py:57-71 GatheredParameters);
- PEFT under ZeRO-3: the whole model gathered, the adapters merged into it, every weight pushed, unmerged (:443-470);
- FSDP2: each parameter's full_tensor in turn (:408-426), PEFT's adapters merged first;
- colocated, the engine takes each tensor by load_weights into its own weights (:512-514); asleep
  (vllm_enable_sleep_mode, off by default: trl/trainer/grpo_config.py:612-613) its weights wake first (:489-492);
- a vLLM server: every rank gathers (a collective), rank 0 packs the tensors into the broadcast's buffers
  (trl/generation/vllm_client.py:821-859; vLLM 0.29.0 distributed/weight_transfer/packed_tensor.py:15-16,68-194:
  the tensors of a 1 GiB chunk held while torch.cat packs them, beside the previous chunk still in flight).
TRL 0.14-0.15 gathered the whole model for each sync, to a vLLM on a GPU of its own (v0.14.0 grpo_trainer.py:388-395,
v0.15.0 :489-515): not planned.

ms-swift 4.6.0 (swift/rlhf_trainers/rollout_mixin.py): each parameter group gathered whole, LoRA merged into it
(without --vllm_enable_lora) and loaded (:999-1041); one group of the whole model unless --move_model_batches N puts
the decoder layers in N groups, with the embeddings, final norm and head in one more and a VLM's tower and projector
in another (:535-642); under FSDP2 every full_tensor of the group is held (:925-935). A sleeping engine's weights
wake first (:1192-1203); --offload_model / --offload_optimizer act around generation, after the sync. A server gets
each group from rank 0 in flattened buckets of SWIFT_UPDATE_WEIGHTS_BUCKET_SIZE, 512 MiB (:754-775, utils.py:1777-1824).

What a gather allocates, DeepSpeed 0.19.8 runtime/zero/partition_parameters.py: GatheredParameters of one parameter
runs _allgather_params_sequential (:1744-1745, 2132-2143), a full buffer even on one rank; of several,
_allgather_params_coalesced (:2022-2054), a full buffer for each, none on one rank (each partition is its parameter,
:2029-2032). FSDP2's full_tensor on a one-rank mesh is the shard. tests/probes/test_sync.py pins these on CPU ranks
through TRL's own code.
"""

from __future__ import annotations

from math import ceil, prod

from planner.estimate import peft_release, rollout, state_terms
from planner.estimate.fsdp import shard_group_size
from planner.estimate.setup import Setup
from planner.estimate.trained import frozen_weight_bytes_per_param, trainable_params, trainable_weight_bytes_per_param
from planner.frameworks import FRAMEWORKS

SWIFT_BUCKET_BYTES = 512 << 20  # ms-swift 4.6.0 rollout_mixin.py:763, SWIFT_UPDATE_WEIGHTS_BUCKET_SIZE's default
VLLM_PACKED_CHUNK_BYTES = 1 << 30  # vLLM 0.29.0 packed_tensor.py:15 DEFAULT_PACKED_BUFFER_SIZE_BYTES
VLLM_PACKED_BUFFERS = 2  # :16 DEFAULT_PACKED_NUM_BUFFERS: a chunk packs while the previous one is broadcast


def weights_bytes_per_param(s: Setup) -> int:
    """The weights' dtype as the rank holds them: the trained weights', a LoRA base's."""
    return frozen_weight_bytes_per_param(s.knobs)


def whole_model_bytes(s: Setup) -> int:
    """Every weight of the model in the rank's dtypes: the base (or trained weights) and a LoRA run's adapters."""
    adapters = trainable_params(s) * trainable_weight_bytes_per_param(s.knobs) if s.lora else 0
    return s.model.params * weights_bytes_per_param(s) + adapters


def largest_param_bytes(s: Setup) -> int:
    """The largest single parameter (the embedding or the head in a dense model)."""
    return s.model.largest_matrix_params() * weights_bytes_per_param(s)


def gathered_copy_bytes(s: Setup, nbytes: int, single: bool) -> int:
    """What gathering `nbytes` of weights allocates on a rank (`single`: one parameter per gather): a full copy where
    the weights are sharded over two ranks or more, or offloaded (copied to the GPU); on one rank none, but for
    ZeRO-3's gather of a single parameter, which copies it anyway. None where nothing is sharded."""
    k = s.knobs
    if k.zero_stage != 3 and k.fsdp == "off":
        return 0
    ranks = s.world_size if k.zero_stage == 3 else shard_group_size(s)
    if ranks > 1 or k.offload == "optimizer+params" or (single and k.zero_stage == 3):
        return nbytes
    return 0


def swift_group_bytes(s: Setup) -> int:
    """ms-swift's largest parameter group: the whole model, or with --move_model_batches N the largest of
    ceil(layers / N) decoder layers, the rest of the language model (embeddings, final norm, head) and a VLM's tower
    and projector. A LoRA run's adapters are counted whole with it (a bound: a group holds its layers' own)."""
    n = s.knobs.workload.roles.move_model_batches
    if n is None:
        return whole_model_bytes(s)
    by_role = s.model.params_by_role()
    tower = by_role.get("vision", 0) + by_role.get("projector", 0)
    layers = layer_group_params(s.model, min(ceil(s.model.text.layers / n), s.model.text.layers))
    rest = s.model.params - by_role.get("layer", 0) - tower
    adapters = trainable_params(s) * trainable_weight_bytes_per_param(s.knobs) if s.lora else 0
    return max(layers, rest, tower) * weights_bytes_per_param(s) + adapters


def layer_group_params(model, n: int) -> int:
    """Parameters of the largest group of `n` consecutive decoder layers (ms-swift 4.6.0 rollout_mixin.py:592-612:
    layer i in group i // n): every layer alike in a dense model; of an MoE model's, as many routed layers as n
    consecutive ones can hold (n where two run back to back, DeepSeek's after its dense ones; ceil(n / 2) where none
    does, Maverick's every other, exact for interleave_moe_layer_step 2: a group starting at a routed layer holds
    ceil(n / 2)), the rest dense."""
    m = model.text.moe
    routed = model.layer_unit_params()
    if m is None or not m.moe_layers or m.moe_layers == model.text.layers:
        return n * routed
    r = min(n if m.routed_adjacent else ceil(n / 2), m.moe_layers)
    return r * routed + (n - r) * model.layer_unit_params(routed=False)


def sync_gather_bytes(s: Setup) -> int:
    """The weights a sync holds gathered at once beyond the rank's shards: ms-swift's largest group; TRL's whole
    model for PEFT under ZeRO-3, otherwise its largest parameter (Framework.sync_groups: ms-swift's)."""
    if FRAMEWORKS[s.knobs.framework].sync_groups:
        return gathered_copy_bytes(s, swift_group_bytes(s), single=False)
    if s.lora and s.knobs.zero_stage == 3:
        return gathered_copy_bytes(s, whole_model_bytes(s), single=False)
    return gathered_copy_bytes(s, largest_param_bytes(s), single=True)


def sync_merge_bytes(s: Setup) -> int:
    """PEFT's merge of an adapted weight (peft 0.21.2 tuners/lora/layer.py:1067): B @ A and its scaled copy at once,
    in the adapters' dtype, then added in place (:1008); from PEFT 0.22 scaled in place, B @ A alone
    (peft_release.merge_copies); the largest adapted matrix decides. Under FSDP2 taken as whole (memplan's bound: TRL
    merges into the sharded weights, ms-swift into the gathered state dict)."""
    if not s.lora:
        return 0
    largest = max((prod(t.shape) for t in s.model.tensors if t.adapted(s.knobs.lora_targets)), default=0)
    return peft_release.merge_copies(s.knobs) * largest * trainable_weight_bytes_per_param(s.knobs)


def sync_send_bytes(s: Setup) -> int:
    """Rank 0's copies for a vLLM server: TRL's packed broadcast (packed_send_bytes; the tensors it packs are gathered
    copies but under PEFT and ZeRO-3, where the whole model is gathered already); ms-swift's one flattened bucket of
    its group (a parameter larger than the bucket alone in one)."""
    if s.knobs.workload.generation != "vllm-server":
        return 0
    largest = largest_param_bytes(s)
    if FRAMEWORKS[s.knobs.framework].sync_groups:
        return min(max(SWIFT_BUCKET_BYTES, largest), swift_group_bytes(s))
    copies = not (s.lora and s.knobs.zero_stage == 3) and gathered_copy_bytes(s, 1, single=True) > 0
    return packed_send_bytes(whole_model_bytes(s), largest, VLLM_PACKED_CHUNK_BYTES, copies)


def packed_send_bytes(whole: int, largest: int, chunk_limit: int, copies: bool) -> int:
    """vLLM's packed broadcast of `whole` bytes of tensors: a chunk is packed from the tensors that fill `chunk_limit`
    and the one that passes it (pack_tensors), one torch.cat copy while the packing list still holds them, beside
    the previous chunk's buffer in flight (packed_nccl_broadcast_producer, two buffers). `copies`: the packed tensors
    are copies that the list keeps alive (a gather's; the one in flight is the sync's gather term, not counted)."""
    chunk = min(whole, chunk_limit + largest)
    return (chunk - largest if copies else 0) + chunk * (VLLM_PACKED_BUFFERS if whole > chunk else 1)


def vllm_sync_bytes(s: Setup, reserved: int) -> int:
    """The colocated engine while it takes the weights (`reserved`: its share of the card, 0 for a server): all of
    it, or asleep (TRL's sleep mode, ms-swift's --sleep_level 1 or 2) its weights woken, split over its
    tensor-parallel group (vllm_tensor_parallel_size), beside its CUDA graphs (planner.estimate.rollout); never more
    than its share, which holds them."""
    roles = s.knobs.workload.roles
    if reserved and (roles.sleep_level or 0) > 0:
        return min(reserved, rollout.weights_bytes(s.model, roles) + rollout.graph_pool_bytes(roles))
    return reserved


def sync_terms(s: Setup, between: dict[str, int], reserved: int) -> dict[str, int]:
    """The weight-sync phase: what stays resident at a generation (`between`), the engine as the sync finds it, and
    the sync's own bytes."""
    return {
        **between,
        "vllm_reserved_bytes": vllm_sync_bytes(s, reserved),
        "sync_gather_bytes": sync_gather_bytes(s),
        "sync_merge_bytes": sync_merge_bytes(s),
        "sync_send_bytes": sync_send_bytes(s),
    }


def generation_weights_bytes(s: Setup) -> int:
    """Weights gathered for HF generate beyond the rank's shards: under ZeRO-3 the whole model at once (TRL 1.16
    trl/models/utils.py:141-150, ds3_gather_for_generation on by default), a full copy of every weight on each rank
    (none on one rank); otherwise what the forward gathers as in training (FSDP's units)."""
    if s.knobs.zero_stage != 3:
        return state_terms.gathered_params_bytes(s)
    return gathered_copy_bytes(s, whole_model_bytes(s), single=False)
