"""verl's images of an RL run (reader.py reads the rest): the processor's pixel bounds and vLLM's limit on images a
prompt, each read as verl 0.9.1 takes it (paths under verl/ unless said)."""

from __future__ import annotations

from planner.frameworks import mmlimit
from planner.frameworks.verl.keys import KEYS
from planner.intake.collect import Collector, as_int, one
from planner.intake.flags import Flag
from planner.model import images

VERL = "verl 0.9.1"

MM = "data.mm_processor_kwargs."  # the processor's kwargs (0.9.1 trainer/config/data/legacy_data.yaml:121-122)
ROLLOUT = "actor_rollout_ref.rollout."
# vLLM's images a prompt: rollout.limit_images (workers/config/rollout.py:257) over the engine kwargs' own
# limit_mm_per_prompt (workers/rollout/vllm_rollout/vllm_async_server.py:287-290; 0 or null leaves the kwargs')
LIMITS = (KEYS.key("images"), *(ROLLOUT + "engine_kwargs.vllm.limit_mm_per_prompt" + k for k in (".image", "")))
ACCEPTED = f"a whole number ({LIMITS[0]}=4, {LIMITS[1]}=4) or a JSON object with image"


def images_of(c: Collector, f: dict[str, Flag]) -> None:
    """The processor's pixel bounds (writer_rl.media_overrides): one image a row within them (the dataset says how
    many), or up to vLLM's limit (LIMITS: the rollout refuses more), their tokens part of data.max_prompt_length (the
    agent loop refuses a longer prompt: experimental/agent_loop/agent_loop.py:351-360), so planned at most at it
    (planner.frameworks.mmlimit). Only both bounds set the Qwen-VL processor's size (transformers 5.10.4
    models/qwen2_vl/image_processing_qwen2_vl.py:132-133): one alone is a line."""
    low, high = f.get(MM + "min_pixels"), f.get(MM + "max_pixels")
    _limit_notes(c, f, low is not None and high is not None)
    if low is None or high is None:
        if low or high:
            c.note(f"{(low or high).source} (one bound alone leaves the processor's size: not planned)")
        return
    limit = next((f[k] for k in LIMITS if k in f and one(f[k].value) not in (None, 0, "null")), None)
    if limit is None:
        c.assume_media(
            "images", 1, f"{high.source} (memplan assumption: one image a row, the dataset decides)", "images"
        )
    else:
        n = mmlimit.image_limit(one(limit.value), limit.source, ACCEPTED)
        c.set("images", n, f"{limit.source} (up to {n} a row: vLLM refuses more, the dataset decides)", limit.key)
    lo, hi = as_int(one(low.value)), as_int(one(high.value))
    c.set("min_pixels", lo, low.source, MM + "min_pixels")
    c.set("max_pixels", hi, high.source, MM + "max_pixels")
    rule = images.family_rule(str(c.model.config.get("model_type", ""))) if c.model is not None else None
    if rule in images.PIXEL_RULES and lo and hi:
        each = images.worst_case(rule, lo, hi)[0]
        mmlimit.cap_row_images(c, each, f"{VERL} refuses a prompt past data.max_prompt_length, images included")


OTHERS = f"{VERL} passes vLLM videos and audios too (workers/rollout/vllm_rollout/vllm_async_server.py:636-642)"
OTHERS += "; memplan reads no video or audio rows from a verl run"


def _limit_notes(c: Collector, f: dict[str, Flag], planned: bool) -> None:
    """Lines for vLLM's limit where it plans nothing: its keys but image (OTHERS); all of it without both bounds."""
    if LIMITS[2] in f:
        mmlimit.note_others(c, one(f[LIMITS[2]].value), f[LIMITS[2]].source, OTHERS)
    for key in sorted(k for k in f if k.startswith(LIMITS[2] + ".") and k != LIMITS[1]):
        c.note(f"{f[key].source} ({key.rsplit('.', 1)[1]} of limit_mm_per_prompt not planned: {OTHERS})")
    for key in [] if planned else [k for k in LIMITS if k in f]:
        c.note(f"{f[key].source} (not planned: images are planned within {MM}min_pixels and max_pixels, not given)")
