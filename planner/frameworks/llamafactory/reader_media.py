"""LLaMA-Factory's images and videos as its reader plans them (planner/frameworks/llamafactory/reader.py hands each
YAML's keys here): the tower's and projector's freeze switches and what LoRA reaches in the tower, one image a row at
image_max_pixels (its tokens, or over cutoff_len a pixel bound), and one video a row at the worst case its frame
sampling allows. Cited at v0.9.5 (src/llamafactory/...) unless a release line says otherwise."""

from __future__ import annotations

from planner.errors import BadInput
from planner.frameworks.llamafactory.keys import KEYS
from planner.frameworks.llamafactory.reader_keys import look
from planner.intake import media, modelconfig
from planner.intake.collect import Collector, as_bool, as_float, as_int, assumption
from planner.intake.flags import Flag
from planner.model import catalog
from planner.model import video_rules as vr

VISION_KEYS = (
    KEYS.key("frozen_vision"),
    KEYS.key("frozen_projector"),
    KEYS.key("max_pixels"),
    "video_max_pixels",
)


def _named_targets_tower(c: Collector, frozen: bool | None, source: str) -> None:
    """lora_target names (not all) beside freeze_vision_tower: LLaMA-Factory drops every tower module from them while
    the tower is frozen (src/llamafactory/model/adapter.py:213 patch_target_modules, model_utils/visual.py:196-211);
    unfrozen, the names reach the tower's modules that match them, which is not planned."""
    s = c.setting("lora_targets")
    if frozen is None or s is None or s.value == "all-linear":
        return
    if frozen:
        c.set(
            "lora_vision",
            False,
            f"{source} (no tower module takes the lora_target names: adapter.py:213)",
            KEYS.key("frozen_vision"),
        )
    else:
        c.note(
            f"{source} (LoRA on the tower's modules that the lora_target names match is not planned: planned on the language model's)"
        )


def vision(c: Collector, f: dict[str, Flag], lora: bool) -> None:
    """A VLM's freeze switches (with LoRA: what its targets reach in the tower; without: the frozen parts), the image
    a row at image_max_pixels and the video a row its frame sampling says, where the model has a tower."""
    if not modelconfig.tower_known(c, f, VISION_KEYS):
        return
    tower, tsrc = look(c, f, "frozen_vision")
    if lora and KEYS.key("frozen_vision") in f:
        why = (
            "LoRA's targets then take the tower's modules too: src/llamafactory/model/model_utils/visual.py:196-211, "
            "misc.py:40-41"
        )
        modelconfig.lora_tower(c, tower, tsrc, KEYS.key("frozen_vision"), why)
        _named_targets_tower(c, as_bool(tower), tsrc)
    proj, psrc = look(c, f, "frozen_projector")
    llm, lsrc = look(c, f, "frozen_language")
    if not lora:
        frozen, note = modelconfig.frozen_value(as_bool(tower), as_bool(proj), as_bool(llm))
        c.fact("frozen", frozen, f"{tsrc}; {psrc}; {lsrc}", KEYS.key("frozen_vision"))
        if note:
            c.note(f"{psrc} ({note})")
    pixels, src = look(c, f, "max_pixels")
    _caps(c, f, as_int(pixels))
    per = modelconfig.pixels_per_token(c.model.config)
    if per and as_int(pixels):
        _image(c, f, as_int(pixels), per, src)
    _video(c, f)


def _caps(c: Collector, f: dict[str, Flag], high: int | None) -> None:
    """image_max_pixels and image_min_pixels kept as the pixel bounds of a flag that counts the images again
    (--images N, --data: planner.intake.media.COUNTED), LLaMA-Factory resizing each image within them
    (src/llamafactory/data/mm_plugin.py:218-235); a floor over the cap is not kept (a bound, never an error)."""
    low = as_int(look(c, f, "min_pixels")[0])
    if high:
        c.derived["max_pixels"] = (media.COUNTED, media.pixel_bound(lambda request: high))
    if high and low and low <= high:
        c.derived["min_pixels"] = (media.COUNTED, media.pixel_bound(lambda request: low))


VIDEO = ("max_frames", "fps", "video_max_pixels", "video_min_pixels")


def _video(c: Collector, f: dict[str, Flag]) -> None:
    """Frame sampling in the files (video_maxlen, video_fps) says the rows hold videos (the dataset alone says how
    many): one video a row, at the worst case LLaMA-Factory samples, min(frames, video_maxlen, duration x
    video_fps) frames each within video_max_pixels (data/mm_plugin.py:237-247, _regularize_images), no image planned
    beside it unless an image key is given. A pixel cap alone (templates set both caps) plans no video; a model
    without a video rule, or a worst case over the cutoff (a bound, not a length: issue 47 item 5), is a line."""
    given = [KEYS.key(n) for n in VIDEO if KEYS.key(n) in f]
    if not given:
        return
    said = "; ".join(f[k].source for k in given)
    sampled = {KEYS.key("max_frames"), KEYS.key("fps")} & set(given)
    if not sampled or not vr.has_rule(str(c.model.config.get("model_type", ""))):
        c.note(f"{said} (video frames are not planned: no frame sampling set, or not a Qwen2-VL / Qwen2.5-VL model)")
        return
    values = {n: look(c, f, n) for n in VIDEO}
    low, high = as_int(values["video_min_pixels"][0]), as_int(values["video_max_pixels"][0])
    tokens, _ = vr.worst_case_tokens(None, as_float(values["fps"][0]), as_int(values["max_frames"][0]), low, high)
    seq = c.get("workload.max_length", c.get("seq_len"))
    if isinstance(seq, int) and tokens > seq:
        c.note(f"{said} (a video's worst case, {tokens} tokens, is over the cutoff {seq}: a bound, not planned)")
        return
    c.assume_media("videos", 1, assumption(f"{said}: one video a row, the dataset decides; give --videos N"), "videos")
    for name, (value, src) in values.items():
        c.set(name, as_float(value) if name == "fps" else as_int(value), src, KEYS.key(name))
    if KEYS.key("max_pixels") not in f and c.setting("image_tokens") is not None:
        c.drop("image_tokens")  # the default image stood for the rows' media


def _image(c: Collector, f: dict[str, Flag], pixels: int, per: int, src: str) -> None:
    """One image a row at image_max_pixels: its tokens where they fit the cutoff; over it, the cap is a bound, not a
    count (issue 47 item 5): the images' tokens are inserted before the row is cut at cutoff_len
    (src/llamafactory/data/processor/supervised.py:62 process_messages, then :73-78 infer_seqlen), so the tower runs
    on the image's patches and the text is cut after them (planned as --images 1 under the pixel bounds)."""
    tokens, seq = pixels // per, c.get("seq_len")
    why = f"{src} (one image a row: {pixels} // {per} pixels a token, src/llamafactory/data/mm_plugin.py:218-235)"
    if not isinstance(seq, int) or tokens <= seq:
        c.assume_media("image_tokens", tokens, why, KEYS.key("max_pixels"))
        return
    low, lsrc = look(c, f, "min_pixels")
    c.assume_media(
        "images", 1, f"{why}; over cutoff_len {seq}: a bound, the tower on its patches, the text cut", "image"
    )
    c.set("max_pixels", pixels, src, KEYS.key("max_pixels"))
    if as_int(low):
        c.set("min_pixels", as_int(low), lsrc, KEYS.key("min_pixels"))


def thinker_alone(c: Collector, source: str) -> None:
    """LLaMA-Factory loads a whole Omni and keeps its thinker alone (0.9.5 src/llamafactory/model/loader.py:173-174):
    a config.json that builds the talker (enable_audio_output true: planner/model/omnitalker.py) would be planned
    with it, so it is refused in one line naming the edit that plans the thinker."""
    try:
        resident = c.model is not None and catalog.load_model(c.model.ref).resident_params() > 0
    except BadInput:  # a config the plan refuses anyway, in its own line
        return
    if resident:
        raise BadInput(
            f"{source}: LLaMA-Factory keeps the Omni's thinker alone (src/llamafactory/model/loader.py:173-174), and "
            f"{c.model.ref} builds its talker (enable_audio_output true): set enable_audio_output false "
            "there, or name the catalog thinker (qwen2.5-omni-7b, qwen3-omni-30b-a3b)",
            "model",
        )
