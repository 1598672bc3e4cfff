"""The architecture's import rules (README, Layout): the planning core imports nothing above it, and no
two files import each other, directly or through others (an AST walk over every import, lazy ones too)."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("planner", "probes", "trainer", "recipe", "api", "scan")


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every project module a file imports, at any depth of the code (function-level imports included)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        out |= {n for n in names if n.split(".")[0] in PACKAGES}
    return out


def _graph() -> dict[str, set[str]]:
    files = {_module(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}
    graph = {}
    for mod, path in files.items():
        deps = set()
        for name in _imports(path):
            while name and name not in files:       # `from a.b import c`: the module a.b (or a.b.c itself)
                name = name.rpartition(".")[0]
            if name and name != mod and not mod.startswith(name + ".") and name != mod.rpartition(".")[0]:
                deps.add(name)
        graph[mod] = deps
    return graph


def test_the_core_imports_nothing_above_it():
    bad = [(m, d) for m, deps in _graph().items() if m.startswith("planner") and not m.startswith("planner.cli")
           for d in deps if d.split(".")[0] in ("probes", "trainer", "api", "scan")]
    assert not bad, bad


def test_no_import_cycle_between_files():
    graph, state, cycles = _graph(), {}, []

    def visit(m, stack):
        state[m] = "open"
        for d in graph.get(m, ()):
            if state.get(d) == "open":
                cycles.append(stack[stack.index(d):] + [d])
            elif d not in state:
                visit(d, [*stack, d])
        state[m] = "done"

    for m in graph:
        if m not in state:
            visit(m, [m])
    assert not cycles, cycles
