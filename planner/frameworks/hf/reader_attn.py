"""transformers' own attention choice where a framework passes none, at the files' transformers pin (ms-swift 2.x
with --use_flash_attn unset: it sets config._attn_implementation for True or False only, v2.5.2
swift/llm/utils/model.py:1951-1955; 3.x with --attn_impl unset, v3.0.3 swift/llm/model/utils.py:36-47; both require
transformers>=4.33 at every tag, requirements/framework.txt; an older line only, Release.transformers):
from 4.36.0 from_pretrained picks sdpa where the model's class takes it (modeling_utils.py:1258-1320
_autoset_attn_implementation, :1456-1482 _check_and_enable_sdpa, torch >= 2.1.1), memplan's default; before 4.36
there is no sdpa path (4.35.2 modeling_utils.py names none) and the decoder builds its eager attention
(4.35.2 models/llama/modeling_llama.py:629-633, flash-attn only where asked)."""

from __future__ import annotations

from planner.intake import line_defaults
from planner.intake.collect import Collector
from planner.intake.releases import transformers_read

SDPA_FROM = (4, 36)
BEFORE_SDPA = (
    "transformers before 4.36 load eager attention where none is asked (4.35.2 models/llama/modeling_llama.py:629-633; "
    "sdpa from 4.36.0 modeling_utils.py:1258-1320)"
)


def attention_at(c: Collector, framework: str, near=None) -> tuple[str, str] | None:
    """("eager", its source) where the files pin a transformers before 4.36 for the line of `framework` the reading
    targets (Release.transformers names one), else None (memplan's sdpa, as transformers picks from 4.36)."""
    line = line_defaults.line_read(c, framework)
    version, said = transformers_read(c, line, "", near)
    if version is None or said.startswith("memplan assumption") or version >= SDPA_FROM:
        return None
    return "eager", f"{said}; {BEFORE_SDPA}"
