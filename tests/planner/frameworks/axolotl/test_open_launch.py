"""An axolotl YAML given alone (issue 47 item 8, "what the launch starts"): `axolotl train FILE` launches accelerate,
whose processes are one a visible GPU where no accelerate config names them, so the reading asks for the GPUs
rather than planning one GPU without a word; --gpus-per-node or an accelerate config given beside it answers."""

from planner import checkconfig, intake
from tests.planner.intake.conftest import DATA

AX = DATA / "axolotl/examples/llama-3/fft-8b-liger-fsdp.yaml"
ASKED = "pass --gpus-per-node)"


def test_a_yaml_alone_asks_for_the_gpus_of_its_launch():
    reading = intake.read([str(AX)])
    assert "gpus_per_node" not in reading.request
    asked = [n for n in reading.unplanned if n.startswith("fft-8b-liger-fsdp.yaml alone: axolotl train launches")]
    assert len(asked) == 1 and "commands/launch.py:1300-1316" in asked[0] and ASKED in asked[0], reading.unplanned


def test_the_flag_answers_the_question():
    result = checkconfig.check_config([str(AX)], {"gpu": "h100", "gpus_per_node": 4})
    assert result.plan.world_size == 4
    assert not any(ASKED in n for n in result.config["unplanned"]), result.config["unplanned"]


def test_an_accelerate_config_beside_it_answers_the_question():
    reading = intake.read([str(AX), str(DATA / "llamafactory/examples/accelerate/fsdp2_config.yaml")])
    assert reading.request["gpus_per_node"] == 2
    assert not any(ASKED in n for n in reading.unplanned), reading.unplanned
