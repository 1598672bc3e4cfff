"""LLaMA-Factory 0.9.5's experimental v1 trainer (`USE_V1=1 llamafactory-cli sft x.yaml`, src/llamafactory/v1): its own
YAML schema (model, model_class, peft_config, quant_config, dist_config, kernel_config, micro_batch_size,
global_batch_size, cutoff_len, batching_strategy ...) and its own loop, not HF's Trainer. How it spends memory, read at
the v0.9.5 tag of github.com/hiyouga/LLaMA-Factory (paths under src/llamafactory/v1/):
- no autocast anywhere: a full fine-tune is cast to fp32 (core/model_engine.py:176-179), so it trains in fp32 unless
  FSDP2 shards it with bf16 on (MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32): plugins/trainer_plugins/
  distributed/fsdp2.py:176-188) or DeepSpeed's config says bf16; LoRA keeps the base in the checkpoint's dtype
  (dtype "auto", model_engine.py:164-171), PEFT's adapters in fp32;
- torch's AdamW on the trained parameters (core/base_trainer.py:195-197; no other optimizer is registered,
  plugins/trainer_plugins/optimizer.py:18-19); activation checkpointing on, non-reentrant (base_trainer.py:89-90);
- its SFT loss: the model is called with the labels (HF's own loss over fp32 logits, kept by its output), then the
  logits cast to fp32 again, a shifted contiguous copy and a cross-entropy per token (base_trainer.py:214-228,
  trainers/sft_trainer.py:25-29): sft_head "lf-v1" (planner.estimate.v1_head);
- FSDP2 reduce-scatters every micro-step (base_trainer.py:257-276: loss.backward() each, no no_sync).
The reader is reader.py."""

from planner.frameworks.base import Default, Framework, Rule
from planner.frameworks.rules import VLM_LORA_ENDS
from planner.frameworks.tool import Signs

V1 = "src/llamafactory/v1/"
SOURCE = "LLaMA-Factory 0.9.5 v1"


def _bf16_without_sharding(k: dict) -> bool:
    return k["precision"] == "bf16" and k["fsdp"] == "off" and k["zero_stage"] == 0


def _half_full_finetune(k: dict) -> bool:
    return k["precision"] == "bf16-pure" and not k["lora_rank"]


FRAMEWORK = Framework(
    name="llamafactory_v1",
    reads=("llamafactory_v1",),
    # its dataclasses' own keys (v1/config/*.py): dist_config, or model with micro_batch_size (ms-swift's Megatron and
    # Ray files share micro_batch_size: their signs rank below this one)
    signs=(Signs("llamafactory_v1", lambda k, d: "dist_config" in k or {"model", "micro_batch_size"} <= k, 50),),
    label="LLaMA-Factory v1",
    version="LLaMA-Factory 0.9.5's v1 trainer (USE_V1=1)",
    every=(
        "optimizer_rank",
        "optimizer_targets",
        "optimizer_projection",
        "lora_rank",
        "lora_targets",
        "lora_dropout",
        "eval_batch",
        "eval_logits_steps",
        "save_weights",
        "client_optimizer",  # a DeepSpeed config without an optimizer entry steps the trainer's torch AdamW
        "zero_buckets",
    ),
    runs={
        # init_config: init_on_default loads the whole model onto each GPU before fully_shard (reader.py)
        "fsdp_load": ("sharded", "whole"),
        "precision": ("fp32", "bf16", "bf16-pure"),
        "checkpointing": ("off", "full"),
        "loss": ("standard",),
        "attention": (
            "sdpa",
            "flash",
            "eager",
        ),  # flash_attn: eager, sdpa, flash_attention_2 (config/model_args.py:64-68)
        "batching": ("padded", "packed"),  # batching_strategy (plugins/trainer_plugins/batching.py)
        "zero_stage": (0, 1, 2, 3),  # dist_config name deepspeed: its config_file as written
        "offload": ("none", "optimizer", "optimizer+params"),  # DeepSpeed's; FSDP2's offload_params
        "fsdp": ("off", "full", "grad-op"),  # dist_config fsdp2, reshard_after_forward True / False
        "optimizer": ("adamw",),
        "quant": ("none", "nf4", "int8"),  # quant_config bnb (plugins/model_plugins/quantization.py:80-122)
        "quant_absmax": ("8bit", "fp32"),  # double_quantization True by default
        "lora_variant": ("lora", "dora"),  # peft_config use_dora
        "lora_train_embeddings": (False, True),  # peft_config modules_to_save
        "lora_vision": (False, True),
        "lora_dropout_kept": (False,),
        "lora_ends": ("none", "embed", "head", "both"),  # peft_config.target_modules naming embed_tokens / lm_head
        "lora_tower_full": (False,),
        "lora_base_fp32": (False,),
        "device_map": ("off",),
        "dataparallel": (False,),
        "num_labels": (1,),
        "negatives": (0,),
        "task": ("causal-lm",),
        "trained_layout": ("last",),
        "trained_layers": (0,),  # its freeze tuning trains fp32 layers without autocast: refused by the reader
        "workload": ("sft",),  # its dpo raises NotImplementedError; rm: a token classifier (refused by the reader)
        "optimizer_in_backward": (False,),
        "expert_parallel": ("off",),
        "frozen": ("none",),
        "vit_checkpointing": ("on",),
        "tensor_parallel": ("off",),
        "context_parallel": ("off",),
        "sequence_parallel": ("off",),  # its Ulysses (cp_size) runs its own loss: refused by the reader
        "cp_attention": ("ring",),
    },
    defaults={
        "precision": Default("fp32", f"{V1}core/model_engine.py:176-179: a full fine-tune model.to(torch.float32)"),
        "checkpointing": Default("full", f"{V1}config/training_args.py:68 enable_activation_checkpointing True"),
        "attention": Default("sdpa", f"{V1}config/model_args.py:36 flash_attn sdpa"),
        "batching": Default("padded", f"{V1}config/training_args.py:60 batching_strategy normal"),
        "optimizer": Default("adamw", f"{V1}core/base_trainer.py:195-197 torch.optim.AdamW"),
        "quant_absmax": Default("8bit", f"{V1}plugins/model_plugins/quantization.py:80-122 double_quantization True"),
        # its torchrun launch sets PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True unless OPTIM_TORCH=0
        "expandable_segments": Default(True, f"{V1}launcher.py:67-70"),
    },
    keys={
        "model": "model",
        "micro_batch": "micro_batch_size",
        "grad_accum": "global_batch_size",
        "seq_len": "cutoff_len",
        "checkpointing": "enable_activation_checkpointing",
        "precision": "bf16",
        "attention": "flash_attn",
        "batching": "batching_strategy",
        "fsdp": "dist_config.reshard_after_forward",
        "fsdp_load": "init_config.name",
        "zero_stage": "dist_config.config_file",
        "offload": "dist_config.offload_params",
        "lora_rank": "peft_config.r",
        "lora_targets": "peft_config.target_modules",
        "lora_dropout": "peft_config.lora_dropout",
        "lora_variant": "peft_config.use_dora",
        "lora_train_embeddings": "peft_config.modules_to_save",
        "quant": "quant_config.quantization_bit",
        "quant_absmax": "quant_config.double_quantization",
    },
    notes=("no autocast: a full fine-tune in fp32 unless FSDP2's bf16 or DeepSpeed's; its own SFT loss; no writer",),
    rules=(
        VLM_LORA_ENDS,
        Rule(
            "precision",
            "the v1 trainer runs no autocast: bf16 over fp32 weights is FSDP2's MixedPrecisionPolicy or DeepSpeed's "
            "bf16 (give --fsdp full or --zero N; else --precision fp32)",
            _bf16_without_sharding,
        ),
        Rule(
            "precision",
            "the v1 trainer casts a full fine-tune to fp32 (core/model_engine.py:176-179): give --precision fp32 or "
            "bf16 with --fsdp full",
            _half_full_finetune,
        ),
    ),
    sft_head="lf-v1",
    fsdp_reduce="fp32",  # fsdp2.py:176-188 MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)
    fsdp_no_sync=False,  # base_trainer.py:257-276: every micro-step's backward reduce-scatters
    loop="hf",
)
