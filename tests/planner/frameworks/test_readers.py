"""Issue 46 item 1: a framework's reader sits behind one protocol the registry dispatches to. A folder declares the
configuration formats its reader.py reads (Framework.reads: read_file) and the python modules whose runs it reads whole
(Framework.launched: read_launched); planner.intake finds the reader through the declaration, never by a name."""

import inspect
from importlib import import_module

import pytest

from planner.frameworks import FRAMEWORKS
from planner.intake import configs, launch

READERS = [f.name for f in FRAMEWORKS.values() if f.reads or f.launched]
FORMATS = ("llamafactory", "axolotl", "swift", "deepspeed", "accelerate", "torchtune", "hf")


@pytest.mark.parametrize("name", READERS)
def test_a_declared_reader_has_the_protocols_functions(name):
    reader = import_module(f"planner.frameworks.{name}.reader")
    f = FRAMEWORKS[name]
    if f.reads:
        params = list(inspect.signature(reader.read_file).parameters)
        assert params == ["c", "data", "path", "flags", "words", "script", "trainer", "vars"], name
    if f.launched:
        assert list(inspect.signature(reader.read_launched).parameters) == ["c", "run"], name


def test_every_format_the_intake_knows_is_read_by_one_framework_and_every_rl_module_launched_by_one():
    owners = {fmt: [f.name for f in FRAMEWORKS.values() if fmt in f.reads] for fmt in FORMATS}
    assert all(len(v) == 1 for v in owners.values()), owners
    assert {fmt: configs.reader(fmt).__name__ for fmt in FORMATS} == {
        fmt: f"planner.frameworks.{owners[fmt][0]}.reader" for fmt in FORMATS
    }
    launched = [m for f in FRAMEWORKS.values() for m in f.launched]
    assert sorted(launched) == sorted(set(launched)) == sorted(launch.RL_MODULES)
    assert set(launched) == {
        "verl.trainer.main_ppo",
        "verl.trainer.fsdp_sft_trainer",  # verl's SFT trainers under torchrun (verl/reader_sft.py)
        "verl.trainer.sft_trainer",
        "openrlhf.cli.train_ppo_ray",
        "openrlhf.cli.train_dpo",
        "openrlhf.cli.train_sft",
        "openrlhf.cli.train_ppo",  # the pre-Ray PPO: every role in every process (openrlhf/reader_ppo.py)
    }
