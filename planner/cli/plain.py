"""What the CLI prints on stdout: tables and lines written as rich 15 writes them to a pipe, without importing rich
where nothing needs it (issue 50 item 5: importing rich and rendering with it was 0.09 s of the 0.32 s cold
`planner suggest`).

`Table` records the calls the renderers make (planner.cli.render) and replays them onto `rich.table.Table` on a
terminal. To a pipe or a file, a table of plain single-line text that fits the 170-column width is drawn here,
the same characters rich draws (box.HEAVY_HEAD, one space of padding, rich/table.py's column widths and
rich/_ratio.py's `ratio_distribute` for `min_width`); anything else (markup or emoji codes rich would interpret,
wide or control characters, a line break, a table wider than the page, a keyword not drawn here) goes to rich.
tests/planner/cli/test_plain.py pins the two renderings equal on random tables."""

from __future__ import annotations

import os
import re
import sys
from math import ceil

WIDTH = 170  # pipes and files get whole tables, not 80 columns
DRAWN = {"title", "title_justify", "min_width"}  # Table keywords drawn here
COLUMN_DRAWN = {"justify", "overflow"}  # overflow only decides how a too-long cell wraps: none here


_EMOJI = re.compile(r":[\w+-]+:")  # an emoji code, which rich's render_str replaces even without markup


def plain_text(s: object, markup: bool = True) -> bool:
    """Text rich prints as it is: a str of printable Latin characters (one column each, cell_len 1), no emoji code,
    and with markup on, no `[`."""
    return (
        isinstance(s, str)
        and all(" " <= c < "\x7f" or "\xa0" <= c < "\u0300" for c in s)
        and not _EMOJI.search(s)
        and not (markup and "[" in s)
    )


class Table:
    """rich.table.Table's constructor, add_column and add_row, recorded."""

    def __init__(self, **kw) -> None:
        self.kw, self.columns, self.rows = kw, [], []

    def add_column(self, header: str = "", **kw) -> None:
        self.columns.append((header, kw))

    def add_row(self, *cells) -> None:
        self.rows.append(cells)

    def __rich__(self):  # a rich console given this table (autotune's stderr, a test's) draws rich's own
        return self.to_rich()

    def to_rich(self):
        from rich.table import Table as RichTable

        t = RichTable(**self.kw)
        for header, kw in self.columns:
            t.add_column(header, **kw)
        for cells in self.rows:
            t.add_row(*cells)
        return t

    def lines(self, width: int = WIDTH) -> list[str] | None:
        """The table as rich draws it on a `width`-column page that is not a terminal, or None where only rich can."""
        widths = self._widths(width)
        if widths is None:
            return None
        title, total = self.kw.get("title") or "", sum(widths) + len(widths) + 1
        if len(title) > total:
            return None  # rich wraps a title wider than its table
        justs = [k.get("justify", "left") for _, k in self.columns]

        def rule(left: str, mid: str, right: str, fill: str) -> str:
            return left + mid.join(fill * w for w in widths) + right

        def row(bar: str, cells) -> str:
            return bar + bar.join(_cell(c, w, j) for c, w, j in zip(cells, widths, justs)) + bar

        head = [rule("┏", "┳", "┓", "━"), row("┃", [h for h, _ in self.columns]), rule("┡", "╇", "┩", "━")]
        return [title.ljust(total)] * bool(title) + head + [row("│", r) for r in self.rows] + [rule("└", "┴", "┘", "─")]

    def _widths(self, width: int) -> list[int] | None:
        """Each column's width with its padding (rich/table.py _calculate_column_widths when nothing wraps), or None
        for a table drawn by rich alone."""
        kw, heads = self.kw, [h for h, _ in self.columns]
        if set(kw) - DRAWN or not self.columns or kw.get("title_justify", "left") != "left":
            return None
        if any(set(k) - COLUMN_DRAWN or k.get("justify", "left") not in ("left", "right") for _, k in self.columns):
            return None
        texts = [kw.get("title") or "", *heads, *(c for row in self.rows for c in row)]
        if any(len(row) != len(heads) for row in self.rows) or not all(plain_text(t) and t == t.strip() for t in texts):
            return None  # rich's wrapping moves a cell's leading spaces
        widths = [max(len(t) for t in (h, *(row[i] for row in self.rows))) + 2 for i, h in enumerate(heads)]
        edges = len(widths) + 1  # rich's _extra_width: a vertical line before, between and after the columns
        if sum(widths) + edges > width:
            return None  # rich would wrap or fold cells
        least = kw.get("min_width")
        if least is not None and sum(widths) < least - edges:
            grow = ratio_distribute(min(least, width) - edges - sum(widths), widths)
            widths = [w + g for w, g in zip(widths, grow)]
        return widths


def _cell(text: str, width: int, justify: str) -> str:
    inner = width - 2
    return " " + (text.rjust(inner) if justify == "right" else text.ljust(inner)) + " "


def ratio_distribute(total: int, ratios: list[int]) -> list[int]:
    """rich/_ratio.py's ratio_distribute without minimums: `total` split in proportion to `ratios`, rounded up in
    order, summing to `total`."""
    left, weight, parts = total, sum(ratios), []
    for r in ratios:
        part = ceil(r * left / weight) if weight > 0 else left
        parts.append(part)
        weight, left = weight - r, left - part
    return parts


def piped(stream=None) -> bool:
    """Whether rich would see `stream` (stdout by default) as no terminal and draw plain UTF-8 boxes on it
    (rich/console.py is_terminal: TTY_COMPATIBLE, FORCE_COLOR, then isatty; ascii_only boxes off UTF-8)."""
    stream = stream or sys.stdout
    if os.environ.get("TTY_COMPATIBLE", "") not in ("", "0") or os.environ.get("FORCE_COLOR") is not None:
        return False
    isatty = getattr(stream, "isatty", None)
    encoding = (getattr(stream, "encoding", None) or "").lower()
    return isatty is not None and not isatty() and encoding.startswith("utf")


class Out:
    """render.console: `print` as rich's Console.print for what the CLI prints; rich is made only when needed."""

    def __init__(self) -> None:
        self._rich = None

    def rich(self):
        if self._rich is None:
            from rich.console import Console

            console = Console()
            self._rich = console if console.is_terminal else Console(width=WIDTH)
        return self._rich

    def print(self, obj="", *, soft_wrap: bool = False, markup=None, highlight=None) -> None:
        if piped():
            if isinstance(obj, Table):
                lines = obj.lines()
                if lines is not None:
                    sys.stdout.write("".join(line + "\n" for line in lines))
                    return
            elif soft_wrap and markup is False and plain_text(obj, markup=False):  # say_line: the text as it is
                sys.stdout.write(obj + "\n")
                return
        shown = obj.to_rich() if isinstance(obj, Table) else obj
        self.rich().print(shown, soft_wrap=soft_wrap, markup=markup, highlight=highlight)
