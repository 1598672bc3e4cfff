"""Families memplan does not count yet (planner/model/pending.py) are refused in one line naming them, from the config
transformers 5.25 writes for each (its config class's defaults), where before some were counted with the generic
llama-like formula (a text-only Qwen3.5 or GLM-4V text model: a recurrent state priced as a KV cache) or refused as
"an MoE of a family memplan does not count" without saying which family or what is missing."""

import pytest

from planner.errors import BadInput
from planner.model.families import from_config
from planner.model.pending import PENDING


@pytest.mark.parametrize("model_type", sorted(PENDING))
def test_each_pending_family_is_refused_in_one_line_naming_it(model_type):
    transformers = pytest.importorskip("transformers")
    cfg = transformers.AutoConfig.for_model(model_type).to_dict()
    with pytest.raises(BadInput) as e:
        from_config(cfg, "m")
    message = str(e.value)
    assert f"model_type {model_type!r} is not counted by memplan yet" in message and "\n" not in message


def test_a_known_language_model_under_a_pending_composite_is_refused_too():
    """A composite's text_config names the family (a GLM-4V text model inside an unknown wrapper)."""
    cfg = {"model_type": "my_vlm", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4}
    cfg.update(intermediate_size=128, vocab_size=100)
    assert not from_config(cfg, "m").exact  # the generic count, marked approximate
    with pytest.raises(BadInput, match="'glm4v_text' is not counted by memplan yet"):
        from_config({**cfg, "text_config": {"model_type": "glm4v_text"}}, "m")
