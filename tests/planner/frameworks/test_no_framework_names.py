"""Outside planner/frameworks/ no code tests a framework's name: what a framework does is data its adapter declares
(Framework.role_engine, sync_groups, all_linear_vision, supporting, ...). An AST walk finds every comparison of
something named `framework` (a variable, an attribute, a dict key) with a framework's name written out."""

import ast
from pathlib import Path

from planner.frameworks import NAMES

ROOT = Path(__file__).resolve().parents[3]
PLANNER = ROOT / "planner"


def _is_framework(node: ast.AST) -> bool:
    """`framework`, `x.framework`, `x["framework"]`, `x.get("framework")`."""
    if isinstance(node, ast.Name):
        return node.id == "framework"
    if isinstance(node, ast.Attribute):
        return node.attr == "framework"
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "framework"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        return bool(node.args) and isinstance(node.args[0], ast.Constant) and node.args[0].value == "framework"
    return False


def _names_in(node: ast.AST) -> list[str]:
    """The framework names a compared operand writes out: a string, or the strings of a tuple, list or set."""
    items = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
    return [i.value for i in items if isinstance(i, ast.Constant) and i.value in NAMES]


def offenders(tree: ast.AST, where: str) -> list[str]:
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        if any(_is_framework(o) for o in operands):
            named = [n for o in operands for n in _names_in(o)]
            if named:
                out.append(f"{where}:{node.lineno} compares the framework with {', '.join(named)}")
    return out


def test_no_framework_name_is_compared_outside_the_framework_folders():
    found = []
    for path in sorted(PLANNER.rglob("*.py")):
        if (PLANNER / "frameworks") in path.parents:
            continue
        found += offenders(ast.parse(path.read_text()), str(path.relative_to(ROOT)))
    assert not found, "\n".join(found)


def test_the_guard_catches_each_form_of_the_comparison():
    """The checker itself: the forms the code had (`s.knobs.framework == "verl"`, `framework in ("a", "b")`,
    `c.framework != "swift"`) each fail it; a framework compared with a variable, or another field with a framework
    name ("hf" is also a generation), does not."""
    planted = """
a = s.knobs.framework == "verl"
b = framework in ("llamafactory", "swift", "axolotl")
c = x.framework != "swift"
d = k["framework"] == "openrlhf"
e = framework == name
f = w.generation != "hf"
"""
    found = offenders(ast.parse(planted), "planted")
    assert [line.split(" ")[0] for line in found] == ["planted:2", "planted:3", "planted:4", "planted:5"], found
