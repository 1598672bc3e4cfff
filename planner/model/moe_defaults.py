"""The mixture-of-experts families' config-class defaults (transformers 5.25, models/<family>/configuration_<family>.py):
what transformers builds where a config.json leaves a key out, so memplan reads the same model. A key present in the
config.json wins, null included (DeepSeek-V2-Lite's `q_lora_rank: null` is no q bottleneck, not the default 1536).

Only the keys memplan reads are here. DeepSeek's num_key_value_heads (unused by latent attention) and head_dim (set
from qk_rope_head_dim, configuration_deepseek_v3.py:125) are left out, as are defaults of None (DeepSeek-V2's
num_experts_per_tok: memplan asks for it) and head_dim where transformers falls back to hidden_size // heads, as
memplan does (Mixtral's None, :69; Qwen-MoE's, OLMoE's and GLM-4.5's getattr fallbacks). The composite families'
language models have their own tables (glm4v.MOE_TEXT_DEFAULTS, vlm.TEXT_DEFAULTS), Qwen3-Omni's thinker's its
own row here.
"""

from __future__ import annotations

_MLA = {"kv_lora_rank": 512, "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128}

TEXT_DEFAULTS: dict[str, dict] = {
    # configuration_deepseek_v2.py:72-76, 79, 87, 89, 91, 101-103, 105, 107-109, 114, 116
    "deepseek_v2": {
        "vocab_size": 102400,
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "max_position_embeddings": 2048,
        "tie_word_embeddings": False,
        "attention_bias": False,
        "mlp_bias": False,
        "first_k_dense_replace": 0,
        "n_routed_experts": 64,
        "n_shared_experts": 2,
        "moe_intermediate_size": 1407,
        **_MLA,
    },
    # configuration_deepseek_v3.py:83-88, 90-91, 94-98, 101-102, 105, 113, 116
    "deepseek_v3": {
        "vocab_size": 129280,
        "hidden_size": 7168,
        "intermediate_size": 18432,
        "moe_intermediate_size": 2048,
        "num_hidden_layers": 61,
        "num_attention_heads": 128,
        "n_shared_experts": 1,
        "n_routed_experts": 256,
        "num_experts_per_tok": 8,
        "first_k_dense_replace": 3,
        "max_position_embeddings": 4096,
        "tie_word_embeddings": False,
        "attention_bias": False,
        **_MLA,
    },
    # configuration_glm4_moe.py:87-92, 94, 98, 100, 102-103, 105-106, 110, 112
    "glm4_moe": {
        "vocab_size": 151552,
        "hidden_size": 4096,
        "intermediate_size": 10944,
        "num_hidden_layers": 46,
        "num_attention_heads": 96,
        "num_key_value_heads": 8,
        "max_position_embeddings": 131072,
        "tie_word_embeddings": False,
        "attention_bias": False,
        "moe_intermediate_size": 1408,
        "num_experts_per_tok": 8,
        "n_shared_experts": 1,
        "n_routed_experts": 128,
        "first_k_dense_replace": 1,
        "use_qk_norm": False,
    },
    # configuration_gpt_oss.py:51-58, 60, 63, 67, 70, 77; head_dim kept unless None (:83)
    "gpt_oss": {
        "num_hidden_layers": 36,
        "num_local_experts": 128,
        "vocab_size": 201088,
        "hidden_size": 2880,
        "intermediate_size": 2880,
        "head_dim": 64,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "tie_word_embeddings": False,
        "max_position_embeddings": 131072,
        "num_experts_per_tok": 4,
        "router_aux_loss_coef": 0.001,
        "attention_bias": True,
    },
    # configuration_mixtral.py:63-68, 71, 78, 81-82, 84
    "mixtral": {
        "vocab_size": 32000,
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "max_position_embeddings": 4096 * 32,
        "tie_word_embeddings": False,
        "num_experts_per_tok": 2,
        "num_local_experts": 8,
        "router_aux_loss_coef": 0.001,
    },
    # configuration_olmoe.py:59-63, 66, 73, 75, 78-79, 81 (num_key_value_heads None: the heads, :85-86)
    "olmoe": {
        "vocab_size": 50304,
        "hidden_size": 2048,
        "intermediate_size": 2048,
        "num_hidden_layers": 16,
        "num_attention_heads": 16,
        "max_position_embeddings": 4096,
        "tie_word_embeddings": False,
        "attention_bias": False,
        "num_experts_per_tok": 8,
        "num_experts": 64,
        "router_aux_loss_coef": 0.01,
    },
    # configuration_qwen2_moe.py:75-80, 82, 86, 92-96, 99, 101
    "qwen2_moe": {
        "vocab_size": 151936,
        "hidden_size": 2048,
        "intermediate_size": 5632,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "max_position_embeddings": 32768,
        "tie_word_embeddings": False,
        "decoder_sparse_step": 1,
        "moe_intermediate_size": 1408,
        "shared_expert_intermediate_size": 5632,
        "num_experts_per_tok": 4,
        "num_experts": 60,
        "router_aux_loss_coef": 0.001,
        "qkv_bias": True,
    },
    # configuration_qwen3_moe.py:77-82, 84, 88, 90, 94-97, 100
    "qwen3_moe": {
        "vocab_size": 151936,
        "hidden_size": 2048,
        "intermediate_size": 6144,
        "num_hidden_layers": 24,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        "max_position_embeddings": 32768,
        "tie_word_embeddings": False,
        "attention_bias": False,
        "decoder_sparse_step": 1,
        "moe_intermediate_size": 768,
        "num_experts_per_tok": 8,
        "num_experts": 128,
        "router_aux_loss_coef": 0.001,
    },
}
# Qwen3-Omni's thinker's language model, laid out as Qwen3-MoE's and with Qwen3-MoE's defaults but these
# (configuration_qwen3_omni_moe.py:156-161, 163, 168, 171-174, 177); its head is tied by the thinker's own flag
# (qwen3omni.read), the text config has none
_OMNI = {"vocab_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28, "num_attention_heads": 28}
TEXT_DEFAULTS["qwen3_omni_moe_text"] = {
    **{k: v for k, v in TEXT_DEFAULTS["qwen3_moe"].items() if k != "tie_word_embeddings"},
    **_OMNI,
}


def with_defaults(cfg: dict, model_type: str) -> dict:
    """The config as transformers' class reads it: each key it leaves out at the class's default."""
    return {**TEXT_DEFAULTS.get(model_type, {}), **cfg}
