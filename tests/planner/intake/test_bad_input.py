"""What cannot be read is one line naming the file and what is accepted (BadInput, field "config"), never a traceback."""

import json
from pathlib import Path

import pytest

from planner import intake
from planner.errors import BadInput
from tests.planner.intake.conftest import HELPERS


def _bad(paths: list[str]) -> str:
    with pytest.raises(BadInput) as e:
        intake.read(paths)
    assert e.value.field == "config"
    assert "\n" not in str(e.value)
    return str(e.value)


def _write(tmp_path: Path, name: str, text: str | bytes) -> str:
    path = tmp_path / name
    path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text)
    return str(path)


def test_no_file_at_all():
    assert "give at least one file" in _bad([])


@pytest.mark.parametrize(
    "name,text,says",
    [
        ("cfg.yaml", "model_name_or_path: [1,\n", "not valid YAML"),
        ("cfg.json", '{"per_device_train_batch_size": 2,', "not valid JSON"),
        ("notes.yaml", "- just\n- a list\n", "not a training configuration memplan knows"),
        ("other.yaml", "colour: blue\nsize: 3\n", "not a training configuration memplan knows"),
        (
            "config.json",
            json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8}),
            "a model's config.json, not a training configuration: pass it as --model",
        ),
        ("v1.yaml", "model: Qwen/Qwen3-4B\nmicro_batch_size: 2\ndist_config: {}\n", "experimental v1 schema"),
        ("empty.sh", "#!/bin/bash\necho hello\n", "no training command found"),
        ("blob.bin", b"\xff\xfe\x00\x81garbage", "cannot be read"),
        ("broken.py", "def f(:\n", "not Python that parses"),
        ("notes.txt", "nothing to see here\n", "neither a training configuration nor a launch script"),
    ],
)
def test_unreadable_or_unknown_files(tmp_path, name, text, says):
    path = _write(tmp_path, name, text)
    message = _bad([path])
    assert says in message and name in message


def test_a_missing_file_and_a_folder(tmp_path):
    message = _bad([str(tmp_path / "nope.yaml")])
    assert "no such file" in message and "accepted:" in message
    assert "a folder, not a file" in _bad([str(tmp_path)])


def test_a_nul_byte_in_the_path():
    assert "NUL byte" in _bad(["a\0b.yaml"])


def test_a_sourced_helper_script_has_no_training_command():
    (helper,) = HELPERS
    assert "no training command found" in _bad([str(helper)])


def test_a_script_naming_a_config_that_is_not_there(tmp_path):
    path = _write(tmp_path, "run.sh", "llamafactory-cli train missing.yaml\n")
    message = _bad([path])
    assert "run.sh" in message and "missing.yaml" in message and "not found" in message
