"""One cache of compiled SQL for every SQLite store a process opens.

SQLAlchemy compiles each statement once per engine: its cache is keyed by the
engine's dialect object. graphtape makes an engine per store it opens, and a
process often opens several: a replay by path opens the recording's store,
a test suite one per test, a script that reads several files one per file.
Each engine compiled again the same few dozen statements, about
0.7 ms each: the largest part of what opening a store and replaying a short
run from it cost.

The SQLite engines made here differ only in the file they open. Their
dialects are alike: same class, the one ``sqlite3`` library of this process,
the same ``create_engine`` options. So this cache keys a statement by what
its compiled form depends on (the dialect's class and the settings compiling
reads) instead of by the dialect object, and every SQLite store shares it.
PostgreSQL engines keep their own cache: two servers may differ in version
and settings.

A key not shaped as SQLAlchemy 2 makes it (a later release) is kept as it
is: the cache then works per engine, as SQLAlchemy's own does.
"""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy.engine import Dialect

# Statements graphtape makes: a few hundred shapes at most. Past the bound the cache starts over
# (a dict's reads and writes stay atomic, with no lock on the read path).
MAX_ENTRIES = 2000


class SharedCompiledCache:
    """A ``compiled_cache`` execution option shared by engines whose dialects compile alike."""

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self._entries: dict[Any, Any] = {}
        self._max = max_entries
        self._lock = threading.Lock()

    def get(self, key: Any, default: Any = None) -> Any:
        return self._entries.get(_shared_key(key), default)

    def __setitem__(self, key: Any, value: Any) -> None:
        shared = _shared_key(key)
        with self._lock:
            if len(self._entries) >= self._max:
                self._entries.clear()
            self._entries[shared] = value

    def __len__(self) -> int:
        return len(self._entries)


def _shared_key(key: Any) -> Any:
    if type(key) is tuple and key and isinstance(key[0], Dialect):
        return (dialect_key(key[0]), *key[1:])
    return key


def dialect_key(dialect: Dialect) -> tuple[Any, ...]:
    """What a statement's compiled form depends on, of its dialect."""
    return (
        type(dialect),
        dialect.server_version_info,
        dialect.paramstyle,
        dialect.label_length,
        dialect.max_identifier_length,
        dialect.supports_native_boolean,
        dialect.supports_multivalues_insert,
        getattr(dialect, "use_insertmanyvalues", None),
        getattr(dialect, "insert_returning", None),
    )


SQLITE_COMPILED = SharedCompiledCache()
