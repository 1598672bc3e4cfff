"""ms-swift's videos (planner/frameworks/swift/reader.py hands each run's environment here): one video a row where the
environment sets its frame sampling (FPS, FPS_MAX_FRAMES), at qwen_vl_utils' frame and pixel settings, and the
environment's video caps kept for --videos N. Moved out of reader_media.py (stop 71), whose vLLM row limit it takes."""

from __future__ import annotations

from planner.frameworks.swift.reader_media import LIMIT, up_to
from planner.intake.collect import Collector, as_float, as_int, assumption, default
from planner.model import video_rules as vr

# a video's settings (writer_media: ms-swift's environment over qwen_vl_utils' constants) and their defaults there,
# the video processor's (qwen-vl-utils 0.0.10 src/qwen_vl_utils/vision_process.py:30-35; planner.model.video_rules)
VIDEO_ENV = {
    "video_min_pixels": ("VIDEO_MIN_PIXELS", vr.MIN_PIXELS, 30),
    "video_max_pixels": ("VIDEO_MAX_PIXELS", vr.MAX_PIXELS, 31),
    "fps": ("FPS", vr.FPS, 33),
    "max_frames": ("FPS_MAX_FRAMES", vr.MAX_FRAMES, 35),
}


def _video_caps(c: Collector, env: dict[str, str], release) -> None:
    """The environment's video settings (VIDEO_ENV), kept for --videos N given beside files that plan no video (no
    frame sampling set): each derived where the environment sets it. Up to 2.x a video's frame cap is VIDEO_MAX_PIXELS,
    else MAX_PIXELS, its other name (v2.5.2 and v2.6.1 swift/llm/utils/vision_utils.py:315 get_env_args
    ('video_max_pixels', int, None, ['max_pixels'])); from 3.x VIDEO_MAX_PIXELS alone (v3.4.0
    swift/llm/model/model/qwen.py:537-545). A cap under the floor is lifted to 1.05 x it, as qwen_vl_utils does
    (qwen-vl-utils 0.0.10 src/qwen_vl_utils/vision_process.py:289): a bound, never an error (issue 47)."""
    values = {f: env[k] for f, (k, _, _) in VIDEO_ENV.items() if k in env}
    if release.name == "2" and "video_max_pixels" not in values and "MAX_PIXELS" in env:
        values["video_max_pixels"] = env["MAX_PIXELS"]
    read = {f: as_float(v) if f == "fps" else as_int(v) for f, v in values.items()}
    low, high = read.get("video_min_pixels") or vr.MIN_PIXELS, read.get("video_max_pixels")
    if high is not None and high < low:
        read["video_max_pixels"] = int(low * 1.05)
    for f, v in read.items():
        if v is not None:
            c.derived[f] = (("videos",), lambda request, v=v: v)


def video(c: Collector, env: dict[str, str], where: str, release, limit: tuple[int, str] | None = None) -> None:
    """One video a row where the environment sets its frame sampling (FPS or FPS_MAX_FRAMES; the dataset says how
    many), at the worst case of the settings given or qwen_vl_utils' (VIDEO_ENV), for a Qwen2-VL / Qwen2.5-VL model:
    its frames within VIDEO_MIN_PIXELS / VIDEO_MAX_PIXELS, from 4.0 also within 90% of 128,000 tokens' pixels
    (VIDEO_TOTAL_PIXELS, v4.0.0 swift/model/models/qwen.py:657-659). Up to 3.3 the video's tokens are inserted after
    --max_length's text and a line says so; a cap alone, or another model, is a line too. A colocated vLLM rollout's
    --vllm_limit_mm_per_prompt video (`limit`: limits' video) puts up to N videos in a row."""
    given = [f"{where} {k}={env[k]}" for k, _, _ in VIDEO_ENV.values() if k in env]
    said = "; ".join(given)
    _video_caps(c, env, release)
    mt = str(c.model.config.get("model_type", "")) if c.model is not None else ""
    if not {"FPS", "FPS_MAX_FRAMES"} & set(env) or not vr.has_rule(mt):
        if given or limit:
            why = "no frame sampling set, or not a Qwen2-VL / Qwen2.5-VL model"
            said = "; ".join([*given, *([f"{limit[1]} (video {limit[0]})"] if limit else [])])
            c.note(f"{said} (video frames are not planned: {why})")
        return
    said += f"; {up_to(limit, 'video')}" if limit else ""
    if release.means("swift_max_length_counts") == "text":
        c.note(f"{said} (ms-swift {release.name}.x inserts the video's tokens after --max_length: not planned)")
        return
    if limit is not None:
        c.set("videos", limit[0], said, LIMIT)
    else:
        c.assume_media(
            "videos", 1, assumption(f"{said}: one video a row, the dataset decides; give --videos N"), "videos"
        )
    for field, (k, fallback, line) in VIDEO_ENV.items():
        value = env.get(k, fallback)
        cite = f"src/qwen_vl_utils/vision_process.py:{line}, no {k} in the environment"
        src = f"{where} {k}={value}" if k in env else default("qwen-vl-utils 0.0.10", cite, f"{k} {value}")
        c.set(field, as_float(value) if field == "fps" else as_int(value), src, k)
    if release.name == "4":  # VIDEO_TOTAL_PIXELS: set beside VIDEO_MAX_PIXELS, else qwen_vl_utils' own, the same
        cite = "v4.0.0 swift/model/models/qwen.py:657-659; qwen-vl-utils 0.0.10 src/qwen_vl_utils/vision_process.py:40"
        what = "each frame within an even share of 90% of 128,000 tokens' pixels"
        c.set("video_pixel_cap", True, default("ms-swift v4.0.0 .. 4.6.0", cite, what), "VIDEO_TOTAL_PIXELS")
    low, high = c.setting("video_min_pixels"), c.setting("video_max_pixels")
    if high.value < low.value:  # qwen_vl_utils lifts a cap under the floor (src/qwen_vl_utils/vision_process.py:289)
        why = f"under VIDEO_MIN_PIXELS {low.value}: qwen_vl_utils raises it to 1.05 x that, qwen-vl-utils 0.0.10 "
        c.set("video_max_pixels", int(low.value * 1.05), f"{high.source} ({why}vision_process.py:289)", high.key)
    if "MAX_PIXELS" not in env:  # the default image stood for the rows' media
        c.drop("image_tokens")
        c.derived.pop("image_tokens", None)
