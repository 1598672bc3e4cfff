"""ms-swift's deletion of a row over --max_length (reader.py asks, reader_media plans the images within it): from 3.4,
under --truncation_strategy delete, a row whose encoded length, its images' tokens in it, passes --max_length never
reaches the model, so --images N alone share the row's length (the request's images_within_length,
planner.search.imagefit.ImageBudget.shared) and each image is sized within it (reader_pixels.default_cap_pixels)."""

from __future__ import annotations

from planner.intake import modelconfig
from planner.intake.collect import Collector, default, one
from planner.intake.flags import Flag

# A row over --max_length is deleted from 3.4 (the length checked on the encoded row, the images' tokens in it:
# releases.TEXT_ONLY_CUT) under --truncation_strategy delete, the default, which the template runs as 'raise' (v3.4.1
# swift/llm/argument/base_args/template_args.py:60-61, 64-66; v4.5.2 swift/arguments/base_args/template_args.py:167-168,
# 181-183): MaxLengthError (v3.4.1 swift/llm/template/base.py:1032-1035; v4.5.2 swift/template/base.py:1502) and the
# dataset drops the row (v3.4.1 swift/llm/dataset/preprocessor/core.py:185, dataset/utils.py:147; v4.5.2
# swift/dataset/preprocessor/core.py:201). GRPO's default is 'left' (v3.4.1 swift/llm/argument/rlhf_args.py:141-143;
# v4.5.2 swift/arguments/rlhf_args.py:350-351); 'left' / 'right' cut the row instead (3.4.1-3.6 the encoded row,
# images' tokens and all, v3.4.1 base.py:1012-1031, the tower still run on every image; 3.7 on keeps the images'
# tokens whole, v3.7.0 base.py:1165-1183) and 'split' (from 3.11) cuts it in pieces: no row is deleted there.
DELETES = "v3.4.1 swift/llm/template/base.py:1032-1035, dataset/preprocessor/core.py:185"
DELETES_4 = "v4.5.2 swift/template/base.py:1502, swift/dataset/preprocessor/core.py:201"


def deleted(release, kind: str, g: Flag | None) -> str | None:
    """The source of `a longer row is deleted` where ms-swift deletes a row over --max_length (DELETES): from 3.4,
    --truncation_strategy delete (`g`), the default but for GRPO; None where the row is cut, split or checked on its
    text (up to 3.3)."""
    if release.means("swift_max_length_counts") == "text":
        return None
    cite = DELETES_4 if release.name == "4" else DELETES
    if g is not None:
        return f"{g.source} (a row over --max_length is deleted: {cite})" if str(one(g.value)) == "delete" else None
    if kind == "grpo":
        return None
    return default(
        f"swift@{release.name}", f"truncation_strategy 'delete': {cite}", "a row over --max_length is deleted"
    )


def within_length(c: Collector, deletes: str | None) -> None:
    """images_within_length where a longer row is deleted (`deletes`) and the model may take images: --images N
    alone share the row's length (planner.search.imagefit.ImageBudget.shared), not cut after the tower."""
    m = c.model
    if deletes is None or (m is not None and not modelconfig.has_vision(m.config)):
        return
    what = "the images of a row that runs share its length: --images N planned within it"
    c.set("images_within_length", True, f"{deletes}; {what}", "--truncation_strategy")
