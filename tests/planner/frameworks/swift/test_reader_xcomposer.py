"""InternLM-XComposer-2.5 under ms-swift 2.x (planner/frameworks/swift/reader_xcomposer.py): its image's tokens follow
the image's size under either template, so a run's files are asked for them in one line; the caller's --image-tokens
answers, the row's length then the text's --max_length and those tokens. XComposer2's fixed image is unchanged."""

import pytest

from planner import intake
from planner.errors import BadInput
from planner.model import xcomposer

RUN = "swift sft --model_type {t} --model_id_or_path {m} --sft_type lora --batch_size 1\n"


def _file(tmp_path, model_type: str, model: str = "/base/internlm-xcomposer2d5"):
    path = tmp_path / "train.sh"
    path.write_text(RUN.format(t=model_type, m=model))
    return str(path)


@pytest.mark.parametrize(
    "model_type,says",
    [
        ("internlm-xcomposer2-7b-chat", "its template (XComposer2's) hands each image at its own size"),
        ("internlm-xcomposer2_5-7b-chat", "Image_transform at hd_num 24, 6 where a row holds several"),
    ],
)
def test_a_2d5_checkpoints_image_is_asked_for_in_one_line(tmp_path, model_type, says):
    with pytest.raises(BadInput) as e:
        intake.read([_file(tmp_path, model_type)])
    text = str(e.value)
    assert e.value.field == "image_tokens" and says in text and "\n" not in text
    assert f"--model_type {model_type} over InternLM-XComposer-2.5's weights" in text
    assert "(h*w+1)*400 + 1 + (h+1)*20 tokens (841 for one tile)" in text and "give --image-tokens" in text


def test_the_callers_image_tokens_answer_and_lengthen_the_row(tmp_path):
    reading = intake.read([_file(tmp_path, "internlm-xcomposer2-7b-chat")], given={"image_tokens": 2861})
    assert reading.request["model"] == "internlm-xcomposer2d5-7b" and reading.request["seq_len"] == 2048
    inputs, row = reading.derived["seq_len"]
    assert inputs == ("image_tokens",) and row({"image_tokens": xcomposer.hd_tokens(2, 3)}) == 2048 + 2861


def test_xcomposer2s_fixed_image_is_planned_as_before(tmp_path):
    reading = intake.read([_file(tmp_path, "internlm-xcomposer2-7b-chat", "/data/rotate_712")])
    assert reading.request["model"] == "internlm-xcomposer2-7b"
    assert reading.request["image_tokens"] == 1225 and reading.request["seq_len"] == 2048 + 1225


@pytest.mark.parametrize(
    "model_type,cites",
    [("xcomposer2", "internlm.py:81, 110"), ("xcomposer2_5", "internlm.py:58-68, HD_NUM from the environment")],
)
def test_a_3x_run_is_asked_with_3xs_template_lines(tmp_path, model_type, cites):
    path = tmp_path / "train.sh"
    path.write_text(f"swift sft --model_type {model_type} --model /base/internlm-xcomposer2d5 --train_type lora\n")
    with pytest.raises(BadInput, match=f"v3.2.2 swift/llm/template/template/{cites}"):
        intake.read([str(path)])
