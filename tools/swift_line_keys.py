"""planner/intake/presets/keys_swift_lines.json: the `swift sft|rlhf` arguments each ms-swift 2.x/3.x release line takes
(at any of its tags) and 4.6.0's wheel does not (presets/keys_swift.txt), and 4.6.0's that no tag of the line takes:
ms-swift's own dataclass fields of TrainArguments and RLHFArguments read from the syntax tree at every tag of the line
(the bare mirror of github.com/modelscope/ms-swift, `git show TAG:path`), with transformers' TrainingArguments fields
of the line's venv (tools/fwenv_old.sh). Never imported or run. The guard: tests/planner/frameworks/swift/
test_line_defaults.py (the venv's own dataclasses.fields, a subset of its line's).
usage: python tools/swift_line_keys.py MIRROR FWENV_OLD > planner/intake/presets/keys_swift_lines.json"""

import ast
import json
import subprocess
import sys
from pathlib import Path

# line -> (its tags' prefixes, the venv read for transformers' fields): planner/frameworks/swift/releases.py; 2.x's
# SftArguments and RLHFArguments are its own dataclasses (v2.5.2 swift/llm/utils/argument.py:608, 1755), no
# TrainingArguments: no venv
LINES = {
    "2": (("v2.",), None),
    "3": (("v3.0.", "v3.1.", "v3.2.", "v3.3."), "swift-3.0.3"),
    "3.4": (("v3.4.", "v3.5.", "v3.6."), "swift-3.4.1"),
    "3.7": (("v3.7.", "v3.8."), "swift-3.7.3"),
    "3.9": (("v3.9.", "v3.10.", "v3.11.", "v3.12."), "swift-3.12.6"),
}
ROOTS = ("TrainArguments", "RLHFArguments")
# 2.x's `swift sft|pt|dpo|orpo|simpo|rlhf` classes (v2.0.0 DPOArguments, v2.1.0 ORPOArguments, from v2.2.0 RLHFArguments;
# v2.4.0 PtArguments: each SftArguments' subclass, swift/llm/utils/argument.py)
ROOTS_2 = ("SftArguments", "PtArguments", "DPOArguments", "ORPOArguments", "RLHFArguments")
HF_FIELDS = "import dataclasses, json, transformers; print(json.dumps([f.name for f in dataclasses.fields(transformers.Seq2SeqTrainingArguments) if f.init]))"


def git(mirror: str, *args: str) -> str:
    return subprocess.run(["git", "-C", mirror, *args], check=True, capture_output=True, text=True).stdout


def classes(mirror: str, tag: str) -> dict[str, tuple[list[str], list[str]]]:
    """class name -> (its bases' names, its class-level annotated names), over swift/llm/argument and swift/trainers."""
    out = {}
    where = ("swift/llm/argument", "swift/llm/utils", "swift/trainers")
    files = git(mirror, "ls-tree", "-r", "--name-only", tag, *where).split()
    for path in (p for p in files if p.endswith(".py")):
        for node in ast.walk(ast.parse(git(mirror, "show", f"{tag}:{path}"))):
            if isinstance(node, ast.ClassDef):
                bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases]
                names = [
                    s.target.id
                    for s in node.body
                    if isinstance(s, ast.AnnAssign)
                    and isinstance(s.target, ast.Name)
                    and "ClassVar" not in ast.unparse(s.annotation)
                ]
                out.setdefault(node.name, (bases, names))
    return out


def fields(graph: dict, name: str, seen: set) -> set[str]:
    if name in seen or name not in graph:
        return set()
    seen.add(name)
    bases, names = graph[name]
    return set(names).union(*(fields(graph, b, seen) for b in bases))


def main(mirror: str, venvs: str) -> None:
    newest = {
        k
        for k in (Path(__file__).parents[1] / "planner/intake/presets/keys_swift.txt").read_text().splitlines()
        if k and not k.startswith("#")
    }
    tags = git(mirror, "tag").split()
    out = {}
    for line, (prefixes, venv) in LINES.items():
        taken = set()
        if venv is not None:
            run = [f"{venvs}/{venv}/bin/python", "-c", HF_FIELDS]
            taken = set(json.loads(subprocess.run(run, check=True, capture_output=True, text=True).stdout))
        for tag in (t for t in tags if t.startswith(prefixes)):
            graph = classes(mirror, tag)
            taken |= set().union(*(fields(graph, r, set()) for r in (ROOTS_2 if line == "2" else ROOTS)))
        out[line] = {"only": sorted(taken - newest), "gone": sorted(newest - taken)}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main(*sys.argv[1:3])
