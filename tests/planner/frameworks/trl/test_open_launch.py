"""A TRL or HF argument file given alone (issue 47 item 8): `trl sft --config FILE` launches accelerate, one process a
visible GPU where no accelerate config names them, and an HF TrainingArguments JSON is read by a script whose launch
is not among the files; either way the reading asks for the GPUs rather than planning one without a word, and
--gpus-per-node answers it."""

import pytest

from planner import checkconfig, intake
from tests.planner.intake.conftest import DATA

MP = DATA / "memplan"
ASKED = "pass --gpus-per-node)"


@pytest.mark.parametrize(
    "name,said",
    [
        ("sft_config.yaml", "`trl sft --config sft_config.yaml` launches accelerate (trl 1.16.0"),
        ("training_args.json", "the script that reads it and the launch that starts it are not among the files"),
    ],
)
def test_a_file_alone_asks_for_the_gpus_of_its_launch(name, said):
    reading = intake.read([str(MP / name)])
    assert "gpus_per_node" not in reading.request
    asked = [n for n in reading.unplanned if n.startswith(f"{name} alone: ")]
    assert len(asked) == 1 and said in asked[0] and asked[0].endswith(ASKED), reading.unplanned


def test_the_flag_answers_the_question():
    result = checkconfig.check_config([str(MP / "sft_config.yaml")], {"gpu": "h100", "gpus_per_node": 4})
    assert result.plan.world_size == 4
    assert not any(ASKED in n for n in result.config["unplanned"]), result.config["unplanned"]


def test_the_launch_script_beside_it_answers_the_question():
    """trl_sft.sh launches the same TRL run with its processes: the file is no longer alone."""
    reading = intake.read([str(MP / "trl_sft.sh")])
    assert not any(" alone: " in n for n in reading.unplanned), reading.unplanned
