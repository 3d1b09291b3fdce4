"""Whether a SQLite file's graphtape tables are plain tables, as graphtape creates them.

A received store is data from elsewhere, and SQLite runs SQL kept in the file: a
view named ``runs`` over an endless recursive query hangs every read, a generated
column builds gigabytes for each row before any read limit can see it, a trigger
runs its own statements on graphtape's writes. graphtape creates none of these
(its only triggers, which keep ``run_facets``, are known by their text), so a
store holding one is refused before anything reads it. Free of SQLAlchemy on
purpose: ``quick_listing`` checks with the standard library's ``sqlite3``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from graphtape.recorder.sqlite_triggers import KNOWN as KNOWN_TRIGGERS
from graphtape.recorder.sqlite_triggers import stored_form

TABLES = ("graphtape_meta", "runs", "steps", "calls", "blobs")

Execute = Callable[[str], Sequence[Sequence[Any]]]


def shape_problem(execute: Execute, tables: Sequence[str] = TABLES) -> str | None:
    """Why the file's ``tables`` are not plain tables (a view, a virtual table, a generated column,
    a trigger), or None. ``execute(sql)`` runs a read and returns its rows."""
    rows = execute("SELECT type, name, sql FROM sqlite_master")
    listed = {name: (kind, sql or "") for kind, name, sql in rows}
    for name in tables:
        kind, sql = listed.get(name, ("table", ""))
        if kind != "table" or sql.lstrip().upper().startswith("CREATE VIRTUAL"):
            return f"its {name} is a {'virtual table' if kind == 'table' else kind}, not a table graphtape made"
    if any(kind == "trigger" and stored_form(sql or "") not in KNOWN_TRIGGERS for kind, _name, sql in rows):
        return "it holds a trigger graphtape did not make"
    for name in tables:
        if name in listed and any(row[-1] for row in execute(f"PRAGMA table_xinfo({name})")):
            return f"its {name} table has generated columns, which graphtape never makes"
    return None
