"""The HF training recipe that the probes and the bundled trainer share, so that what a probe measures is
what the trainer runs: half dtypes by precision, the transformers model from its config, the LoRA
adapters, and the optimizers as they run on CUDA."""

from __future__ import annotations

import copy

import torch

HALF = {"fp16": torch.float16, "bf16": torch.bfloat16, "bf16-pure": torch.bfloat16}


def hf_config(cfg: dict, layers: int | None = None):
    """A transformers config from a config.json dict (cache off; optionally fewer decoder layers)."""
    import transformers

    from planner.errors import BadInput
    from planner.model import vila

    cfg = copy.deepcopy(cfg)  # transformers rewrites nested dicts (rope_scaling) in place
    model_type = cfg.pop("model_type")
    if model_type in vila.MODEL_TYPES:
        raise BadInput(
            f"model_type {model_type!r} (VILA) runs in VILA's own code, which no transformers class builds: "
            "the probes and the bundled trainer cannot run it, its plans are analytic (--evidence analytic)",
            "model",
        )
    config = transformers.AutoConfig.for_model(model_type, **cfg)
    config.use_cache = False
    if layers is not None:
        config.get_text_config().num_hidden_layers = layers
    return config


def text_layers(cfg: dict) -> int:
    return hf_config(cfg).get_text_config().num_hidden_layers


def lora_config(knobs, model_spec=None):
    """The adapters of a LoRA plan: --lora-targets (all-linear, attention, or module names), alpha 2r, --lora-dropout,
    and with --lora-train-embeddings trained copies of the embedding and head (PEFT modules_to_save); the probes and
    the bundled trainer train the same ones (a VLM's: its language model's, given its `model_spec`). --lora-variant
    adalora or vera: PEFT's AdaLoraConfig or VeraConfig at --lora-rank (tuner_config); oft or boft: _oft_config."""
    from peft import LoraConfig

    from planner.model.lora_targets import peft_target_modules, peft_target_parameters, with_ends

    save = ["embed_tokens", "wte", "lm_head"] if knobs.lora_train_embeddings else None
    targets = peft_target_modules(knobs.lora_targets, model_spec, getattr(knobs, "lora_vision", False)) or []
    targets = with_ends(targets, getattr(knobs, "lora_ends", "none"), model_spec) or []
    variant = getattr(knobs, "lora_variant", "lora")
    if (
        variant == "adapter"
    ):  # never built as LoRA: ms-swift's module, measured in its venv (tests/probes/swift_adapter.py)
        raise ValueError(
            "--lora-variant adapter is ms-swift's AdapterModule: the bundled trainer and probes build PEFT's tuners"
        )
    if variant in ("oft", "boft"):  # no tower adapters under OFT (planner.config.spec_lora.oft_rules)
        return _oft_config(knobs, targets, save)
    if variant in ("adalora", "vera"):
        return tuner_config(variant, knobs, targets, save)
    return LoraConfig(
        r=knobs.lora_rank,
        lora_alpha=2 * knobs.lora_rank,
        target_modules=targets,
        target_parameters=peft_target_parameters(knobs.lora_targets),
        lora_dropout=knobs.lora_dropout,
        modules_to_save=save,
        use_dora=variant == "dora",
    )


def _oft_config(knobs, targets: list, save):
    """OFT or BOFT as LLaMA-Factory and ms-swift build them: the block size (--lora-rank), no block count (PEFT's
    OFTConfig r=0; BOFTConfig boft_block_num=0), one butterfly factor, no dropout."""
    from peft import BOFTConfig, OFTConfig

    if knobs.lora_variant == "oft":
        return OFTConfig(r=0, oft_block_size=knobs.lora_rank, target_modules=targets, modules_to_save=save)
    return BOFTConfig(
        boft_block_size=knobs.lora_rank,
        boft_block_num=0,
        boft_n_butterfly_factor=1,
        target_modules=targets,
        modules_to_save=save,
    )


def tuner_config(variant: str, knobs, targets, save):
    """AdaLoRA at init_r = --lora-rank (target_r half of it: only lora_E's mask; ms-swift 4.6's beta1, beta2,
    orth_reg_weight and deltaT defaults, tuner_args.py:175-182) in its allocator's warmup (tinit): the importance
    buffers are updated every step (update_and_allocate: probes.step.train_steps calls it where ms-swift's callback
    does, before zero_grad), and the masking, in place, keeps no memory; or VeRA at r = --lora-rank."""
    from peft import AdaLoraConfig, VeraConfig

    if variant == "vera":
        return VeraConfig(
            r=knobs.lora_rank, target_modules=targets, vera_dropout=knobs.lora_dropout, modules_to_save=save
        )
    r = knobs.lora_rank
    return AdaLoraConfig(
        init_r=r,
        target_r=max(1, r // 2),
        lora_alpha=2 * r,
        target_modules=targets,
        lora_dropout=knobs.lora_dropout,
        modules_to_save=save,
        tinit=10**6,
        total_step=10**7,
    )


def allocate_ranks(model, step: int) -> None:
    """AdaLoRA's rank allocator after the optimizer's step and before zero_grad, as ms-swift's callback runs it
    (swift/callbacks/adalora.py:23-25); nothing for any other model (a DDP wrapper's module is looked into)."""
    peft_model = getattr(model, "module", model)
    allocate = getattr(getattr(peft_model, "base_model", None), "update_and_allocate", None)
    if callable(allocate):
        allocate(step)


def make_optimizer(params: list, optimizer: str, lr: float = 1e-5) -> torch.optim.Optimizer:
    """torch's optimizers as they run on CUDA: AdamW foreach (CUDA's default), fused on request
    (the probes and the bundled trainer)."""
    if optimizer == "adamw":
        return torch.optim.AdamW(params, lr=lr, foreach=True)
    if optimizer == "adamw-fused":
        return torch.optim.AdamW(params, lr=lr, fused=True)
    if optimizer == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=0.9, foreach=True)
    if optimizer == "adafactor":
        from transformers.optimization import Adafactor

        return Adafactor(params, lr=lr, scale_parameter=False, relative_step=False)
    if optimizer == "rmsprop":  # transformers' optim rmsprop (trainer_optimizer.py:339-349)
        return torch.optim.RMSprop(params, lr=lr, foreach=True)
    if optimizer == "adagrad":  # transformers' optim adagrad (trainer_optimizer.py:329-336)
        return torch.optim.Adagrad(params, lr=lr, foreach=True)
    return _bitsandbytes_optimizer(params, optimizer, lr)


def _bitsandbytes_optimizer(params: list, optimizer: str, lr: float) -> torch.optim.Optimizer:
    """8-bit and paged AdamW, Lion and RMSprop (bitsandbytes; paged ones page their states through CUDA unified
    memory), as transformers' optim names build them (trainer_optimizer.py:246-293)."""
    try:
        import bitsandbytes as bnb
    except ImportError:
        raise ValueError(f"optimizer {optimizer!r} needs bitsandbytes, which is not installed") from None
    if optimizer.startswith("paged") and not any(p.is_cuda for p in params):
        raise ValueError(f"optimizer {optimizer!r} pages its states through CUDA unified memory: it needs a GPU")
    cls = {
        "adamw-8bit": bnb.optim.AdamW8bit,
        "paged-adamw": bnb.optim.PagedAdamW32bit,
        "paged-adamw-8bit": bnb.optim.PagedAdamW8bit,
        "lion": bnb.optim.Lion32bit,
        "lion-8bit": bnb.optim.Lion8bit,
        "paged-lion": bnb.optim.PagedLion32bit,
        "paged-lion-8bit": bnb.optim.PagedLion8bit,
        "rmsprop-bnb": bnb.optim.RMSprop32bit,
        "rmsprop-bnb-8bit": bnb.optim.RMSprop8bit,
    }[optimizer]
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    # bitsandbytes builds its quantization maps from Python lists (functional.create_dynamic_map's .tolist()):
    # under the sim's fake tensors they are built real (two 256-entry float32 maps), as the GPU run builds them
    with unset_fake_temporarily():
        return cls(params, lr=lr)


def shard_fsdp(model, knobs, device_type: str = "cpu", mesh=None):
    """FSDP2 as the plans run it (planner/estimate/fsdp.py): every block transformers lists in the model's (and its
    sub-models') `_no_split_modules` is a unit, then the root; `bf16` = fp32 shards computed in bf16 with fp32
    reduction (MixedPrecisionPolicy), bf16-pure and fp32 without a policy; grad-op keeps units unsharded from
    forward to backward; hybrid shards within a node and replicates across nodes (HSDP); `mesh`: the ranks to shard
    over beside tensor parallel (recipe.parallel.Mesh.shard_mesh)."""
    import os

    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, OffloadPolicy, fully_shard
    from transformers import PreTrainedModel

    world = dist.get_world_size()
    if mesh is None and knobs.fsdp == "hybrid":
        local = int(os.environ.get("LOCAL_WORLD_SIZE", world))
        mesh = init_device_mesh(device_type, (world // local, local), mesh_dim_names=("replicate", "shard"))
    elif mesh is None:
        mesh = init_device_mesh(device_type, (world,))
    mp = (
        MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        if knobs.precision == "bf16"
        else MixedPrecisionPolicy()
    )
    kw = {
        "mesh": mesh,
        "mp_policy": mp,
        "offload_policy": CPUOffloadPolicy() if knobs.offload == "optimizer+params" else OffloadPolicy(),
    }
    units = set().union(*(m._no_split_modules or [] for m in model.modules() if isinstance(m, PreTrainedModel)))
    for module in [m for m in model.modules() if type(m).__name__ in units]:
        fully_shard(module, reshard_after_forward=knobs.fsdp != "grad-op", **kw)
    fully_shard(model, **kw)
    return model
