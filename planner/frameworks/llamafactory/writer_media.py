"""The images' and videos' keys of a plan's LLaMA-Factory YAML (writer.py's dataset section): the pixel bounds each
image was planned within (Goal.pixels) and, for a plan with --videos (Goal.video), each frame's bounds, the fps and
the most frames sampled, so that the YAML runs the plan and not LF's defaults. At v0.9.5 src/llamafactory/hparams/
model_args.py: image_max_pixels 768 * 768 (:305-308), image_min_pixels 32 * 32 (:309-312), video_max_pixels 256 * 256
(:321-324), video_min_pixels 16 * 16 (:325-328), video_fps 2.0 (:329-332), video_maxlen 128 (:333-336); a video's
frames are min(its frames, video_maxlen, duration x video_fps) (data/mm_plugin.py:237-247), each resized within the
video bounds (_regularize_images). An older line writes each key it takes (releases.takes; keys.py renames)."""

from __future__ import annotations

from collections.abc import Callable

from planner.config.spec import Goal, Plan
from planner.frameworks.llamafactory.keys import KEYS
from planner.frameworks.llamafactory.releases import takes, writes_pixels

Entry = tuple[str, object, str]  # key, value, trailing comment ("" for none)
Pair = Callable[[str, object], tuple[str, object]]  # writer.keys_of(plan)


def media_entries(plan: Plan, goal: Goal | None, pair: Pair) -> list[Entry]:
    """The image entries, then the video entries; none for a line whose YAML takes no cap in pixels (the 0.8 line's
    image_resolution is a side: releases.writes_pixels)."""
    if goal is None or not writes_pixels(plan.release):
        return []
    return image_entries(plan, goal, pair) + video_entries(plan, goal, pair)


def image_entries(plan: Plan, goal: Goal, pair: Pair) -> list[Entry]:
    """The pixel bounds the images were planned within, LF's resize before its processor (data/mm_plugin.py:218-235)."""
    if goal.pixels is None:
        return []
    out = [(*pair("max_pixels", goal.pixels[1]), "the pixel cap each image was planned at")]
    return out + ([(*pair("min_pixels", goal.pixels[0]), "")] if takes("image_min_pixels", plan.release) else [])


def video_entries(plan: Plan, goal: Goal, pair: Pair) -> list[Entry]:
    """Each frame's pixel bounds, the fps and the frames the videos were planned at (Goal.video): video_maxlen caps a
    longer video at the frames planned."""
    if goal.video is None:
        return []
    low, high, fps, frames = goal.video
    why = {"video_max_pixels": "the pixel cap each video frame was planned at", "max_frames": "the frames planned"}
    named = {"video_max_pixels": high, "video_min_pixels": low, "fps": fps, "max_frames": frames}
    return [(*pair(n, v), why.get(n, "")) for n, v in named.items() if takes(KEYS.key(n, plan.release), plan.release)]
