"""Families transformers 5.25 builds that memplan does not count yet (issue 49 item 4), refused in one line that names
the family and what is missing, before any reader sees the config: counted with the generic llama-like formula or
as their nearest family they would be planned wrong (a recurrent state priced as a KV cache, a talker and an audio
tower left out, routed experts priced as one MLP)."""

from __future__ import annotations

from planner.errors import BadInput

# Qwen2.5-Omni's and Qwen3-Omni's thinkers are counted (planner/model/qwenomni.py, qwen3omni.py)
# transformers' Glm46VConfig (models/glm46v/configuration_glm46v.py:54-57): a tower and any language model AutoModel
# builds; a config.json naming glm4v_moe (GLM-4.5V's) or glm4v (GLM-4.1V's) is counted (planner/model/glm4v.py)
_GLM46V = (
    "transformers' Glm46V composite (a tower beside any AutoModel language model); its glm4v_moe config is counted"
)
PENDING = {
    "glm4v_text": "GLM-4.1V's language model alone (its M-RoPE positions come from the composite glm4v)",
    "glm4v_moe_text": "GLM-4.5V's language model alone (its M-RoPE positions come from the composite glm4v_moe)",
    "glm46v": "GLM-4.6V as " + _GLM46V,
}

# composites memplan counts whose text_config names a model_type refused on its own
OWNED = {"glm4v": "glm4v_text", "glm4v_moe": "glm4v_moe_text"}


def refuse_pending(cfg: dict) -> None:
    """A BadInput naming the family when config.json's model_type (or its text_config's) is one memplan does not
    count yet."""
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else {}
    inner = None if OWNED.get(cfg.get("model_type")) == text.get("model_type") else text.get("model_type")
    for mt in (cfg.get("model_type"), inner):
        if isinstance(mt, str) and mt in PENDING:
            raise BadInput(
                f"config.json: model_type {mt!r} is not counted by memplan yet ({PENDING[mt]}); "
                "planning it as another family would misstate its memory",
                "model",
            )
