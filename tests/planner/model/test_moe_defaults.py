"""The MoE families' config.json keys left out: memplan reads each at its transformers config class's default
(planner/model/moe_defaults.py), counted against transformers 5.25's meta-device build of the same config.json."""

import pytest

from planner.model.families import from_config
from planner.model.moe_defaults import TEXT_DEFAULTS

# Tiny configs that leave out every key whose default the count follows: DeepSeek's n_shared_experts,
# first_k_dense_replace and q_lora_rank, GLM-4.5's too, the key-value heads (a class default, not the heads),
# gpt-oss's head_dim, Qwen1.5-MoE's shared_expert_intermediate_size. The heads are chosen so that the default
# key-value heads divide them and differ from them.
_BASE = {"hidden_size": 64, "num_hidden_layers": 4, "vocab_size": 128, "intermediate_size": 96}
_MLA = {"kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8, "v_head_dim": 8, "num_attention_heads": 4}
_ROUTED = {"moe_intermediate_size": 32, "num_experts_per_tok": 2}
CASES = {
    "deepseek_v2": {**_BASE, **_MLA, **_ROUTED, "n_routed_experts": 4},
    "deepseek_v3": {**_BASE, **_MLA, **_ROUTED, "n_routed_experts": 4, "n_group": 1, "topk_group": 1},
    "glm4_moe": {**_BASE, **_ROUTED, "n_routed_experts": 4, "num_attention_heads": 16},
    "gpt_oss": {**_BASE, "num_local_experts": 4, "num_experts_per_tok": 2, "num_attention_heads": 16},
    "mixtral": {**_BASE, "num_local_experts": 4, "num_experts_per_tok": 2, "num_attention_heads": 16},
    "olmoe": {**_BASE, "num_experts": 4, "num_experts_per_tok": 2, "num_attention_heads": 16},
    "qwen2_moe": {**_BASE, **_ROUTED, "num_experts": 4, "num_attention_heads": 32},
    "qwen3_moe": {**_BASE, **_ROUTED, "num_experts": 4, "num_attention_heads": 16},
}


def _built(mt: str, cfg: dict) -> int:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    conf = transformers.AutoConfig.for_model(mt, **cfg)
    with torch.device("meta"):
        return sum(p.numel() for p in transformers.AutoModelForCausalLM.from_config(conf).parameters())


@pytest.mark.parametrize("mt", sorted(CASES))
def test_left_out_keys_count_as_transformers_builds_them(mt):
    assert from_config({"model_type": mt, **CASES[mt]}, mt).params == _built(mt, CASES[mt])


def test_a_null_q_lora_rank_is_no_bottleneck_not_the_default():
    """DeepSeek-V2-Lite's config.json says `q_lora_rank: null`: q_proj straight from the hidden size."""
    cfg = {**CASES["deepseek_v2"], "q_lora_rank": None}
    spec = from_config({"model_type": "deepseek_v2", **cfg}, "lite")
    assert spec.text.mla.q_lora_rank == 0
    assert spec.params == _built("deepseek_v2", cfg)


@pytest.mark.parametrize("mt", sorted(TEXT_DEFAULTS))
def test_the_table_is_the_config_classes_defaults(mt):
    transformers = pytest.importorskip("transformers")
    conf = transformers.AutoConfig.for_model(mt)
    assert {k: getattr(conf, k) for k in TEXT_DEFAULTS[mt]} == TEXT_DEFAULTS[mt]


def test_the_omni_thinkers_language_model_takes_its_class_defaults():
    """Qwen3-Omni's thinker's text_config without num_key_value_heads: Qwen3OmniMoeTextConfig's 4, not the heads."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    text = {**_BASE, **_ROUTED, "num_experts": 4, "num_attention_heads": 16}
    vision = {"depth": 1, "hidden_size": 32, "num_heads": 2, "intermediate_size": 64, "out_hidden_size": 64}
    audio = {"encoder_layers": 1, "d_model": 32, "encoder_attention_heads": 2, "encoder_ffn_dim": 64}
    thinker = {"text_config": text, "vision_config": {**vision, "deepstack_visual_indexes": []}}
    thinker["audio_config"] = {**audio, "output_dim": 64, "num_mel_bins": 16, "downsample_hidden_size": 8}
    cfg = {"thinker_config": thinker, "enable_audio_output": False}
    conf = transformers.AutoConfig.for_model("qwen3_omni_moe", **cfg)
    with torch.device("meta"):
        model = transformers.Qwen3OmniMoeThinkerForConditionalGeneration._from_config(conf.thinker_config)
    assert from_config({"model_type": "qwen3_omni_moe", **cfg}, "omni").params == sum(
        p.numel() for p in model.parameters()
    )
