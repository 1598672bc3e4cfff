"""`planner gpus`: the GPU catalog."""

import json

from planner.cli import main


def test_gpus_json(capsys):
    assert main(["gpus", "--json"]) == 0
    gpus = json.loads(capsys.readouterr().out)["gpus"]
    assert any(g["name"] == "h20" for g in gpus)
    assert all(g["sources"] for g in gpus)


def test_a_gpu_without_bf16_says_so():
    """Issue 13: the V100 showed a bf16 rate of 0."""
    from tests.planner.cli.helpers import planner

    row = next(line for line in planner("gpus").stdout.splitlines() if "v100-32gb" in line)
    assert "no bf16" in row
