"""ms-swift's cap on each Qwen-VL image (reader_media asks): qwen_vl_utils' own where the environment sets none, and
the template's --max_pixels, which rescales an image before qwen_vl_utils sizes it. A token is a merged patch,
(patch x merge)^2 pixels (planner.intake.modelconfig.pixels_per_token).

Each image's cap without MAX_PIXELS: ms-swift resizes it with qwen_vl_utils alone and hands the HF processor
do_resize=False from v3.0.2 (fetch_image then do_resize=False: v3.0.3 swift/llm/template/template/qwen.py:205, 245;
v3.4.1 :216, 243; v3.7.3 :236, 270; v3.12.6 :318, 369; v4.0.0 swift/template/templates/qwen.py:314, 365; v4.5.2 :339,
391), so the processor's own max_pixels never applies; v2.5.2 (swift/llm/utils/template.py:1530-1553, 1611) to v3.0.1
(v3.0.0 swift/llm/template/template/qwen.py:148-171, 222) resize within the same default, then the processor again
within its preprocessor_config.json's max_pixels, 12,845,056 in Qwen2-VL's and Qwen2.5-VL's Instruct checkpoints (not
transformers' class default, 1,280 x 28 x 28): the same cap. qwen_vl_utils' is 16,384 tokens' pixels: MAX_PIXELS =
16384 * 28 * 28 (qwen-vl-utils 0.0.10 src/qwen_vl_utils/vision_process.py), IMAGE_MAX_TOKEN_NUM 16384 times
(patch x merge)^2 from 0.0.14 (vision_process.py:132; ms-swift passes Qwen3-VL's patch 16, v3.12.6 template/qwen.py:
316-318). From 3.4 a row over --max_length is deleted (v3.4.0 swift/llm/template/base.py:421-425): no image of a row
that runs has more tokens than the length.

--max_pixels P (a template argument from v3.0.0, swift/llm/argument/base_args/template_args.py:35; v4.0.0
swift/arguments/base_args/template_args.py:121): the template rescales each image over P pixels to int sides of area
at most P, its aspect ratio kept (rescale_image, v3.4.1 swift/llm/template/vision_utils.py:87-97), before the
template's own resize (v3.0.0 swift/llm/template/base.py:141, 150; v3.4.1 :236, 241; v3.12.6 :293, 298; v4.5.2
swift/template/base.py:434, 439); qwen_vl_utils then rounds each side to the factor, which can pass P (its own cap is
checked after the rounding, P is not): rescaled_worst_tokens counts it."""

from __future__ import annotations

import math
from functools import cache

from planner.intake import modelconfig, models

QWEN_VL_UTILS_TOKENS = 16384
MAX_RATIO = 200  # qwen_vl_utils' smart_resize refuses a longer side over 200 x the shorter (vision_process.py)


def default_cap_pixels(request: dict, kept: bool) -> int | None:
    """qwen_vl_utils' cap under the request's model: 16,384 tokens' pixels (12,845,056 for Qwen2-VL's 28 x 28 a
    token), at most the row's length in tokens where a longer row is deleted (not `kept`: reader_media.deleted); None
    where the model's token size is not known. GRPO's row is its prompt (--max_length: workload.max_prompt_length)."""
    per = token_pixels(request)
    w = request.get("workload") or {}
    prompt = w.get("max_prompt_length") if w.get("kind") == "grpo" else None
    length = prompt or request.get("seq_len") or request.get("max_length")
    tokens = QWEN_VL_UTILS_TOKENS if kept or not isinstance(length, int) else min(QWEN_VL_UTILS_TOKENS, length)
    return tokens * per if per else None


def token_pixels(request: dict) -> int | None:
    """The pixels a token covers under the request's model (pixels_per_token), None where not known."""
    m = models.lookup(str(request.get("model", "")), None)
    return modelconfig.pixels_per_token(m.config) if m is not None and modelconfig.has_vision(m.config) else None


@cache
def rescaled_worst_tokens(max_pixels: int, factor: int, cap_tokens: int) -> int:
    """The most tokens an image gets from --max_pixels `max_pixels` (its sides int, its area at most that, the ratio
    at most MAX_RATIO) and qwen_vl_utils' smart_resize after it (each side rounded to `factor`, at least one; over
    `cap_tokens` blocks, floored within them): every height tried, at the widest width its area allows. Pinned in
    tests/planner/frameworks/swift/test_releases.py (1,515 tokens at 1,003,520 pixels, a 71 x 14,134 image)."""
    best = 0
    for h in range(1, math.isqrt(MAX_RATIO * max_pixels) + 1):
        w = max_pixels // h
        if w < 1 or max(h, w) > MAX_RATIO * min(h, w):
            continue
        best = max(best, min(cap_tokens, max(1, round(h / factor)) * max(1, round(w / factor))))
    return best


def rescaled_pixels(pixels: int | None, template: int, per: int | None) -> int | None:
    """A pixel cap (`pixels`, the planner's max_pixels) under --max_pixels `template`: the worst case's tokens' pixels
    (rescaled_worst_tokens), never over `pixels`; None where the token size is not known."""
    if not pixels or not per:
        return pixels
    return per * rescaled_worst_tokens(template, math.isqrt(per), pixels // per)
