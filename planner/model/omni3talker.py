"""Qwen3-Omni-MoE's talker and code2wav, the modules transformers builds beside the thinker when a whole qwen3_omni_moe
config.json has enable_audio_output true (the published checkpoints): Qwen3OmniMoeForConditionalGeneration.enable_talker
(transformers 5.25 models/qwen3_omni_moe/modeling_qwen3_omni_moe.py:3959-3975) builds both from their configs in the
load dtype (no fp32 cast, unlike Qwen2.5-Omni's token2wav: planner/model/omnitalker.py). Role "talker" for both: frozen
and resident under every Knobs.frozen setting (modelspec.RESIDENT_ROLES), as ms-swift keeps them (qwen3omni.py).

Counted from config.json as those classes build them (tests/planner/model/test_omnitalker.py against the meta build):
the talker is a Qwen3-MoE decoder (q/k norms, stacked routed experts, a router, a shared expert and its one-output
gate) over a codec embedding, two resize MLPs from the thinker's width (text_projection, hidden_projection), an
untied codec_head, and the code predictor (a dense Qwen3 decoder with num_code_groups - 1 codec embeddings and heads);
code2wav is a layer-scaled transformer over the quantizers' codes, ConvNeXt upsampling and a SnakeBeta decoder."""

from __future__ import annotations

from planner.errors import BadInput
from planner.model.omnitalker import TALKER, _conv, _dense, decoder_tensors, need_parts
from planner.model.shapes import Tensors, size, sub


def _moe_decoder(c: dict) -> list[Tensors]:
    """Qwen3OmniMoeTalkerModel's layers and norm: attention with q/k norms, 128 routed experts stacked (gate_up
    and down), the router, the shared expert and its gate, two norms a layer."""
    h, L, moe = size(c, "hidden_size"), size(c, "num_hidden_layers"), size(c, "moe_intermediate_size")
    heads, kv, hd = size(c, "num_attention_heads"), size(c, "num_key_value_heads"), size(c, "head_dim")
    e, shared = size(c, "num_experts", "num_local_experts"), size(c, "shared_expert_intermediate_size")
    if c.get("mlp_only_layers") or size(c, "decoder_sparse_step", default=1) != 1:
        raise BadInput(
            "config.json: a talker with dense layers (mlp_only_layers, decoder_sparse_step) is not counted "
            "(accepted: every layer routed, as the published talker)",
            "model",
        )
    t = _dense(TALKER, heads * hd, h, L, False) + _dense(TALKER, kv * hd, h, 2 * L, False)
    t += _dense(TALKER, h, heads * hd, L, False) + [Tensors(TALKER, (hd,), 2 * L)]
    t += [Tensors(TALKER, (e, 2 * moe, h), L), Tensors(TALKER, (e, h, moe), L), Tensors(TALKER, (e, h), L)]
    t += _dense(TALKER, shared, h, 2 * L, False) + _dense(TALKER, h, shared, L, False) + _dense(TALKER, 1, h, L, False)
    return t + [Tensors(TALKER, (h,), 2 * L + 1)]


def talker_tensors(c: dict) -> list[Tensors]:
    """Qwen3OmniMoeTalkerForConditionalGeneration's parameters (modeling_qwen3_omni_moe.py: the talker model with
    its codec_embedding, text_projection and hidden_projection, codec_head, the code predictor)."""
    tc, cp = sub(c, "text_config"), sub(c, "code_predictor_config")
    h, vocab, thinker = size(tc, "hidden_size"), size(tc, "vocab_size"), size(c, "thinker_hidden_size")
    t = _moe_decoder(tc) + [Tensors(TALKER, (vocab, h))]
    t += 2 * (_dense(TALKER, thinker, thinker) + _dense(TALKER, h, thinker))  # two Qwen3OmniMoeTalkerResizeMLP
    t += _dense(TALKER, vocab, h, bias=False)  # codec_head
    groups, cvocab, ch = size(c, "num_code_groups"), size(cp, "vocab_size"), size(cp, "hidden_size")
    t += decoder_tensors(cp, TALKER, qkv_bias=False, qk_norm=True)
    return t + [
        Tensors(TALKER, (cvocab, ch), 2 * (groups - 1))
    ]  # codec embeddings and lm heads, one a group past the first


def code2wav_tensors(c: dict) -> list[Tensors]:
    """Qwen3OmniMoeCode2Wav's parameters: the pre-transformer (unbiased attention without q/k norms, a layer
    scale after attention and after the MLP), the code embedding (codebook_size x num_quantizers rows), a
    ConvTranspose1d and ConvNeXt block per upsampling ratio, the decoder's first conv, a SnakeBeta, ConvTranspose1d
    and three residual units per upsample rate (the channels halving from decoder_dim), the last SnakeBeta and conv."""
    h, L, heads = size(c, "hidden_size"), size(c, "num_hidden_layers"), size(c, "num_attention_heads")
    kv, inter = size(c, "num_key_value_heads", default=heads), size(c, "intermediate_size")
    hd = size(c, "head_dim", default=h // heads)
    if c.get("attention_bias"):
        raise BadInput("config.json: code2wav_config attention_bias true is not counted (accepted: false)", "model")
    t = _dense(TALKER, heads * hd, h, L, False) + _dense(TALKER, kv * hd, h, 2 * L, False)
    t += _dense(TALKER, h, heads * hd, L, False) + _dense(TALKER, inter, h, 2 * L, False)
    t += _dense(TALKER, h, inter, L, False) + [Tensors(TALKER, (h,), 4 * L + 1)]  # 2 norms, 2 layer scales; norm
    t += [Tensors(TALKER, (size(c, "codebook_size") * size(c, "num_quantizers"), h))]
    for factor in _ints(c, "upsampling_ratios"):
        t += _conv(TALKER, h, h, factor) + [Tensors(TALKER, (h, 1, 7)), Tensors(TALKER, (h,), 4)]  # gamma, norm
        t += _dense(TALKER, 4 * h, h) + _dense(TALKER, h, 4 * h)  # pwconv1, pwconv2
    ch = size(c, "decoder_dim")
    t += _conv(TALKER, ch, h, 7)
    for i, rate in enumerate(_ints(c, "upsample_rates")):
        c_in, c_out = ch >> i, ch >> (i + 1)
        t += [Tensors(TALKER, (c_in,), 2), Tensors(TALKER, (c_in, c_out, 2 * rate)), Tensors(TALKER, (c_out,))]
        t += [Tensors(TALKER, (c_out,), 12)] + _conv(TALKER, c_out, c_out, 7, 3) + _conv(TALKER, c_out, c_out, 1, 3)
    last = ch >> len(_ints(c, "upsample_rates"))
    return t + [Tensors(TALKER, (last,), 2)] + _conv(TALKER, 1, last, 7)


def _ints(c: dict, key: str) -> list[int]:
    v = c.get(key)
    if not isinstance(v, list) or not v or not all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in v):
        raise BadInput(f"config.json: code2wav_config {key} must be a list of positive integers", "model")
    return v


def resident_tensors(cfg: dict) -> list[Tensors]:
    """The talker's and code2wav's tensors of a whole qwen3_omni_moe config with enable_audio_output true."""
    need_parts(cfg, ("talker_config", "code2wav_config"))
    return talker_tensors(cfg["talker_config"]) + code2wav_tensors(cfg["code2wav_config"])
