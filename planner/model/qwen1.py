"""Qwen v1 (Qwen-7B/14B/72B and their -Chat, config.json model_type `qwen`, class QWenLMHeadModel): a model only its
repository's own code builds (trust_remote_code; transformers has no class for it), read here in that code's module
names, so LoRA targets as users write them for it (`c_attn`, LLaMA-Factory's default for Qwen v1) adapt what it adapts.

The layout, in the Hub repositories' modeling_qwen.py (Qwen/Qwen-14B-Chat; the same file for 7B and 72B):
- QWenAttention: `c_attn` one Linear hidden -> 3 x heads x kv_channels with a bias (q, k, v fused), `c_proj` heads x
  kv_channels -> hidden, bias only without no_bias (every released config sets no_bias true);
- QWenMLP: `w1` and `w2` hidden -> intermediate_size // 2 and `c_proj` back, c_proj(w1(x) * silu(w2(x))), biased only
  without no_bias: a gated MLP of width intermediate_size // 2 (config.json's intermediate_size counts both branches);
- QWenBlock: ln_1 and ln_2 RMSNorms; QWenModel: wte, the blocks, ln_f; lm_head untied (tie_word_embeddings false).
Its context is seq_length (2,048 for 14B; max_position_embeddings is the dynamic-NTK limit), as ms-swift reads it.
"""

from __future__ import annotations

from planner.model.shapes import FAMILY_TRAITS, Tensors, text_fields
from planner.model.shapes import divides as _divides
from planner.model.shapes import linear as _linear
from planner.model.shapes import size as _get

MODEL_TYPE = "qwen"


def read(cfg: dict, text_spec: type) -> tuple[object, list[Tensors]]:
    """(TextSpec, tensors) of a Qwen v1 config.json."""
    sizes = text_fields(cfg, kv_key=None)  # multi-head attention
    h, L, heads, _ = sizes
    if cfg.get("kv_channels") is None:
        _divides(h, "hidden_size", heads, "num_attention_heads")
    hd = _get(cfg, "kv_channels", default=h // heads)
    inter, vocab = _get(cfg, "intermediate_size") // 2, _get(cfg, "vocab_size")
    bias = not bool(cfg.get("no_bias", True))
    tied = bool(cfg.get("tie_word_embeddings", False))
    t = [Tensors("embed", (vocab, h))]
    t += _linear("layer", 3 * heads * hd, h, L, True, lora=True, name="attn.c_attn")
    t += _linear("layer", h, heads * hd, L, bias, lora=True, name="attn.c_proj")
    t += _linear("layer", inter, h, L, bias, lora=True, name="mlp.w1")
    t += _linear("layer", inter, h, L, bias, lora=True, name="mlp.w2")
    t += _linear("layer", h, inter, L, bias, lora=True, name="mlp.c_proj")
    t += [Tensors("layer", (h,), 2 * L), Tensors("norm", (h,))]
    if not tied:
        t.append(Tensors("head", (vocab, h)))
    positions = _get(cfg, "seq_length", default=0) or _get(cfg, "max_position_embeddings", default=0)
    spec = sizes.spec(
        text_spec,
        head_dim=hd,
        intermediate=inter,
        vocab=vocab,
        tied=tied,
        max_positions=positions,
        biases=(True, bias, bias),
        traits=FAMILY_TRAITS[MODEL_TYPE],
    )
    return spec, t
