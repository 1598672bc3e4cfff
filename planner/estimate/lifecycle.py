"""The phases around the steps: the model's load and a checkpoint save, per rank on the GPU and per node in host RAM,
as HF's Trainer (and the frameworks on it), bare accelerate and the bundled trainer run them. Read in transformers 5.23.0, accelerate 1.15.0,
DeepSpeed 0.19.8 and torch 2.13.0 (paths below are relative to site-packages); each term is pinned to the state dicts
the libraries' own save calls return on CPU ranks (probes/zero.py, probes/dist.py: tests/probes/test_save.py).

Load. from_pretrained's dtype defaults to "auto", the checkpoint's (transformers/modeling_utils.py:4177-4178, 829-832),
and safetensors tensors loaded in that dtype stay views of the mmapped file (modeling_utils.py:4568-4573;
core_model_loading.py:1319-1324): page cache the kernel can reclaim, one copy per node, not counted. A tensor cast
to another dtype is a copy in host RAM on every rank that loads it. ZeRO-3 (zero.Init) has rank 0 alone read values
(modeling_utils.py:4520-4533). accelerate's FSDP2 upcasts every trainable parameter to fp32 on the host of every rank
before it shards, whatever cpu_ram_efficient_loading says (accelerate/utils/fsdp_utils.py:813-828).

HF's `_save_checkpoint` runs `save_model` on every rank, then the optimizer's save (transformers/trainer.py:3369,
3390-3392). torch.save copies one storage at a time to the host (torch/serialization.py:1290-1310), so a state dict of
GPU tensors costs on the host only what its largest storage holds, unless the tensors are views of one flat buffer
(ZeRO-1/2's bit16 groups), and a state dict already copied to the host costs all of it.

`save_weights` ("auto": what memplan exports: ZeRO-3 gathers 16-bit weights, FSDP saves shards) decides whether the
full weights are gathered: ZeRO-3's stage3_gather_16bit_weights_on_model_save (DeepSpeed's default false,
deepspeed/runtime/zero/config.py:257; accelerate fills "auto" with false, accelerator.py:2223-2226) and FSDP's
state_dict_type (HF's default FULL_STATE_DICT, transformers/training_args.py:2852; bare accelerate's FSDP2 default
SHARDED_STATE_DICT, accelerate/utils/dataclasses.py:2047-2051)."""

from __future__ import annotations

from planner.config.spec import saves_full_weights
from planner.estimate import state_terms
from planner.estimate.nograd import compute_dtype_bytes
from planner.estimate.setup import Setup
from planner.estimate.trained import (
    frozen_bytes,
    optimizer_state_bytes_per_param,
    trainable_params,
    trainable_weight_bytes_per_param,
)
from planner.estimate.zero import of as zero_settings
from planner.frameworks import FRAMEWORKS

SAFETENSORS_SHARD_BYTES = 50 * 10**9  # save_pretrained's max_shard_size "50GB" (transformers modeling_utils.py:3316)
FP32 = 4


def checkpoint_dtype_bytes(s: Setup) -> int:
    """The checkpoint's dtype as config.json names it (dtype, or torch_dtype before transformers 4.56); bf16 where it
    names none (what current checkpoints hold)."""
    cfg = s.model.config
    name = cfg.get("dtype") or cfg.get("torch_dtype") or (cfg.get("text_config") or {}).get("dtype") or "bfloat16"
    return 4 if str(name) in ("float32", "torch.float32") else 2


def load_host_bytes_per_node(s: Setup) -> int:
    """Host RAM the ranks of one node hold at once while the model is loaded and sharded (page cache aside)."""
    k, g, ckpt = s.knobs, s.node_ranks, checkpoint_dtype_bytes(s)
    t, w = trainable_params(s), trainable_weight_bytes_per_param(k)
    cast = t * w if w != ckpt else 0  # a rank loading in the plan's weight dtype
    if FRAMEWORKS[k.framework].loop == "bundled":  # recipe/model.py: from_pretrained(dtype=weight_dtype), every rank
        return g * cast
    if k.fsdp != "off":  # every rank upcasts its trainable parameters (accelerate/utils/fsdp_utils.py:813-820)
        return g * t * FP32 if k.precision in ("bf16", "fp16") else g * cast
    if k.zero_stage == 3:
        return 0  # rank 0 reads views of the files; the others build empty partitions
    if k.zero_stage in (1, 2):  # DeepSpeed casts the module to bf16/fp16 on the host (runtime/engine.py:2080-2088)
        return g * t * compute_dtype_bytes(s) if ckpt != compute_dtype_bytes(s) else 0
    return g * cast  # DDP: the script loads in the plan's weight dtype


def load_gpu_transient_bytes(s: Setup) -> int:
    """GPU memory loading adds on top of the parameters it leaves: ZeRO-3 gathers one module's own parameters to fill
    them (deepspeed/runtime/zero/partition_parameters.py:2465-2474), FSDP2 one full parameter in fp32 with
    cpu_ram_efficient_loading (accelerate fsdp_utils.py:629-653) or one unit without it
    (torch/distributed/fsdp/_fully_shard/_fsdp_init.py:382-401): the largest matrix is the bound memplan counts.
    --fsdp-load whole (LLaMA-Factory v1's init_on_default: from_pretrained(device_map=its GPU), a full fine-tune cast
    to fp32 there, then fully_shard; v0.9.5 src/llamafactory/v1/core/model_engine.py:115-122, 160-180,
    plugins/trainer_plugins/distributed/fsdp2.py:323-369): the whole model in the plan's weight dtype, less the
    shard the plan counts already."""
    k = s.knobs
    if k.fsdp != "off" and k.fsdp_load == "whole":  # the whole model on each GPU, then its shards (fsdp_load)
        return state_terms.whole_params_bytes(s) - state_terms.params_bytes(s)
    if k.fsdp != "off":
        return s.model.largest_matrix_params() * FP32
    if k.zero_stage == 3:
        return s.model.largest_matrix_params() * compute_dtype_bytes(s)
    return 0


def saved_weight_params(s: Setup) -> int:
    """The parameters the model's state dict holds in a save: PEFT saves the adapters only (transformers/trainer.py:4110,
    exclude_frozen_parameters under ZeRO-3; PeftModel.save_pretrained), a full fine-tune every parameter."""
    return trainable_params(s) if s.lora else s.model.params


def optimizer_state_bytes_full(s: Setup) -> int:
    """The optimizer's states of every trainable parameter in fp32 (what a full optimizer state dict gathers)."""
    return int(trainable_params(s) * optimizer_state_bytes_per_param(s.knobs.optimizer, FP32))


def fsdp_model_bytes(s: Setup) -> int:
    """The model's state dict under FSDP: trainable parameters in fp32 (accelerate upcasts them under mixed precision,
    accelerate/utils/fsdp_utils.py:814-820), frozen ones as loaded."""
    return trainable_params(s) * FP32 + frozen_bytes(s)


def save_host_bytes_per_node(s: Setup) -> int:
    """Host RAM a checkpoint save holds at once on the busiest node (node 0, where rank 0 is)."""
    k, g = s.knobs, s.node_ranks
    w, half = saved_weight_params(s), compute_dtype_bytes(s)
    if (
        FRAMEWORKS[k.framework].loop == "bundled"
    ):  # trainer/checkpoint.py: DeepSpeed's save_checkpoint, FSDP's dcp.save, DDP's torch.save
        return w * half if k.zero_stage in (1, 2) and k.fsdp == "off" else 0  # the writer's flat bit16 group
    if k.fsdp != "off":  # the whole model's state dict (PEFT filters the adapters after), then the optimizer's
        states = max(fsdp_model_bytes(s), optimizer_state_bytes_full(s))  # accelerate/utils/fsdp_utils.py:114-159
        return (
            states if saves_full_weights(s.knobs) else g * states // s.world_size
        )  # rank 0 all, or each rank its shards
    if k.zero_stage == 3:
        if saves_full_weights(
            s.knobs
        ):  # DeepSpeed engine.py:5631-5698: rank 0 keeps every module's weights on the host
            return w * half
        return min(zero_settings(s).sub_group_size, w // s.world_size) * FP32  # one sub-group
    if k.zero_stage in (1, 2):  # every rank clones the full model to the host (accelerate accelerator.py:4092-4095)
        return g * w * half
    return min(  # DDP: rank 0's save_pretrained, one safetensors shard at a time
        w * trainable_weight_bytes_per_param(k), SAFETENSORS_SHARD_BYTES
    )


def save_gpu_transient_bytes(s: Setup) -> int:
    """GPU memory a save adds on every rank: ZeRO-3 gathers one module's own parameters at a time (DeepSpeed
    engine.py:5631-5698, GatheredParameters of parameters(recurse=False)), FSDP's full state dict one unsharded
    parameter at a time (torch/distributed/_state_dict_utils.py:266-285); the largest is the embedding or the head.
    One rank gathers nothing: ZeRO-3 uses a partition of one as the parameter (deepspeed/runtime/zero/
    partition_parameters.py:1559-1560, _no_gather_coalesced) and FSDP2's full tensor of one shard is that shard
    (an H200 measured 0 bytes above the step for both: benchmarks/results/gpu/h200/terms.json)."""
    k = s.knobs
    if FRAMEWORKS[k.framework].loop == "bundled" or not saves_full_weights(k) or s.world_size == 1:
        return 0
    if k.fsdp != "off":
        return s.model.largest_matrix_params() * FP32
    if k.zero_stage == 3:
        return s.model.largest_matrix_params() * compute_dtype_bytes(s)
    return 0


def host_phases(s: Setup, training: int) -> dict[str, int]:
    """Host RAM per node in each phase: `training` what offload holds while the steps run."""
    return {"load": load_host_bytes_per_node(s), "training": training, "checkpoint-save": save_host_bytes_per_node(s)}
