"""Qwen2.5-Omni's talker and token2wav, the modules transformers builds beside the thinker when a whole qwen2_5_omni
config.json has enable_audio_output true (the published checkpoints): Qwen2_5OmniForConditionalGeneration.enable_talker
(transformers 5.25 models/qwen2_5_omni/modeling_qwen2_5_omni.py:3737-3741) builds the talker in the load dtype and the
token2wav, then casts it to fp32 (`self.token2wav.float()`, :3740). What ms-swift does with them: frozen and resident
(planner/model/qwenomni.py), so they carry roles every Knobs.frozen setting freezes (modelspec.RESIDENT_ROLES): "talker"
held in the dtype the model is loaded in, "token2wav" in fp32 (modelspec.FP32_ROLES).

Counted from config.json as those classes build them, each against the meta-device build (tests/planner/model/
test_omnitalker.py): the talker (:2187-2206, :2303-2315) is a Qwen2 decoder (biased q/k/v, head_dim from its config)
over an embedding of embedding_size (the thinker's width), with thinker_to_talker_proj (embedding_size -> hidden, biased)
and an untied codec_head; token2wav is a DiT (:2836-3080, :3476-3510, its ECAPA-TDNN speaker encoder :2534-2830) and a
BigVGAN vocoder (:3200-3290, :3338-3380)."""

from __future__ import annotations

from planner.errors import BadInput
from planner.model.shapes import Tensors, size

TALKER, TOKEN2WAV = "talker", "token2wav"
# Qwen2_5OmniTalkerConfig's defaults (configuration_qwen2_5_omni.py:335-354): a 3584-wide talker of 28 layers, not
# the checkpoints' (896 wide, 24 layers): a config without its talker_config is refused rather than planned so
TALKER_KEYS = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads")
TALKER_DEFAULTS = {"vocab_size": 8448, "embedding_size": 3584, "head_dim": 128}
# Qwen2_5OmniDiTConfig's and Qwen2_5OmniBigVGANConfig's defaults (configuration_qwen2_5_omni.py:428-450, :473-480),
# which the checkpoints' token2wav_config repeat
DIT_DEFAULTS = {
    "hidden_size": 1024,
    "num_hidden_layers": 22,
    "ff_mult": 2,
    "emb_dim": 512,
    "num_embeds": 8193,
    "mel_dim": 80,
    "enc_emb_dim": 192,
    "enc_dim": 128,
    "enc_channels": [256, 256, 256, 256, 768],
    "enc_kernel_sizes": [5, 3, 3, 3, 1],
    "enc_attention_channels": 64,
    "enc_res2net_scale": 2,
    "enc_se_channels": 64,
}
BIGVGAN_DEFAULTS = {
    "mel_dim": 80,
    "upsample_initial_channel": 1536,
    "upsample_rates": [5, 3, 2, 2, 2, 2],
    "upsample_kernel_sizes": [11, 7, 4, 4, 4, 4],
    "resblock_kernel_sizes": [3, 7, 11],
    "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]],
}


def _dense(role: str, d_out: int, d_in: int, n: int = 1, bias: bool = True) -> list[Tensors]:
    return [Tensors(role, (d_out, d_in), n)] + ([Tensors(role, (d_out,), n)] if bias else [])


def _conv(role: str, c_out: int, c_in: int, k: int, n: int = 1, bias: bool = True) -> list[Tensors]:
    return [Tensors(role, (c_out, c_in, k), n)] + ([Tensors(role, (c_out,), n)] if bias else [])


def decoder_tensors(c: dict, role: str, qkv_bias: bool, qk_norm: bool = False) -> list[Tensors]:
    """A Qwen2/Qwen3 dense decoder's layers and final norm (q/k/v biased in Qwen2's, q/k norms in Qwen3's)."""
    h, L, inter = size(c, "hidden_size"), size(c, "num_hidden_layers"), size(c, "intermediate_size")
    heads, kv, hd = size(c, "num_attention_heads"), size(c, "num_key_value_heads"), size(c, "head_dim")
    t = _dense(role, heads * hd, h, L, qkv_bias) + _dense(role, kv * hd, h, 2 * L, qkv_bias)
    t += _dense(role, h, heads * hd, L, False) + _dense(role, inter, h, 2 * L, False) + _dense(role, h, inter, L, False)
    t += [Tensors(role, (h,), 2 * L + 1)] + ([Tensors(role, (hd,), 2 * L)] if qk_norm else [])
    return t


def talker_tensors(c: dict) -> list[Tensors]:
    """Qwen2_5OmniTalkerForConditionalGeneration's parameters (:2201-2206, :2311-2315)."""
    missing = [k for k in TALKER_KEYS if k not in c]
    if missing:
        raise BadInput(
            f"config.json: talker_config lacks {', '.join(missing)} (the checkpoint's own are needed)", "model"
        )
    c = {**TALKER_DEFAULTS, **c}
    h, vocab, emb = size(c, "hidden_size"), size(c, "vocab_size"), size(c, "embedding_size")
    t = [Tensors(TALKER, (vocab, emb))] + _dense(TALKER, h, emb) + decoder_tensors(c, TALKER, qkv_bias=True)
    return t + _dense(TALKER, vocab, h, bias=False)  # codec_head


def _ecapa(d: dict) -> list[Tensors]:
    """The DiT's speaker encoder, ECAPA_TimeDelayNet (:2752-2810): a TDNN, SE-Res2Net blocks, the multi-layer
    aggregation, attentive statistics pooling and fc, every Conv1d biased."""
    ch, ks, mel, scale = d["enc_channels"], d["enc_kernel_sizes"], size(d, "mel_dim"), size(d, "enc_res2net_scale")
    se, att = size(d, "enc_se_channels"), size(d, "enc_attention_channels")
    if not isinstance(ch, list) or not isinstance(ks, list) or len(ch) != len(ks) or len(ch) < 2:
        raise BadInput("config.json: token2wav dit_config enc_channels and enc_kernel_sizes: two or more each", "model")
    t = _conv(TOKEN2WAV, ch[0], mel, ks[0])
    for i in range(1, len(ch) - 1):  # SqueezeExcitationRes2NetBlock (:2710-2750)
        c_in, c = ch[i - 1], ch[i]
        t += _conv(TOKEN2WAV, c, c_in, 1) + _conv(TOKEN2WAV, c // scale, c_in // scale, ks[i], scale - 1)
        t += _conv(TOKEN2WAV, c, c, 1) + _conv(TOKEN2WAV, se, c, 1) + _conv(TOKEN2WAV, c, se, 1)
    t += _conv(TOKEN2WAV, ch[-1], ch[-1], ks[-1])  # mfa (the SE blocks' outputs concatenated: 3 x 256 = 768)
    t += _conv(TOKEN2WAV, att, 3 * ch[-1], 1) + _conv(TOKEN2WAV, ch[-1], att, 1)  # asp
    return t + _conv(TOKEN2WAV, size(d, "enc_dim"), 2 * ch[-1], 1)  # fc


def dit_tensors(d: dict) -> list[Tensors]:
    """Qwen2_5OmniToken2WavDiTModel (:3476-3510): time embedding (256 sinusoid features), the codec embedding,
    the input projection and speaker encoder, transformer blocks under AdaLayerNormZero, the final norm and proj_out."""
    h, L, ff, mel, emb = (size(d, k) for k in ("hidden_size", "num_hidden_layers", "ff_mult", "mel_dim", "emb_dim"))
    t = _dense(TOKEN2WAV, h, 256) + _dense(TOKEN2WAV, h, h)  # DiTTimestepEmbedding (:3033-3040)
    t += [Tensors(TOKEN2WAV, (size(d, "num_embeds") + 1, emb))]  # DiTCodecEmbedding (:2870-2875)
    t += _dense(TOKEN2WAV, h, mel + size(d, "enc_dim") + size(d, "enc_emb_dim") + emb) + _ecapa(d)
    t += _dense(TOKEN2WAV, 6 * h, h, L) + _dense(TOKEN2WAV, h, h, 4 * L)  # AdaLayerNormZero; to_q/k/v, to_out
    t += _dense(TOKEN2WAV, ff * h, h, L) + _dense(TOKEN2WAV, h, ff * h, L)  # DiTMLP (:2924-2935)
    return t + _dense(TOKEN2WAV, 2 * h, h) + _dense(TOKEN2WAV, mel, h)  # norm_out, proj_out


def bigvgan_tensors(b: dict) -> list[Tensors]:
    """Qwen2_5OmniToken2WavBigVGANModel (:3338-3380): conv_pre, a ConvTranspose1d per upsample rate halving the
    channels, an AMPBlock per resblock kernel at each (two Conv1d and two SnakeBeta alpha/beta per dilation,
    :3200-3275), the final SnakeBeta and an unbiased conv_post."""
    ch, mel = size(b, "upsample_initial_channel"), size(b, "mel_dim")
    ks, rk, rd = b["upsample_kernel_sizes"], b["resblock_kernel_sizes"], b["resblock_dilation_sizes"]
    if not all(isinstance(x, list) for x in (ks, rk, rd)) or len(rk) != len(rd):
        raise BadInput("config.json: token2wav bigvgan_config's kernel and dilation lists do not match", "model")
    t = _conv(TOKEN2WAV, ch, mel, 7)
    for i, k in enumerate(ks):
        c_in, c = ch >> i, ch >> (i + 1)
        t += [Tensors(TOKEN2WAV, (c_in, c, k)), Tensors(TOKEN2WAV, (c,))]
        for kernel, dilations in zip(rk, rd):
            n = len(dilations)
            t += _conv(TOKEN2WAV, c, c, kernel, 2 * n) + [Tensors(TOKEN2WAV, (c,), 4 * n)]
    last = ch >> len(ks)
    return t + [Tensors(TOKEN2WAV, (last,), 2)] + _conv(TOKEN2WAV, 1, last, 7, bias=False)


def token2wav_tensors(c: dict) -> list[Tensors]:
    """Qwen2_5OmniToken2WavModel (:3647-3670): code2wav_dit_model and code2wav_bigvgan_model."""
    d, b = c.get("dit_config") or {}, c.get("bigvgan_config") or {}
    if not isinstance(d, dict) or not isinstance(b, dict):
        raise BadInput("config.json: token2wav_config's dit_config and bigvgan_config must be objects", "model")
    return dit_tensors({**DIT_DEFAULTS, **d}) + bigvgan_tensors({**BIGVGAN_DEFAULTS, **b})


def need_parts(cfg: dict, keys: tuple[str, ...]) -> None:
    """A whole Omni config with its talker resident names the talker's own configs: without one transformers would
    build its class defaults (a 3584-wide talker: not a checkpoint's), so such a config is refused in one line."""
    missing = [k for k in keys if not isinstance(cfg.get(k), dict)]
    if missing:
        raise BadInput(
            f"config.json: a {cfg.get('model_type')} model with enable_audio_output true lacks {' and '.join(missing)} "
            "(transformers would build its defaults, no checkpoint's talker): give the checkpoint's config.json, or plan "
            "the thinker with enable_audio_output false (ms-swift: ENABLE_AUDIO_OUTPUT=0)",
            "model",
        )


def resident_tensors(cfg: dict) -> list[Tensors]:
    """The talker's and token2wav's tensors of a whole qwen2_5_omni config with enable_audio_output true."""
    need_parts(cfg, ("talker_config", "token2wav_config"))
    return talker_tensors(cfg["talker_config"]) + token2wav_tensors(cfg["token2wav_config"])
