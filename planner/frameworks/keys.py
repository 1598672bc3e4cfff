"""A framework's key table, read both ways: each row ties a memplan field to the framework's own key (flag or config
key) at its newest release, the framework's default for it with the file:line it stands at, the value map between
memplan's words and the framework's, and the key's name at older release lines. Each framework folder declares one
`Table` (its keys.py); its reader looks keys and defaults up there, its writer names keys and maps values through it,
and its Release lines take their key names from it. The special cases (what a value implies beyond one field) stay
code in the reader and writer; only plain field <-> key rows live here. Data only: no reading, no writing."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Key:
    """`field`: the memplan field (a knob, a workload field), or the framework's own name where memplan has no field;
    `key`: the framework's name for it at its newest release; `default`/`cite`: the framework's default and where it
    stands ("" when it has none the reader uses); `to_value`: memplan value -> the framework's (the writer's map; a
    value not in it is written as it is; the readers map the framework's words back through planner.intake.vocab,
    which knows every spelling, not only the ones written); `renames`: release line name -> the key's name there
    (ms-swift 3's train_type)."""

    field: str
    key: str
    default: object = None
    cite: str = ""
    to_value: Mapping = field(default_factory=dict)
    renames: Mapping[str, str] = field(default_factory=dict)
    # release line name -> the value map there, where it differs from `to_value` (LLaMA-Factory's flash_attn took a
    # bool through v0.6.3): a value that map does not hold has no spelling at that line (Table.spelled)
    values: Mapping[str, Mapping] = field(default_factory=dict)

    def at(self, release: str = "") -> str:
        """The key's name at release line `release` ("": the newest)."""
        return self.renames.get(release, self.key)

    def write(self, value: object, release: str = "") -> object:
        """memplan's value as the framework writes it at release line `release` (KeyError for a value that line's
        own map, `values`, does not hold: see spelled)."""
        if release in self.values and not isinstance(value, (list, dict)):
            return self.values[release][value]
        if not self.to_value or isinstance(value, (list, dict)):
            return value
        return self.to_value.get(value, value)

    def spelled(self, value: object, release: str = "") -> bool:
        """Whether release line `release` has a spelling of memplan's `value` for this key."""
        return release not in self.values or value in self.values[release]


class Table:
    """One framework's rows, by field; `prefix`: how its keys are written on a command line ("--" for flags, "" for a
    config file's keys)."""

    def __init__(self, *rows: Key, prefix: str = "") -> None:
        self.rows = {r.field: r for r in rows}
        assert len(self.rows) == len(rows), "one row a field"
        self.prefix = prefix

    def __getitem__(self, name: str) -> Key:
        return self.rows[name]

    def named(self, key: str) -> Key:
        """The row whose newest key is `key` (KeyError for none)."""
        return next(r for r in self.rows.values() if r.key == key)

    def key(self, name: str, release: str = "") -> str:
        """Field `name`'s key at release line `release` (bare, without the prefix)."""
        return self.rows[name].at(release)

    def flag(self, name: str, release: str = "") -> str:
        """Field `name`'s key as written (`--lora_rank`)."""
        return self.prefix + self.key(name, release)

    def pair(self, name: str, value: object, release: str = "") -> tuple[str, object]:
        """(key, the framework's value) the writer writes for field `name` at memplan value `value`."""
        return self.key(name, release), self.rows[name].write(value, release)

    def release_keys(self, release: str, names: Iterable[str]) -> dict[str, str]:
        """{field: flag} of the fields `names` at release line `release` (Release.keys)."""
        return {n: self.flag(n, release) for n in names}

    def shown(self, names: str, **texts: str) -> dict[str, str]:
        """Framework.keys (the frameworks table's column), in the order of `names` (space-separated): `name` shows its
        row's flag, `name=field` that field's row's flag; a name in `texts` shows its text (what no one row says)."""
        out = {}
        for item in names.split():
            name, _, what = item.partition("=")
            out[name] = texts[name] if name in texts else self.flag(what or name)
        return out

    def renamed(self, release: str) -> dict[str, str]:
        """{the key's name at `release`: its newest name} for every row release line `release` renames."""
        return {r.renames[release]: r.key for r in self.rows.values() if release in r.renames}


def whole_line(releases: Sequence, spans: Mapping[str, tuple], key: str, line: str = "") -> bool:
    """Whether every version of release line `line` ("": the newest; `releases`: a framework's Release lines) takes key
    `key`, by `spans` (Framework.key_spans[trainer]: key -> (the first version taking it, the first no longer taking
    it)); a key `spans` does not list, every release. A file written for the line runs on any of its versions."""
    span = spans.get(key)
    lines = sorted((r for r in releases if r.first is not None), key=lambda r: r.first)
    if span is None or not lines:
        return True
    i = next((i for i, r in enumerate(lines) if r.name == line), len(lines) - 1)
    end = lines[i + 1].first if i + 1 < len(lines) else None
    first, gone = span
    return (first is None or first <= lines[i].first) and (gone is None or (end is not None and gone >= end))
