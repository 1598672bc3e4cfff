"""Readings of the field corpus's runs (tests/field/, issue 47) that were planned wrong, each pinned to the user's own
files as posted: what the reading missed, read as the framework at that release runs it."""

from pathlib import Path

from planner import intake

FIELD = Path(__file__).resolve().parents[2] / "field"


def _fields(reading) -> dict:
    return {s.field: s for s in reading.settings}


def test_a_model_given_beside_the_files_settles_the_fields_that_need_it():
    """swift-2010: `--model_id_or_path $MODEL_PATH` cannot be resolved, so the user gives --model; the VLM's settings
    (ms-swift 2.x's --lora_target_modules ALL, every Linear by name, the ViT's too) are planned with that model
    instead of one 'for a model not known here' line."""
    files = [str(FIELD / "swift-2010-qwen2vl7b-lora-1xa100" / "train.sh")]
    alone = intake.read(files)
    assert "lora_vision" not in _fields(alone)
    assert any("for a model not known here" in line for line in alone.unplanned)
    given = intake.read(files, given={"model": "qwen2.5-vl-7b"})
    assert _fields(given)["lora_vision"].value is True
    assert "ALL in ms-swift 2.x: find_all_linears takes the ViT's too" in _fields(given)["lora_vision"].source
    assert not any("for a model not known here" in line for line in given.unplanned)
