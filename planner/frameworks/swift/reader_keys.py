"""Which `swift sft|rlhf` flags the release line a reading targets takes, each one it does not (or takes and memplan
does not read) a note in that line's words: ms-swift 4.6.0's (presets/keys_swift.txt), and for each 3.x line those
its tags take that 4.6.0 does not ("only") and 4.6.0's that none of its tags takes ("gone"), in
presets/keys_swift_lines.json (tools/swift_line_keys.py: TrainArguments' and RLHFArguments' fields at every tag of
the line, from the syntax tree, with transformers' of the line's venv; guard: tests/planner/frameworks/swift/
test_line_defaults.py, each venv's own dataclasses.fields). The 2 line's flags are translate's (reader_2.py)."""

from __future__ import annotations

import json
from functools import cache

from planner.frameworks.swift.keys import KEYS
from planner.intake.collect import PRESETS, SWIFT, Collector, accepted
from planner.intake.flags import Flag


@cache
def _lines() -> dict[str, dict[str, frozenset[str]]]:
    table = json.loads((PRESETS / "keys_swift_lines.json").read_text())
    return {line: {k: frozenset(v) for k, v in keys.items()} for line, keys in table.items()}


def note_unknown(c: Collector, f: dict[str, Flag], line: str, skip: set[str]) -> None:
    """A note for each flag in `f` (less `skip`) release line `line` does not take ("not an ms-swift 3.4 argument:
    swift refuses it"), or takes where 4.6.0 does not and memplan reads no meaning of ("an ms-swift 3.4 argument,
    not planned"); at a line the table does not hold (2, after translate; 4), 4.6.0's keys decide."""
    own = _lines().get(line)
    if own is None:
        for k in sorted(set(f) - accepted("swift") - skip):
            c.note(f"{f[k].source} (not an {SWIFT} argument: swift refuses it)")
        return
    for k in sorted(set(f) - skip - {KEYS.key("lora", "3")}):
        if k in own["only"]:
            c.note(f"{f[k].source} (an ms-swift {line} argument, not planned)")
        elif k in own["gone"] or k not in accepted("swift"):
            c.note(f"{f[k].source} (not an ms-swift {line} argument: swift refuses it)")
