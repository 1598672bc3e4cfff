"""Families transformers 5.25 builds that memplan does not count yet (issue 49 item 4), refused in one line that names
the family and what is missing, before any reader sees the config: counted with the generic llama-like formula or
as their nearest family they would be planned wrong (a recurrent state priced as a KV cache, a talker and an audio
tower left out, routed experts priced as one MLP)."""

from __future__ import annotations

from planner.errors import BadInput

_OMNI = "the thinker's vision and audio towers and the talker (speech) model beside the language model"
_GLM4V = "GLM-4V / GLM-4.1V: its own vision tower (a 3-D patch convolution, 2-D rotary, a downsampling merger)"
PENDING = {
    "qwen2_5_omni": "Qwen2.5-Omni: " + _OMNI,
    "qwen2_5_omni_thinker": "Qwen2.5-Omni: " + _OMNI,
    "qwen3_omni_moe": "Qwen3-Omni: " + _OMNI + ", with routed experts",
    "qwen3_omni_moe_thinker": "Qwen3-Omni: " + _OMNI + ", with routed experts",
    "glm4v": _GLM4V,
    "glm4v_text": _GLM4V,
    "glm4v_moe": _GLM4V + ", with GLM-4.5's routed experts",
    "glm4v_moe_text": _GLM4V + ", with GLM-4.5's routed experts",
    "glm46v": _GLM4V,
    "llama4": "Llama-4: interleaved routed and dense layers, chunked attention and its vision tower",
    "llama4_text": "Llama-4: interleaved routed and dense layers and chunked attention",
}


def refuse_pending(cfg: dict) -> None:
    """A BadInput naming the family when config.json's model_type (or its text_config's) is one memplan does not
    count yet."""
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else {}
    for mt in (cfg.get("model_type"), text.get("model_type")):
        if isinstance(mt, str) and mt in PENDING:
            raise BadInput(
                f"config.json: model_type {mt!r} is not counted by memplan yet ({PENDING[mt]}); "
                "planning it as another family would misstate its memory",
                "model",
            )
