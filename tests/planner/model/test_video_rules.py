"""planner/model/video_rules.py against transformers' own Qwen2VLVideoProcessor (5.24), run in the venv that holds
torchvision (MEMPLAN_VIDEO_PYTHON, `make fwenv`): frames sampled by fps and capped by max_frames, frames resized
between min and max pixels, with and without the per-frame cap of qwen-vl-utils; and the worst case of the settings
against any video."""

import json
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.model import video_rules as v

HERE = Path(__file__).resolve().parent
BASE = {"fps": 2.0, "max_frames": 768, "min_pixels": v.MIN_PIXELS, "max_pixels": v.MAX_PIXELS, "cap": False}
CASES = [
    {"width": 640, "height": 480, "seconds": 10, "native_fps": 30},
    {"width": 1920, "height": 1080, "seconds": 4, "native_fps": 25},  # over the per-frame cap: scaled down
    {"width": 64, "height": 64, "seconds": 1.5, "native_fps": 30},  # 3 frames at 2 fps: the 4-frame floor
    {"width": 96, "height": 96, "seconds": 600, "native_fps": 2},  # 1,200 frames: max_frames keeps 768
    {"width": 128, "height": 96, "seconds": 100, "native_fps": 10, "max_frames": 16},
    {"width": 200, "height": 120, "seconds": 7, "native_fps": 1},  # 1 fps under 2 fps: the video's own 7, floored to 6
    {"width": 1920, "height": 1080, "seconds": 4, "native_fps": 25, "max_pixels": 256 * 28 * 28},
    {"width": 320, "height": 240, "seconds": 5, "native_fps": 24, "min_pixels": 512 * 28 * 28},  # scaled up
    {"width": 700, "height": 700, "seconds": 200, "native_fps": 2, "cap": True},  # 400 frames: the budget's share
    {"width": 300, "height": 300, "seconds": 20, "native_fps": 10, "fps": 4.0, "cap": True},
]


@pytest.fixture(scope="module")
def real_counts():
    python = os.environ.get("MEMPLAN_VIDEO_PYTHON")
    if not python or not Path(python).exists():
        pytest.skip("MEMPLAN_VIDEO_PYTHON names no Python with torchvision (make fwenv builds .fwenv/video)")
    cases = [{**BASE, **c} for c in CASES]
    out = subprocess.run(
        [python, str(HERE / "video_counts.py")],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return dict(zip(range(len(cases)), json.loads(out.stdout)))


@pytest.mark.parametrize("i", range(len(CASES)))
def test_video_tokens_are_the_processors(i, real_counts):
    c = {**BASE, **CASES[i]}
    got = v.video_tokens(
        c["width"],
        c["height"],
        c["seconds"],
        c["native_fps"],
        c["fps"],
        c["max_frames"],
        c["min_pixels"],
        c["max_pixels"],
        c["cap"],
    )
    assert got == real_counts[i] > 0


@settings(max_examples=300, deadline=None)
@given(
    w=st.integers(28, 4000),
    h=st.integers(28, 4000),
    seconds=st.floats(0.5, 3600),
    native_fps=st.sampled_from([1, 10, 24, 25, 30, 60]),
    cap=st.booleans(),
    max_frames=st.integers(4, 768),
)
def test_no_video_gives_more_than_the_worst_case(w, h, seconds, native_fps, cap, max_frames):
    if max(w, h) / min(w, h) > 200 or seconds * native_fps < 4:
        return
    worst, _ = v.worst_case_tokens(None, 2.0, max_frames, cap=cap)
    bounded, _ = v.worst_case_tokens(seconds, 2.0, max_frames, cap=cap)
    got = v.video_tokens(w, h, seconds, native_fps, 2.0, max_frames, cap=cap)
    assert got <= bounded <= worst


def test_the_worst_case_is_reached():
    """768 frames (384 temporal patches) of 768 28 x 28 blocks; with the cap, 300 blocks a frame."""
    assert v.worst_case_tokens() == (384 * 768, 768)
    assert v.worst_case_tokens(cap=True) == (384 * 300, 768)
    assert v.worst_case_tokens(seconds=10) == (10 * 768, 20)
    assert v.video_tokens(28 * 32, 28 * 24, 3600, 30) == v.worst_case_tokens()[0]  # a 32 x 24-block hour
