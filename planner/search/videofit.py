"""Videos planned from the video processor's settings (`--videos N`, Qwen2-VL and Qwen2.5-VL): each video at the most
tokens its settings admit (planner.model.video_rules: frames from --video-seconds and --fps up to --max-frames, each
frame at most --video-max-pixels, with --video-pixel-cap the budget qwen-vl-utils spreads over the frames), said in
the answer. The video tokens are part of the sample's image tokens (the tower runs them as it runs images)."""

from __future__ import annotations

from dataclasses import dataclass

from planner.errors import BadInput
from planner.model import video_rules as vr
from planner.model.modelspec import ModelSpec


@dataclass(frozen=True)
class VideoBudget:
    videos: int  # per sample
    tokens_per_video: int  # the worst case
    frames: int  # the frames sampled at it
    seconds: float | None
    fps: float
    max_frames: int
    max_pixels: int
    cap: bool

    @property
    def tokens(self) -> int:
        return self.videos * self.tokens_per_video

    def json(self) -> dict:
        return {
            "videos": self.videos,
            "tokens_per_video": self.tokens_per_video,
            "frames": self.frames,
            "seconds": self.seconds,
            "fps": self.fps,
            "max_frames": self.max_frames,
            "video_max_pixels": self.max_pixels,
            "video_pixel_cap": self.cap,
        }


def budget(req, model: ModelSpec) -> VideoBudget | None:
    """The worst case of `--videos N` (None without videos); BadInput for a model without a video rule, or settings
    given without --videos."""
    given = [f for f in ("video_seconds", "video_min_pixels", "video_max_pixels") if getattr(req, f) is not None]
    if not req.videos:
        if given:
            raise BadInput(f"--{given[0].replace('_', '-')} sizes the videos of --videos N: give --videos", given[0])
        return None
    if not vr.has_rule(model.model_type):
        raise BadInput(
            f"--videos {req.videos}: video tokens are planned for Qwen2-VL and Qwen2.5-VL ({model.name!r} is "
            f"{model.model_type}); give its video tokens as --image-tokens",
            "videos",
        )
    low, high = req.video_min_pixels or vr.MIN_PIXELS, req.video_max_pixels or vr.MAX_PIXELS
    if low > high:
        raise BadInput(f"--video-min-pixels {low} is over --video-max-pixels {high}", "video_min_pixels")
    tokens, frames = vr.worst_case_tokens(req.video_seconds, req.fps, req.max_frames, low, high, req.video_pixel_cap)
    return VideoBudget(
        req.videos, tokens, frames, req.video_seconds, req.fps, req.max_frames, high, req.video_pixel_cap
    )


def lines(d: dict) -> list[str]:
    """The answer's line for the CLI."""
    length = f"{d['seconds']:g} s" if d["seconds"] is not None else "any length"
    return [
        f"videos: {d['videos']} a sample, {d['tokens_per_video']:,} tokens each at worst ({length} at {d['fps']:g} "
        f"fps: {d['frames']} frames of at most {d['video_max_pixels']:,} pixels"
        + (", the budget spread over them" if d["video_pixel_cap"] else "")
        + ")"
    ]
