"""memplan's bundled trainer (`planner train`): it runs every knob the planner has but prequantized GPTQ/AWQ bases
(it builds the model from its config with random weights, and gptqmodel is not among its dependencies)."""

from planner.frameworks.base import Framework, Rule

FRAMEWORK = Framework(
    name="memplan",
    label="the bundled trainer, planner train",
    version="this checkout",
    # context parallel: torch's context_parallel shards only CUDA's SDPA kernels (torch 2.13
    # distributed/tensor/experimental/_context_parallel/_attention.py:918-945), so the trainer cannot run it on gloo
    runs={"quant": ("none", "nf4", "fp4", "int8"), "context_parallel": ("off",), "cp_attention": ("ring",)},
    rules=(
        Rule(
            "tensor_parallel",
            "--tensor-parallel shards each layer with torch's DTensor plan, beside FSDP2 over the other ranks "
            "(torchtitan's 2-D mesh): give --fsdp full or grad-op",
            lambda k: k["tensor_parallel"] > 1 and k["fsdp"] not in ("full", "grad-op"),
        ),
        Rule(
            "tensor_parallel",
            "--tensor-parallel splits the model's own linears: full fine-tuning only (--lora-rank 0)",
            lambda k: k["tensor_parallel"] > 1 and k["lora_rank"] > 0,
        ),
        Rule(
            "batching",
            "--batching packed with --sequence-parallel: the bundled trainer's Ulysses attention is causal over each "
            "padded row, without the packed rows' document masks",
            lambda k: k["batching"] == "packed" and k["sequence_parallel"] > 1,
        ),
    ),
    keys={"micro_batch": "--micro-batch", "grad_accum": "--grad-accum", "seq_len": "--seq-len"},
    fsdp_reduce="fp32",  # recipe/__init__.py shard_fsdp: MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)
    loop="bundled",
    notes=(
        (
            "every knob but GPTQ/AWQ bases: selective-op and every-N checkpointing, the chunked loss, optimizer in backward, token budgets"
        ),
    ),
)
