"""The config files and objects a plan is written as: PEFT's LoraConfig (peft_config), transformers' quantization
config (quantization_config), HF's FSDP2 fsdp_config, the accelerate config of an FSDP plan, and the DeepSpeed JSON
(deepspeed_config). DeepSpeed keys follow the DeepSpeed config documentation (deepspeed.ai/docs/config-json); "auto"
values are the ones HF Trainer fills from TrainingArguments (transformers.integrations.deepspeed).
"""

from __future__ import annotations

import json

from planner.config.knobfields import CT_QUANTS
from planner.config.release import written_micro_batch
from planner.config.spec import Hardware, Knobs, Plan, saves_full_weights
from planner.estimate.quant import FOUR_BIT
from planner.estimate.zero import settings as zero_settings
from planner.export import parallel
from planner.model.lora_targets import peft_target_modules, peft_target_parameters, with_ends
from planner.model.modelspec import ModelSpec

DS_CONFIG_NAME = "ds_config.json"
FSDP_CONFIG_NAME = "fsdp_config.json"


def peft_config(plan: Plan, model: ModelSpec | None = None) -> dict | None:
    """PEFT LoraConfig fields of a LoRA plan (recipe.lora_config trains the same adapters); a VLM's targets are its
    language model's linears alone (peft_target_modules)."""
    if not plan.lora_rank:
        return None
    cfg = {
        "r": plan.lora_rank,
        "lora_alpha": 2 * plan.lora_rank,
        # --lora-ends: embed_tokens / lm_head too, all-linear spelt as the model's linear names beside them
        "target_modules": with_ends(
            peft_target_modules(plan.lora_targets, model, plan.lora_vision), plan.lora_ends, model
        )
        or [],
        "lora_dropout": plan.lora_dropout,
        "task_type": "CAUSAL_LM",
    }
    if peft_target_parameters(plan.lora_targets):
        cfg["target_parameters"] = peft_target_parameters(plan.lora_targets)
    if plan.lora_train_embeddings:
        cfg["modules_to_save"] = ["embed_tokens", "lm_head"]
    if plan.lora_variant == "dora":
        cfg["use_dora"] = True
    return cfg


def compute_dtype_name(plan: Plan) -> str:
    return {"fp32": "float32", "fp16": "float16"}.get(plan.precision, "bfloat16")


def quant_storage(plan: Plan) -> str | None:
    """bnb_4bit_quant_storage of a sharded 4-bit plan: the packed weight stored in the compute dtype, so that FSDP and
    ZeRO-3 shard it with the rest (planner.estimate.quant); None where nothing shards it (bitsandbytes' uint8)."""
    if plan.quant not in FOUR_BIT or not (plan.zero_stage == 3 or plan.fsdp != "off"):
        return None
    return compute_dtype_name(plan)


def quantization_config_class(plan: Plan) -> str:
    """The transformers class quantization_config's fields are for."""
    classes = {"gptq": "GPTQConfig", "awq": "AwqConfig", "hqq": "HqqConfig"} | dict.fromkeys(
        CT_QUANTS, "CompressedTensorsConfig"
    )
    return classes.get(plan.quant, "BitsAndBytesConfig")


def quantization_config(plan: Plan) -> dict | None:
    """transformers BitsAndBytesConfig fields of a QLoRA plan: 4-bit base, double quantization, compute dtype, and
    the storage dtype when sharded."""
    if plan.quant == "none":
        return None
    if plan.quant == "int8":
        return {"load_in_8bit": True}
    if plan.quant in ("gptq", "awq"):  # the checkpoint's own config, with a kernel that trains (planner.estimate.quant)
        return {"bits": 4, "group_size": 128, "backend": "auto_trainable"}
    if plan.quant in CT_QUANTS:  # transformers 4.57's default, the route planned (planner.estimate.quant)
        return {"run_compressed": True}
    if plan.quant == "hqq":  # HqqConfig's defaults, the checkpoint's own
        return {"nbits": 4, "group_size": 64}
    out = {
        "load_in_4bit": True,
        "bnb_4bit_quant_type": plan.quant,
        "bnb_4bit_use_double_quant": plan.quant_absmax == "8bit",
        "bnb_4bit_compute_dtype": compute_dtype_name(plan),
    }
    if quant_storage(plan):
        out["bnb_4bit_quant_storage"] = quant_storage(plan)
    return out


def fsdp_config(plan: Plan, model: ModelSpec | None, classes: tuple[str, ...] | None = None) -> dict:
    """HF's fsdp_config for an FSDP2 plan (transformers TrainingArguments._process_fsdp_args reads it). `classes`: the
    layer classes of the checkpoint the framework loads (planner.model.catalog.checkpoints), else the model's."""
    cfg = {
        "version": 2,
        "reshard_after_forward": plan.fsdp != "grad-op",
        "activation_checkpointing": plan.checkpointing != "off",
        "cpu_ram_efficient_loading": True,
        "state_dict_type": "FULL_STATE_DICT" if saves_full_weights(plan) else "SHARDED_STATE_DICT",
        "cpu_offload": plan.offload != "none",
    }
    units = list(classes) if classes is not None else wrap_classes(model) if model is not None else []
    if units:
        cfg["transformer_layer_cls_to_wrap"] = units
    return cfg


def wrap_classes(model: ModelSpec) -> list[str]:
    """The model's FSDP units: its own layer classes, and a VLM's language-model layers (the reader's fsdp_units)."""
    return list(model.fsdp_units)


def accelerate_config(
    plan: Plan, hw: Hardware, model: ModelSpec | None, classes: tuple[str, ...] | None = None
) -> dict | None:
    """An accelerate config (`accelerate launch --config_file`) for an FSDP2 plan, or a ZeRO plan with Ulysses
    sequence parallel (export.parallel); None otherwise."""
    if plan.fsdp == "off":
        if plan.sequence_parallel > 1 and plan.zero_stage >= 1:
            return parallel.deepspeed_accelerate_config(plan, hw, DS_CONFIG_NAME)
        return None
    f = fsdp_config(plan, model, classes)
    fsdp = {
        "fsdp_version": 2,
        "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
        "fsdp_reshard_after_forward": f["reshard_after_forward"],
        "fsdp_offload_params": f["cpu_offload"],
        "fsdp_state_dict_type": f["state_dict_type"],
        "fsdp_cpu_ram_efficient_loading": True,
        "fsdp_activation_checkpointing": f["activation_checkpointing"],
    }
    if "transformer_layer_cls_to_wrap" in f:
        fsdp["fsdp_transformer_layer_cls_to_wrap"] = ",".join(f["transformer_layer_cls_to_wrap"])
    cfg = {
        "compute_environment": "LOCAL_MACHINE",
        "distributed_type": "FSDP",
        "fsdp_config": fsdp,
        "mixed_precision": "bf16" if plan.precision == "bf16" else "no",
        "num_machines": hw.nodes,
        "num_processes": hw.world_size,
        "machine_rank": 0,
        "main_training_function": "main",
        "use_cpu": False,
    }
    if plan.fsdp == "hybrid":  # HSDP: replicate across nodes, shard within one (accelerate's ParallelismConfig)
        cfg["parallelism_config"] = {
            "parallelism_config_dp_replicate_size": hw.nodes,
            "parallelism_config_dp_shard_size": hw.gpus_per_node,
        }
    fields = parallel.parallelism_fields(plan, hw.nodes)
    if fields:  # context parallel: FSDP shards over dp_shard x cp
        cfg["parallelism_config"] = parallel.accelerate_section(fields)
    return cfg


def deepspeed_config(plan: Plan, model: ModelSpec) -> dict | None:
    """A complete DeepSpeed config for zero >= 1 (None for torch DDP)."""
    return deepspeed_config_for(plan.knobs, written_micro_batch(plan), plan.grad_accum, plan.world_size, model)


def deepspeed_config_for(k: Knobs, micro_batch: int, grad_accum: int, world: int, model: ModelSpec) -> dict | None:
    """deepspeed_config from a plan's knobs and batch split (the probes and the trainer have no Plan)."""
    if k.zero_stage == 0:
        return None
    # every value the plan's memory terms assume (planner.estimate.zero): "auto"'s, or the user's own (zero_buckets)
    z = zero_settings(model.text.hidden, k.zero_buckets, k.zero_stage)
    zero: dict = {
        "stage": k.zero_stage,
        "overlap_comm": z.overlap_comm,
        "contiguous_gradients": z.contiguous_gradients,
        "reduce_bucket_size": z.reduce_bucket_size,
    }
    if k.zero_stage in (1, 2):
        zero.update(allgather_partitions=True, allgather_bucket_size=z.allgather_bucket_size, reduce_scatter=True)
    else:
        zero.update(
            stage3_prefetch_bucket_size=z.prefetch_bucket_size,
            stage3_param_persistence_threshold=z.param_persistence_threshold,
            stage3_max_live_parameters=z.max_live_parameters,
            stage3_max_reuse_distance=z.max_reuse_distance,
            sub_group_size=z.sub_group_size,
            stage3_gather_16bit_weights_on_model_save=saves_full_weights(k),
        )
    if k.offload != "none":
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    if k.offload == "optimizer+params":
        zero["offload_param"] = {"device": "cpu", "pin_memory": True}
    cfg: dict = {
        # every rank, as HF fills it (transformers integrations/deepspeed.py:143); under Ulysses accelerate then sets
        # it to the data-parallel ranks' (accelerator.py:2358-2365)
        "train_batch_size": micro_batch * grad_accum * world,
        "train_micro_batch_size_per_gpu": micro_batch,
        "gradient_accumulation_steps": grad_accum,
        "gradient_clipping": 1.0,
        "zero_optimization": zero,
        "steps_per_print": 100,
        "wall_clock_breakdown": False,
        **parallel.deepspeed_keys(k),
    }
    if k.precision == "bf16":
        cfg["bf16"] = {"enabled": True}
    elif k.precision == "fp16":
        cfg["fp16"] = {
            "enabled": True,
            "loss_scale": 0,
            "initial_scale_power": 16,
            "loss_scale_window": 1000,
            "hysteresis": 2,
            "min_loss_scale": 1,
        }
    if k.optimizer in ("adamw", "adamw-fused") and not k.client_optimizer:  # else HF's Trainer builds --optim
        cfg["optimizer"] = {
            "type": "AdamW",
            "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"},
        }
    else:
        cfg["zero_allow_untested_optimizer"] = True
    return cfg


def yaml_text(cfg: dict, indent: int = 0) -> str:
    """A flat-or-nested dict of scalars as YAML (what accelerate's config files hold); JSON scalars are YAML."""
    lines = []
    for k, v in cfg.items():
        if isinstance(v, dict):
            lines.append(" " * indent + f"{k}:\n" + yaml_text(v, indent + 2).rstrip("\n"))
        else:
            lines.append(" " * indent + f"{k}: {json.dumps(v)}")
    return "\n".join(lines) + "\n"
