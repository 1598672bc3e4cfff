"""Qwen3-Omni-MoE's thinker (model_type qwen3_omni_moe_thinker, or a whole qwen3_omni_moe config.json's
thinker_config), counted from config.json as transformers 5.25 builds Qwen3OmniMoeThinkerForConditionalGeneration
(models/qwen3_omni_moe/modeling_qwen3_omni_moe.py:2157-2169, :1767-1771): `model.audio_tower` (its own encoder, below),
`model.visual` (Qwen3-VL's tower with deepstack mergers, planner/model/vlm.py) and `model.language_model` (a Qwen3-MoE
decoder: every layer routed unless mlp_only_layers, stacked experts, q/k norms; moespec.LAYOUT) beside an untied
lm_head (the thinker's tie_word_embeddings, False: configuration_qwen3_omni_moe.py:231).

What the frameworks train is this thinker, as for Qwen2.5-Omni (planner/model/qwenomni.py): LLaMA-Factory registers
qwen3_omni_moe_thinker with projector keys visual.merger and audio_tower.proj (model_utils/visual.py:409-418: its
substring match takes visual.merger_list and audio_tower.proj1/proj2 too) and the rest of the towers frozen; ms-swift
4.6 loads Qwen3OmniMoeForConditionalGeneration whole (swift/model/models/qwen.py:2145-2170) with ENABLE_AUDIO_OUTPUT
overriding config.json's enable_audio_output (:2155-2158): a whole config with enable_audio_output true adds its
talker and code2wav, frozen and resident in the load dtype (planner/model/omni3talker.py).

The audio tower (modeling_qwen3_omni_moe.py:755-790, :509-530, :604-616): three stride-2 3x3 Conv2d of
downsample_hidden_size channels (biased), conv_out (downsample x the thrice-halved mel bins -> d_model, no bias),
encoder_layers blocks of biased q/k/v/out projections, two LayerNorms and a biased fc1/fc2, then ln_post, proj1
(d_model -> d_model) and proj2 (d_model -> output_dim), both biased. Its tensors take role "audio" (frozen with the
vision tower, idle in rows without audio: modelspec.FROZEN_ROLES, IDLE_AUDIO), proj1/proj2 role "projector".
"""

from __future__ import annotations

from dataclasses import replace

from planner.errors import BadInput
from planner.model import omni3talker, qwenomni, vlm
from planner.model.shapes import Tensors, linear, size

MODEL_TYPES = ("qwen3_omni_moe", "qwen3_omni_moe_thinker")
TEXT_TYPE = "qwen3_omni_moe_text"  # laid out as Qwen3-MoE's (moespec.LAYOUT)
TOWERS = ("visual.", "audio_tower.")
PROJECTORS = ("visual.merger.", "visual.merger_list.", "audio_tower.proj1.", "audio_tower.proj2.")
# Qwen3OmniMoeAudioEncoderConfig's defaults (configuration_qwen3_omni_moe.py:54-71): Qwen2.5-Omni's, and its
# convolutions' channels
AUDIO_DEFAULTS = {**qwenomni.AUDIO_DEFAULTS, "downsample_hidden_size": 480}


def _part(cfg: dict, key: str) -> dict:
    part = cfg.get(key)
    if not isinstance(part, dict):
        raise BadInput(f"config.json: the thinker's {key} is missing or not an object", "model")
    return part


def audio_tensors(a: dict) -> list[Tensors]:
    """The audio tower's parameters (modeling_qwen3_omni_moe.py:773-784; its layers :525-530, :609-616)."""
    d, L, ffn = size(a, "d_model"), size(a, "encoder_layers"), size(a, "encoder_ffn_dim")
    mels, out, ds = size(a, "num_mel_bins"), size(a, "output_dim"), size(a, "downsample_hidden_size")
    freq = (((mels + 1) // 2 + 1) // 2 + 1) // 2  # the mel bins after the three stride-2 convolutions
    t = [Tensors("audio", (ds, 1, 3, 3)), Tensors("audio", (ds, ds, 3, 3), 2), Tensors("audio", (ds,), 3)]
    t += linear("audio", d, ds * freq, 1, False)  # conv_out
    t += linear("audio", d, d, 4 * L, True) + [Tensors("audio", (d,), 4 * L)]  # q, k, v, out_proj; two LayerNorms
    t += linear("audio", ffn, d, L, True) + linear("audio", d, ffn, L, True) + [Tensors("audio", (d,), 2)]  # ln_post
    return t + linear("projector", d, d, 1, True) + linear("projector", out, d, 1, True)  # proj1, proj2


def read(cfg: dict, vision_spec) -> tuple[dict, object, list[Tensors]]:
    """(the language model's config for modelspec's MoE reader, the tower's VisionSpec, the vision tower's,
    projectors' and audio tower's tensors, and the resident talker's and code2wav's where config.json builds them)."""
    th = qwenomni.thinker_config(cfg, "qwen3_omni_moe")
    tc = {**_part(th, "text_config"), "model_type": TEXT_TYPE}
    tc["tie_word_embeddings"] = bool(th.get("tie_word_embeddings", False))
    v = {k: x for k, x in _part(th, "vision_config").items() if k != "image_size"}  # no tiles: each image whole
    composite = {"model_type": "qwen3_vl_moe", "vision_config": v, "text_config": {"hidden_size": tc["hidden_size"]}}
    _, vision, vt, _ = vlm.read(composite, vision_spec)  # Qwen3-VL's tower: its merger and deepstack mergers
    vision = replace(vision, tower_modules=TOWERS, projector_modules=PROJECTORS)
    resident = omni3talker.resident_tensors(cfg) if qwenomni.talker_resident(cfg, "qwen3_omni_moe") else []
    return tc, vision, vt + audio_tensors({**AUDIO_DEFAULTS, **_part(th, "audio_config")}) + resident
