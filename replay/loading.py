"""Load a user's compiled graph from a reference: ``package.module:attr`` or ``path/to/file.py:attr``.

Loading EXECUTES CODE: a file reference runs that file as a module, a module
reference imports the module (and its packages), with whatever they do at
import time. So only a reference a person wrote is loaded directly (``--graph``,
``--override``, a marker's ``graph=``). A reference read from a recording or
a fixture is shown first, with the file it resolves to
(:func:`source_of`), and loaded only when the user agrees: a prompt on a
terminal, ``--trust-recorded-graph``, or a confirmation in the TUI.

Files are loaded by path with importlib under a private module name, so a file
called ``graph.py`` never shadows or replaces an installed module. Every
failure is a :class:`GraphLoadError` whose message names the reference and
what to try; the original exception stays chained for ``--debug``.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import shlex
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from graphtape.recorder.errors import GraphtapeError
from graphtape.recorder.run_gate import GraphRunStopped, runs_stopped
from graphtape.recorder.terminal_text import printable
from graphtape.recorder.windows_paths import WINDOWS_HINT, windows_path
from graphtape.replay.module_hint import raised_where, where_to_run

__all__ = ["GraphLoadError", "check_ref", "load_callable", "load_graph", "load_module_from_path", "source_of", "split_ref"]


class GraphLoadError(GraphtapeError):
    """A graph reference could not be resolved to a compiled graph."""


def split_ref(ref: str) -> tuple[str, str]:
    """``"a/b.py:graph"`` -> ``("a/b.py", "graph")``; the last colon separates (Windows drive letters survive).

    A reference without its ``:attr`` (``myapp/agent.py``) is refused with the usual one,
    ``:graph``, suggested; a Windows path (``myapp\\agent.py:graph``), as ``--db`` refuses one.
    """
    text = (ref or "").strip()
    target, sep, attr = text.rpartition(":")
    named = bool(sep and target and attr and all(part.isidentifier() for part in attr.split(".")))
    windows = windows_path(target if named else text)
    if windows is not None:
        raise GraphLoadError(f"bad graph reference {ref!r}: {windows!r} is {WINDOWS_HINT}")
    if not named:
        bare = target if sep and not attr else text if not sep else ""
        guess = f"; did you mean {bare + ':graph'!r}?" if bare and (_is_path(bare) or all(p.isidentifier() for p in bare.split("."))) else ""
        raise GraphLoadError(f"bad graph reference {ref!r}: use package.module:attr or path/to/file.py:attr (the attribute holding the compiled graph){guess}")
    return target, attr


def _is_path(target: str) -> bool:
    return target.endswith(".py") or os.sep in target or "/" in target


def check_ref(ref: str) -> None:
    """Refuse ``ref`` as loading it would, but without importing or running anything.

    For a command that only writes a reference down (``export``): a
    reference that can never load would give a test that can only fail. A
    file path must name a file (from the current directory, as a load takes
    it); a module must be a dotted name, found or not.
    """
    target, _attr = split_ref(ref)
    if _is_path(target):
        _require_file(Path(target).expanduser())
    elif not all(part.isidentifier() for part in target.split(".")):
        raise GraphLoadError(f"bad graph reference {ref!r}: {target!r} is not a module name; use package.module:attr or path/to/file.py:attr")


def _require_file(file: Path) -> None:
    if not file.is_file():
        where = "it is a directory" if file.is_dir() else "no such file"
        if where == "no such file" and not file.is_absolute():
            where += f" in {Path.cwd()} (a relative path is read from the working directory)"
            where += _bundled_demo(file)
        raise GraphLoadError(f"cannot load {file}: {where}")


def _bundled_demo(file: Path) -> str:
    """``; the demo's agents come with graphtape: ...`` for the README's ``fixtures/agents/...``
    paths given outside graphtape's repository (after ``graphtape demo`` in a project's folder)."""
    if file.parts[:2] != ("fixtures", "agents"):
        return ""
    bundled = Path(__file__).resolve().parent.parent / file
    if not bundled.is_file():
        return ""
    return f"; the demo's agents come with graphtape: {shlex.quote(printable(str(bundled)))}"


def load_module_from_path(path: str | os.PathLike) -> ModuleType:
    """Execute a Python file as a private module (cached per resolved path for this process)."""
    file = Path(path).expanduser()
    _require_file(file)
    file = file.resolve()
    digest = hashlib.sha1(str(file).encode()).hexdigest()[:8]
    name = f"_graphtape_user_{file.stem}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise GraphLoadError(f"cannot load {file}: not a Python source file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    # Let the file import its siblings while it runs, as `python file.py` would.
    sys.path.insert(0, str(file.parent))
    try:
        with runs_stopped(str(file)):
            spec.loader.exec_module(module)
    except GraphRunStopped as stop:
        _note_stopped(stop)  # the module stays as far as it ran: where its graph was built
    except BaseException as exc:
        del sys.modules[name]
        if isinstance(exc, Exception):
            raise GraphLoadError(f"loading {file} failed: {type(exc).__name__}: {_first_line(exc)}{raised_where(exc)}") from exc
        raise
    finally:
        try:
            sys.path.remove(str(file.parent))
        except ValueError:
            pass
    return module


def _import_module(name: str, near: tuple = ()) -> ModuleType:
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # `graphtape ... mypkg.agent:graph` from a project root
    origin = _origin_of(name)
    try:
        with runs_stopped(origin or name):
            return importlib.import_module(name)
    except GraphRunStopped as stop:
        # The import system dropped the half-run module: a module that runs its graph when
        # imported is loaded by its path instead, where it is kept as far as it ran.
        if origin is None or not origin.endswith(".py"):
            raise GraphLoadError(f"importing {name} runs a graph ({stop}): put that run under `if __name__ == \"__main__\":`") from None
        return load_module_from_path(origin)
    except ModuleNotFoundError as exc:
        if exc.name and (name == exc.name or name.startswith(exc.name + ".")):
            raise GraphLoadError(f"no module named {name!r}: {where_to_run(name, near)}") from exc
        raise GraphLoadError(f"importing {name} failed: {type(exc).__name__}: {_first_line(exc)}{raised_where(exc)}") from exc
    except Exception as exc:  # noqa: BLE001 - the user's module raised while importing
        raise GraphLoadError(f"importing {name} failed: {type(exc).__name__}: {_first_line(exc)}{raised_where(exc)}") from exc


def _origin_of(name: str) -> str | None:
    """The file importing ``name`` would run, found without importing it (``None`` if not found)."""
    if name in sys.modules:
        return None  # imported already: importing it again runs nothing
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError, AttributeError):
        return None
    origin = getattr(spec, "origin", None)
    return origin if isinstance(origin, str) and os.path.isfile(origin) else None


def _note_stopped(stop: GraphRunStopped) -> None:
    place = f"{stop.file} line {stop.line}" if stop.line else stop.file
    where = printable(" ".join(place.splitlines()))
    print(
        f"graphtape: note: {where} runs a graph when loaded; graphtape stopped that run (it loads the file for its graph only):"
        ' put the run under `if __name__ == "__main__":`',
        file=sys.stderr,
    )


def _resolve(ref: str, base: str | os.PathLike | None = None, near: tuple = ()) -> tuple[Any, ModuleType, str]:
    target, attr = split_ref(ref)
    if _is_path(target):
        path = Path(target).expanduser()
        if not path.is_absolute() and base is not None:
            path = Path(base) / path
        module = load_module_from_path(path)
    else:
        module = _import_module(target, (*near, *((base,) if base is not None else ())))
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            hint = _graph_like_names(module)
            more = f"; graph-like names there: {', '.join(hint)}" if hint else ""
            raise GraphLoadError(f"{target} has no attribute {attr!r}{more}")
        obj = getattr(obj, part)
    return obj, module, target


def source_of(ref: str, base: str | os.PathLike | None = None) -> Path | None:
    """The file loading ``ref`` would execute, found WITHOUT importing anything; ``None`` if not found.

    A module reference is looked up on ``sys.path`` (and the current
    directory) as the import system would, without running a package's
    ``__init__``.
    """
    try:
        target, _attr = split_ref(ref)
    except GraphLoadError:
        return None
    if _is_path(target):
        path = Path(target).expanduser()
        if not path.is_absolute():
            path = Path(base or os.getcwd()) / path
        return path.resolve() if path.is_file() else None
    parts = target.split(".")
    if not all(p.isidentifier() for p in parts):
        return None
    from importlib.machinery import PathFinder

    for entry in [os.getcwd(), *sys.path]:
        folder = Path(entry or os.getcwd()).joinpath(*parts[:-1])
        if not folder.is_dir():
            continue
        # The import system's own finder, asked about one folder: it picks as an import would (a
        # package's __init__ before a module of the same name, an extension module before a .py)
        # and runs nothing. A folder without __init__ (a namespace package) runs no file here.
        try:
            spec = PathFinder.find_spec(parts[-1], [str(folder)])
        except (ImportError, ValueError, OSError):
            continue
        origin = getattr(spec, "origin", None) if spec is not None else None
        if origin and Path(origin).is_file():
            return Path(origin).resolve()
    return None


def package_files_of(ref: str, source: Path | None) -> list[Path]:
    """The ``__init__`` files of the packages a module reference sits in, which importing it runs
    first (those not imported yet), outermost first; found beside ``source`` (``source_of``)."""
    try:
        target, _attr = split_ref(ref)
    except GraphLoadError:
        return []
    if source is None or _is_path(target):
        return []
    parts = target.split(".")
    folder = source.parent if source.name.split(".")[0] != "__init__" else source.parent.parent
    out = []
    for depth in range(len(parts) - 1, 0, -1):  # the innermost package is the leaf's own folder
        init = folder / "__init__.py"
        if ".".join(parts[:depth]) not in sys.modules and init.is_file():
            out.append(init.resolve())
        folder = folder.parent
    return out[::-1]


def load_callable(ref: str) -> Any:
    """A function named by ``module:attr`` or ``path.py:attr`` (a replay override, given by the user)."""
    obj, _module, _target = _resolve(ref)
    if not callable(obj):
        raise GraphLoadError(f"{ref} is {_a(type(obj).__name__)}, not a function")
    return obj


def load_graph(ref: str, base: str | os.PathLike | None = None, near: tuple = ()) -> Any:
    """Execute the file or import the module ``ref`` names, and return the compiled graph there.

    Any code in that file or module runs. Raises :class:`GraphLoadError` with a
    hint when there is no compiled graph. A relative file path is taken from
    ``base`` (default: the current directory). A module that does not import names the folder
    holding it, looked for above the current directory and in ``near`` (a store's folder).
    """
    obj, _module, _target = _resolve(ref, base, near)
    if not _looks_compiled(obj):
        if hasattr(obj, "compile"):
            raise GraphLoadError(f"{ref} is an uncompiled {type(obj).__name__}: point at the result of .compile()")
        raise GraphLoadError(f"{ref} is {_a(type(obj).__name__)}, not a compiled LangGraph graph")
    return obj


def _looks_compiled(obj: Any) -> bool:
    return not isinstance(obj, type) and hasattr(obj, "stream") and hasattr(obj, "checkpointer")


def _graph_like_names(module: ModuleType) -> list[str]:
    return sorted(n for n, v in vars(module).items() if not n.startswith("_") and _looks_compiled(v))


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def _a(name: str) -> str:
    """``a dict``, ``an int``: a type's name with its article."""
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"
