"""The images' and videos' environment of a plan's ms-swift script (writer.py): the pixel bounds each image was planned
within (Goal.pixels) and, for a plan with --videos (Goal.video), each frame's bounds, the fps and the most frames
sampled, so that the script runs the plan and not qwen_vl_utils' defaults. ms-swift reads them from the environment
by their upper-case names over qwen_vl_utils' module constants (get_env_args, swift/utils/utils.py:267-280):
4.6.0 swift/model/models/qwen.py:708-754 patch_qwen_vl_utils (min_pixels, max_pixels, video_min_pixels,
video_max_pixels, fps as a float, fps_max_frames; with VIDEO_MAX_PIXELS it sets VIDEO_TOTAL_PIXELS to 90% of 128,000
tokens' pixels, :711-713, which only lowers a long video's frames); the same keys at v3.3.0 swift/llm/model/model/
qwen.py:495-502. An InternVL image's tile cap is MAX_NUM (4.6.0 swift/template/templates/internvl.py:28, default 12;
v3.0.0 swift/llm/template/template/internvl.py:40). v3.0.0 reads FPS as an int (swift/llm/template/vision_utils.py:288), so the 3 line is written a
whole fps only."""

from __future__ import annotations

import json

from planner.config.spec import Goal, Plan
from planner.frameworks.swift.writer_rollout import OLD_WORDS


def writes_media(plan: Plan) -> bool:
    """Every written line's script takes the images' pixel and tile caps and the videos' (planner.export.launch)."""
    return True


def media_env(goal: Goal | None, line: str = "") -> list[tuple[str, str]]:
    """[(name, value)] of the image caps (pixels or tiles), then the video's."""
    if goal is None:
        return []
    out = [("MAX_PIXELS", str(goal.pixels[1])), ("MIN_PIXELS", str(goal.pixels[0]))] if goal.pixels else []
    out += [("MAX_NUM", str(goal.tiles))] if goal.tiles else []
    if goal.video is None:
        return out
    low, high, fps, frames = goal.video
    out += [("VIDEO_MAX_PIXELS", str(high)), ("VIDEO_MIN_PIXELS", str(low))]
    if fps == int(fps) or line != "3":
        out.append(("FPS", f"{fps:g}"))
    return out + [("FPS_MAX_FRAMES", str(frames))]


def writes_limit(plan: Plan) -> bool:
    """Whether the script gives the rollout vLLM's limit_mm_per_prompt (planner.export.launch asks): a colocated
    engine's (vllm_limit), and at the 3.4 line (written in 3.4.x's words: writer_rollout.OLD_WORDS) the engine on a GPU
    of its own too, which the trainer builds with it (v3.4.1 swift/trainers/rlhf_trainer/grpo_trainer.py:499; the flag
    from v3.4.0 swift/trainers/arguments.py:153); a rollout server (`swift rollout`) takes its own, not written here."""
    return plan.workload.generation == "vllm-colocate" or plan.knobs.release in OLD_WORDS


def vllm_limit(plan: Plan, goal: Goal | None) -> list[tuple[str, str]]:
    """--vllm_limit_mm_per_prompt of a GRPO plan's colocated vLLM rollout where a row was planned to hold more than one
    image or video (Goal.images, Goal.videos): a JSON object ms-swift parses (4.6.0 swift/rlhf_trainers/
    args_mixin.py:45, 59-60) and hands the engine (rollout_mixin.py:517), which refuses a prompt with more; the
    engine takes a row's images and videos (swift/infer_engine/vllm_engine.py:468-483). A rollout server takes its
    own (`swift rollout`), not written here."""
    if goal is None or plan.workload.kind != "grpo" or plan.workload.generation == "hf" or not writes_limit(plan):
        return []
    limit = {k: n for k, n in (("image", goal.images), ("video", goal.videos)) if n is not None and n > 1}
    return [("vllm_limit_mm_per_prompt", json.dumps(limit))] if limit else []
