"""torchtitan 0.3.0 (`torchrun -m torchtitan.train --module M --config F`, a config registry of Python functions that
return `Trainer.Config`): FSDP2 over the data-parallel ranks (HSDP across nodes, DDP as replicate-only), tensor parallel
with sequence-parallel norms, context parallel over FlexAttention, full or per-op selective activation checkpointing,
the chunked loss; no LoRA, no DeepSpeed, no Ulysses. Its Llama-3 and Qwen3 definitions only (planner/frameworks/torchtitan/writer.py
maps the catalog's models). Files cited are in the 0.3.0 wheel (paths under torchtitan/)."""

from planner.frameworks.base import Default, Framework, Rule

# catalog name -> (torchtitan model package, flavor): the definitions whose shapes are the catalog's (torchtitan's
# Llama-3.2 1B/3B and Qwen3-0.6B do not tie their embeddings as the checkpoints do)
MODELS = {
    "llama-3.1-8b": ("llama3", "8B"),
    "llama-3.1-70b": ("llama3", "70B"),
    "llama-3.3-70b": ("llama3", "70B"),
    "qwen3-8b": ("qwen3", "8B"),
    "qwen3-30b-a3b": ("qwen3", "30B-A3B"),
    "qwen3-235b-a22b": ("qwen3", "235B-A22B"),
}


def _hybrid_split(k: dict, w) -> bool:
    """HSDP replicates across nodes: tensor x context parallel must divide a node's GPUs."""
    return k["fsdp"] == "hybrid" and bool(w.gpus_per_node % (k["tensor_parallel"] * k["context_parallel"]))


FRAMEWORK = Framework(
    name="torchtitan",
    writes=True,  # writer.py (planner.export.launch dispatches to it)
    label="torchtitan",
    version="torchtitan 0.3.0",
    every=(  # every value of these (closed by default: planner.frameworks.base.Framework.runs)
        "precision",
        "optimizer_rank",  # GaLore's and APOLLO's, inert under the optimizers it runs
        "optimizer_targets",
        "optimizer_projection",
        "quant_absmax",
        "lora_targets",
        "lora_train_embeddings",
        "lora_dropout",
        "lora_base_fp32",
        "vit_checkpointing",
        "tensor_parallel",
        "context_parallel",
        "cp_attention",
        "eval_batch",
        "eval_logits_steps",
        "save_weights",
    ),
    runs={
        "fsdp_load": ("sharded",),  # its FSDP loads shards or a unit at a time (Knobs.fsdp_load)
        "lora_dropout_kept": (False,),
        "lora_ends": ("none",),  # no PEFT
        "lora_tower_full": (False,),
        "client_optimizer": (False,),  # FSDP2, no DeepSpeed
        "zero_buckets": ("",),  # no DeepSpeed
        "device_map": ("off",),  # one process a GPU
        "dataparallel": (False,),  # torch's nn.DataParallel: HF's Trainer alone
        "num_labels": (1,),  # causal-lm only: the task's knobs at their defaults
        "negatives": (0,),
        "task": ("causal-lm",),  # its trainer is causal-LM pretraining and SFT
        "trained_layout": ("last",),  # LLaMA-Pro's interleaved blocks: not run here
        "trained_layers": (0,),  # freeze tuning (LLaMA-Factory's finetuning_type freeze): not run here
        "workload": ("sft",),  # next-token training over its dataloaders (hf_datasets/text_datasets.py)
        # trainer.py:108-110 (SelectiveAC by default); distributed/activation_checkpoint.py:166-215,330-335 (FullAC,
        # SelectiveAC, None); 0.3.0 has no layer-every-N mode
        "checkpointing": ("off", "full", "selective-op"),
        "loss": ("standard", "chunked"),  # components/loss.py: CrossEntropyLoss, ChunkedLossWrapper (:567)
        # models/common/config_utils.py:71-101: language models attend through flex (default), flex_flash or varlen,
        # flash-style kernels that keep no score matrix; sdpa is refused
        "attention": ("flash",),
        # its dataloaders fill every row with seq_len tokens of whole documents, with per-document positions
        # (config_utils.py:76-78: block-causal masks): packing
        "batching": ("packed",),
        "zero_stage": (0,),
        "offload": ("none", "optimizer+params"),  # training.enable_cpu_offload (config/configs.py:61-64)
        "fsdp": ("off", "full", "grad-op", "hybrid"),  # parallelism degrees and fsdp_reshard_after_forward
        "optimizer": ("adamw", "adamw-fused"),  # components/optimizer/optimizer.py:109-111 implementation
        "quant": ("none",),
        "optimizer_in_backward": (False,),
        "expert_parallel": ("off",),  # expert_parallel_degree exists (configs.py:279); not exported yet
        "frozen": ("none",),
        "lora_vision": (False,),
        "lora_variant": ("lora",),  # its LoRA config has no use_dora: DoRA is not run
        "lora_rank": ("off",),  # components/lora.py is a model converter, not exported yet
        "sequence_parallel": ("off",),  # no Ulysses; its sequence parallel is TP's norms (configs.py:160)
    },
    defaults={
        "micro_batch": Default(8, "torchtitan/config/configs.py:37: training.local_batch_size 8"),
        "grad_accum": Default(1, "torchtitan/config/configs.py:43-47: global_batch_size -1 (local x data parallel)"),
        "seq_len": Default(2048, "torchtitan/config/configs.py:52: training.seq_len 2048"),
        "precision": Default(
            "bf16", "torchtitan/config/configs.py:78,85,93: dtype float32, mixed_precision_param bfloat16, reduce fp32"
        ),
        "checkpointing": Default("selective-op", "torchtitan/trainer.py:108-110: SelectiveAC.Config"),
        "fsdp": Default("full", "torchtitan/config/configs.py:124,136: data_parallel_shard_degree -1, reshard default"),
        "optimizer": Default(
            "adamw-fused", "torchtitan/components/optimizer/optimizer.py:109-111: implementation fused"
        ),
        "attention": Default("flash", "torchtitan/models/llama3/__init__.py:371: attn_backend flex"),
        "tensor_parallel": Default(1, "torchtitan/config/configs.py:157: tensor_parallel_degree 1"),
        "context_parallel": Default(1, "torchtitan/config/configs.py:232: context_parallel_degree 1"),
    },
    keys={
        "micro_batch": "training.local_batch_size",
        "global_batch": "training.global_batch_size",
        "seq_len": "training.seq_len",
        "checkpointing": "activation_checkpoint",
        "fsdp": "parallelism.data_parallel_shard_degree / fsdp_reshard_after_forward",
        "offload": "training.enable_cpu_offload",
        "optimizer": "optimizer.implementation",
        "loss": "loss",
        "precision": "training.mixed_precision_param / training.dtype",
        "tensor_parallel": "parallelism.tensor_parallel_degree",
        "context_parallel": "parallelism.context_parallel_degree",
        "model": "model_spec",
    },
    notes=("FSDP2 with TP and CP in one mesh; selective checkpointing by default; Llama-3 and Qwen3 only",),
    rules=(
        Rule(
            "precision",
            "trains in float32 or bfloat16 weights, mixed precision in bfloat16 (config/configs.py:78-93): "
            "give --precision bf16, bf16-pure or fp32",
            lambda k: k["precision"] == "fp16",
        ),
        Rule(
            "cp_attention",
            "context parallel over FlexAttention all-gathers the keys and values on every rank "
            "(distributed/context_parallel/api.py:56-77): give --cp-attention all-gather",
            lambda k: k["context_parallel"] > 1 and k["cp_attention"] != "all-gather",
        ),
        Rule(
            "offload",
            "training.enable_cpu_offload is FSDP2's CPUOffloadPolicy (config/configs.py:61-64): give --fsdp full",
            lambda k: k["offload"] != "none" and k["fsdp"] == "off",
        ),
        Rule(
            "model",
            lambda k, w: (
                f"torchtitan 0.3.0 has no definition of {w.model.name}: it trains {', '.join(MODELS)} here "
                "(models/llama3, models/qwen3)"
            ),
            lambda k, w: w.model is not None and w.model.name not in MODELS,
            scope="layout",
        ),
        Rule(
            "fsdp",
            "--fsdp hybrid: tensor x context parallel must divide the GPUs of a node (one replica a node)",
            _hybrid_split,
            scope="layout",
        ),
    ),
    fsdp_reduce="fp32",  # config/configs.py:93: mixed_precision_reduce float32
)
