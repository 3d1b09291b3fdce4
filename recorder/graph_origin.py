"""Where an attached graph came from, so replay and fixtures can find it again without ``--graph``.

``attach()`` notes the module it was called from. When the first run
starts (by then that module has finished importing), the module's globals
are searched for the attribute holding the graph: ``module:attr`` for an
importable module, ``path.py:attr`` for a script run as ``__main__``. Only
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

    def reference(self) -> str | None:
        """``module:attr`` (or ``path.py:attr``) of a module-level attribute holding the graph, if one does."""
        module = sys.modules.get(self.module or "")
        if module is None:
            return None
        try:
            names = [name for name, value in list(vars(module).items()) if id(value) in self.targets and not name.startswith("_")]
        except Exception:  # noqa: BLE001 - an odd module namespace: no reference, recording goes on
            return None
        if not names:
            return None
        attr = sorted(names)[0]
        if self.module != "__main__":
            return f"{self.module}:{attr}"
        if not self.file:
            return None
        return f"{_portable(self.file)}:{attr}"


def origin_of(graph: Any, copy: Any, depth: int = 2) -> Origin:
    """The caller's module (``depth`` frames up from here) and the two graph objects to find in it."""
    try:
        frame = sys._getframe(depth)
        module, file = frame.f_globals.get("__name__"), frame.f_globals.get("__file__")
    except (ValueError, AttributeError):
        module, file = None, None
    return Origin(module, file, (id(graph), id(copy)))


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
