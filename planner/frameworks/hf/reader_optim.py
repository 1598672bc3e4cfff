"""HF's Trainer's optim default at the transformers a reading's release line runs, for the frameworks that run on
HF's Trainer and leave its optim unset (LLaMA-Factory's and ms-swift's readers): the files' transformers pin, else
the line's own (Release.transformers, said as assumed: planner.intake.releases.transformers_read)."""

from __future__ import annotations

from planner.intake import line_defaults
from planner.intake.collect import Collector, default
from planner.intake.releases import transformers_read

# adamw_torch through 4.53 (4.53.0 training_args.py:1281), adamw_torch_fused on torch >= 2.8 from 4.54 (4.54.0
# :1286-1291; 4.56.2 :1296-1303)
BY_RELEASE = "transformers 4.53.0 training_args.py:1281 adamw_torch; 4.54.0 :1286-1291 fused on torch >= 2.8"


def optim_at(version: tuple[int, ...]) -> str:
    """HF's optim default at transformers `version` (BY_RELEASE)."""
    return "adamw_torch_fused" if version >= (4, 54) else "adamw_torch"


def optimizer_at(c: Collector, framework: str, pinned: bool, near=None) -> tuple[str, str] | None:
    """(HF's optim default, its source) at the transformers the line the reading targets runs, for a line of
    `framework` that names one (Release.transformers): the files' transformers pin (`pinned`: only a pin, else the
    line's own, said as assumed; `near`: a folder the pin may be in too, where the reader has not added its file
    yet); None where neither applies."""
    line = line_defaults.line_read(c, framework)
    version, said = transformers_read(c, line, "a transformers before 4.54 runs adamw_torch", near)
    if version is None or pinned == said.startswith("memplan assumption"):
        return None
    value = optim_at(version)
    return value, default(f"{framework}@{line.name}", f"{said}; {BY_RELEASE}", f"optim {value}")
