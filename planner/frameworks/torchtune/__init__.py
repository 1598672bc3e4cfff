"""torchtune 0.6.1 (`tune run [--nproc_per_node N] RECIPE --config CFG key=value`, a recipe YAML of `_component_`
builders; its last release): the four SFT recipes full_finetune_single_device, full_finetune_distributed,
lora_finetune_single_device and lora_finetune_distributed (QLoRA: a `qlora_*` model builder). Its dtype is the
parameters', gradients' and optimizer states' ("When dtype=bf16, all activations, gradients and optimizer states are
in bfloat16": memplan's bf16-pure), fp16 is refused; FSDP2 `fully_shard` on the distributed recipes, no DeepSpeed.
Files cited are at the v0.6.1 tag of pytorch/torchtune (recipes/..., torchtune/...); the reader is reader.py."""

from planner.frameworks.base import Default, Framework, Rule
from planner.frameworks.rules import VLM_LORA_ENDS
from planner.frameworks.runs import TRANSFORMERS_ONE_STATE  # the same classes: torch's and bitsandbytes'
from planner.frameworks.tool import Signs, Tool

R = "recipes/"
# the recipes memplan plans, and the others torchtune ships (refused by name: planner.frameworks.torchtune.reader)
RECIPES = (
    "full_finetune_single_device",
    "full_finetune_distributed",
    "lora_finetune_single_device",
    "lora_finetune_distributed",
)
OTHER_RECIPES = (  # torchtune/_recipe_registry.py (v0.6.1), and recipes/dev/ run by their path
    "full_dpo_distributed",
    "lora_dpo_single_device",
    "lora_dpo_distributed",
    "ppo_full_finetune_single_device",
    "knowledge_distillation_single_device",
    "knowledge_distillation_distributed",
    "qat_distributed",
    "qat_lora_finetune_distributed",
    "eleuther_eval",
    "generate",
    "quantize",
    "grpo_full_finetune_distributed",
    "early_exit_finetune_distributed",
    "lora_finetune_distributed_multi_dataset",
    "generate_v2",
    "generate_v2_distributed",
)


def _unsharded(k: dict, w) -> bool:
    """More than one process, no FSDP: the single-device recipes run one process; the distributed ones always shard."""
    return w.world_size > 1 and k["fsdp"] == "off"


FRAMEWORK = Framework(
    name="torchtune",
    lora_adapter_dtype="model",  # LoRALinear built under the recipe's dtype (Memory.lora_adapter_dtype)
    reads=("torchtune",),
    # a recipe config of `_component_` builders (torchtune/config/_instantiate.py): told before every other format
    signs=(Signs("torchtune", lambda k, d: any(isinstance(v, dict) and "_component_" in v for v in d.values()), 10),),
    # `tune run [torchrun options] RECIPE --config CFG` (torchtune/_cli/run.py:113-117): reader.read_run reads it whole
    tools=(Tool("tune", trains=("run",), options="torchrun", reads="run"),),
    label="torchtune",
    version="torchtune 0.6.1",
    every=(  # every value of these (closed by default: planner.frameworks.base.Framework.runs)
        "optimizer_rank",  # GaLore's and APOLLO's, inert under the optimizers it runs
        "optimizer_targets",
        "optimizer_projection",
        "lora_rank",
        "lora_targets",
        "lora_dropout",
        "eval_batch",
        "eval_logits_steps",
        "save_weights",
    ),
    runs={
        "fsdp_load": ("sharded",),  # its FSDP loads shards or a unit at a time (Knobs.fsdp_load)
        "lora_dropout_kept": (False,),
        "lora_tower_full": (False,),
        "device_map": ("off",),  # one process a GPU
        "dataparallel": (False,),  # torch's nn.DataParallel: HF's Trainer alone
        "client_optimizer": (False,),  # FSDP2 or one GPU, no DeepSpeed: its recipes build their own optimizer
        "zero_buckets": ("",),  # no DeepSpeed
        "num_labels": (1,),
        "negatives": (0,),
        "task": ("causal-lm",),
        "trained_layout": ("last",),  # LLaMA-Pro's interleaved blocks: not run here
        "trained_layers": (0,),  # freeze tuning (LLaMA-Factory's finetuning_type freeze): not run here
        "workload": ("sft",),  # DPO, PPO, KD, QAT, GRPO recipes: refused by name (reader.py)
        # fp16 raises ("full fp16 training is not supported"): full_finetune_single_device.py:124, _distributed.py:131,
        # lora_finetune_single_device.py:130, lora_finetune_distributed.py:134; training/precision.py:18-22
        "precision": ("bf16-pure", "fp32"),
        # enable_activation_checkpointing wraps every layer (training.set_activation_checkpointing); offloading
        # (training/_activation_offloading.py:24-77, OffloadActivations) requires it (full_finetune_single_device.py:
        # 163-174) and moves what the checkpoints save, each layer's input, to the host: memplan's offload-inputs
        # (the layer recomputed in backward); no recipe offloads without the checkpoints, memplan's offload
        "checkpointing": ("off", "full", "offload-inputs"),
        "loss": ("standard", "chunked"),  # modules/loss/ce_chunked_output_loss.py: CEWithChunkedOutputLoss (8 chunks)
        "attention": ("sdpa",),  # modules/attention_utils.py:185-260: SDPA, flex attention over packed rows' masks
        "batching": ("padded", "packed"),  # dataset.packed (full_finetune_single_device.py:572, padded_collate_packed)
        "zero_stage": (0,),  # no DeepSpeed
        "offload": ("none", "optimizer+params"),  # fsdp_cpu_offload: FSDP2's CPUOffloadPolicy (distributed recipes)
        "fsdp": (
            "off",
            "full",
            "grad-op",
        ),  # fsdp_reshard_after_forward True / False (full_finetune_distributed.py:299)
        "optimizer": ("adamw", "adamw-fused", "sgd", "adamw-8bit", "paged-adamw-8bit", *TRANSFORMERS_ONE_STATE),
        "quant": ("none", "nf4"),  # qlora_* builders: torchao NF4 (modules/low_precision/nf4_linear.py:48)
        "quant_absmax": ("8bit",),  # torchao to_nf4: 64-value blocks, their scalers quantized to int8 in 256-blocks
        "optimizer_in_backward": (False, True),  # optimizer_in_bwd (the full recipes)
        "expert_parallel": ("off",),
        "frozen": ("none",),
        "lora_vision": (False,),
        "lora_variant": ("lora",),  # use_dora is not planned
        "lora_base_fp32": (False,),  # the base is built in dtype (set_default_dtype)
        "lora_train_embeddings": (False,),
        "lora_ends": ("none", "head"),  # model.apply_lora_to_output (reader_model.py)
        "vit_checkpointing": ("on",),
        "tensor_parallel": ("off",),  # tensor_parallel_dim: not planned (reader.py notes it)
        "context_parallel": ("off",),
        "sequence_parallel": ("off",),
        "cp_attention": ("ring",),
    },
    defaults={
        "precision": Default("bf16-pure", f"{R}configs/*: dtype: bf16 (required: cfg.dtype, no default)"),
        "checkpointing": Default(
            "off", f"{R}full_finetune_single_device.py:160-162: enable_activation_checkpointing False"
        ),
        "fsdp": Default("full", f"{R}full_finetune_distributed.py:299: fsdp_reshard_after_forward True"),
        "loss": Default("standard", f"{R}configs/*: loss: _component_ (required: cfg.loss, no default)"),
        "attention": Default("sdpa", "torchtune/modules/attention_utils.py:185-260: SDPA unless a BlockMask"),
        "batching": Default("padded", f"{R}full_finetune_single_device.py:572: dataset.packed False"),
        "optimizer_in_backward": Default(False, f"{R}full_finetune_distributed.py:181: optimizer_in_bwd False"),
        "quant_absmax": Default(
            "8bit", "torchao/dtypes/nf4tensor.py to_nf4: block_size 64, scaler_block_size 256, scalers in int8"
        ),
    },
    keys={
        "micro_batch": "batch_size",
        "grad_accum": "gradient_accumulation_steps",
        "seq_len": "tokenizer.max_seq_len",
        "checkpointing": "enable_activation_checkpointing / enable_activation_offloading",
        "fsdp": "fsdp_reshard_after_forward",
        "offload": "fsdp_cpu_offload",
        "optimizer": "optimizer._component_",
        "optimizer_in_backward": "optimizer_in_bwd",
        "loss": "loss._component_",
        "batching": "dataset.packed",
        "precision": "dtype",
        "lora_rank": "model.lora_rank",
        "lora_targets": "model.lora_attn_modules / apply_lora_to_mlp",
        "lora_ends": "model.apply_lora_to_output",
        "quant": "model._component_ (qlora_*)",
        "model": "model._component_",
    },
    notes=(
        "bf16 params, grads and optimizer states (bf16-pure) or fp32; FSDP2 on the distributed recipes; no DeepSpeed",
    ),
    rules=(
        VLM_LORA_ENDS,
        Rule(
            "optimizer_in_backward",
            "optimizer_in_bwd is the full fine-tune recipes' (lora_finetune_*.py has none): give --lora-rank 0",
            lambda k: k["optimizer_in_backward"] and k["lora_rank"] > 0,
        ),
        Rule(
            "offload",
            "fsdp_cpu_offload is FSDP2's CPUOffloadPolicy, the distributed recipes': give --fsdp full",
            lambda k: k["offload"] != "none" and k["fsdp"] == "off",
        ),
        Rule(
            "fsdp",
            "torchtune's single-device recipes run one process and its distributed ones shard with FSDP2: give "
            "--fsdp full (fsdp_reshard_after_forward True) or grad-op (False)",
            _unsharded,
            scope="layout",
        ),
    ),
    # FSDP2 under torchtune: fully_shard with no MixedPrecisionPolicy (torchtune/training/_distributed.py:550-568),
    # the model built in dtype: gradients reduce in the parameters' dtype; no no_sync / set_requires_gradient_sync in
    # the recipes: every micro-step reduce-scatters
    fsdp_reduce="param",
    fsdp_no_sync=False,
    # torchtune's own loop (not HF's, not the bundled trainer's): "hf" counts host RAM the cautious way (an FSDP save
    # gathers the full state dict on rank 0's host, training.gather_cpu_state_dict, as accelerate's does)
    loop="hf",
)
