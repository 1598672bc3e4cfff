"""How LLaMA-Factory's reader takes a key's value (planner/frameworks/llamafactory/reader.py and reader_media.py): the
file's own, else the default of the release line the reading targets where that line moved it
(planner.intake.line_defaults.moved_default, the one way every framework's reader takes a release's defaults), else the
newest line's default with its citation (the key table, keys.py)."""

from __future__ import annotations

from planner.frameworks.llamafactory.keys import KEYS
from planner.intake import line_defaults
from planner.intake.collect import LF, Collector, default
from planner.intake.flags import Flag


def get(f: dict[str, Flag], key: str, fallback: object, cite: str) -> tuple[object, str]:
    """(value, source) of a key, or LF's default with its citation."""
    if key in f:
        return f[key].value, f[key].source
    return fallback, default(LF, cite, f"{key} {fallback}")


def look(c: Collector, f: dict[str, Flag], name: str) -> tuple[object, str]:
    """(value, source) of field `name`'s key (keys.py, in the newest line's names: reader._in_release renamed them),
    else the release line's default where it moved (planner.frameworks.llamafactory.RELEASES), else the newest's."""
    k = KEYS[name]
    if k.key not in f and (moved := line_defaults.moved_default(c, "llamafactory", name)) is not None:
        return moved
    return get(f, k.key, k.default, k.cite)
