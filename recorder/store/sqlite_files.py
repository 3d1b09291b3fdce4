"""Whether a SQLite file can be written, and the URI that reads it without writing anything beside it.

Kept free of SQLAlchemy: ``quick_listing`` (``graphtape runs`` without
SQLAlchemy) asks the same questions as the full store's ``read_only``.
"""

from __future__ import annotations

import functools

import os
from pathlib import Path
from urllib.parse import quote

# Text that is not UTF-8 (graphtape never writes any: a crafted or damaged file) reads with
# U+FFFD where it is wrong, as a terminal shows it; sqlite3's own decoding refused the whole
# read, so one such cell made every run of the store unreadable. (str itself, in C: no cost.)
TEXT_FACTORY = functools.partial(str, encoding="utf-8", errors="replace")


def sqlite_cannot_write(path: Path) -> bool:
    """Whether opening ``path`` for writing would fail: the file, or its folder and its WAL files, not writable.

    ``os.access`` also answers for a read-only mount (as root too). A writable
    file in a folder we cannot write to is still writable when its ``-wal`` and
    ``-shm`` are there and writable (SQLite needs nothing else).
    """
    if not os.access(path, os.W_OK):
        return True
    if os.access(path.parent, os.W_OK | os.X_OK):
        return False
    return not all(os.access(f"{path}{end}", os.W_OK) for end in ("-wal", "-shm"))


def read_only_uri(path: Path) -> str:
    """The SQLite URI that reads ``path`` without creating anything beside it."""
    flag = "mode=ro" if Path(f"{path}-shm").exists() else "immutable=1"
    return f"file:{quote(str(path))}?{flag}"
