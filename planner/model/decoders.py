"""The language models' tensor groups read from config.json, family by family the way transformers builds the
modules: the llama-like decoders (grouped-query attention, QK norm, GLM's biases and partial rotary), the
mixture-of-experts ones (moespec.LAYOUT, MLA) and GPT-2; and the refusal of a mixture-of-experts config of a family
not read here. planner.model.families dispatches a config to them."""

from __future__ import annotations

from planner.errors import BadInput
from planner.model.modelspec import TextSpec
from planner.model.moe_defaults import with_defaults
from planner.model.moespec import LAYOUT as MOE_LAYOUT
from planner.model.moespec import MOE_FAMILIES, mla_attention, moe_mlp
from planner.model.shapes import FAMILY_TRAITS, Tensors, Traits, text_fields
from planner.model.shapes import divides as _divides
from planner.model.shapes import linear as _linear
from planner.model.shapes import number as _number
from planner.model.shapes import size as _get

LLAMA_LIKE = {
    "llama",
    "mistral",
    "qwen2",
    "qwen3",
    "gemma",
    "gemma2",
    "gemma3_text",
    "phi3",
    "qwen2_5_vl",
    "qwen2_5_vl_text",
    "qwen2_vl",
    "qwen2_vl_text",
    "glm",
    "glm4",
}


# Families whose q/k/v carry a bias unless config.json says attention_bias false (the config class's default) and
# whose o_proj never does: GLM-4 (configuration_glm4.py:73; modeling_glm4.py:211-220, transformers 5.25) and the
# ChatGLM-architecture glm-4-9b-chat as transformers' GlmForCausalLM (configuration_glm.py:73; modeling_glm.py:211-220)
QKV_BIAS_ONLY = {"glm", "glm4", "glm4_moe"}


# Families whose rotary rotates the first partial_rotary_factor of each head and concatenates the rest back, with the
# factor's default: GLM, GLM-4 and GLM-4.5 (configuration_glm.py:76, configuration_glm4.py:76,
# configuration_glm4_moe.py:119)
ROTARY_CAT = {"glm": 0.5, "glm4": 0.5, "glm4_moe": 0.5}


def rotary_cat_dim(cfg: dict, model_type: str, head_dim: int) -> int:
    """The rotated dims of a ROTARY_CAT family's heads: int(head_dim x partial_rotary_factor), the factor at the top
    level or in rope_parameters (modeling_glm4.py:293-295); 0 for the others."""
    if model_type not in ROTARY_CAT:
        return 0
    rope = cfg.get("rope_parameters") if isinstance(cfg.get("rope_parameters"), dict) else {}
    factor = rope.get("partial_rotary_factor", cfg.get("partial_rotary_factor", ROTARY_CAT[model_type]))
    return int(head_dim * _number({"partial_rotary_factor": factor}, "partial_rotary_factor", 1.0, high=1.0))


QK_NORM = {"qwen3", "gemma3_text"}  # an RMSNorm over each head of q and k before RoPE


# Keys that mean a mixture-of-experts model: counted as dense they would be off by the expert count.
MOE_KEYS = (
    "num_local_experts",
    "num_experts",
    "n_routed_experts",
    "moe_num_experts",
    "num_experts_per_tok",
    "moe_intermediate_size",
    "n_shared_experts",
)


def llama_text(cfg: dict, model_type: str) -> tuple[TextSpec, list[Tensors]]:
    sizes = text_fields(cfg)
    h, L, heads, kv = sizes
    if "head_dim" not in cfg or cfg["head_dim"] is None:
        _divides(h, "hidden_size", heads, "num_attention_heads")
    _divides(heads, "num_attention_heads", kv, "num_key_value_heads")
    hd = _get(cfg, "head_dim", default=h // heads)
    inter, vocab = _get(cfg, "intermediate_size"), _get(cfg, "vocab_size")
    tied = bool(cfg.get("tie_word_embeddings", model_type in {"gemma", "gemma2", "gemma3_text"}))
    attention_bias = bool(cfg.get("attention_bias", model_type in QKV_BIAS_ONLY))
    qkv_bias = model_type.startswith("qwen2") or attention_bias
    o_bias = attention_bias and not model_type.startswith("qwen2") and model_type not in QKV_BIAS_ONLY
    mlp_bias = bool(cfg.get("mlp_bias", False))
    gemma2 = model_type == "gemma2"
    traits = FAMILY_TRAITS.get(model_type, Traits())
    t: list[Tensors] = [Tensors("embed", (vocab, h))]
    if traits.fused_qkv:  # Phi-3's qkv_proj: one Linear (what LoRA adapts)
        t += _linear("layer", (heads + 2 * kv) * hd, h, L, qkv_bias, lora=True, name="qkv_proj")
    else:
        for d_out, name in ((heads * hd, "q_proj"), (kv * hd, "k_proj"), (kv * hd, "v_proj")):
            t += _linear("layer", d_out, h, L, qkv_bias, lora=True, name=name)
    t += _linear("layer", h, heads * hd, L, o_bias, lora=True, name="o_proj")
    if traits.fused_gate_up:  # Phi-3's gate_up_proj
        t += _linear("layer", 2 * inter, h, L, mlp_bias, lora=True, name="gate_up_proj")
    else:
        t += _linear("layer", inter, h, L, mlp_bias, lora=True, name="gate_proj")
        t += _linear("layer", inter, h, L, mlp_bias, lora=True, name="up_proj")
    t += _linear("layer", h, inter, L, mlp_bias, lora=True, name="down_proj")
    t.append(Tensors("layer", (h,), L * traits.norms_per_layer))
    if model_type in QK_NORM:
        t.append(Tensors("layer", (hd,), 2 * L))
    t.append(Tensors("norm", (h,)))
    if not tied:
        t.append(Tensors("head", (vocab, h)))
    spec = sizes.spec(
        TextSpec,
        head_dim=hd,
        intermediate=inter,
        vocab=vocab,
        tied=tied,
        max_positions=_get(cfg, "max_position_embeddings", default=0),
        attention="eager" if gemma2 else "sdpa",
        final_logit_softcap=_number(cfg, "final_logit_softcapping", 0.0) or None if gemma2 else None,
        dropout=_number(cfg, "attention_dropout", 0.0, high=1.0),
        qk_norm=model_type in QK_NORM,
        biases=(qkv_bias, o_bias, mlp_bias),
        traits=traits,
        rotary_cat_dim=rotary_cat_dim(cfg, model_type, hd),
    )
    return spec, t


def _gqa_attention(
    cfg: dict, mt: str, h: int, heads: int, kv: int, L: int, qk_norm: bool
) -> tuple[int, tuple[bool, bool, bool], list[Tensors]]:
    """An MoE family's grouped-query attention: (head_dim, the (q/k/v, o, MLP) biases, its tensors). GLM-4.5's o_proj
    has no bias whatever attention_bias says (modeling_glm4_moe.py:188-201)."""
    if cfg.get("head_dim") is None:
        _divides(h, "hidden_size", heads, "num_attention_heads")
    hd = _get(cfg, "head_dim", default=h // heads)
    ab = bool(cfg.get("qkv_bias", True)) if mt == "qwen2_moe" else bool(cfg.get("attention_bias", mt == "gpt_oss"))
    bias = (ab, ab and mt not in ("qwen2_moe", "glm4_moe"), False)
    attn = []
    for d_out, name in ((heads * hd, "q_proj"), (kv * hd, "k_proj"), (kv * hd, "v_proj")):
        attn += _linear("layer", d_out, h, L, bias[0], lora=True, name=name)
    attn += _linear("layer", h, heads * hd, L, bias[1], lora=True, name="o_proj")
    attn += [Tensors("layer", (hd,), 2 * L)] if qk_norm and mt != "olmoe" else []
    attn += [Tensors("layer", (heads * hd,), L), Tensors("layer", (kv * hd,), L)] if mt == "olmoe" else []
    attn += [Tensors("layer", (heads,), L)] if mt == "gpt_oss" else []  # attention sinks
    return hd, bias, attn


def moe_text(cfg: dict, family: str, vlm: bool = False) -> tuple[TextSpec, list[Tensors]]:
    """Mixtral, Qwen1.5/Qwen3-MoE, OLMoE, gpt-oss (grouped-query attention) and DeepSeek-V2/V3 (latent attention),
    and the language models laid out as one of them (moespec.LAYOUT). A key the config leaves out is its class's
    default (moe_defaults)."""
    mt, cfg = MOE_LAYOUT.get(family, family), with_defaults(cfg, family)
    sizes = text_fields(cfg)
    h, L, heads, kv = sizes
    _divides(heads, "num_attention_heads", kv, "num_key_value_heads")
    vocab = _get(cfg, "vocab_size")
    # OLMoE: one norm over all of q, one over all of k; GLM-4.5: per-head ones with use_qk_norm
    mla, qk_norm = None, mt in ("qwen3_moe", "olmoe") or (mt == "glm4_moe" and bool(cfg.get("use_qk_norm")))
    t: list[Tensors] = [Tensors("embed", (vocab, h))]
    if mt.startswith("deepseek"):
        mla, attn = mla_attention(cfg, h, heads, L)
        hd, kv, bias = mla.qk_head_dim, heads, (False, False, False)
    else:
        hd, bias, attn = _gqa_attention(cfg, mt, h, heads, kv, L, qk_norm)
    moe, mlp = moe_mlp(cfg, family, h, L, vlm)
    t += attn + mlp + [Tensors("layer", (h,), 2 * L), Tensors("norm", (h,))]
    tied = bool(cfg.get("tie_word_embeddings", False))
    if not tied:
        t.append(Tensors("head", (vocab, h)))
    spec = sizes._replace(kv_heads=kv).spec(  # DeepSeek's latent attention: a key-value head a head
        TextSpec,
        head_dim=hd,
        intermediate=_get(cfg, "intermediate_size"),
        vocab=vocab,
        tied=tied,
        max_positions=_get(cfg, "max_position_embeddings", default=0),
        attention="eager" if mt == "gpt_oss" else "sdpa",  # gpt-oss: _supports_sdpa = False (sinks)
        dropout=_number(cfg, "attention_dropout", 0.0, high=1.0),
        qk_norm=qk_norm,
        biases=bias,
        moe=moe,
        mla=mla,
        sinks=mt == "gpt_oss",
        rotary_cat_dim=rotary_cat_dim(cfg, mt, hd),
    )
    return spec, t


def gpt2_text(cfg: dict) -> tuple[TextSpec, list[Tensors]]:
    h, L, heads = _get(cfg, "n_embd", "hidden_size"), _get(cfg, "n_layer", "num_hidden_layers"), _get(cfg, "n_head")
    _divides(h, "n_embd", heads, "n_head")
    inter = _get(cfg, "n_inner", default=4 * h)
    vocab, npos = _get(cfg, "vocab_size"), _get(cfg, "n_positions", default=1024)
    t = [Tensors("embed", (vocab, h)), Tensors("embed", (npos, h))]
    t += [Tensors("layer", (h,), 4 * L)]  # ln_1, ln_2 weight and bias
    t += _linear("layer", 3 * h, h, L, True, lora=True, name="attn.c_attn")
    t += _linear("layer", h, h, L, True, lora=True, name="attn.c_proj")
    t += _linear("layer", inter, h, L, True, lora=True, name="mlp.c_fc")
    t += _linear("layer", h, inter, L, True, lora=True, name="mlp.c_proj")
    t += [Tensors("norm", (h,), 2)]
    tied = bool(cfg.get("tie_word_embeddings", True))
    if not tied:
        t.append(Tensors("head", (vocab, h)))
    spec = TextSpec(
        hidden=h,
        layers=L,
        heads=heads,
        kv_heads=heads,
        head_dim=h // heads,
        intermediate=inter,
        vocab=vocab,
        tied=tied,
        max_positions=npos,
        dropout=_number(cfg, "resid_pdrop", 0.1, high=1.0),
        biases=(True, True, True),
        traits=FAMILY_TRAITS["gpt2"],
    )
    return spec, t


def refuse_experts(cfg: dict, mt: str) -> None:
    """A mixture-of-experts config of a family memplan does not read (moespec.MOE_FAMILIES) is refused: counted
    as dense it would be priced as one expert."""
    for part in (cfg, cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else {}):
        found = [k for k in MOE_KEYS if part.get(k) not in (None, 0, 1, False)]
        if found or "moe" in str(part.get("model_type", mt)).lower():
            raise BadInput(
                f"config.json: model_type {part.get('model_type', mt)!r} is a mixture-of-experts model "
                f"({', '.join(found) or 'moe'}) of a family memplan does not count (MoE families: "
                f"{', '.join(MOE_FAMILIES)}); counting it as a dense model would understate its memory "
                "several times over",
                "model",
            )
