"""The rows benchmarks/accuracy.py measures: the tiny architectures it adds to the catalog (a tied-vocabulary Qwen2.5,
tiny members of the routed families), the grids of (arch, precision, knobs, micro-batch, sequence) (GRID, RECIPE_GRID,
MOE_GRID, MOE_LORA_GRID) and config(), an architecture's config.json by its row name (also handed to the --rl
rows)."""

from __future__ import annotations

QWEN_TINY = {
    "model_type": "qwen2",
    "architectures": ["Qwen2ForCausalLM"],
    "hidden_size": 256,
    "intermediate_size": 688,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "vocab_size": 151936,
    "tie_word_embeddings": True,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0,
    "hidden_act": "silu",
}


# (arch, precision, checkpointing, micro_batch, seq_len)
GRID = [
    ("debug-llama", "fp32", "off", 1, 512),
    ("debug-llama", "fp32", "full", 4, 1024),
    ("debug-llama", "fp16", "off", 2, 2048),
    ("debug-llama", "fp16", "full", 8, 512),
    ("debug-llama", "bf16", "off", 4, 512),
    ("debug-llama", "bf16", "full", 2, 4096),
    ("debug-llama", "bf16-pure", "off", 1, 4096),
    ("debug-llama", "bf16-pure", "full", 8, 1024),
    ("debug-llama", "bf16", "off", 8, 1024),
    ("debug-llama", "fp32", "off", 2, 2048),
    ("debug-llama", "bf16", "full", 1, 1024),
    ("qwen-tiny-tied", "fp32", "off", 1, 512),
    ("qwen-tiny-tied", "fp32", "full", 2, 512),
    ("qwen-tiny-tied", "fp16", "off", 1, 1024),
    ("qwen-tiny-tied", "fp16", "full", 2, 1024),
    ("qwen-tiny-tied", "bf16", "off", 2, 512),
    ("qwen-tiny-tied", "bf16", "full", 1, 2048),
    ("qwen-tiny-tied", "bf16-pure", "off", 1, 1024),
    ("qwen-tiny-tied", "bf16-pure", "full", 4, 512),
    ("qwen-tiny-tied", "bf16", "off", 1, 4096),
    ("debug-gpt2", "fp32", "off", 1, 512),
    ("debug-gpt2", "fp32", "full", 4, 512),
    ("debug-gpt2", "fp16", "off", 2, 1024),
    ("debug-gpt2", "fp16", "full", 8, 512),
    ("debug-gpt2", "bf16", "off", 4, 1024),
    ("debug-gpt2", "bf16", "full", 2, 1024),
    ("debug-gpt2", "bf16-pure", "off", 1, 1024),
    ("debug-gpt2", "bf16-pure", "full", 8, 1024),
    ("debug-gpt2", "bf16", "off", 8, 512),
    ("debug-gpt2", "fp32", "full", 1, 1024),
    # a 256-entry vocabulary: the peak moves from the logits into the last layer's backward
    ("debug-llama-v256", "fp32", "full", 4, 1024),
    ("debug-llama-v256", "bf16", "off", 2, 2048),
    ("debug-gpt2-v256", "bf16", "full", 4, 1024),
    ("debug-gpt2-v256", "bf16-pure", "off", 2, 1024),
]


# (arch, precision, recipe knobs, micro_batch, seq_len)
RECIPE_GRID = [
    ("debug-llama", "bf16", {"checkpointing": "selective-op"}, 4, 1024),
    ("qwen-tiny-tied", "bf16-pure", {"checkpointing": "selective-op"}, 2, 1024),
    ("debug-gpt2", "fp32", {"checkpointing": "selective-op"}, 4, 512),
    ("debug-llama", "fp32", {"checkpointing": "every-2"}, 4, 1024),
    ("debug-gpt2", "bf16", {"checkpointing": "every-3"}, 2, 1024),
    ("debug-llama", "bf16", {"checkpointing": "offload"}, 4, 1024),
    ("qwen-tiny-tied", "fp32", {"checkpointing": "offload"}, 2, 512),
    ("debug-llama", "bf16", {"loss": "chunked"}, 2, 2048),
    ("qwen-tiny-tied", "bf16", {"loss": "chunked"}, 2, 1024),
    ("debug-gpt2", "fp32", {"loss": "chunked"}, 4, 512),
    ("debug-llama", "bf16-pure", {"loss": "fused"}, 2, 2048),
    ("qwen-tiny-tied", "bf16", {"loss": "fused"}, 2, 1024),
    ("debug-gpt2", "fp32", {"loss": "fused"}, 4, 512),
    ("debug-llama", "bf16", {"attention": "flash"}, 4, 1024),
    ("qwen-tiny-tied", "fp32", {"attention": "flash"}, 2, 1024),
    ("debug-llama", "fp32", {"attention": "eager"}, 2, 1024),
    ("debug-gpt2", "bf16-pure", {"attention": "eager"}, 2, 1024),
    ("debug-llama", "bf16", {"batching": "packed"}, 4, 512),
    ("qwen-tiny-tied", "bf16-pure", {"batching": "packed"}, 2, 1024),
    ("debug-llama", "bf16-pure", {"batching": "packed", "attention": "flash"}, 4, 1024),
    ("debug-llama", "fp32", {"optimizer_in_backward": True}, 2, 1024),
    ("qwen-tiny-tied", "bf16-pure", {"optimizer_in_backward": True}, 2, 512),
    ("debug-llama", "bf16", {"lora_rank": 8, "lora_targets": "attention"}, 4, 1024),
    ("qwen-tiny-tied", "fp32", {"lora_rank": 8, "lora_targets": "q_proj,v_proj"}, 2, 1024),
    ("debug-llama", "bf16-pure", {"lora_rank": 8, "lora_dropout": 0.1}, 4, 1024),
    ("debug-llama", "bf16", {"lora_rank": 8, "lora_train_embeddings": True}, 2, 1024),
    # LoRA on the embedding and the head (--lora-ends; planner.estimate.lora_ends)
    ("debug-llama", "bf16", {"lora_rank": 8, "lora_ends": "both", "lora_dropout": 0.1}, 4, 1024),
    ("qwen-tiny-tied", "fp32", {"lora_rank": 8, "lora_ends": "head"}, 2, 1024),
    ("debug-llama", "bf16-pure", {"lora_rank": 8, "lora_ends": "embed", "checkpointing": "full"}, 2, 1024),
    ("debug-llama", "bf16", {"lora_rank": 8, "lora_variant": "dora"}, 4, 1024),
    ("qwen-tiny-tied", "bf16-pure", {"lora_rank": 8, "lora_variant": "dora"}, 2, 1024),
    ("debug-llama", "fp32", {"lora_rank": 8, "lora_variant": "dora", "checkpointing": "full"}, 2, 1024),
    ("debug-llama", "bf16", {"lora_rank": 32, "lora_variant": "oft"}, 4, 1024),  # OFT block 32 (planner.estimate.oft)
    ("qwen-tiny-tied", "bf16-pure", {"lora_rank": 32, "lora_variant": "oft"}, 2, 1024),
    ("debug-llama", "bf16", {"lora_rank": 16, "lora_variant": "oft", "checkpointing": "full"}, 2, 1024),
    ("debug-llama", "bf16", {"lora_rank": 8, "quant": "nf4"}, 4, 1024),
    ("qwen-tiny-tied", "bf16", {"lora_rank": 8, "quant": "fp4", "lora_targets": "attention"}, 2, 1024),
    ("debug-llama", "bf16", {"lora_rank": 8, "quant": "nf4", "quant_absmax": "fp32"}, 4, 1024),
    ("debug-llama", "bf16", {"lora_rank": 8, "quant": "int8"}, 4, 1024),
    ("debug-llama", "bf16", {"lora_rank": 8, "quant": "int8", "checkpointing": "full"}, 4, 1024),
    ("debug-llama", "bf16", {"lora_rank": 8, "quant": "gptq", "framework": "hf"}, 4, 1024),  # stand-in in both runs
    ("debug-llama", "fp16", {"lora_rank": 8, "quant": "awq", "framework": "hf"}, 4, 1024),  # stand-in in both runs
    ("debug-llama-v256", "bf16", {"checkpointing": "selective-op", "loss": "chunked"}, 4, 2048),
    (
        "debug-llama",
        "bf16",
        {"checkpointing": "selective-op", "loss": "fused", "batching": "packed", "attention": "flash"},
        4,
        1024,
    ),
]


# Mixture-of-experts rows (issue 18, --moe): the debug-moe preset (Qwen3-MoE, 8 experts, top-2) and tiny members
# of the other routed families: DeepSeek-V2 (latent attention, a dense first layer, shared experts), Mixtral and
# gpt-oss (eager attention with sinks, clamped SwiGLU, biases). Real CPU steps route for real.
MOE_TINY = {
    "deepseek-tiny": {
        "model_type": "deepseek_v2",
        "hidden_size": 256,
        "intermediate_size": 688,
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 8,
        "n_routed_experts": 8,
        "n_shared_experts": 1,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 128,
        "first_k_dense_replace": 1,
        "q_lora_rank": None,
        "kv_lora_rank": 64,
        "qk_nope_head_dim": 32,
        "qk_rope_head_dim": 16,
        "v_head_dim": 32,
        "vocab_size": 8192,
        "max_position_embeddings": 4096,
        "topk_method": "greedy",
    },
    "mixtral-tiny": {
        "model_type": "mixtral",
        "hidden_size": 256,
        "intermediate_size": 512,
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
        "vocab_size": 8192,
        "max_position_embeddings": 4096,
    },
    "gpt-oss-tiny": {
        "model_type": "gpt_oss",
        "hidden_size": 256,
        "intermediate_size": 256,
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 32,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
        "vocab_size": 8192,
        "max_position_embeddings": 4096,
        "sliding_window": 128,
        "layer_types": ["sliding_attention", "full_attention"] * 2,
    },
}


MOE_GRID = [
    ("debug-moe", "fp32", "off", 2, 512),
    ("debug-moe", "fp32", "full", 4, 1024),
    ("debug-moe", "bf16", "off", 4, 512),
    ("debug-moe", "bf16", "full", 2, 2048),
    ("debug-moe", "bf16-pure", "off", 2, 1024),
    ("debug-moe", "bf16-pure", "full", 8, 512),
    ("debug-moe-v256", "fp32", "full", 4, 1024),
    ("debug-moe-v256", "bf16", "off", 2, 1024),
    ("deepseek-tiny", "fp32", "off", 2, 512),
    ("deepseek-tiny", "bf16-pure", "off", 2, 1024),
    ("deepseek-tiny", "bf16", "full", 2, 1024),
    ("mixtral-tiny", "fp32", "off", 2, 1024),
    ("mixtral-tiny", "bf16", "full", 4, 512),
    ("gpt-oss-tiny", "fp32", "off", 2, 512),
    ("gpt-oss-tiny", "bf16-pure", "off", 2, 512),
    # the eager dispatch (experts_implementation: eager): the sim routes by the plan's imbalance (2), real steps
    # by their routers
    ("debug-moe-eager", "fp32", "off", 2, 512),
    ("debug-moe-eager", "bf16", "off", 2, 512),
    ("debug-moe-v256-eager", "fp32", "full", 4, 1024),
    ("mixtral-tiny-eager", "bf16", "full", 4, 512),
    ("gpt-oss-tiny-eager", "fp32", "off", 2, 512),
]


# LoRA on the tiny MoE (PEFT target_parameters for the stacked experts): experts adapted, frozen, or both
MOE_LORA = [
    {"lora_rank": 16, "lora_targets": t} for t in ("all-linear", "attention", "experts.gate_up_proj,experts.down_proj")
]


MOE_LORA_GRID = [
    (a, "bf16-pure", {"checkpointing": c, **kw}, mb, s)
    for a, c, mb, s in (("debug-moe", "off", 2, 512), ("debug-moe-v256", "full", 4, 1024))
    for kw in MOE_LORA
]


def config(arch: str) -> dict:
    from planner.model.catalog import model_config

    if arch.endswith("-eager"):
        return {**config(arch.removesuffix("-eager")), "experts_implementation": "eager"}
    if arch == "qwen-tiny-tied":
        return dict(QWEN_TINY)
    if arch in MOE_TINY:
        return {"rms_norm_eps": 1e-6, "hidden_act": "silu", "tie_word_embeddings": False, **MOE_TINY[arch]}
    if arch.endswith("-v256"):
        return dict(model_config(arch.removesuffix("-v256")), vocab_size=256)
    return model_config(arch)
