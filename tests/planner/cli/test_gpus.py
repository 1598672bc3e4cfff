"""`planner gpus`: the GPU catalog."""
import json

from planner.cli import main


def test_gpus_json(capsys):
    assert main(["gpus", "--json"]) == 0
    gpus = json.loads(capsys.readouterr().out)["gpus"]
    assert any(g["name"] == "h20" for g in gpus)
    assert all(g["sources"] for g in gpus)
