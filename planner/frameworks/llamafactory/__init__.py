"""LLaMA-Factory 0.9.5 (`llamafactory-cli train x.yaml`): LoRA by default, full-layer checkpointing on by default,
Liger's fused loss, packing, ZeRO through its DeepSpeed JSONs, FSDP through an accelerate config, SFT and DPO.
Files cited are in the 0.9.5 wheel (src/llamafactory/...)."""

from planner.frameworks.base import NO_SPLITS, Default, Framework, Rule, expert_targets, full_dpo_precomputed
from planner.frameworks.llamafactory.keys import KEYS
from planner.frameworks.llamafactory.signs import SIGNS
from planner.frameworks.tool import Tool

HP = "llamafactory 0.9.5 hparams"
FRAMEWORK = Framework(
    name="llamafactory",
    reads=("llamafactory",),
    signs=SIGNS,
    # `llamafactory-cli train x.yaml` (`lmf` too): the processes of its torchrun read by reader.read_launcher
    tools=(Tool("llamafactory-cli", trains=("train",), aliases=("lmf",), modules=("llamafactory",)),),
    writes=True,  # writer.py (planner.export.launch dispatches to it)
    label="LLaMA-Factory",
    version="llamafactory 0.9.5",
    every=(  # every value of these (closed by default: planner.frameworks.base.Framework.runs)
        "precision",
        "zero_stage",
        "offload",
        "attention",
        "optimizer",
        "client_optimizer",  # a DeepSpeed config without an optimizer entry (deepspeed reader)
        "lora_rank",
        "quant_absmax",
        "lora_targets",
        "lora_train_embeddings",
        "lora_dropout",
        "lora_variant",
        "lora_base_fp32",
        "frozen",
        "cp_attention",
        "eval_batch",
        "eval_logits_steps",
        "save_weights",
    ),
    runs={
        "device_map": ("off",),  # one process a GPU
        "num_labels": (1,),  # causal-lm only: the task's knobs at their defaults
        "negatives": (0,),
        "task": ("causal-lm",),  # stage rm keeps the vocabulary head (a value head beside it): not planned yet
        # freeze_vision_tower false beside LoRA keeps the tower's linears in lora_target all (0.9.5
        # model/model_utils/misc.py:40-41, visual.py:200-209): adapters on the tower
        "lora_vision": (False, True),
        "vit_checkpointing": ("on",),  # HF's gradient_checkpointing_enable reaches the tower; no key leaves it out
        "checkpointing": ("off", "full", "offload"),
        "loss": ("standard", "fused"),
        "batching": ("padded", "packed"),
        "fsdp": ("off", "full"),
        "optimizer_in_backward": (False,),
        "expert_parallel": ("off",),
        "quant": ("none", "nf4", "fp4", "int8", "gptq"),  # AWQ needs autoawq: model/model_utils/quantization.py:122-123
        "workload": ("sft", "dpo"),
        **NO_SPLITS,  # 0.9.5's hparams hold no sequence, context or tensor parallel size (v1 and Megatron aside)
    },
    defaults={
        "lora_rank": Default(8, f"{HP}/finetuning_args.py:77 (finetuning_type lora, :464)"),
        "lora_targets": Default("all-linear", f"{HP}/finetuning_args.py:81: lora_target all"),
        "checkpointing": Default(
            "full",
            f"{HP}/model_args.py:145: disable_gradient_checkpointing False "
            "(model/model_utils/checkpointing.py:173-176 turns it on)",
        ),
        "seq_len": Default(2048, f"{HP}/data_args.py:46: cutoff_len 2048"),
        "frozen": Default(
            "vision+projector",
            f"{HP}/finetuning_args.py:527,531: freeze_vision_tower, freeze_multi_modal_projector True",
        ),
        "optimizer": Default("adamw-fused", "transformers training_args.py: optim adamw_torch_fused on torch >= 2.8"),
        "micro_batch": Default(8, "transformers training_args.py: per_device_train_batch_size 8"),
        "grad_accum": Default(1, "transformers training_args.py: gradient_accumulation_steps 1"),
    },
    keys=KEYS.shown(  # the frameworks table's keys, named by the key table
        "micro_batch grad_accum checkpointing zero_stage offload=zero_stage fsdp optimizer loss attention "
        "precision lora_rank quant seq_len batching=packing model frozen=frozen_vision",
        fsdp="accelerate config (fsdp_config.yaml)",
        precision="bf16 / pure_bf16",
    ),
    notes=(
        "LoRA and checkpointing on by default; checkpointing offload is use_unsloth_gc",
        "trainable parameters upcast to fp32 unless pure_bf16 (model/adapter.py)",
    ),
    rules=(
        Rule(
            "workload",
            "full DPO always loads a reference model (hparams/finetuning_args.py:574): no precompute_ref_log_probs",
            full_dpo_precomputed,
        ),
        Rule(
            "lora_targets",
            "lora_target names modules: it has no PEFT target_parameters for stacked experts (give module names)",
            lambda k: bool(expert_targets(k)),
        ),
    ),
    # extras/constants.py:1360-1398: its InternVL ids are the -hf conversions only; model/model_utils/visual.py:274
    # registers model_type internvl (the native classes) for freeze_vision_tower and the projector
    remote_code=False,
    # its lora_target all leaves out the tower and projector under freeze_vision_tower (its default):
    # model/model_utils/misc.py:37-41 (llamafactory 0.9.5)
    all_linear_vision=False,
)
