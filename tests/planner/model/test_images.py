"""The worst case of each image rule (planner.model.images.worst_case): no image of a dense grid of sizes, nor of any
size hypothesis draws, gives more tokens, and the size it names gives them (the rules themselves are pinned to the
real image processors in tests/scan)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.errors import BadInput
from planner.model.images import FAMILY_RULE, family_rule, image_rule, worst_case

RULES = [
    ("qwen2-vl", None, None),
    ("qwen2-vl", 3136, 1003520),
    ("qwen2-vl", None, 262144),
    ("qwen3-vl", None, None),
    ("qwen3-vl", None, 1048576),
    ("internvl", None, None),
    ("internvl:6", None, None),
    ("internvl:1", None, None),
    ("llava", None, None),
    ("llava-next", None, None),
    ("llava-onevision", None, None),
    ("gemma3", None, None),
    ("gemma3:pan-and-scan", None, None),
    ("idefics3", None, None),
    ("mllama", None, None),
    ("minicpm-v", None, None),
    ("fixed:300", None, None),
]
GRID = range(28, 4097, 84)


@pytest.mark.parametrize("spec, low, high", RULES, ids=lambda x: str(x))
def test_no_image_of_the_grid_gives_more(spec, low, high):
    tokens, size = worst_case(spec, low, high)
    rule = image_rule(spec, low, high)
    assert rule(*size) == tokens
    assert max(rule(w, h) for w in GRID for h in GRID) <= tokens


@pytest.mark.parametrize("spec, low, high", RULES, ids=lambda x: str(x))
@settings(max_examples=200, deadline=None)
@given(w=st.integers(1, 8000), h=st.integers(1, 8000))
def test_no_image_gives_more(spec, low, high, w, h):
    if max(w, h) / min(w, h) > 200:  # Qwen's processors refuse such images
        return
    assert image_rule(spec, low, high)(w, h) <= worst_case(spec, low, high)[0]


def test_worst_cases_as_the_processors_settings_say():
    """Qwen2-VL at its checkpoints' max_pixels 12,845,056 (16,384 x 28^2, what from_pretrained runs): 16,384 tokens;
    at the class's 1,003,520 (1,280 x 28^2): 1,280; at 262,144: 334 (262,144 // 784 = 334 blocks of 28 x 28 pixels on
    a 167 x 2 grid, an elongated image; a square one gets 17 x 17 = 289); Qwen3-VL's 16,777,216: 16,384;
    InternVL's 12 tiles
    and thumbnail: 13 x 256 + 2; LLaVA-NeXT's 672 x 672 grid: 576 + 48 x 48 + 48; Idefics3's 4 x 4 tiles and the
    global image: 17 x 169; pan-and-scan's 4 crops: 5 x 256."""
    got = {spec: worst_case(spec)[0] for spec, _, _ in RULES}
    assert (got["qwen2-vl"], worst_case("qwen2-vl", None, 262144)[0], got["qwen3-vl"]) == (16384, 334, 16384)
    assert worst_case("qwen2-vl", None, 1003520) == (1280, (1120, 896))
    assert (got["internvl"], got["internvl:6"], got["internvl:1"]) == (13 * 256 + 2, 7 * 256 + 2, 258)
    assert (got["llava-next"], got["idefics3"], got["gemma3:pan-and-scan"]) == (2928, 2873, 1280)


def test_each_family_names_a_rule_that_exists():
    for model_type, spec in FAMILY_RULE.items():
        assert family_rule(model_type) == spec and image_rule(spec)(640, 480) > 0
    assert family_rule("smolvlm") is None
    with pytest.raises(BadInput, match="--image-rule 'qwen'"):
        image_rule("qwen")
