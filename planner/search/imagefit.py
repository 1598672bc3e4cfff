"""Images planned from the processor's settings instead of a token count (`--images N` without --tokens-per-image
or --data): each image at the worst case its family's rule admits under --image-rule, --min-pixels and --max-pixels
(planner.model.images), said in the answer, and for a configuration that does not fit then, the largest square
image at which it still does (every image at that size), as the data path names the longest row that fits.

Where the framework deletes a row whose tokens pass the length (images_within_length, read from its files), the N
images of a row that runs share that length: planned at min(N x the worst case, the length) tokens together, never cut
after the tower (ImageBudget.shared). Every tower term counts a sample's image tokens together (planner.estimate.vision:
the linear ones per patch, the eager and masked attention over all of them, as over one image), so this is the
hungriest split of the shared tokens, one image holding them all, and no term has a per-image cost that N images of
length / N tokens would pass.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.errors import BadInput
from planner.model import images
from planner.model.modelspec import ModelSpec
from planner.search.lengths import longest_fitting, with_image_tokens

MAX_SIDE = 8192  # square images tried up to this side (pixels)


def text_only(model: ModelSpec, goal) -> bool:
    """A VLM planned without a single image token (issue 47 item 5: the headline and the JSON, CheckResult.text_only,
    say so, for every face)."""
    return getattr(model, "vision", None) is not None and not goal.image_tokens and not goal.tower_tokens


@dataclass(frozen=True)
class ImageBudget:
    rule: str
    images: int  # per sample
    tokens_per_image: int  # the worst case
    size: tuple[int, int]  # an image (width, height) that gives it
    min_pixels: int | None = None
    max_pixels: int | None = None
    any_size: bool = False  # the rule gives every image the same count (llava, gemma3, mllama, fixed:N)
    shared: int | None = None  # the row's length its images share where a longer row is deleted and N x tokens pass it

    def tokens(self, each: int) -> int:
        """A row's image tokens at `each` an image: N x each, within the shared length where a longer row is deleted."""
        n = self.images * each
        return min(n, self.shared) if self.shared else n

    def json(self) -> dict:
        shared = {"shared_length": self.shared} if self.shared else {}
        return {
            "rule": self.rule,
            "images": self.images,
            "tokens_per_image": self.tokens_per_image,
            "worst_case_size": list(self.size),
            "min_pixels": self.min_pixels,
            "max_pixels": self.max_pixels,
            "any_size": self.any_size,
            **shared,
        }


def budget(req, model: ModelSpec) -> ImageBudget | None:
    """The worst case of `--images N` alone (None when the request gives its image tokens, or data)."""
    pixels = req.min_pixels is not None or req.max_pixels is not None
    if req.images is None or req.tokens_per_image is not None:
        if pixels and req.data is None:
            raise BadInput(
                "--min-pixels / --max-pixels size the images of --data, or of --images N alone (no --tokens-per-image)",
                "max_pixels",
            )
        return None
    if req.data is not None:
        raise BadInput(
            f"--images {req.images} with --data: the data's own images are counted (leave --images out)", "images"
        )
    if model.vision is None:
        raise BadInput(f"--images {req.images}: model {model.name!r} has no vision tower", "images")
    rule = req.image_rule or images.family_rule(model.model_type)
    if rule is None:
        raise BadInput(
            f"--images {req.images}: give --tokens-per-image, or --image-rule ({model.name!r} has no image rule of its "
            f"own; accepted: {images.IMAGE_RULES}, fixed:N)",
            "tokens_per_image",
        )
    if pixels and rule not in images.PIXEL_RULES:
        raise BadInput(
            f"--min-pixels / --max-pixels: the {rule} rule has no pixel budget (qwen2-vl, qwen3-vl)", "max_pixels"
        )
    if req.min_pixels and req.max_pixels and req.min_pixels > req.max_pixels:
        raise BadInput(f"--min-pixels {req.min_pixels} is over --max-pixels {req.max_pixels}", "min_pixels")
    tokens, size = images.worst_case(rule, req.min_pixels, req.max_pixels)
    count = images.image_rule(rule, req.min_pixels, req.max_pixels)
    same = all(count(w, h) == tokens for w in images.SIDES for h in images.SIDES)
    room = req.workload.prompt_tokens() if req.workload.kind == "grpo" else req.seq_len  # what a GRPO prompt holds
    shared = room if req.images_within_length and req.images * tokens > room else None
    return ImageBudget(rule, req.images, tokens, size, req.min_pixels, req.max_pixels, same, shared)


def largest_square(plan, model: ModelSpec, hw, goal, b: ImageBudget) -> dict | None:
    """For a plan that does not fit at the worst case: the largest square image (every image of a sample that size)
    at which it fits, {"side", "tokens_per_image"}; None when not even the smallest does. Tokens grow with the side,
    and the peak with the tokens: a bisection over the sides whose token count changes."""
    rule = images.image_rule(b.rule, b.min_pixels, b.max_pixels)
    sides, last = [], None
    for side in range(14, MAX_SIDE + 1, 14):
        t = rule(side, side)
        if t != last:
            sides.append((side, t))
            last = t

    def fits(i: int) -> bool:  # a GRPO prompt shrinks with its images (lengths.with_image_tokens)
        n = b.tokens(sides[i][1])
        return n <= goal.seq_len and with_image_tokens(plan, model, hw, goal, n).fits

    if not fits(0):
        return None
    lo, hi = 0, len(sides)  # fits(lo) holds; hi is past the end or does not fit
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    side = sides[lo + 1][0] - 1 if lo + 1 < len(sides) else MAX_SIDE
    while rule(side, side) != sides[lo][1]:  # the count changed between two tried sides: its last side
        side -= 1
    return {"side": side, "tokens_per_image": sides[lo][1]}


def most_images(plan, model: ModelSpec, hw, goal, each: int, text_cut: bool = False) -> tuple[int, bool]:
    """For a plan that fits with one image of `each` tokens a row, the files leaving the count open
    (planner.intake.media.condition): (the most such images a row holds with the plan still fitting, whether the
    row's length allows no more). Where the length holds the images' tokens (cut or deleted past it), more images
    leave less text within it; where it cuts the text alone (`text_cut`: ms-swift 2.x to 3.3, the images' tokens
    inserted after), each image lengthens the row, up to the model's context (lengths.longest_fitting's bisection)."""
    text = goal.seq_len - each if text_cut else 0
    room = model.text.max_positions - text if text_cut else goal.seq_len
    top = max(1, room // max(1, each))

    def fits(k: int) -> bool:
        n = k * each
        return k <= 1 or with_image_tokens(plan, model, hw, goal, n, **({"seq_len": text + n} if text_cut else {})).fits

    k = longest_fitting(fits, top)
    return k, k == top


def with_cut(out: dict, goal) -> dict:
    """The answer's images with the cut, where the worst case is over the length: the tower runs on every patch and
    the text is cut after it (planner.config.spec.Goal.tower_tokens); how to keep the images whole, in the rule's knob."""
    if goal.tower_tokens <= goal.image_tokens:
        return out
    hint = images.fewer_tokens(out["rule"], out["images"], goal.seq_len)
    return {**out, "tower_tokens": goal.tower_tokens, "cut_at": goal.seq_len, "to_keep_whole": hint}


def verdict(b: ImageBudget, plan, model: ModelSpec, hw, goal) -> dict:
    out = with_cut(b.json(), goal)
    if not plan.fits and plan.token_batches is None:
        out["fits_up_to"] = largest_square(plan, model, hw, goal, b)
    return out


def lines(d: dict) -> list[str]:
    """The answer's lines for the CLI."""
    w, h = d["worst_case_size"]
    pixels = _cap(d)
    head = (
        f"images: {d['images']} a sample, {d['tokens_per_image']:,} tokens each whatever its size ({d['rule']} rule)"
        if d["any_size"]
        else f"images: {d['images']} a sample at the {d['rule']} rule's worst case{pixels}, {d['tokens_per_image']:,} "
        f"tokens an image (a {w}x{h} image gives that many)"
    )
    out = [head]
    if "shared_length" in d:
        out.append(
            f"at the worst case the images are {d['images'] * d['tokens_per_image']:,} tokens, over the row's "
            f"{d['shared_length']:,}: a longer row is deleted, so a row that runs holds at most {d['shared_length']:,} "
            "image tokens, planned at that many (the tower's terms count them together, as one image's)"
        )
    if "cut_at" in d:
        out.append(
            f"at the worst case the images are {d['tower_tokens']:,} tokens, over --seq-len {d['cut_at']:,}: the "
            f"tower runs on all their patches, then the text is cut at {d['cut_at']:,}; to keep them whole, "
            f"{d['to_keep_whole']}"
        )
    if "fits_up_to" in d:
        up = d["fits_up_to"]
        out.append(
            "it does not fit with images of any size"
            if up is None
            else f"this configuration fits images up to {up['side']}x{up['side']} ({up['tokens_per_image']:,} tokens "
            "an image); larger ones run out of memory"
        )
    return out


def _cap(d: dict) -> str:
    """The pixel cap the images were planned at, for the line: the one given, else a Qwen rule's own, the checkpoints'
    preprocessor_config.json (planner.model.images.PIXEL_RULES: what from_pretrained runs where the script sets none)."""
    if d.get("max_pixels"):
        return f", max_pixels {d['max_pixels']:,}"
    if d["rule"] in images.PIXEL_RULES:
        return (
            f", max_pixels {images.PIXEL_RULES[d['rule']][2]:,} (the checkpoint's processor; --max-pixels sets yours)"
        )
    return ""
