"""vLLM's limit_mm_per_prompt wherever memplan reads a vLLM rollout whose rows the training takes whole (LMM-R1's
--limit_mm_per_prompt, planner.frameworks.openrlhf.lmmr1; verl's actor_rollout_ref.rollout.limit_images,
planner.frameworks.verl.reader; ms-swift's --vllm_limit_mm_per_prompt, planner.frameworks.swift.reader_media; TRL
v1.9.0 hands vLLM none, trl/generation/vllm_generation.py:351-367): the images a row may hold, and the image tokens
planned in it. Written where a plan's rows hold more than one image or video (Goal.images / videos: verl's
writer_rl.limit_overrides, ms-swift's writer_media.vllm_limit); a limit's keys memplan does not plan for the framework
(LMM-R1's video, which its rollout never passes; verl's video and audio; ms-swift's audio) are named in a line
(note_others).

Cited at vLLM 0.8.3 (LMM-R1's pin, its setup.py):
- a prompt with more items of a modality than its limit is refused (multimodal/processing.py:1086-1092), the limit 1
  where none is given (config.py:2544-2551); vLLM 0.29.0 refuses the same way (multimodal/processing/context.py:
  488-507) with 999 where none is given (config/multimodal.py:104-108, 490-502), so there the dataset decides;
- a prompt of max_model_len tokens or more is refused, image tokens included (v1/engine/processor.py:307-321): a row's
  images are at most what its cap leaves the prompt (verl's and ms-swift's own prompt caps do the same).
So a row's image tokens are min(N x one image's tokens at the pixel cap, the planned prompt) (row_image_tokens).
The engine's memory does not move with N: the profile run takes up to N x max_num_seqs items of the largest size
(v1/worker/gpu_model_runner.py:1506-1545) and the KV cache gets what that peak leaves of the card's
gpu_memory_utilization (v1/worker/gpu_worker.py:182-184): the engine holds that fraction whatever N is."""

from __future__ import annotations

import json

from planner.errors import BadInput

# the fields one way of counting a row's image tokens sets (planner.intake.IMAGE_COUNTS' image_tokens drops them)
PER_IMAGE = ("images", "tokens_per_image", "min_pixels", "max_pixels", "image_rule")


def _parsed(value: object) -> object:
    """A limit_mm_per_prompt value as given, its text parsed as JSON (None for text that is no JSON)."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return None


def image_limit(value: object, source: str, accepted: str, modality: str = "image") -> int:
    """The images (or `modality`'s items) a prompt may hold from a limit_mm_per_prompt value: a JSON object (or its
    text) with that key a whole number >= 0, 1 where it names none (vLLM 0.8.3's default), or a whole number (verl's
    limit_images); anything else is refused in one line naming the value and `accepted`."""
    given = _parsed(value)
    if isinstance(given, dict) and all(isinstance(k, str) and k.isidentifier() for k in given):
        given = given.get(modality, 1)
    if isinstance(given, bool) or not isinstance(given, int) or given < 0:
        field = "images" if modality == "image" else f"{modality}s"
        raise BadInput(f"{source}: {value!r} is not a limit memplan can plan; accepted: {accepted}", field)
    return given


def others(value: object, planned: tuple[str, ...] = ("image",)) -> list[str]:
    """The keys of a limit_mm_per_prompt JSON object other than the `planned` modalities (video, audio, ...), in the
    order given; [] for a whole number or no object."""
    given = _parsed(value)
    return [str(k) for k in given if k not in planned] if isinstance(given, dict) else []


def note_others(c, value: object, source: str, why: str, planned: tuple[str, ...] = ("image",)) -> None:
    """A `not planned:` line on the reading (`c`: planner.intake.collect.Collector) naming the limit's keys other than
    the `planned` ones (others) and `why` they are not planned; nothing where there are none."""
    keys = others(value, planned)
    if keys:
        c.note(f"{source} ({', '.join(keys)} of limit_mm_per_prompt not planned: {why})")


def row_image_tokens(images: int, tokens_per_image: int, prompt_tokens: int) -> int:
    """A row's image tokens: its `images` at the pixel cap's `tokens_per_image`, at most the planned prompt."""
    return min(images * tokens_per_image, prompt_tokens)


def cap_row_images(c, tokens_per_image: int, why: str) -> None:
    """Where the reading's (`c`: planner.intake.collect.Collector, which this stage does not import) images at their worst case (`tokens_per_image`) pass its planned prompt, plan the row's
    image tokens at the prompt instead (row_image_tokens; `why`: what caps the prompt), the per-image fields
    dropped (planner.resolved takes one way of counting); an image count the reading assumed (one image a row, the
    dataset decides: planner.intake.media) leaves the row's image tokens assumed too, the verdict's condition."""
    n, prompt = c.get("images"), c.get("workload.max_prompt_length")
    if not isinstance(n, int) or not isinstance(prompt, int) or n * tokens_per_image <= prompt:
        return
    tokens = row_image_tokens(n, tokens_per_image, prompt)
    counted, assumed = c.setting("images"), "images" in c.assumed_media
    cap = c.setting("max_pixels")  # said in the new setting's source: the reading drops no setting without a line
    at = f" (max_pixels {cap.value:,}: {cap.source})" if cap is not None else ""
    for field in PER_IMAGE:
        c.drop(field)
    (c.assume_media if assumed else c.set)(
        "image_tokens",
        tokens,
        f"{counted.source}; {why}: {n} image(s) of {tokens_per_image:,} tokens at the pixel cap{at} pass the prompt, "
        f"so the row's image tokens are planned at the prompt, {tokens:,}",
        counted.key if assumed else "image_tokens",
    )
