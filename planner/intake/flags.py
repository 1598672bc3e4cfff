"""A training command's `--flags` (and a config file's keys) as one mapping, name -> Flag, the way HfArgumentParser
reads them: `--name value`, `--name=value`, a bare `--name` (True), several values (`--reward_funcs a b`),
`--name-with-dashes` for `name_with_dashes`, negative numbers as values. Each Flag keeps where it was written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from planner.intake.collect import UNKNOWN, where
from planner.intake.shell import Word

_FLAG = re.compile(r"--?[A-Za-z_][\w.-]*(=.*)?", re.DOTALL)


@dataclass(frozen=True)
class Flag:
    key: str  # the name: leading dashes dropped, `-` read as `_`
    value: object  # True for a bare flag, a string for one value, a list for several; typed from YAML / JSON
    source: str  # `train.sh:14 --per_device_train_batch_size 4`, `qwen_lora.yaml: cutoff_len: 2048`
    raw: str  # the flag or key as written


def is_flag(text: str) -> bool:
    return _FLAG.fullmatch(text) is not None


def norm(name: str) -> str:
    return name.lstrip("-").replace("-", "_")


def parse(words: list[Word], path: Path) -> tuple[dict[str, Flag], list[Word]]:
    """The flags of a command's arguments, and the other words: those before the first flag (a config file,
    `key=value`) and any the script computes when it runs (an array, a command's output: a word that is all
    UNKNOWN, which may stand for flags, so it is no flag's value)."""
    flags: dict[str, Flag] = {}
    lead: list[Word] = []
    i = 0
    while i < len(words):
        w = words[i]
        if not is_flag(w.text):
            if not flags or _computed(w.text):
                lead.append(w)
            i += 1
            continue
        name, eq, value = w.text.partition("=")
        values = [value] if eq else []
        i += 1
        while not eq and i < len(words) and not is_flag(words[i].text) and not _computed(words[i].text):
            values.append(words[i].text)
            i += 1
        got: object = True if not values and not eq else values[0] if len(values) == 1 else values
        flags[norm(name)] = Flag(norm(name), got, where(path, name, None if got is True else got, w.line), name)
    return flags, lead


def _computed(text: str) -> bool:
    return bool(text) and text.strip(UNKNOWN) == ""


def from_mapping(data: dict, path: Path, prefix: str = "") -> dict[str, Flag]:
    """A YAML / JSON config's top-level keys as flags."""
    return {str(k): Flag(str(k), v, where(path, prefix + str(k), v), str(k)) for k, v in data.items()}


def dotted(data: dict, path: Path, prefix: str = "") -> dict[str, Flag]:
    """A YAML config's keys as flags, a section's dotted (`peft_config.r`, `model._component_`), each with its file and
    key: torchtune's recipe configs and LLaMA-Factory v1's plugin sections."""
    out: dict[str, Flag] = {}
    for k, v in data.items():
        key = f"{prefix}{k}"
        out |= dotted(v, path, f"{key}.") if isinstance(v, dict) else {key: Flag(key, v, where(path, key, v), key)}
    return out
