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


def _scanned(lengths: list[int], image_tokens: int):
    """A scanner's answer for a dataset of `lengths` (text and images), its most image tokens a row `image_tokens`:
    the data's counts without a file (planner.search.datafit.make_fit)."""
    from planner.search.datafit import make_fit

    def scanner(path, tokenizer, rule, max_length, min_pixels, max_pixels):
        return make_fit(path, lengths, [image_tokens], max_length)

    return scanner


def test_videos_n_with_data_adds_each_rows_videos_to_its_text_and_images():
    """--data's rows say their text and images (the scan reads no video), --videos N the videos of each: the rows are
    planned at their length plus N videos at the worst case, cut at --max-length as the data's rows are."""
    data = {"data": "rows.jsonl", "tokenizer": "tok", "seq_len": None, "videos": 1, "video_seconds": 10}
    req = advise.parse(advise.CheckRequest, {**BASE, **data})
    video = 10 * 768  # 20 frames: 10 temporal patches of 768 blocks
    out = advise.check(req, scanner=_scanned([900, 3000, 1200], 500))
    assert (out.goal["seq_len"], out.goal["image_tokens"]) == (3000 + video, 500 + video)
    assert out.data["longest_row"] == 2 and out.data["truncated_rows"] == 0
    cut = advise.parse(advise.CheckRequest, {**BASE, **data, "max_length": 8192})
    out = advise.check(cut, scanner=_scanned([900, 3000, 1200], 500), alternatives=False)
    assert out.goal["seq_len"] == 8192  # every row with its 7,680 video tokens is cut at 8,192
    with pytest.raises(BadInput) as e:  # the videos alone over the length that cuts the rows: one line
        advise.check(
            advise.parse(advise.CheckRequest, {**BASE, **data, "max_length": 4096}),
            scanner=_scanned([900], 0),
            alternatives=False,
        )
    assert e.value.field == "videos" and "over --max-length 4096" in str(e.value)


def test_with_videos_grows_every_row_and_counts_the_rows_cut():
    from planner.search.datafit import make_fit, with_videos

    fit = with_videos(make_fit("rows.jsonl", [900, 3000, 1200], [500], None), 7680, 8192)
    assert (fit.lengths, fit.seq_len, fit.truncated, fit.longest_row) == ([8580, 10680, 8880], 8192, 3, 2)
    assert fit.image_tokens == 500  # the data's images; the videos join them in resolved.image_tokens
