"""The import graph: no cycles, every module imports only from its own layer or below, and only the store speaks SQL.

Layers, bottom up: the recorder; replay; the TUI's plain helpers (data,
rendering, views, the demo); widgets; screens; the app; the command line.
Read from the source files (every ``import``, top-level or inside a
function), so a lazy import cannot hide a cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {
    "graphtape": ROOT / "graphtape",
    "graphtape.recorder": ROOT / "recorder",
    "graphtape.replay": ROOT / "replay",
    "graphtape.tui": ROOT / "tui",
}
LAYERS = [  # (prefix, layer); the longest matching prefix decides
    ("graphtape.recorder", 0),
    ("graphtape.replay", 1),
    ("graphtape.tui", 2),
    ("graphtape.tui.widgets", 3),
    ("graphtape.tui.screens", 4),
    ("graphtape.tui.app", 5),
    ("graphtape.tui.cli", 6),
    ("graphtape.tui.__main__", 7),
    ("graphtape", 7),
]


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package, folder in FOLDERS.items():
        for path in folder.rglob("*.py"):
            parts = [p for p in path.relative_to(folder).with_suffix("").parts if p != "__init__"]
            found[".".join([package, *parts])] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    return {m for m in _every_import(name, path) if m in MODULES and m != name}


def _every_import(name: str, path: Path) -> set[str]:
    """Every module (and ``module.name``) the file imports, graphtape's own or not."""
    here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    seen: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            seen.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                module = ".".join(here[: len(here) - node.level + 1] + ([node.module] if node.module else []))
            seen.add(module)
            seen.update(f"{module}.{alias.name}" for alias in node.names)
    return seen


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _layer(module: str) -> int:
    cli = module.startswith("graphtape.tui.cli")
    best = max((p for p, _ in LAYERS if module == p or module.startswith(p + ".") or (cli and p == "graphtape.tui.cli")), key=len)
    return dict(LAYERS)[best]


def test_every_source_module_is_seen():
    assert {"graphtape.recorder.attach", "graphtape.replay.runner", "graphtape.tui.cli", "graphtape.tui.screens.run"} <= set(MODULES)


def test_no_module_imports_from_a_higher_layer():
    upward = sorted(
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        for target in targets
        if _layer(target) > _layer(module) and not module.startswith(target + ".") and target != "graphtape"
    )
    assert upward == []


def test_the_import_graph_has_no_cycles():
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in GRAPH:
        if v not in index:
            visit(v)
    assert cycles == []


SQL = ("sqlalchemy", "sqlite3", "psycopg", "psycopg2")
STORE = ("graphtape.recorder.store", "graphtape.recorder.schema")
# Reads LangGraph's own checkpoint database, read-only, never graphtape's tables;
# the runs it makes are written through RunStore.
READS_ANOTHER_DATABASE = {"graphtape.recorder.import_langgraph"}


def _in(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def test_only_the_store_speaks_sql():
    """Everything else reads and writes runs through RunStore: no SQLAlchemy, database driver or table outside it."""
    assert {"graphtape.recorder.store.writing", "graphtape.recorder.store.read_steps", "graphtape.replay.fixture_export"} <= set(MODULES)
    spoken = sorted(
        f"{module} imports {target}"
        for module, path in MODULES.items()
        if not _in(module, STORE) and module not in READS_ANOTHER_DATABASE
        for target in _every_import(module, path)
        if _in(target, SQL) or _in(target, ("graphtape.recorder.schema",))
    )
    assert spoken == []
