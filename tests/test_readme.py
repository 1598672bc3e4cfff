"""The pages never show an output their command does not print now, and never link to nothing: README.md and every
docs/*.md page, one test each, so a failure names the page (docs/readme.py; `make docs` rewrites the blocks)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs"))
import readme

PAGES = readme.pages()
IDS = [readme.name(p) for p in PAGES]
FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.DOTALL)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_every_pasted_output_is_what_its_command_prints(page):
    text, new, changed = readme.render_page(page)
    assert not changed, readme.diff(page, text, new)[-6000:] + f"\n{readme.name(page)}: {changed}: run `make docs`"


def test_the_check_fails_on_a_stale_block(tmp_path):
    stale = "text\n<!-- docs: planner gpus -->\n```\nGPU catalog: one made-up row\n```\nmore\n"
    new, changed = readme.rendered(stale, tmp_path)
    assert changed == ["planner gpus"] and "h100-80gb" in new and "made-up" not in new
    assert readme.rendered(new, tmp_path)[1] == []  # written once, it matches


def test_the_command_line_reports_each_page_it_is_given():
    r = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "readme.py"), "--check", str(ROOT / "docs" / "ARCHITECTURE.md")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert r.returncode == 0 and r.stdout.strip() == "docs/ARCHITECTURE.md: 0 blocks match their commands", r


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_every_command_with_a_pasted_output_is_marked(page):
    """A planner command block followed directly by an output block has its marker (so no output escapes)."""
    unmarked = re.findall(r"```\n(planner [^\n]+)\n```\n```\n", page.read_text())
    assert not unmarked, unmarked


def test_the_pages_hold_the_outputs():
    """The README shows a suggest and a check; the pages hold the rest (none was lost in a move)."""
    counts = {readme.name(p): len(readme.MARKER.findall(p.read_text())) for p in PAGES}
    assert counts["README.md"] >= 2 and sum(counts.values()) >= 30, counts


def slugs(text: str) -> set[str]:
    """The #anchors GitHub gives a page's headings (github-slugger): lower case, punctuation dropped, spaces to
    hyphens, and -1, -2 ... on repeats; headings inside fenced blocks are not headings."""
    occurrences: dict[str, int] = {}
    for line in FENCE.sub("", text).splitlines():
        m = re.match(r"#{1,6} +(.+?)(?: +#+)? *$", line)
        if not m:
            continue
        result = original = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        while result in occurrences:
            occurrences[original] += 1
            result = f"{original}-{occurrences[original]}"
        occurrences[result] = 0
    return set(occurrences)


def links(text: str) -> list[str]:
    """Every link target outside code."""
    return LINK.findall(CODE_SPAN.sub("", FENCE.sub("", text)))


def test_slugs_follow_github():
    text = "# A `b`: c|d\n## FSDP2 beside ZeRO\n## Repeat\n## Repeat\n```\n# not a heading\n```\n"
    assert slugs(text) == {"a-b-cd", "fsdp2-beside-zero", "repeat", "repeat-1"}
    assert links("[x](a.md#b) `[y](no.md)` ![i](p.png)\n```\n[z](no.md)\n```\n") == ["a.md#b", "p.png"]


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_every_relative_link_and_anchor_resolves(page):
    broken = []
    for target in links(page.read_text()):
        if re.match(r"[a-z]+:", target):  # https:, mailto: ...
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no file {dest}")
        elif anchor and dest.suffix == ".md" and anchor not in slugs(dest.read_text()):
            broken.append(f"{target}: no heading #{anchor} in {readme.name(dest)}")
    assert not broken, broken
