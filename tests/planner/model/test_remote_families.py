"""Models the field corpus names (issue 47 item 4) whose checkpoints load through their repository's own code:
Qwen v1 (model_type qwen, no transformers class) counted in its own module names; glm-4-9b-chat (ChatGLM's code)
as transformers' GlmForCausalLM, whose shapes are ChatGLM's; Yi-34B as LlamaForCausalLM (test_catalog's meta-device
test builds both)."""

import pytest

from planner.model import catalog
from planner.model.families import from_config

# Qwen/Qwen-14B-Chat: the Hub's safetensors metadata shows 14.2B (rounded); the exact count is its modules' (qwen1.py)
QWEN_14B = 14_167_290_880


def test_qwen_v1_counts_its_modules():
    m = catalog.load_model("qwen-14b")
    assert m.params == QWEN_14B and m.exact and round(m.params / 1e8) == 142
    h, L, ff, vocab = 5120, 40, 27392 // 2, 152064
    layer = (h * 3 * h + 3 * h) + h * h + 2 * h * ff + ff * h + 2 * h  # c_attn (biased), c_proj, w1, w2, c_proj, norms
    assert m.params == 2 * vocab * h + L * layer + h
    assert m.text.max_positions == 2048  # seq_length; max_position_embeddings 8192 is the dynamic-NTK limit
    assert m.text.traits.fused_qkv and m.fsdp_units == ("QWenBlock",)


def test_qwen_v1_lora_targets_are_its_module_names():
    """LLaMA-Factory's `--lora_target c_attn` on Qwen v1: r x (5120 + 15360) a layer, the fused q/k/v Linear."""
    m = catalog.load_model("qwen-14b")
    assert m.lora_params(8, "c_attn") == 8 * (5120 + 3 * 5120) * 40
    assert m.lora_params(8, "c_proj") == 8 * ((5120 + 5120) + (13696 + 5120)) * 40  # attn.c_proj and mlp.c_proj
    assert m.lora_params(8, "attention") == m.lora_params(8, "c_attn,c_proj") - 8 * (13696 + 5120) * 40


def test_qwen_v1_bias_follows_no_bias():
    cfg = {**catalog.model_config("qwen-14b"), "no_bias": False, "num_hidden_layers": 1}
    biased = from_config(cfg, "q").params
    plain = from_config({**cfg, "no_bias": True}, "q").params
    assert biased - plain == 5120 + 2 * 13696 + 5120  # attn.c_proj, w1, w2, mlp.c_proj biases


def test_glm_4_9b_chat_has_chatglms_shapes():
    """glm-4-9b-chat's ChatGLM config (num_layers 40, multi_query_group_num 2, kv_channels 128, ffn_hidden_size
    13696, padded_vocab_size 151552, add_qkv_bias, no other bias, untied output_layer): its modules, counted."""
    m = catalog.load_model("glm-4-9b-chat")
    h, L, ff, vocab, kv = 4096, 40, 13696, 151552, 2 * 128
    qkv = h * (h + 2 * kv) + (h + 2 * kv)  # query_key_value, biased
    layer = qkv + h * h + h * 2 * ff + ff * h + 2 * h  # dense, dense_h_to_4h, dense_4h_to_h, two RMSNorms
    assert m.params == 2 * vocab * h + L * layer + h == 9_399_951_360
    assert m.text.rotary_cat_dim == 64 and m.text.traits.norms_per_layer == 2


@pytest.mark.parametrize("name", ["yi-34b", "glm-4-9b-chat", "qwen-14b"])
def test_each_is_a_known_family_not_the_generic_count(name):
    assert catalog.load_model(name).exact
