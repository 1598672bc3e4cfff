"""planner.cli.plain draws what rich draws to a pipe: random tables and lines, each rendered by both (rich 15, the
real one) and compared character for character; where plain declines, rich is used, so output never differs."""

import io
import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from planner.cli import plain

# printable ASCII and Latin-1 letters, spaces, brackets and colons (markup and emoji codes), a wide and a combining
# character: some tables plain draws, some it leaves to rich
TEXT = st.lists(st.sampled_from([*"ab Z09-_.,/%()[]:é", "名", "\u0301", "smile", "\n", "  "]), max_size=16).map("".join)
SIMPLE = st.text(alphabet="ab Z09-_.,/%()é", max_size=20).map(str.strip)
ANY = st.one_of(SIMPLE, SIMPLE, SIMPLE, TEXT)  # mostly what plain draws


@st.composite
def tables(draw):
    n = draw(st.integers(1, 6))
    kw = {"title": draw(ANY), "title_justify": "left"}
    if draw(st.booleans()):
        kw["min_width"] = draw(st.integers(0, 190))
    t = plain.Table(**kw)
    for _ in range(n):
        col = {"justify": draw(st.sampled_from(["left", "right"]))}
        if draw(st.booleans()):
            col["overflow"] = "fold"
        t.add_column(draw(ANY), **col)
    for _ in range(draw(st.integers(0, 5))):
        t.add_row(
            *(
                draw(st.text(alphabet="xyz 0123456789,.-", max_size=60).map(str.strip))
                if draw(st.booleans())
                else draw(ANY)
                for _ in range(n)
            )
        )
    return t


def rich_text(obj, **kw) -> str:
    out = io.StringIO()
    Console(width=plain.WIDTH, file=out).print(obj, **kw)
    return out.getvalue()


@settings(max_examples=400, deadline=None)
@given(tables())
def test_a_table_plain_draws_is_the_table_rich_draws(t):
    lines = t.lines()
    if lines is not None:
        assert "".join(line + "\n" for line in lines) == rich_text(t.to_rich())


@settings(max_examples=200, deadline=None)
@given(TEXT)
def test_a_line_printed_as_it_is_is_rich_s_line(text):
    if plain.plain_text(text, markup=False):
        assert text + "\n" == rich_text(text, soft_wrap=True, markup=False, highlight=False)


def test_plain_draws_the_usual_tables_and_leaves_the_rest_to_rich():
    usual = plain.Table(title="memory per GPU (GiB), peak during backward", title_justify="left", min_width=42)
    usual.add_column("term")
    usual.add_column("GiB", justify="right")
    usual.add_row("params", "1.87")
    assert usual.lines() is not None
    for text in ("[bold]x[/bold]", "名", "a :smile: b", "two\nlines", "x" * 200):
        t = plain.Table(title="t")
        t.add_column("c")
        t.add_row(text)
        assert t.lines() is None, text
    centred = plain.Table()
    centred.add_column("c", justify="center")
    assert centred.lines() is None


def test_a_piped_suggest_imports_no_rich():
    cmd = "suggest --model llama-3.1-8b --gpu a100-80gb --gpus-per-node 8 --global-batch 256 --seq-len 4096 --top 5"
    r = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "planner.cli", *cmd.split()],
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "┏" in r.stdout and " rich" not in r.stderr
