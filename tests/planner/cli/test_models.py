"""`planner models`: the model catalog."""

import json

from planner.cli import main


def test_models_json(capsys):
    assert main(["models", "--json"]) == 0
    models = {m["name"]: m for m in json.loads(capsys.readouterr().out)["models"]}
    assert models["qwen2.5-vl-7b"]["vision_params"] > 0 and models["llama-2-7b"]["layers"] == 32
    assert models["qwen3-0.6b"]["params"] == 596_049_920
