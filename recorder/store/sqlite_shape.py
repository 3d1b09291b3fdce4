"""Whether a SQLite file's graphtape tables are plain tables, as graphtape creates them.

A received store is data from elsewhere, and SQLite runs SQL kept in the file: a
view named ``runs`` over an endless recursive query hangs every read, a generated
column builds gigabytes for each row before any read limit can see it, a trigger
runs its own statements on graphtape's writes. graphtape creates none of these
(its only triggers, which keep ``run_facets``, are known by their text), nor an index on an
expression, a CHECK constraint or a computed default (SQL run for every row written), so a
store holding one is refused before anything reads it. Free of SQLAlchemy on
purpose: ``quick_listing`` checks with the standard library's ``sqlite3``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from graphtape.recorder.sqlite_triggers import KNOWN as KNOWN_TRIGGERS
from graphtape.recorder.sqlite_triggers import stored_form

TABLES = ("graphtape_meta", "runs", "steps", "calls", "blobs", "run_facets")

_NAME = r'(?:"[^"]+"|\[[^\]]+\]|`[^`]+`|\w+)'
_COLUMN = _NAME + r"(?:\s+COLLATE\s+\w+)?(?:\s+(?:ASC|DESC))?"
# An index on plain columns, maybe partial on a column being (not) null: every index graphtape
# makes. One on an expression (length(hex(zeroblob(...)))) runs it for every row written.
_PLAIN_INDEX = re.compile(
    rf"CREATE\s+(?:UNIQUE\s+)?INDEX\s+(?:IF\s+NOT\s+EXISTS\s+)?{_NAME}(?:\.{_NAME})?\s+ON\s+{_NAME}\s*"
    rf"\(\s*{_COLUMN}(?:\s*,\s*{_COLUMN})*\s*\)(?:\s+WHERE\s+{_NAME}\s+IS\s+(?:NOT\s+)?NULL)?\s*;?",
    re.IGNORECASE,
)
# A CHECK constraint or a default computed by an expression: SQL run for every row written.
_RUNS_ON_WRITE = re.compile(r"\bCHECK\s*\(|\bDEFAULT\s*\(", re.IGNORECASE)

Execute = Callable[[str], Sequence[Sequence[Any]]]


def shape_problem(execute: Execute, tables: Sequence[str] = TABLES) -> str | None:
    """Why the file's ``tables`` are not plain tables (a view, a virtual table, a generated column,
    a trigger), or None. ``execute(sql)`` runs a read and returns its rows."""
    rows = execute("SELECT type, name, tbl_name, sql FROM sqlite_master")
    listed = {name: (kind, sql or "") for kind, name, _table, sql in rows}
    for name in tables:
        kind, sql = listed.get(name, ("table", ""))
        if kind != "table" or sql.lstrip().upper().startswith("CREATE VIRTUAL"):
            return f"its {name} is a {'virtual table' if kind == 'table' else kind}, not a table graphtape made"
        if _RUNS_ON_WRITE.search(sql):
            return f"its {name} table has a CHECK constraint or a computed default, which graphtape never makes"
    if any(kind == "trigger" and stored_form(sql or "") not in KNOWN_TRIGGERS for kind, _name, _table, sql in rows):
        return "it holds a trigger graphtape did not make"
    for kind, name, table, sql in rows:
        if kind == "index" and sql and table in tables and not _PLAIN_INDEX.fullmatch(sql.strip()):
            return f"its index {name} is on an expression, which graphtape never makes"
    for name in tables:
        if name in listed and any(row[-1] for row in execute(f"PRAGMA table_xinfo({name})")):
            return f"its {name} table has generated columns, which graphtape never makes"
    return None
