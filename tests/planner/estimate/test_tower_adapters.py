"""--lora-vision without the tower checkpointed: traced at zero 0 under AMP and bf16-pure (planner.estimate.tower_lora,
pinned in tests/planner/estimate/test_tower_lora.py); elsewhere planned as a trained tower's, and `check` says so in
a line and in its JSON (activation_terms.UNCOUNTED_TOWER_ADAPTERS)."""

import json

from planner.config.spec import Knobs
from planner.estimate.activation_terms import UNCOUNTED_TOWER_ADAPTERS, tower_adapters_uncounted
from planner.model.catalog import load_model

TOWER = load_model("gemma-3-4b").vision


def test_only_an_untraced_unchecked_tower_with_adapters_and_images_is_said():
    lora = Knobs(lora_rank=8, lora_vision=True, checkpointing="off", precision="fp32")
    assert tower_adapters_uncounted(lora, TOWER, 256) == UNCOUNTED_TOWER_ADAPTERS
    assert tower_adapters_uncounted(lora.model_copy(update={"precision": "bf16", "zero_stage": 2}), TOWER, 256)
    assert not tower_adapters_uncounted(lora.model_copy(update={"precision": "bf16"}), TOWER, 256)  # traced
    assert not tower_adapters_uncounted(lora.model_copy(update={"precision": "bf16-pure"}), TOWER, 256)
    assert not tower_adapters_uncounted(lora.model_copy(update={"checkpointing": "full"}), TOWER, 256)
    assert not tower_adapters_uncounted(lora, TOWER, 0)  # no image: the tower does not run
    assert not tower_adapters_uncounted(Knobs(lora_rank=8, checkpointing="off"), TOWER, 256)  # a frozen tower
    assert not tower_adapters_uncounted(lora, None, 256)


def test_check_says_it_in_its_json(tmp_path, capsys, monkeypatch):
    from planner.cli import main

    monkeypatch.setenv("MEMPLAN_STORE", str(tmp_path / "none.sqlite"))
    base = ["check", "--model", "gemma-3-4b", "--gpu", "h100-80gb", "--micro-batch", "1", "--seq-len", "1024"]
    base += ["--image-tokens", "256", "--lora-rank", "8", "--lora-vision", "--json", "--checkpointing", "off"]
    assert main([*base, "--precision", "fp32"]) == 0
    assert json.loads(capsys.readouterr().out)["uncounted"] == UNCOUNTED_TOWER_ADAPTERS
    assert main([*base, "--precision", "bf16"]) == 0
    assert "uncounted" not in json.loads(capsys.readouterr().out)
