"""Where an attached graph came from, so replay and fixtures can find it again without ``--graph``.

``attach()`` notes the module it was called from. When the first run
starts (by then that module has finished importing), the module's globals
are searched for the attribute holding the graph: ``module:attr`` for an
importable module, ``path.py:attr`` for a script run as ``__main__`` or a file
loaded under a name it cannot be imported by. Only
attribute identity is compared; nothing is imported or called. A graph
built inside a function has no such attribute: its runs keep no reference,
and ``attach(..., graph_ref="module:attr")`` names it explicitly.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_GRAPH_NAME = "LangGraph"  # what LangGraph names a graph nobody named


@dataclass
class Origin:
    """The module ``attach()`` was called from, and the graph objects to look for in it."""

    module: str | None
    file: str | None
    targets: tuple[int, ...]  # id() of the original graph and of its recorded copy
    scanned: bool = False  # the other loaded modules were searched once already
    # The module's own namespace, as attach() saw it: a server that loads one file once per
    # graph it serves (LangGraph's, as ``__agent``) leaves only the last under that name.
    namespace: dict[str, Any] | None = None

    def reference(self) -> str | None:
        """``module:attr`` (or ``path.py:attr``) of a module-level attribute holding the graph, if one does.

        The caller's module is looked at first. A script (``__main__``) is the last
        resort, since loading it runs it again: an importable module holding the
        original graph (``from agent import graph`` in the script) is preferred, and
        it is also what a caller without such an attribute (``attach`` inside a
        function) gets. Several: the one imported last, usually where the graph is built.
        """
        own = self._own()
        if own is not None and self.module != "__main__":
            return own
        if not self.scanned:
            self.scanned = True
            found = _importable_holder(self.targets[0], skip=self.module)
            if found is not None:
                return found
        return own

    def _own(self) -> str | None:
        namespace = self.namespace
        if namespace is None:
            module = sys.modules.get(self.module or "")
            namespace = _namespace(module) if module is not None else None
        names = _names_holding(namespace, set(self.targets)) if namespace is not None else []
        if not names:
            return None
        attr = names[0]
        if self.module != "__main__" and _named_after_its_file(self.module or "", self.file):
            return f"{self.module}:{attr}"
        if not self.file:
            return None
        return f"{_portable(self.file)}:{attr}"


def _named_after_its_file(module: str, file: str | None) -> bool:
    """Whether ``module`` is the name its file imports by (``myapp.agent`` from ``myapp/agent.py``).

    A file loaded under another name (LangGraph's server loads ``./agent.py`` as ``__agent``)
    cannot be imported by that name again: it is found again by its path.
    """
    if not file:
        return True
    path = Path(file)
    stem = path.name.split(".")[0]  # agent.py, agent.cpython-311-x86_64-linux-gnu.so
    last = module.rsplit(".", 1)[-1]
    return path.parent.name == last if stem == "__init__" else stem == last


def _namespace(module: Any) -> dict[str, Any] | None:
    try:
        namespace = vars(module)
    except Exception:  # noqa: BLE001 - an odd module object: no reference, recording goes on
        return None
    return namespace if isinstance(namespace, dict) else None


def _names_holding(namespace: dict[str, Any], targets: set[int]) -> list[str]:
    """Public names in a module's ``namespace`` whose value is one of ``targets`` (by identity), sorted."""
    try:
        # A first pass at C speed: most modules hold neither graph, and a process has
        # a thousand modules with tens of thousands of attributes.
        if targets.isdisjoint(map(id, list(namespace.values()))):
            return []
        return sorted(name for name, value in list(namespace.items()) if id(value) in targets and not name.startswith("_"))
    except Exception:  # noqa: BLE001 - an odd module namespace: no reference, recording goes on
        return []


# Packages that never hold a user's graph: the standard library's, and the libraries an agent
# process loads by the hundred (a process running create_react_agent holds about 1,300
# modules, 1,100 of them these; looking through them all took 9 ms each time a new graph was
# attached and run, a request's worth in a server that builds its graph per request).
_NOT_USERS = frozenset(sys.stdlib_module_names) | {
    "graphtape", "langchain", "langchain_core", "langchain_text_splitters", "langgraph", "langgraph_sdk",
    "langsmith", "pydantic", "pydantic_core", "typing_extensions", "annotated_types", "typing_inspection",
    "sqlalchemy", "psycopg", "psycopg2", "psycopg_binary", "pg8000", "asyncpg", "greenlet", "orjson",
    "ormsgpack", "xxhash", "zstandard", "uuid_utils", "re2", "deepdiff", "orderly_set", "textual", "rich",
    "markdown_it", "mdurl", "pygments", "platformdirs", "vcr", "yaml", "wrapt", "multidict", "yarl",
    "propcache", "aiohttp", "aiohappyeyeballs", "aiosignal", "frozenlist", "attr", "attrs", "requests",
    "requests_toolbelt", "urllib3", "certifi", "charset_normalizer", "idna", "httpx", "httpcore", "h11",
    "anyio", "sniffio", "websockets", "jsonpatch", "jsonpointer", "tenacity", "packaging", "openai",
    "anthropic", "jiter", "distro", "tiktoken", "regex", "tqdm", "numpy", "pandas", "google", "grpc",
    "opentelemetry", "pytest", "_pytest", "pluggy", "iniconfig", "six", "dateutil",
}


def _importable_holder(target: int, skip: str | None) -> str | None:
    """``module:attr`` of the last-imported module (not a script, not graphtape, not a library's) holding ``target``."""
    found = None
    for name, module in list(sys.modules.items()):
        if module is None or name == skip or name == "__main__" or name.startswith("_") or name.partition(".")[0] in _NOT_USERS:
            continue
        namespace = _namespace(module)
        names = _names_holding(namespace, {target}) if namespace is not None else []
        if names:
            found = f"{name}:{names[0]}"
    return found


def origin_of(graph: Any, copy: Any, depth: int = 2) -> Origin:
    """The caller's module (``depth`` frames up from here) and the two graph objects to find in it."""
    try:
        frame = sys._getframe(depth)
        namespace = frame.f_globals
        module, file = namespace.get("__name__"), namespace.get("__file__")
    except (ValueError, AttributeError):
        namespace, module, file = None, None, None
    return Origin(module, file, (id(graph), id(copy)), namespace=namespace)


def _portable(file: str) -> str:
    """A path relative to the working directory when the file is under it, else absolute."""
    path = Path(file).resolve()
    try:
        return path.relative_to(Path(os.getcwd()).resolve()).as_posix()
    except (ValueError, OSError):
        return path.as_posix()


def display_name(graph_name: str, graph_ref: str | None) -> str:
    """The graph's own name, or where it came from when LangGraph named it ``LangGraph``."""
    if graph_name != DEFAULT_GRAPH_NAME or not graph_ref:
        return graph_name
    module, _, attr = graph_ref.rpartition(":")
    return f"{Path(module).stem if module.endswith('.py') else module.rsplit('.', 1)[-1]}:{attr}"
