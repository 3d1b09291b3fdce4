"""Where a module a graph reference names is, when importing it from here fails.

`graphtape replay RUN` from another folder, or `pytest` started inside `fixtures/runs`, cannot
import `myapp.agent`: the project's folder is not on the path. Looking for `myapp/agent.py`
(nothing imported, nothing run) in the folders above the working one, and in the folders the
caller names (a store's), turns "check PYTHONPATH" into the folder to run from.
"""

from __future__ import annotations

import os
import shlex
import sys
import traceback
from collections.abc import Iterable
from pathlib import Path

from graphtape.recorder.terminal_text import printable


def module_folder(name: str, near: Iterable[str | os.PathLike] = ()) -> tuple[Path, Path] | None:
    """The folder ``name`` imports from (and its file there), among ``near`` and the working
    folder's parents; ``None`` if none holds it."""
    parts = name.split(".")
    if not all(p.isidentifier() for p in parts):
        return None
    here = Path.cwd()
    seen: set[Path] = {here}
    for folder in [*(Path(p).expanduser() for p in near), *here.parents]:
        try:
            folder = folder.resolve()
        except OSError:
            continue
        if folder in seen:
            continue
        seen.add(folder)
        for file in (folder.joinpath(*parts).with_suffix(".py"), folder.joinpath(*parts, "__init__.py")):
            try:
                if file.is_file():
                    return folder, file
            except OSError:
                break
    return None


def store_folder(url: object) -> tuple[Path, ...]:
    """The folder of a SQLite store file, as ``near``: a project's runs usually sit beside its
    code, so a graph module not found from here is looked for there too."""
    if not isinstance(url, str) or not url.startswith("sqlite:///") or "?" in url or url == "sqlite:///:memory:":
        return ()
    return (Path(url[len("sqlite:///") :]).expanduser().absolute().parent,)


def where_to_run(name: str, near: Iterable[str | os.PathLike] = ()) -> str:
    """What a "no module named" error should say to do: the folder that holds the module, if one
    does, else the general advice."""
    found = module_folder(name, near)
    if found is None:
        return "check PYTHONPATH, or give a path/to/file.py:attr"
    folder, file = found
    shown = printable(str(folder))
    return (
        f"{printable(str(file.relative_to(folder)))} is in {shown}, not under {printable(str(Path.cwd()))}: "
        f"run from {shown}, or set PYTHONPATH={shlex.quote(shown)}"
    )


def raised_where(exc: BaseException) -> str:
    """What to look at when a graph's module raised while it loaded: `` (raised at app/agent.py
    line 3)``, the innermost frame of the error, and for a missing dependency, which Python was
    asked (graphtape installed with pipx, or in another virtualenv than the project's, cannot
    import the project's packages)."""
    if isinstance(exc, SyntaxError):
        return ""  # its message already names the file and line
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith("<frozen ")]
    where = ""
    if frames:
        file = Path(frames[-1].filename)
        try:
            file = file.relative_to(Path.cwd())
        except ValueError:
            pass
        where = f" (raised at {printable(str(file))} line {frames[-1].lineno})"
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        top = exc.name.partition(".")[0]
        where += f"; is {printable(top)} installed in the Python graphtape runs on ({printable(sys.executable)})? install it there, or graphtape in your project's environment"
    return where
