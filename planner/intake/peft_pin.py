"""The PEFT a LoRA run's files pin (requirements.txt, a `pip freeze`, ... beside them: planner.intake.pins), read as
--peft-release: the release memplan measured at or below the pin (planner.frameworks.peft.VERSIONS: 0.18 up to 0.19.x,
0.20, 0.21, 0.22 and later); an older exact pin or a git checkout is a `not planned:` line, the line's PEFT planned; a
bound (peft>=0.13) allows the newest, the line's own."""

from __future__ import annotations

from pathlib import Path

from planner.frameworks.peft import VERSIONS
from planner.frameworks.reading import version_of
from planner.intake.collect import Collector
from planner.intake.pins import pins


def knob_of(version: str) -> str | None:
    """The --peft-release value a pinned `version` plans as, or None where memplan measured none at or below it."""
    v = version_of(version)
    if v is None:
        return None
    below = [name for name, measured in VERSIONS.items() if measured[:2] <= v[:2]]
    return max(below, key=lambda n: VERSIONS[n]) if below else None


def read(c: Collector) -> None:
    """--peft-release from a peft pin beside the files of a LoRA run (not where the request already says one)."""
    if not int(c.get("lora_rank", 0) or 0) or c.get("peft_release", "line") != "line":
        return
    pin = pins([Path(f).resolve().parent for f in c.files]).get("peft")
    if pin is None:
        return
    version, where = pin
    if "==" not in where and " @ " not in where:  # a bound (peft>=0.13) allows the newest: the line's PEFT
        return
    knob = knob_of(version) if version else None
    if knob is None:
        c.note(f"{where} (a PEFT memplan did not measure: planned with the framework line's PEFT)")
        return
    c.set("peft_release", knob, f"{where} (PEFT {version}: planned as {VERSIONS[knob][0]}.{VERSIONS[knob][1]})", "peft")
