"""Hybrid linear-attention language models: Qwen3-Next (qwen3_next), Qwen3.5 (qwen3_5_text, the language model of
qwen3_5) and Qwen3.5-MoE (qwen3_5_moe_text), read from config.json the way transformers 5.25 builds them.

Each decoder layer is one of two kinds, by `layer_types` (or, when absent, every `full_attention_interval`-th layer,
4 by default, is full attention: configuration_qwen3_next.py:123-130):
- linear_attention: a Gated DeltaNet (modeling_qwen3_5.py:555-600): a depthwise causal conv1d over q, k and v
  (conv_dim = 2 x key_dim + value_dim channels, no bias), dt_bias and A_log per value head, a gated RMSNorm over a
  value head (Qwen3_5RMSNormGated), out_proj; the input projections are in_proj_qkv, in_proj_z, in_proj_b and
  in_proj_a in Qwen3.5 and Qwen3.5-MoE, fused as in_proj_qkvz and in_proj_ba in Qwen3-Next
  (modular_qwen3_next.py:419-423). It keeps a recurrent state (value heads x k_dim x v_dim) and a conv state instead
  of a KV cache that grows with the sequence.
- full_attention: gated attention (modeling_qwen3_5.py:824-897): q_proj gives the queries and a sigmoid output gate
  (2 x heads x head_dim), per-head q/k RMSNorms, rotary on the first partial_rotary_factor of each head (0.25 by
  default, configuration_qwen3_next.py:124).
The MLP is a gated one (Qwen3.5) or a routed block with a gated shared expert, Qwen1.5-MoE's layout (Qwen3-Next
through mlp_only_layers and decoder_sparse_step; every layer in Qwen3.5-MoE: modular_qwen3_5_moe.py:208-219).
Norms are zero-centred (1 + w), computed in fp32 (Qwen3_5RMSNorm, modeling_qwen3_5.py:917-934).
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.errors import BadInput
from planner.model.moespec import moe_mlp
from planner.model.shapes import FAMILY_TRAITS, Tensors, divides, linear, number, size, text_fields

TEXT_TYPES = ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text")
ROUTED = ("qwen3_next", "qwen3_5_moe_text")
FUSED_PROJECTIONS = ("qwen3_next",)  # in_proj_qkvz and in_proj_ba
# config classes' defaults a config.json may leave out (configuration_qwen3_next.py:81-115, Qwen3_5TextConfig and
# Qwen3_5MoeTextConfig override vocab, hidden, intermediate, layers, kv heads and experts: transformers 5.25)
DEFAULTS = {
    "qwen3_next": {
        "vocab_size": 151936,
        "hidden_size": 2048,
        "intermediate_size": 5632,
        "num_hidden_layers": 48,
        "num_key_value_heads": 2,
        "num_experts_per_tok": 10,
        "num_experts": 512,
    },
    "qwen3_5_text": {
        "vocab_size": 248320,
        "hidden_size": 4096,
        "intermediate_size": 12288,
        "num_hidden_layers": 32,
        "num_key_value_heads": 4,
    },
    "qwen3_5_moe_text": {
        "vocab_size": 248320,
        "hidden_size": 2048,
        "num_hidden_layers": 40,
        "num_key_value_heads": 2,
        "num_experts_per_tok": 8,
        "num_experts": 256,
    },
}
COMMON = {
    "num_attention_heads": 16,
    "head_dim": 256,
    "linear_conv_kernel_dim": 4,
    "linear_key_head_dim": 128,
    "linear_value_head_dim": 128,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 32,
    "moe_intermediate_size": 512,
    "shared_expert_intermediate_size": 512,
    "decoder_sparse_step": 1,
    "max_position_embeddings": 32768,
}


@dataclass(frozen=True)
class LinearAttentionSpec:
    """The Gated DeltaNet layers of a hybrid model (TextSpec.linear); the other layers are full attention."""

    layers: int  # decoder layers of this kind
    k_heads: int
    v_heads: int
    k_dim: int
    v_dim: int
    conv_kernel: int
    rotary_dims: int = 0  # the full-attention layers' rotated dims of each head (rotary_dims)
    chunk: int = 64  # torch_chunk_gated_delta_rule's chunk_size (modeling_qwen3_5.py:346)

    @property
    def key_dim(self) -> int:
        return self.k_heads * self.k_dim

    @property
    def value_dim(self) -> int:
        return self.v_heads * self.v_dim

    @property
    def conv_dim(self) -> int:
        return 2 * self.key_dim + self.value_dim

    def state_bytes(self, batch: int) -> int:
        """One layer's recurrent state and conv state in fp32, per sequence batch: what a generation cache holds for
        this layer whatever the sequence length."""
        return 4 * batch * (self.v_heads * self.k_dim * self.v_dim + self.conv_dim * self.conv_kernel)


def resolved(cfg: dict, mt: str) -> dict:
    """config.json with the config class's defaults for what it leaves out."""
    return {**COMMON, **DEFAULTS[mt], **{k: v for k, v in cfg.items() if v is not None}}


def layer_kinds(cfg: dict, layers: int) -> list[bool]:
    """True for each linear-attention layer, in order."""
    types = cfg.get("layer_types")
    if types is None:
        interval = size(cfg, "full_attention_interval", default=4)
        return [bool((i + 1) % interval) for i in range(layers)]
    if (
        not isinstance(types, list)
        or len(types) < layers
        or any(t not in ("linear_attention", "full_attention") for t in types[:layers])
    ):
        raise BadInput(
            f"config.json: layer_types must list 'linear_attention' or 'full_attention' for each of the {layers} "
            f"layers (got {types!r:.80})",
            "model",
        )
    return [t == "linear_attention" for t in types[:layers]]


def linear_attention(cfg: dict, mt: str, h: int, n: int) -> tuple[LinearAttentionSpec, list[Tensors]]:
    """The Gated DeltaNet's spec and its tensors in `n` layers."""
    spec = LinearAttentionSpec(
        n,
        size(cfg, "linear_num_key_heads"),
        size(cfg, "linear_num_value_heads"),
        size(cfg, "linear_key_head_dim"),
        size(cfg, "linear_value_head_dim"),
        size(cfg, "linear_conv_kernel_dim"),
        rotary_dims(cfg, size(cfg, "head_dim")),
    )
    if spec.v_heads % spec.k_heads:
        raise BadInput(
            f"config.json: linear_num_key_heads = {spec.k_heads} does not divide linear_num_value_heads = "
            f"{spec.v_heads}",
            "model",
        )
    if not n:
        return spec, []
    vh, pre = spec.v_heads, "linear_attn."
    if mt in FUSED_PROJECTIONS:
        t = linear("layer", 2 * spec.key_dim + 2 * spec.value_dim, h, n, False, True, pre + "in_proj_qkvz")
        t += linear("layer", 2 * vh, h, n, False, True, pre + "in_proj_ba")
    else:
        t = linear("layer", spec.conv_dim, h, n, False, True, pre + "in_proj_qkv")
        t += linear("layer", spec.value_dim, h, n, False, True, pre + "in_proj_z")
        t += linear("layer", vh, h, n, False, True, pre + "in_proj_b")
        t += linear("layer", vh, h, n, False, True, pre + "in_proj_a")
    t += [Tensors("layer", (spec.conv_dim, 1, spec.conv_kernel), n), Tensors("layer", (vh,), 2 * n)]
    t += [Tensors("layer", (spec.v_dim,), n)] + linear("layer", h, spec.value_dim, n, False, True, pre + "out_proj")
    return spec, t


def full_attention(cfg: dict, h: int, heads: int, kv: int, hd: int, n: int) -> tuple[bool, list[Tensors]]:
    """Gated attention's tensors in `n` layers: q_proj twice the query width (the output gate)."""
    bias = bool(cfg.get("attention_bias", False))
    t = []
    for d_out, name in ((2 * heads * hd, "q_proj"), (kv * hd, "k_proj"), (kv * hd, "v_proj")):
        t += linear("layer", d_out, h, n, bias, True, name)
    t += linear("layer", h, heads * hd, n, bias, True, "o_proj") + [Tensors("layer", (hd,), 2 * n)]
    return bias, t


def rotary_dims(cfg: dict, hd: int) -> int:
    """The rotated dims of each full-attention head: int(head_dim x partial_rotary_factor), the factor in
    rope_parameters or at the top level (0.25 by default; Qwen3_5TextRotaryEmbedding, modeling_qwen3_5.py:163-165)."""
    rope = cfg.get("rope_parameters") if isinstance(cfg.get("rope_parameters"), dict) else {}
    factor = rope.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 0.25))
    return int(hd * number({"partial_rotary_factor": factor}, "partial_rotary_factor", 1.0, high=1.0))


def mlp(cfg: dict, mt: str, h: int, L: int):
    """(MoESpec or None, the MLP tensors of all layers, the dense width)."""
    if mt not in ROUTED:
        inter = size(cfg, "intermediate_size")
        t = linear("layer", inter, h, L, False, True, "gate_proj") + linear(
            "layer", inter, h, L, False, True, "up_proj"
        )
        return None, t + linear("layer", h, inter, L, False, True, "down_proj"), inter
    routed = cfg if mt == "qwen3_next" else {**cfg, "mlp_only_layers": [], "decoder_sparse_step": 1}
    routed = {**routed, "intermediate_size": routed.get("intermediate_size") or size(cfg, "moe_intermediate_size")}
    moe, t = moe_mlp(routed, "qwen2_moe", h, L, family=mt)
    return moe, t, routed["intermediate_size"]


def read(cfg: dict, mt: str, text_spec):
    """(TextSpec, tensors) of a hybrid language model; `text_spec` is modelspec's TextSpec class."""
    cfg = resolved(cfg, mt)
    sizes = text_fields(cfg, kv_required=True)
    h, L, heads, kv = sizes
    hd, vocab = size(cfg, "head_dim"), size(cfg, "vocab_size")
    divides(heads, "num_attention_heads", kv, "num_key_value_heads")
    kinds = layer_kinds(cfg, L)
    lin, t_lin = linear_attention(cfg, mt, h, sum(kinds))
    bias, t_full = full_attention(cfg, h, heads, kv, hd, L - sum(kinds))
    moe, t_mlp, inter = mlp(cfg, mt, h, L)
    tied = bool(cfg.get("tie_word_embeddings", False))
    t = [Tensors("embed", (vocab, h)), *t_lin, *t_full, *t_mlp, Tensors("layer", (h,), 2 * L), Tensors("norm", (h,))]
    t += [] if tied else [Tensors("head", (vocab, h))]
    spec = sizes.spec(
        text_spec,
        head_dim=hd,
        intermediate=inter,
        vocab=vocab,
        tied=tied,
        max_positions=size(cfg, "max_position_embeddings"),
        dropout=number(cfg, "attention_dropout", 0.0, high=1.0),
        qk_norm=True,
        biases=(bias, bias, False),
        moe=moe,
        linear=lin,
        traits=FAMILY_TRAITS[mt],
    )
    return spec, t
