"""Keep the pasted outputs true: every output block behind a marker, in README.md and in every docs/*.md page, is
what its command prints now.

A marker is an HTML comment on the line before a fenced block:

    <!-- docs: planner gpus -->            the block is the command's whole stdout
    <!-- docs: lines=60 planner ... -->     its first 60 lines, then a line "..."
    <!-- docs: python benchmarks/X.py ... -->  a benchmark's report, run from the repository's root

    python docs/readme.py --check [PAGE ...]   exit 1 and a diff when any block differs, one report line per page
                                               (tests/test_readme.py runs each page)
    python docs/readme.py --write [PAGE ...]   rewrite the blocks in place (`make docs`)

PAGE is README.md or docs/<name>.md (all of them when none is named). Commands run as `python -m planner.cli ...`
in a scratch folder of their page's own (its `docs` a link to the repository's docs/, so docs/examples/... holds),
with an empty probe store (so evidence is analytic, as on a fresh machine, and no page's probe changes another's
output), at rich's width for a pipe (170 columns). Lines are compared and written without trailing blanks. The
scratch store's path is shown as the default one.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MARKER = re.compile(
    r"^<!-- docs: (?:lines=(\d+) )?((?:planner|python benchmarks/\S+\.py) .+?) -->\n```\n(.*?)```$",
    re.MULTILINE | re.DOTALL,
)
SHOWN_STORE = "~/.local/share/memplan/probes.sqlite"


def pages() -> list[Path]:
    """README.md, then every docs/*.md page by name."""
    return [README, *sorted((ROOT / "docs").glob("*.md"))]


def name(page: Path) -> str:
    """The page as the reports and the tests name it: its path from the repository's root."""
    return page.resolve().relative_to(ROOT).as_posix()


def run(command: str, scratch: Path) -> str:
    """The command's stdout as the page shows it."""
    store = scratch / "probes.sqlite"
    env = {**os.environ, "MEMPLAN_STORE": str(store), "OMP_NUM_THREADS": "1", "MEMPLAN_HUB": "0"}  # pages: offline
    env.pop("COLUMNS", None)
    words = shlex.split(command)
    if words[0] == "python":  # a benchmark's report of committed results, run where its paths hold
        argv, cwd = [sys.executable, *words[1:]], ROOT
    else:
        argv, cwd = [sys.executable, "-m", "planner.cli", *words[1:]], scratch
    r = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, env=env, timeout=600, check=False)
    if r.returncode not in (0, 3):
        raise RuntimeError(f"{command!r} exited {r.returncode}: {r.stderr[-2000:]}")
    return "\n".join(line.rstrip() for line in r.stdout.replace(str(store), SHOWN_STORE).splitlines())


def rendered(text: str, scratch: Path) -> tuple[str, list[str]]:
    """(the page with every marked block regenerated, the commands whose blocks changed)."""
    changed, out, last = [], [], 0
    for m in MARKER.finditer(text):
        limit, command, old = m.group(1), m.group(2), m.group(3)
        new = run(command, scratch)
        if limit and len(new.splitlines()) > int(limit):
            new = "\n".join(new.splitlines()[: int(limit)] + ["..."])
        new += "\n"
        if "\n".join(x.rstrip() for x in old.splitlines()) + "\n" != new:
            changed.append(command)
        out += [text[last : m.start(3)], new]
        last = m.end(3)
    return "".join(out) + text[last:], changed


def render_page(page: Path) -> tuple[str, str, list[str]]:
    """(the page's text, the text with its blocks regenerated, the commands whose blocks changed), in a fresh
    scratch folder."""
    text = page.read_text()
    if not MARKER.search(text):
        return text, text, []
    with tempfile.TemporaryDirectory(prefix="memplan-docs-") as tmp:
        (Path(tmp) / "docs").symlink_to(ROOT / "docs")  # the examples' relative paths hold there
        new, changed = rendered(text, Path(tmp))
    return text, new, changed


def diff(page: Path, text: str, new: str) -> str:
    return "".join(difflib.unified_diff(text.splitlines(True), new.splitlines(True), name(page), "now"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true")
    mode.add_argument("--write", action="store_true")
    ap.add_argument("pages", nargs="*", type=Path, help="README.md or docs/<name>.md (default: all of them)")
    args = ap.parse_args()
    chosen = [p if p.is_absolute() else Path.cwd() / p for p in args.pages] or pages()
    stale = 0
    for page in chosen:
        text, new, changed = render_page(page)
        blocks = len(MARKER.findall(text))
        if args.write:
            if new != text:
                page.write_text(new)
            print(f"{name(page)}: {blocks} blocks, {len(changed)} rewritten" + "".join(f"\n  {c}" for c in changed))
        elif changed:
            stale += len(changed)
            sys.stdout.write(diff(page, text, new))
            print(f"{name(page)}: {len(changed)} of {blocks} blocks differ from what their commands print")
        else:
            print(f"{name(page)}: {blocks} blocks match their commands")
    if stale:
        print(f"\n{stale} block(s) differ: run `make docs`")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
