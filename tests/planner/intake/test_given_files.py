"""A file a launch script names is found among the files given beside it (`--config launch.sh run.yaml`), as the
not-found error asks ("pass it too"): LLaMA-Factory#4133 posts `torchrun ... src/train.py examples/x.yaml` and the
YAML, which on the user's own machine sits in another folder."""

from pathlib import Path

import pytest

from planner import intake
from planner.errors import BadInput

YAML = "model_name_or_path: Qwen/Qwen2.5-7B-Instruct\nstage: sft\ndo_train: true\nfinetuning_type: lora\n"


def _files(tmp_path: Path) -> tuple[Path, Path, Path]:
    """launch.sh naming examples/run.yaml, and two given run.yaml files: one under examples/, one elsewhere."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b" / "examples").mkdir(parents=True)
    (tmp_path / "c").mkdir()
    script = tmp_path / "a" / "launch.sh"
    script.write_text("torchrun --nproc_per_node 2 src/train.py examples/run.yaml\n")
    deep = tmp_path / "b" / "examples" / "run.yaml"
    deep.write_text(YAML + "cutoff_len: 777\n")
    flat = tmp_path / "c" / "run.yaml"
    flat.write_text(YAML + "cutoff_len: 555\n")
    return script, deep, flat


def test_a_named_file_given_beside_the_script_is_the_one_read(tmp_path):
    script, _, flat = _files(tmp_path)
    reading = intake.read([str(script), str(flat)])
    assert reading.request["seq_len"] == 555
    assert reading.request["gpus_per_node"] == 2


def test_the_given_file_whose_path_ends_like_the_named_one_wins(tmp_path):
    script, deep, flat = _files(tmp_path)
    reading = intake.read([str(script), str(flat), str(deep)])
    assert reading.request["seq_len"] == 777
    assert str(deep) in reading.files


def test_a_named_file_neither_here_nor_given_is_still_asked_for(tmp_path):
    script, _, _ = _files(tmp_path)
    with pytest.raises(BadInput, match="pass it too"):
        intake.read([str(script)])
