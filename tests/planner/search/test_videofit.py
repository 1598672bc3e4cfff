"""planner/search/videofit.py: --videos N planned at the worst case of the video settings, part of the image tokens,
said in the answer; bad combinations refused in one line naming the field."""

import pytest

from planner import advise
from planner.errors import BadInput
from planner.model import video_rules as vr

BASE = {"model": "qwen2.5-vl-7b", "gpu": "h100", "gpus_per_node": 8, "micro_batch": 1, "zero": 3}


def check(**fields):
    return advise.check(advise.parse(advise.CheckRequest, {**BASE, "seq_len": 32768, **fields}))


def test_videos_are_image_tokens_at_their_worst_case():
    out = check(videos=1, video_seconds=30, image_tokens=None)
    assert out.videos == {
        "videos": 1,
        "tokens_per_video": 30 * 768,  # 60 frames: 30 temporal patches of 768 blocks
        "frames": 60,
        "seconds": 30,
        "fps": 2.0,
        "max_frames": 768,
        "video_max_pixels": vr.MAX_PIXELS,
        "video_pixel_cap": False,
    }
    assert out.goal["image_tokens"] == 23040
    two = check(videos=2, video_seconds=10, images=1, tokens_per_image=100)
    assert two.goal["image_tokens"] == 2 * 10 * 768 + 100


@pytest.mark.parametrize(
    "fields, field, needle",
    [
        ({"video_seconds": 10}, "video_seconds", "give --videos"),
        ({"videos": 1}, "videos", "294,912 tokens a video: 768 frames"),  # any length: over 32,768 tokens
        ({"videos": 1, "model": "llava-1.5-7b"}, "videos", "planned for Qwen2-VL and Qwen2.5-VL"),
        (
            {"videos": 1, "video_seconds": 5, "video_min_pixels": 10**6, "video_max_pixels": 10**5},
            "video_min_pixels",
            "over",
        ),
    ],
)
def test_bad_video_settings_are_refused_naming_the_field(fields, field, needle):
    with pytest.raises(BadInput) as e:
        check(**fields)
    assert e.value.field == field and needle in str(e.value)


def test_the_cap_spreads_the_budget_over_long_videos():
    capped = check(videos=1, video_seconds=600, video_pixel_cap=True, seq_len=131072)
    assert capped.videos["tokens_per_video"] == 384 * 300 < vr.worst_case_tokens()[0]
