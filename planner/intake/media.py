"""The media a check --config plan assumed a row holds, as its verdict's condition (issue 47 items 5 and 6). Where a
reader set a row's image or video count that the files do not say (Collector.assume_media, Reading.media_assumed: one
image a row at the pixel cap, one video a row at its frame settings), the verdict holds for such rows only: a row
with more images, or with a video, needs more memory (field run swift-2753: a Qwen2-VL LoRA planned at one image a
row of 768 tokens ran out of memory on rows of about 34,000 patches). Said once, as an open length is: a condition
with the flags that replace it. None where the user's flags (--images, --image-tokens, --tokens-per-image,
--videos) or --data give the count. The files' pixel caps a reader keeps for such a flag (COUNTED, pixel_bound)."""

from __future__ import annotations

from planner.model import images

# the flags that say what a row holds (planner.intake.IMAGE_COUNTS drops the read count under them; --data's rows
# carry their own images and videos): any of them, and the row's media are the user's, not an assumption
TOLD = ("images", "image_tokens", "tokens_per_image", "videos", "data")
GIVE = "give --images N, --videos N or --data"
OWN = ("images", "image", "videos")  # a count's key that is memplan's own name, not the files': not shown


def condition(reading, body: dict, flags: dict, goal) -> dict | None:
    """{images_per_row, tokens_per_image, videos, source, condition} for the counts `reading` assumed that no flag in
    `flags` gives (the planned request `body`, the goal it was planned for); None where none is left, or where the
    plan holds no image token (planned text only: the headline says that instead)."""
    read = {s.field: s for s in reading.settings}
    kept = [f for f in reading.media_assumed if f in read]
    if not kept or any(t in flags for t in TOLD) or not (goal.image_tokens or goal.tower_tokens):
        return None
    image = next((f for f in kept if f != "videos"), None)
    videos = 1 if "videos" in kept else 0
    each = _tokens_per_image(image, body, goal) if image else None
    kinds = " and ".join(k for k, on in (("images", image), ("videos", "videos" in kept)) if on)
    parts = ["one image" + (f" of at most {each:,} tokens" if each else "")] if image else []
    parts += ["one video at the worst case of its frame settings"] if "videos" in kept else []
    keys = ", ".join(dict.fromkeys(read[f].key for f in kept if read[f].key not in OWN))
    more = {"images": "more images, or with videos,", "videos": "more videos, or with images,"}.get(kinds)
    text = (
        f"the files do not say how many {kinds} a row holds: planned for {' and '.join(parts)}"
        f"{f' ({keys})' if keys else ''}; rows with {more or 'more images or videos'} are not planned: {GIVE}"
    )
    return {
        "images_per_row": 1 if image else 0,
        "tokens_per_image": each,
        "videos": videos,
        "source": "; ".join(read[f].source for f in kept),
        "condition": text,
    }


def _tokens_per_image(field: str, body: dict, goal) -> int | None:
    """One image's tokens: the row's image tokens read (derived again where a flag changed the model), else the
    goal's, where no video shares them (the tower's, before a cut at the row's length)."""
    if field == "image_tokens" and body.get("image_tokens"):
        return int(body["image_tokens"])
    if goal.videos:
        return None
    return int(goal.tower_tokens or goal.image_tokens) or None


# the flags that count a row's images again (--images N, or --data's rows): a reader keeps its files' pixel caps for
# them as derived fields (Reading.derived), so that each image is sized within the files' cap (the user has the last
# word on the count, the files on each image's cap; a cap is a bound, never an error against the length: issue 47)
COUNTED = ("images", "data")


def counted(request: dict) -> bool:
    """Whether the final request sizes its images by a rule (--images N alone, or --data), not by tokens given."""
    return request.get("tokens_per_image") is None and request.get("image_tokens") is None


def pixel_bound(bound):
    """A pixel bound the files set (`bound`: the final request -> pixels), kept where the final model's image rule
    has a pixel budget (qwen2-vl, qwen3-vl: planner.model.images.PIXEL_RULES) and the images are sized by it
    (counted); else None."""

    def value(request: dict) -> int | None:
        from planner.intake import models  # the readers import this module: the catalog once they are built

        m = models.lookup(str(request.get("model", "")), None)
        rule = images.family_rule(str(m.config.get("model_type"))) if m is not None else None
        return bound(request) if rule in images.PIXEL_RULES and counted(request) else None

    return value
