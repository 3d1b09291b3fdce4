"""Load the graph a test names: ``package.module:attr`` or ``path/to/file.py:attr``.

Used by the pytest plugin, which must not import the TUI. Only references a
person wrote (a marker's ``graph=``) are loaded, never one read from a fixture.
Files load under the same private module name as the CLI gives them, so a
graph loaded by either is the same module object.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

from recorder.errors import GraphtapeError

__all__ = ["GraphRefError", "load_graph_ref"]


class GraphRefError(GraphtapeError):
    """A graph reference does not lead to a compiled graph."""


def load_graph_ref(ref: str, base: str | os.PathLike | None = None) -> Any:
    """The compiled graph ``ref`` points at; a relative file path is taken from ``base`` (default: cwd)."""
    target, sep, attr = (ref or "").strip().rpartition(":")
    if not sep or not target or not attr or not all(p.isidentifier() for p in attr.split(".")):
        raise GraphRefError(f"bad graph reference {ref!r}: use package.module:attr or path/to/file.py:attr")
    if target.endswith(".py") or "/" in target or os.sep in target:
        path = Path(target).expanduser()
        if not path.is_absolute() and base is not None:
            path = Path(base) / path
        obj: Any = _load_file(path)
    else:
        try:
            obj = importlib.import_module(target)
        except ModuleNotFoundError as exc:
            if exc.name and (target == exc.name or target.startswith(exc.name + ".")):
                raise GraphRefError(f"no module named {target!r}: check the test's sys.path, or give path/to/file.py:attr") from exc
            raise GraphRefError(f"importing {target} failed: {type(exc).__name__}: {_line(exc)}") from exc
        except Exception as exc:  # noqa: BLE001 - the user's module failed while importing
            raise GraphRefError(f"importing {target} failed: {type(exc).__name__}: {_line(exc)}") from exc
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise GraphRefError(f"{target} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if isinstance(obj, type) or not (hasattr(obj, "stream") and hasattr(obj, "checkpointer")):
        hint = ": point at the result of .compile()" if hasattr(obj, "compile") else ""
        raise GraphRefError(f"{ref} is a {type(obj).__name__}, not a compiled LangGraph graph{hint}")
    return obj


def _load_file(path: Path) -> Any:
    if not path.is_file():
        raise GraphRefError(f"cannot load {path}: {'it is a directory' if path.is_dir() else 'no such file'}")
    path = path.resolve()
    name = f"_graphtape_user_{path.stem}_{hashlib.sha1(str(path).encode()).hexdigest()[:8]}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise GraphRefError(f"cannot load {path}: not a Python source file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:
        del sys.modules[name]
        if isinstance(exc, Exception):
            raise GraphRefError(f"loading {path} failed: {type(exc).__name__}: {_line(exc)}") from exc
        raise
    finally:
        try:
            sys.path.remove(str(path.parent))
        except ValueError:
            pass
    return module


def _line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
