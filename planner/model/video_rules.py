"""Video tokens of Qwen2-VL and Qwen2.5-VL, restated from transformers 5.24's Qwen2VLVideoProcessor
(models/qwen2_vl/video_processing_qwen2_vl.py):
- frames (sample_frames, :206-224): a video of `seconds` at its own frame rate is sampled at `fps` frames a second,
  kept between min_frames and max_frames (and the video's own frames), both floored to a multiple of the temporal
  patch (2);
- each frame resized by smart_resize (factor 28) between the processor's size shortest_edge (min_pixels, 128 x 28 x
  28) and longest_edge (max_pixels, 768 x 28 x 28) (resize, :238-268); with cap_pixels_per_frame (qwen-vl-utils'
  behaviour; off unless asked in 5.24, :333-342) the cap is also an even share of 90% of max_video_tokens' pixels;
- two frames make one temporal patch: tokens = frames / 2 x (height / 28) x (width / 28) (patchify, :270-300; the
  2 x 2 merge).
Pinned to the real processor on videos of several lengths and sizes (tests/planner/model/test_video_rules.py, in a
venv with torchvision, which the video processor imports).
"""

from __future__ import annotations

import math

from planner.model.image_rules import smart_resize
from planner.model.images import worst_case

FACTOR = 28
TEMPORAL_PATCH = 2
FPS = 2.0
MIN_FRAMES, MAX_FRAMES = 4, 768
MIN_PIXELS, MAX_PIXELS = 128 * 28 * 28, 768 * 28 * 28  # the processor's size shortest_edge / longest_edge
MAX_VIDEO_TOKENS = 128_000
FAMILIES = ("qwen2_vl", "qwen2_5_vl")  # the model types whose video processor this restates


def has_rule(model_type: str) -> bool:
    return model_type in FAMILIES


def sampled_frames(seconds: float, native_fps: float, fps: float = FPS, max_frames: int = MAX_FRAMES) -> int:
    """Frames sample_frames keeps of a video of `seconds` at `native_fps`."""
    total = int(seconds * native_fps)
    top = math.floor(min(max_frames, total) / TEMPORAL_PATCH) * TEMPORAL_PATCH
    n = min(max(total / native_fps * fps, MIN_FRAMES), top, total)
    return math.floor(n / TEMPORAL_PATCH) * TEMPORAL_PATCH


def frame_cap_pixels(frames: int, max_pixels: int, min_pixels: int, cap: bool) -> int:
    """The per-frame pixel cap: max_pixels, and with cap_pixels_per_frame an even share of the video's budget."""
    if not cap:
        return max_pixels
    total = int(MAX_VIDEO_TOKENS * FACTOR * FACTOR * 0.9)
    return max(min(max_pixels, total * TEMPORAL_PATCH // frames), int(min_pixels * 1.05))


def video_tokens(
    width: int,
    height: int,
    seconds: float,
    native_fps: float = 30.0,
    fps: float = FPS,
    max_frames: int = MAX_FRAMES,
    min_pixels: int = MIN_PIXELS,
    max_pixels: int = MAX_PIXELS,
    cap: bool = False,
) -> int:
    """LLM tokens of one video."""
    frames = sampled_frames(seconds, native_fps, fps, max_frames)
    h, w = smart_resize(height, width, FACTOR, min_pixels, frame_cap_pixels(frames, max_pixels, min_pixels, cap))
    return frames // TEMPORAL_PATCH * (h // FACTOR) * (w // FACTOR)


def worst_case_tokens(
    seconds: float | None = None,
    fps: float = FPS,
    max_frames: int = MAX_FRAMES,
    min_pixels: int = MIN_PIXELS,
    max_pixels: int = MAX_PIXELS,
    cap: bool = False,
) -> tuple[int, int]:
    """(the most tokens one video gives under these settings, its frames): a video up to `seconds` long (any length:
    as many frames as max_frames keeps), each frame at the most 28 x 28 blocks the per-frame cap admits (a frame
    smart_resize keeps as it is, aspect ratio at most 200). With the cap a video of fewer frames can give more (each
    frame's share of the budget grows), so every even frame count up to the longest is tried."""
    top = math.floor(max_frames / TEMPORAL_PATCH) * TEMPORAL_PATCH
    if seconds is not None:  # at the highest frame rate: every frame sample_frames may keep is there
        top = sampled_frames(seconds, max(fps, 1000.0), fps, max_frames)
    counts = range(TEMPORAL_PATCH, top + 1, TEMPORAL_PATCH) if cap else [top]
    return max((n // TEMPORAL_PATCH * _frame_blocks(n, min_pixels, max_pixels, cap), n) for n in counts)


def _frame_blocks(frames: int, min_pixels: int, max_pixels: int, cap: bool) -> int:
    """The most 28 x 28 blocks a frame keeps under the per-frame cap: the qwen2-vl image rule's worst case there."""
    return worst_case("qwen2-vl", min_pixels, frame_cap_pixels(frames, max_pixels, min_pixels, cap))[0]
