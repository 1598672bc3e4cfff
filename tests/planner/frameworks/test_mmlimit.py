"""vLLM's limit_mm_per_prompt as memplan plans it (planner.frameworks.mmlimit): a row's image tokens are its images at
the pixel cap, each as the real Qwen2-VL processor counts them, at most the planned prompt; a limit is read from
LMM-R1's JSON text, a dict or verl's whole number, and anything else is refused in one line."""

import pytest

from planner.errors import BadInput
from planner.frameworks import mmlimit
from planner.model import images

ACCEPTED = "a JSON object such as '{\"image\": 4}'"


def test_a_rows_image_tokens_are_the_processors_for_n_images_within_the_prompt():
    """Three images at the worst case of max_pixels 200,704 (256 x 28 x 28) through transformers' Qwen2-VL image
    processor (the PIL one, CPU): 3 x 256 merged tokens (the grid's patches over 2 x 2), exactly; a 512-token prompt
    holds 512 of them."""
    pytest.importorskip("transformers")
    from PIL import Image
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    each, size = images.worst_case("qwen2-vl", None, 200704)
    proc = Qwen2VLImageProcessorPil(min_pixels=3136, max_pixels=200704)
    grids = proc([Image.new("RGB", size, (90, 140, 20))] * 3, return_tensors="np")["image_grid_thw"]
    measured = int(grids.prod(axis=1).sum()) // 4
    assert each == 256 and mmlimit.row_image_tokens(3, each, 10**6) == measured == 768  # exact
    assert mmlimit.row_image_tokens(3, each, 512) == 512


@pytest.mark.parametrize(
    ("value", "n"), [('{"image": 4}', 4), ({"image": 2, "video": 1}, 2), ('{"video": 2}', 1), (3, 3), ("0", 0)]
)
def test_a_limit_is_read_from_json_a_dict_or_a_number(value, n):
    assert mmlimit.image_limit(value, "run.sh:1", ACCEPTED) == n


@pytest.mark.parametrize("value", ["image=4", '{"image": -1}', '{"image": "4"}', True, [4]])
def test_a_limit_memplan_cannot_plan_is_refused_in_one_line(value):
    with pytest.raises(BadInput, match=r"is not a limit memplan can plan; accepted: a JSON object") as e:
        mmlimit.image_limit(value, "run.sh:1", ACCEPTED)
    assert str(e.value).startswith(f"run.sh:1: {value!r} ") and "\n" not in str(e.value)
