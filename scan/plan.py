"""The scanner the faces hand to the planner's core (planner.search.datafit.Scanner): scan a dataset and return its
DataFit (tokens per row, the length to plan for, the rows --max-length cuts)."""

from __future__ import annotations

from planner.search.datafit import DataFit, make_fit


def data_fit(
    path: str,
    tokenizer: str | None,
    image_rule: str = "qwen2-vl",
    max_length: int | None = None,
    min_pixels: int | None = None,
    max_pixels: int | None = None,
) -> DataFit:
    from scan.scanner import scan

    got = scan(path, tokenizer, image_rule, min_pixels, max_pixels)
    return make_fit(path, got.totals(), got.image, max_length)
