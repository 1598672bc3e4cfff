"""torchtune (a framework memplan does not read yet): its `tune run RECIPE --config CFG key=value` commands and its
recipe configs, as torchtune's README and recipes/configs post them (pytorch/torchtune bd2a0fc7c), are refused in one
line that names torchtune and the recipe, never read as a plain HF Trainer with HF's defaults."""

import pytest

from planner import intake
from planner.errors import BadInput
from planner.intake import launch
from planner.intake.shell import read_script
from tests.planner.cli.helpers import one_line_error, planner
from tests.planner.intake.conftest import DATA

TUNE = DATA / "scripts" / "torchtune"
CASES = [
    (TUNE / "readme_qlora_single_device.sh", "tune run lora_finetune_single_device --config llama3_2/3B_qlora_single_device"),
    (TUNE / "readme_full_distributed.sh", "tune run full_finetune_distributed --config llama3_1/8B_full"),
    (TUNE / "recipes/configs/llama3_1/8B_lora_single_device.yaml", "a torchtune recipe config"),
]  # fmt: skip


@pytest.mark.parametrize(("path", "named"), CASES, ids=[c[0].name for c in CASES])
def test_a_torchtune_run_is_refused_in_one_line_naming_torchtune(path, named):
    with pytest.raises(BadInput) as e:
        intake.read([str(path)])
    msg = str(e.value)
    assert named in msg and "torchtune, a framework memplan does not read yet" in msg and "\n" not in msg
    assert e.value.field == "config"


def test_tune_run_is_found_with_torchruns_options_before_the_recipe(tmp_path):
    (run,) = launch.runs(read_script(TUNE / "readme_full_distributed.sh"))
    assert (run.tool, run.target, run.opts["nproc_per_node"].value) == ("tune", "full_finetune_distributed", "2")
    others = "tune download meta-llama/Meta-Llama-3.1-8B-Instruct\ntune cp llama3_1/8B_full ./my.yaml\n"
    (tmp_path / "other.sh").write_text(others)
    assert launch.runs(read_script(tmp_path / "other.sh")) == []


def test_check_config_says_so_in_one_line():
    r = planner("check", "--config", str(CASES[0][0]), "--gpu", "a100-80gb")
    one_line_error(r, "torchtune, a framework memplan does not read yet")
