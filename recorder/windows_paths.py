"""A Windows-style path given on a system whose separator is ``/``: told apart, so it is refused in one line.

``C:\\runs\\g.db`` or ``myapp\\agent.py`` on Linux would name one file in the working folder with
the backslashes in its name: never what was meant. ``--db`` and ``--graph`` both say so.
"""

from __future__ import annotations

import os
import re

WINDOWS_HINT = "a Windows path, and on this system paths use '/' (a backslash would be part of a file's name)"
_WINDOWS_PATH = re.compile(r"^(?:[A-Za-z]:[\\/]|\\\\|\.{0,2}\\)|^[^/]*\\[^/]*$")


def windows_path(path: str | os.PathLike | None) -> str | None:
    """``path`` if it is a Windows-style path given on a system whose separator is ``/``, else None (URLs never are)."""
    if path is None or os.sep != "/":
        return None
    text = os.fspath(path)
    if not isinstance(text, str) or "://" in text:
        return None
    return text if _WINDOWS_PATH.search(text) else None
