"""What was read from the user's files: check --config's settings (field, value, the framework's key, its source)
and what was not planned, and scan's dataset (its headline and the tokens per row)."""

from __future__ import annotations

import re
from pathlib import Path

from planner.cli.plain import Table

# an absolute path in a setting's source, shown by its last name (--json keeps it whole)
ABSOLUTE_PATH = re.compile(r"(?<![\w.])/(?:[^\s/()]+/)+([^\s/()]+)")


def config_table(config: dict) -> Table:
    """check --config: what was read, field by field, with its value, the framework's key and where it came from."""
    files = ", ".join(Path(f).name for f in config["files"])
    t = Table(title=f"read from {files} ({config['framework']})", title_justify="left")
    for col in ("field", "value", "key", "from"):
        t.add_column(col, overflow="fold")
    for s in config["settings"]:
        value = s["value"] if not isinstance(s["value"], dict) else ", ".join(f"{k} {v}" for k, v in s["value"].items())
        t.add_row(s["field"], str(value), s["key"], ABSOLUTE_PATH.sub(r"\1", s["source"]))
    return t


def config_lines(config: dict) -> list[str]:
    return [f"not planned: {line}" for line in config["unplanned"]]


def scan_headline(data: dict) -> str:
    return (
        f"{data['data']}: {data['rows']:,} rows ({data['kind']}), {data['images']:,} images; the longest is "
        f"row {data['longest_row']:,} ({data['tokens']['max']:,} tokens)"
    )


def scan_table(data: dict) -> Table:
    t = Table()
    t.add_column("tokens per row")
    for col in ("mean", "p50", "p90", "p99", "max"):
        t.add_column(col, justify="right")
    for label, key in (("text", "text_tokens"), ("image", "image_tokens"), ("total", "tokens")):
        d = data[key]
        t.add_row(label, *(f"{d[c]:,}" for c in ("mean", "p50", "p90", "p99", "max")))
    return t
