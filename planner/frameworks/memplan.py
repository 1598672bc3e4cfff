"""memplan's bundled trainer (`planner train`): it runs every knob the planner has but prequantized GPTQ/AWQ bases
(it builds the model from its config with random weights, and gptqmodel is not among its dependencies)."""

from planner.frameworks.base import Framework

FRAMEWORK = Framework(
    name="memplan",
    label="the bundled trainer, planner train",
    version="this checkout",
    runs={"quant": ("none", "nf4", "fp4", "int8")},
    keys={"micro_batch": "--micro-batch", "grad_accum": "--grad-accum", "seq_len": "--seq-len"},
    fsdp_reduce="fp32",  # recipe/__init__.py shard_fsdp: MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)
    loop="bundled",
    notes=(
        (
            "every knob but GPTQ/AWQ bases: selective-op and every-N checkpointing, the chunked loss, optimizer in backward, token budgets"
        ),
    ),
)
