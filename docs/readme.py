"""Keep the README's pasted outputs true: every output block behind a marker is what its command prints now.

A marker is an HTML comment on the line before a fenced block:

    <!-- docs: planner gpus -->            the block is the command's whole stdout
    <!-- docs: lines=60 planner ... -->     its first 60 lines, then a line "..."
    <!-- docs: python benchmarks/X.py ... -->  a benchmark's report, run from the repository's root

    python docs/readme.py --check   exit 1 and a diff when any block differs (tests/test_readme.py runs this)
    python docs/readme.py --write   rewrite the blocks in place (`make docs`)

Commands run as `python -m planner.cli ...` in a scratch folder, with an empty probe store (so evidence is
analytic, as on a fresh machine), at rich's width for a pipe (170 columns). Lines are compared and written
without trailing blanks. The scratch store's path is shown as the default one.
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

README = Path(__file__).resolve().parents[1] / "README.md"
MARKER = re.compile(r"^<!-- docs: (?:lines=(\d+) )?((?:planner|python benchmarks/\S+\.py) .+?) -->\n```\n(.*?)```$",
                    re.MULTILINE | re.DOTALL)
SHOWN_STORE = "~/.local/share/memplan/probes.sqlite"


def run(command: str, scratch: Path) -> str:
    """The command's stdout as the README shows it."""
    store = scratch / "probes.sqlite"
    env = {**os.environ, "MEMPLAN_STORE": str(store), "OMP_NUM_THREADS": "1"}
    env.pop("COLUMNS", None)
    words = shlex.split(command)
    if words[0] == "python":        # a benchmark's report of committed results, run where its paths hold
        argv, cwd = [sys.executable, *words[1:]], README.parent
    else:
        argv, cwd = [sys.executable, "-m", "planner.cli", *words[1:]], scratch
    r = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, env=env, timeout=600, check=False)
    if r.returncode not in (0, 3):
        raise RuntimeError(f"{command!r} exited {r.returncode}: {r.stderr[-2000:]}")
    return "\n".join(line.rstrip() for line in r.stdout.replace(str(store), SHOWN_STORE).splitlines())


def rendered(text: str, scratch: Path) -> tuple[str, list[str]]:
    """(README with every marked block regenerated, the commands whose blocks changed)."""
    changed, out, last = [], [], 0
    for m in MARKER.finditer(text):
        limit, command, old = m.group(1), m.group(2), m.group(3)
        new = run(command, scratch)
        if limit and len(new.splitlines()) > int(limit):
            new = "\n".join(new.splitlines()[: int(limit)] + ["..."])
        new += "\n"
        if "\n".join(x.rstrip() for x in old.splitlines()) + "\n" != new:
            changed.append(command)
        out += [text[last:m.start(3)], new]
        last = m.end(3)
    return "".join(out) + text[last:], changed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true")
    mode.add_argument("--write", action="store_true")
    args = ap.parse_args()
    text = README.read_text()
    with tempfile.TemporaryDirectory(prefix="memplan-docs-") as tmp:
        (Path(tmp) / "docs").symlink_to(README.parent / "docs")      # the examples' relative paths hold there
        new, changed = rendered(text, Path(tmp))
    if args.write:
        README.write_text(new)
        print(f"{len(MARKER.findall(text))} blocks, {len(changed)} rewritten" + "".join(f"\n  {c}" for c in changed))
        return 0
    if changed:
        sys.stdout.writelines(difflib.unified_diff(text.splitlines(True), new.splitlines(True), "README.md", "now"))
        print(f"\n{len(changed)} README block(s) differ from what their commands print: run `make docs`")
        return 1
    print(f"{len(MARKER.findall(text))} README blocks match their commands")
    return 0


if __name__ == "__main__":
    sys.exit(main())
