"""Catalog entries whose published size is a model card's rounded figure (issue 47 item 4's Qwen3 sizes and Qwen v1
7B): the exact count is transformers' meta build (test_catalog.py) or the modules' own (qwen1.py); these pin the
stored config.json values to the cards, total and non-embedding, to the card's 0.1B."""

import pytest

from planner.model import catalog

# "Number of Parameters" / "Number of Paramaters (Non-Embedding)" of the Qwen3 model cards (Qwen/Qwen3-1.7B, -4B,
# -14B, -32B on the Hub; the 4B's vendored in github.com/Robojiang/qwen_mlsys Qwen3-4B-Base/README.md)
CARDS = {
    "qwen3-1.7b": (1.7, 1.4),
    "qwen3-4b": (4.0, 3.6),
    "qwen3-14b": (14.8, 13.2),
    "qwen3-32b": (32.8, 31.2),
}


def _embedding_params(name: str) -> int:
    cfg = catalog.model_config(name)
    return cfg["vocab_size"] * cfg["hidden_size"] * (1 if cfg["tie_word_embeddings"] else 2)


@pytest.mark.parametrize("name", sorted(CARDS))
def test_qwen3_sizes_match_their_cards(name):
    total, body = CARDS[name]
    params = catalog.load_model(name).params
    assert round(params / 1e9, 1) == total  # the card rounds to 0.1B
    assert round((params - _embedding_params(name)) / 1e9, 1) == body


def test_qwen_v1_7b_counts_its_modules():
    """Qwen/Qwen-7B(-Chat): 32 QWenBlocks of 4096 with a biased fused c_attn and a 22016 / 2 wide SwiGLU, vocab
    151936 untied: 7,721,324,544 (the card's 7B; its seq_length 8192 is the context)."""
    m = catalog.load_model("qwen-7b")
    h, L, ff, vocab = 4096, 32, 22016 // 2, 151936
    layer = (h * 3 * h + 3 * h) + h * h + 2 * h * ff + ff * h + 2 * h
    assert m.params == 2 * vocab * h + L * layer + h == 7_721_324_544
    assert m.exact and m.text.max_positions == 8192 and m.fsdp_units == ("QWenBlock",)
