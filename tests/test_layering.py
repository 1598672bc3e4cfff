"""The architecture's import rules (docs/ARCHITECTURE.md): each layer imports only the layers below it (ALLOWED),
no two layers and no two files import each other, directly or through others (an AST walk over every import, lazy
ones too)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("planner", "probes", "trainer", "recipe", "api", "scan")


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, modules=frozenset()) -> set[str]:
    """Every project module a file imports, at any depth of the code (function-level imports included). `from a.b
    import c` imports the module a.b.c where that is one of `modules` (a framework's reader importing
    planner.intake's shared readers: not planner/intake/__init__.py), else what a.b defines."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            full = [f"{node.module}.{a.name}" for a in node.names]
            names = [n for n in full if n in modules] or [node.module, *full]
            if len(names) < len(full):  # some names are modules, some the package's own definitions
                names.append(node.module)
        out |= {n for n in names if n.split(".")[0] in PACKAGES}
    return out


def _graph() -> dict[str, set[str]]:
    files = {_module(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}
    graph = {}
    for mod, path in files.items():
        deps = set()
        for name in _imports(path, frozenset(files)):
            while name and name not in files:  # `from a.b import c`: the module a.b (or a.b.c itself)
                name = name.rpartition(".")[0]
            if name and name != mod and not mod.startswith(name + ".") and name != mod.rpartition(".")[0]:
                deps.add(name)
        graph[mod] = deps
    return graph


# Each layer and the layers it may import (docs/ARCHITECTURE.md): the core imports nothing above it; recipe/ and
# scan/ stand on the core; probes/ on the recipe; the trainer on the recipe and scan/ (never on probes/ or a face);
# the API on probes/ and scan/ (never on the CLI); the CLI face on everything (it launches the trainer and the API).
ALLOWED = {
    "core": set(),
    "recipe": {"core"},
    "scan": {"core"},
    "probes": {"core", "recipe"},
    "trainer": {"core", "recipe", "scan"},
    "api": {"core", "probes", "scan"},
    "face": {"core", "recipe", "scan", "probes", "trainer", "api"},
}


def layer(module: str) -> str:
    if module.startswith("planner.cli"):
        return "face"
    return "core" if module.split(".")[0] == "planner" else module.split(".")[0]


def forbidden(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(importer, imported) for every import across layers that ALLOWED does not list."""
    return sorted(
        (m, d) for m, deps in graph.items() for d in deps if layer(m) != layer(d) and layer(d) not in ALLOWED[layer(m)]
    )


def test_every_import_across_layers_is_allowed():
    """Core -> anything above, API -> CLI, trainer -> CLI or probes, probes -> API: each is a failure."""
    assert set(ALLOWED) == {layer(m) for m in _graph()}  # every package has its row
    bad = forbidden(_graph())
    assert not bad, bad


def test_a_planted_forbidden_import_is_caught():
    """The checker itself: an API -> CLI import (the cycle api/deps.py had) and a core -> probes one fail it."""
    graph = _graph()
    planted = {
        **graph,
        "api.deps": graph["api.deps"] | {"planner.cli.advising"},
        "planner.search.search": graph["planner.search.search"] | {"probes.run"},
    }
    assert forbidden(planted) == [("api.deps", "planner.cli.advising"), ("planner.search.search", "probes.run")]


def test_no_cycle_between_layers():
    edges = {(layer(m), layer(d)) for m, deps in _graph().items() for d in deps if layer(m) != layer(d)}
    reach = {a: {b for x, b in edges if x == a} for a in ALLOWED}
    for _ in ALLOWED:  # transitive closure
        reach = {a: bs | {c for b in bs for c in reach.get(b, ())} for a, bs in reach.items()}
    assert not [a for a, bs in reach.items() if a in bs], reach


def test_no_import_cycle_between_files():
    graph, state, cycles = _graph(), {}, []

    def visit(m, stack):
        state[m] = "open"
        for d in graph.get(m, ()):
            if state.get(d) == "open":
                cycles.append(stack[stack.index(d) :] + [d])
            elif d not in state:
                visit(d, [*stack, d])
        state[m] = "done"

    for m in graph:
        if m not in state:
            visit(m, [m])
    assert not cycles, cycles


# Inside the core, the stages of a request, lowest first (docs/ARCHITECTURE.md): a stage imports only the ones
# before it; search, evidence, export and intake (config files read) are siblings that never import each other
# (advise hands each what it needs).
CORE_STAGES = [
    {"errors"},
    {"frameworks", "extras"},
    {"config"},
    {"model"},
    {"estimate"},
    {"search", "evidence", "export", "intake"},
    {"resolved", "verification"},
    {"advise"},
    {"checkconfig_lines"},
    {"checkconfig"},
]


# a framework's folder (planner/frameworks/<name>/) holds its adapter in the frameworks stage, its reader among the
# intake's modules and its writer among the export's: each file is staged as the part it belongs to
FOLDER_PARTS = {"reader": "intake", "writer": "export"}


def part(module: str) -> str:
    """The core part a module belongs to: planner.<part>, or for a framework's reader*/writer* module, intake/export."""
    parts = module.split(".")
    if parts[1] == "frameworks" and len(parts) == 4:
        return next((p for prefix, p in FOLDER_PARTS.items() if parts[3].startswith(prefix)), "frameworks")
    return parts[1]


def stage(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "planner" or len(parts) < 2 or parts[1] == "cli":
        return None
    return next(i for i, names in enumerate(CORE_STAGES) if part(module) in names)


def core_backward(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    return sorted(
        (m, d)
        for m, deps in graph.items()
        for d in deps
        if stage(m) is not None and stage(d) is not None and part(m) != part(d) and stage(d) >= stage(m)
    )


def test_the_core_imports_its_stages_one_way():
    graph = _graph()
    assert {part(m) for m in graph if stage(m) is not None} == set().union(*CORE_STAGES) - {"__init__"}
    assert not core_backward(graph), core_backward(graph)
    planted = {
        **graph,
        "planner.config.spec": graph["planner.config.spec"] | {"planner.search.search"},
        "planner.search.search": graph["planner.search.search"] | {"planner.export.export"},
    }
    planted["planner.frameworks.swift"] = graph["planner.frameworks.swift"] | {"planner.frameworks.swift.reader"}
    planted["planner.frameworks.swift.reader"] = graph["planner.frameworks.swift.reader"] | {
        "planner.frameworks.swift.writer"
    }
    assert core_backward(planted) == [
        ("planner.config.spec", "planner.search.search"),
        ("planner.frameworks.swift", "planner.frameworks.swift.reader"),  # an adapter importing its reader
        ("planner.frameworks.swift.reader", "planner.frameworks.swift.writer"),  # a reader importing a writer
        ("planner.search.search", "planner.export.export"),
    ]


def test_a_suggest_request_flows_one_way():
    """tools/request_flow.py over the README's first request: no core module is re-entered from another core
    module (a library's callback, pydantic running Knobs' validator, is counted apart)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("request_flow", ROOT / "tools" / "request_flow.py")
    flow = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(flow)
    from planner import advise

    req = advise.parse(advise.SuggestRequest, flow.BODY)
    counts = flow.flow(lambda: advise.suggest(req))
    assert counts["reentries"] == {}, counts["reentries"]
    assert counts["entries"]["planner.export.launch"] == 1  # launch material: made in one place, once
