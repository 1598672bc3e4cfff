"""ms-swift's deletion of a row over --max_length (planner/frameworks/swift/reader_deleted.py): from 3.4, under
--truncation_strategy delete (the default but for GRPO), a row whose encoded length passes --max_length is dropped, so
--images N alone share the row's length (images_within_length) and each image is sized within it; up to 3.3, under
'left' / 'right' / 'split', and under GRPO's default 'left', no row is deleted and each image keeps qwen_vl_utils'
16,384 tokens."""

from pathlib import Path

import pytest

from planner import checkconfig, intake

VLM = "Qwen/Qwen2.5-VL-7B-Instruct"
LORA = f"swift sft --model {VLM} --train_type lora --max_length 4096 --dataset x"
GRPO = f"swift rlhf --rlhf_type grpo --model {VLM} --tuner_type lora --max_length 4096 --dataset x"
CAP = 16384  # qwen_vl_utils' tokens an image (reader_pixels.QWEN_VL_UTILS_TOKENS)


def _read(tmp_path: Path, text: str, pins: str = ""):
    if pins:
        (tmp_path / "requirements.txt").write_text(pins)
    path = tmp_path / "train.sh"
    path.write_text(text + "\n")
    return intake.read([str(path)])


@pytest.mark.parametrize(
    ("pin", "command", "within", "each"),
    [
        pytest.param("", LORA, False, CAP, id="3.0-3.3 checks the text"),
        pytest.param("ms-swift==3.5.0\n", LORA, True, 4096, id="3.4 deletes"),
        pytest.param("ms-swift==3.5.0\n", LORA + " --truncation_strategy delete", True, 4096, id="3.4 delete"),
        pytest.param("ms-swift==3.5.0\n", LORA + " --truncation_strategy right", False, CAP, id="3.4 right"),
        pytest.param("ms-swift==3.12.6\n", LORA + " --truncation_strategy split", False, CAP, id="3.9 split"),
        pytest.param("", LORA.replace("--train_type", "--tuner_type"), True, 4096, id="4 deletes"),
        pytest.param("", GRPO, False, CAP, id="4 GRPO left"),
        pytest.param("", GRPO + " --truncation_strategy delete", True, 4096, id="4 GRPO delete"),
    ],
)
def test_images_n_share_the_length_where_a_longer_row_is_deleted(tmp_path, pin, command, within, each):
    r = _read(tmp_path, command, pin)
    s = {x.field: x for x in r.settings}
    assert ("images_within_length" in s) == within
    if within:
        assert "a row over --max_length is deleted" in s["images_within_length"].source
        cite = "v4.5.2 swift/template/base.py:1502" if "--tuner_type" in command else "v3.4.1 swift/llm/template"
        assert cite in s["images_within_length"].source
    body = checkconfig.config_body(r, {"images": 2}).body
    assert body.get("images_within_length", False) == within and body["max_pixels"] == each * 28 * 28


def test_a_text_models_reading_has_no_images_to_share(tmp_path):
    r = _read(tmp_path, "swift sft --model Qwen/Qwen2.5-7B-Instruct --tuner_type lora --max_length 4096 --dataset x")
    assert "images_within_length" not in r.request


def test_two_images_of_a_deleted_lines_row_plan_as_one_image_holding_it(tmp_path):
    """The field's case: a Qwen2.5-VL-7B LoRA at --max_length 4096, ms-swift 3.5.0 on one H100, --images 2 without
    MAX_PIXELS. Each image may be 4,096 tokens, the two together at most 4,096 (a longer row is deleted): planned as
    one image of 4,096 tokens, its masked tower attention over 16,384 patches (37.6 GiB), not as 8,192 tokens the text
    is cut after (the tower's attention over 32,768 patches, 94.0 GiB)."""
    (tmp_path / "requirements.txt").write_text("ms-swift==3.5.0\n")
    (tmp_path / "train.sh").write_text(LORA + "\n")
    files = [str(tmp_path / "train.sh"), str(tmp_path / "requirements.txt")]
    two = checkconfig.check_config(files, {"gpu": "h100", "images": 2})
    one = checkconfig.check_config(files, {"gpu": "h100", "image_tokens": 4096})
    assert (two.context[2].image_tokens, two.context[2].tower_tokens) == (4096, 0)
    assert two.plan.memory.peak_allocated_bytes == one.plan.memory.peak_allocated_bytes
    assert two.plan.fits and two.images["shared_length"] == 4096


@pytest.mark.parametrize(("pin", "image", "row"), [("ms-swift==3.5.0\n", 4096, 4096), ("", CAP, 4096 + CAP)])
def test_the_files_own_image_over_the_length_is_within_it_where_the_row_is_deleted(tmp_path, pin, image, row):
    """MAX_PIXELS=12845056 (16,384 tokens an image) at --max_length 4096: from 3.4 a row with that image is deleted, so
    the image a row that runs holds is at most 4,096 tokens (it was refused as over the length); up to 3.3 the image
    comes after the text's 4,096."""
    r = _read(tmp_path, "MAX_PIXELS=12845056 " + LORA, pin)
    assert (r.request["image_tokens"], r.request["seq_len"]) == (image, row)
    assert ("a row over --max_length is deleted" in {x.field: x for x in r.settings}["image_tokens"].source) == bool(
        pin
    )
