"""verl's images of an RL run (reader.py reads the rest): the processor's pixel bounds and vLLM's limit on images a
prompt, each read as verl 0.9.1 takes it (paths under verl/ unless said), and verl's own pixel bounds where the files
name images but set none (own_bounds)."""

from __future__ import annotations

from planner.frameworks import mmlimit
from planner.frameworks.verl.keys import KEYS
from planner.intake.collect import Collector, as_int, default, one
from planner.intake.flags import Flag
from planner.model import images

VERL = "verl 0.9.1"

MM = "data.mm_processor_kwargs."  # the processor's kwargs (0.9.1 trainer/config/data/legacy_data.yaml:121-122)
ROLLOUT = "actor_rollout_ref.rollout."
# vLLM's images a prompt: rollout.limit_images (workers/config/rollout.py:257) over the engine kwargs' own
# limit_mm_per_prompt (workers/rollout/vllm_rollout/vllm_async_server.py:287-290; 0 or null leaves the kwargs')
LIMITS = (KEYS.key("images"), *(ROLLOUT + "engine_kwargs.vllm.limit_mm_per_prompt" + k for k in (".image", "")))
ACCEPTED = f"a whole number ({LIMITS[0]}=4, {LIMITS[1]}=4) or a JSON object with image"
# the dataset's column of a row's images, "images" where unset (trainer/config/data/legacy_data.yaml:95,
# utils/dataset/rl_dataset.py:109; the same from v0.4.0, v0.3.0.post1 rl_dataset.py:85): the files naming it say
# the rows hold images (a column of that name in a dataset the files do not name is fed too: not read, no image)
IMAGE_KEY = "data.image_key"
# what sizes each image where the files set no bound: the rollout's qwen_vl_utils fetch_image, at most 16,384 tokens
# of (patch x 2)^2 pixels an image (qwen_vl_utils 0.0.14 vision_process.py:27,132; 0.0.10 MAX_PIXELS 16384 * 28 *
# 28; verl's own process_image from v0.4.0, v0.7.0 utils/dataset/vision_utils.py:23-31), then the processor that
# AutoProcessor.from_pretrained builds from the checkpoint (its preprocessor_config.json, the same cap for the
# Qwen-VL checkpoints: planner.model.image_rules; built at workers/config/model.py:162)
OWN_CAP = (
    "utils/dataset/rl_dataset.py:453-457 qwen_vl_utils fetch_image; utils/tokenizer/tokenizer.py:196 "
    "AutoProcessor.from_pretrained(checkpoint), its preprocessor_config.json"
)
QWEN_ONLY = "memplan sizes a verl run's images for the Qwen-VL families only"
OTHERS = f"{VERL} passes vLLM videos and audios too (workers/rollout/vllm_rollout/vllm_async_server.py:636-642)"
OTHERS += "; memplan reads no video or audio rows from a verl run"


def images_of(c: Collector, f: dict[str, Flag]) -> None:
    """The processor's pixel bounds (writer_rl.media_overrides), else verl's own where the files name images
    (own_bounds): one image a row within them (the dataset says how many), or up to vLLM's limit (LIMITS: the rollout
    refuses more), their tokens part of data.max_prompt_length (the agent loop refuses a longer prompt:
    experimental/agent_loop/agent_loop.py:351-360), so planned at most at it (planner.frameworks.mmlimit). Only both
    bounds set the Qwen-VL processor's size (transformers 5.10.4 models/qwen2_vl/image_processing_qwen2_vl.py:132-133):
    one alone is a line."""
    low, high = f.get(MM + "min_pixels"), f.get(MM + "max_pixels")
    limit = next((f[k] for k in LIMITS if k in f and one(f[k].value) not in (None, 0, "null")), None)
    named = f.get(IMAGE_KEY) if one(getattr(f.get(IMAGE_KEY), "value", None)) not in (None, "", "null") else None
    both = low is not None and high is not None
    if not both and (low or high):
        c.note(f"{(low or high).source} (one bound alone leaves the processor's size: not planned)")
    bounds = _given(low, high) if both else own_bounds(c, named or limit)
    why = QWEN_ONLY if not both and (named or limit) and bounds is None else "no image is planned for this run"
    _limit_notes(c, f, bounds is not None, why)
    if bounds is None:
        if named is not None and not both:
            c.note(f"{named.source} (images not planned: {why})")
        return
    said = high.source if both else (named or limit).source
    if limit is None:
        key = "images" if both else IMAGE_KEY
        c.assume_media("images", 1, f"{said} (memplan assumption: one image a row, the dataset decides)", key)
    else:
        n = mmlimit.image_limit(one(limit.value), limit.source, ACCEPTED)
        c.set("images", n, f"{limit.source} (up to {n} a row: vLLM refuses more, the dataset decides)", limit.key)
    (lo, lo_source), (hi, hi_source) = bounds
    c.set("min_pixels", lo, lo_source, MM + "min_pixels")
    c.set("max_pixels", hi, hi_source, MM + "max_pixels")
    rule = images.family_rule(str(c.model.config.get("model_type", ""))) if c.model is not None else None
    if rule in images.PIXEL_RULES and lo and hi:
        each = images.worst_case(rule, lo, hi)[0]
        mmlimit.cap_row_images(c, each, f"{VERL} refuses a prompt past data.max_prompt_length, images included")


def _given(low: Flag, high: Flag) -> tuple:
    """The files' bounds, each (pixels, source)."""
    return (as_int(one(low.value)), low.source), (as_int(one(high.value)), high.source)


def own_bounds(c: Collector, said: Flag | None) -> tuple | None:
    """verl's own pixel bounds, each (pixels, source), where the files name images (`said`: data.image_key or an
    image limit) and set no processor kwargs: the family's checkpoint bounds (planner.model.images.PIXEL_RULES),
    which qwen_vl_utils' cap of 16,384 tokens an image meets (OWN_CAP); None where nothing names images, or for a
    model whose family memplan restates no pixel rule of (QWEN_ONLY: a line)."""
    if said is None:
        return None
    rule = images.family_rule(str(c.model.config.get("model_type", ""))) if c.model is not None else None
    if rule not in images.PIXEL_RULES:
        return None
    factor, lo, hi = images.PIXEL_RULES[rule]
    tokens = f"{hi // (factor * factor):,} tokens of {factor} x {factor} pixels"
    return (lo, default(VERL, OWN_CAP, f"min_pixels {lo:,}")), (
        hi,
        default(VERL, OWN_CAP, f"max_pixels {hi:,}, {tokens}"),
    )


def _limit_notes(c: Collector, f: dict[str, Flag], planned: bool, why: str) -> None:
    """Lines for what plans nothing: vLLM's limit's keys but image (OTHERS), all of it where no image is planned
    (`why`); data.video_key (OTHERS)."""
    if LIMITS[2] in f:
        mmlimit.note_others(c, one(f[LIMITS[2]].value), f[LIMITS[2]].source, OTHERS)
    for key in sorted(k for k in f if k.startswith(LIMITS[2] + ".") and k != LIMITS[1]):
        c.note(f"{f[key].source} ({key.rsplit('.', 1)[1]} of limit_mm_per_prompt not planned: {OTHERS})")
    for key in [] if planned else [k for k in LIMITS if k in f]:
        c.note(f"{f[key].source} (not planned: {why})")
    if "data.video_key" in f:
        c.note(f"{f['data.video_key'].source} (not planned: {OTHERS})")
