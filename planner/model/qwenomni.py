"""Qwen2.5-Omni's thinker (model_type qwen2_5_omni_thinker, or a whole qwen2_5_omni config.json's thinker_config),
counted from config.json as transformers 5.25 builds Qwen2_5OmniThinkerForConditionalGeneration
(models/qwen2_5_omni/modeling_qwen2_5_omni.py:1959-1970): `model.audio_tower` (a Whisper-like encoder), `model.visual`
(Qwen2.5-VL's tower, planner/model/qwenvl.py) and `model.language_model` (a Qwen2 decoder) beside an untied lm_head
(the thinker's own tie_word_embeddings, False: configuration_qwen2_5_omni.py:248-276).

What the frameworks train is this thinker. LLaMA-Factory 0.9.5 loads the whole Omni and keeps `model.thinker` alone
(src/llamafactory/model/loader.py:173-174), freezing `audio_tower` with the vision tower and training
`visual.merger` and `audio_tower.proj` as projectors (model_utils/visual.py:364-370). ms-swift 4.5.2 loads
Qwen2_5OmniForConditionalGeneration whole (swift/model/models/qwen.py:1583-1586): with config.json's
enable_audio_output (true in the checkpoints; ENABLE_AUDIO_OUTPUT=0 overrides it, :1576-1580) transformers builds the
talker and token2wav beside the thinker (modeling_qwen2_5_omni.py:3731-3741, token2wav cast to fp32) and ms-swift
freezes them (swift/arguments/tuner_args.py:216, model_arch.py:615-622 `generator`). Such a config's talker and
token2wav are counted beside the thinker (planner/model/omnitalker.py), frozen and resident (modelspec.RESIDENT_ROLES),
token2wav in fp32; the ms-swift reader plans the published checkpoints so (frameworks/swift/reader_env.omni_talker).

The audio tower (:817-850): conv1 (mel bins -> d_model, k 3) and conv2 (d_model, k 3) with biases, a 2-row
audio_bos_eos_token embedding of output_dim, encoder_layers blocks of q/v/out biased and k unbiased projections, two
LayerNorms and a biased fc1/fc2, then ln_post and proj (d_model -> output_dim). Its tensors take role "audio", frozen
with the vision tower (modelspec.FROZEN_ROLES). Audio inputs' activations are not planned: a plan's rows hold text
and images only, and the thinker skips the audio tower without input_features.
"""

from __future__ import annotations

from dataclasses import replace

from planner.errors import BadInput
from planner.model import omnitalker, qwenvl
from planner.model.shapes import Tensors, linear, size

MODEL_TYPES = ("qwen2_5_omni", "qwen2_5_omni_thinker")


# transformers 5.25's sub-config classes' defaults (configuration_qwen2_5_omni.py:30-210)
VISION_DEFAULTS = {
    "depth": 32,
    "hidden_size": 3584,
    "intermediate_size": 3420,
    "num_heads": 16,
    "in_channels": 3,
    "patch_size": 14,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2,
    "window_size": 112,
    "out_hidden_size": 3584,
    "fullatt_block_indexes": [7, 15, 23, 31],
}
AUDIO_DEFAULTS = {
    "num_mel_bins": 128,
    "encoder_layers": 32,
    "encoder_ffn_dim": 5120,
    "d_model": 1280,
    "output_dim": 3584,
}
TEXT_DEFAULTS = {
    "vocab_size": 152064,
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "num_hidden_layers": 28,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "max_position_embeddings": 32768,
}
PROJECTORS = ("visual.merger.", "audio_tower.proj.")


def thinker_config(cfg: dict, whole: str = "qwen2_5_omni") -> dict:
    """The thinker's config: a whole Omni's (model_type `whole`) thinker_config, or cfg itself (Qwen3-Omni's too:
    planner/model/qwen3omni.py)."""
    if cfg.get("model_type") != whole:
        return cfg
    return cfg.get("thinker_config") or {}


def talker_resident(cfg: dict, whole: str = "qwen2_5_omni") -> bool:
    """Whether transformers builds the talker beside the thinker: a whole config with enable_audio_output true (both
    config classes' default, configuration_qwen2_5_omni.py:583, configuration_qwen3_omni_moe.py:588)."""
    return cfg.get("model_type") == whole and bool(cfg.get("enable_audio_output", True))


def _sub(cfg: dict, key: str, defaults: dict) -> dict:
    part = cfg.get(key) or {}
    if not isinstance(part, dict):
        raise BadInput(f"config.json: {key} is not an object", "model")
    return {**defaults, **part}


def audio_tensors(a: dict) -> list[Tensors]:
    """The audio tower's parameters (modeling_qwen2_5_omni.py:549-577, 648-660, 829-843)."""
    d, L, ffn = size(a, "d_model"), size(a, "encoder_layers"), size(a, "encoder_ffn_dim")
    mels, out = size(a, "num_mel_bins"), size(a, "output_dim")
    t = [Tensors("audio", (d, mels, 3)), Tensors("audio", (d,)), Tensors("audio", (d, d, 3)), Tensors("audio", (d,))]
    t += [Tensors("audio", (2, out))]  # audio_bos_eos_token
    t += linear("audio", d, d, 3 * L, True) + linear("audio", d, d, L, False)  # q, v, out_proj; k_proj
    t += [Tensors("audio", (d,), 4 * L)] + linear("audio", ffn, d, L, True) + linear("audio", d, ffn, L, True)
    # ln_post; proj, which both frameworks train as a projector (LLaMA-Factory's projector_keys, ms-swift's aligner)
    return t + [Tensors("audio", (d,), 2)] + linear("projector", out, d, 1, True)


def read(cfg: dict, vision_spec) -> tuple[dict, object, list[Tensors]]:
    """(text config for decoders' Qwen2 reader, the tower's VisionSpec, the tower's, projectors' and audio
    tower's tensors, and the resident talker's and token2wav's where config.json builds them)."""
    th = thinker_config(cfg)
    tc = {**_sub(th, "text_config", TEXT_DEFAULTS), "tie_word_embeddings": bool(th.get("tie_word_embeddings", False))}
    v = _sub(th, "vision_config", VISION_DEFAULTS)
    vision, vt = qwenvl.read("qwen2_5_vl", v, size(tc, "hidden_size"), vision_spec)
    vision = replace(vision, tower_modules=("visual.", "audio_tower."), projector_modules=PROJECTORS)
    resident = omnitalker.resident_tensors(cfg) if talker_resident(cfg) else []  # the talker and fp32 token2wav
    return tc, vision, vt + audio_tensors(_sub(th, "audio_config", AUDIO_DEFAULTS)) + resident
