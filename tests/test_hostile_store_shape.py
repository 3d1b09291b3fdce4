"""A received SQLite store whose graphtape tables are not plain tables is refused before any read.

SQLite runs SQL kept in the file: a view named ``runs`` over an endless recursive query hung
every command, a generated column built gigabytes per row before the read limit saw it.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from graphtape.recorder import Recorder, StoreError, open_store
from graphtape.tui.cli import main

ENDLESS = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT i FROM n"


def _recorded(tmp_path: Path) -> Path:
    from langgraph.graph import END, START, StateGraph
    from typing_extensions import TypedDict

    class S(TypedDict):
        n: int

    b = StateGraph(S)
    b.add_node("inc", lambda s: {"n": s["n"] + 1})
    b.add_edge(START, "inc")
    b.add_edge("inc", END)
    db = tmp_path / "received.db"
    with Recorder(db) as rec:
        rec.attach(b.compile(), name="ok", tags=["t"]).invoke({"n": 0})
    return db


def _tamper(db: Path, *statements: str) -> None:
    conn = sqlite3.connect(db)
    conn.executescript(";\n".join(statements))
    conn.close()


HOSTILE = {
    "view": (["ALTER TABLE runs RENAME TO runs_kept", f"CREATE VIEW runs AS SELECT r.* FROM runs_kept r, ({ENDLESS}) e"], "its runs is a view"),
    "generated column": (["ALTER TABLE steps ADD COLUMN big BLOB GENERATED ALWAYS AS (zeroblob(900000000)) VIRTUAL"], "generated columns"),
    "trigger": (["CREATE TRIGGER slow AFTER INSERT ON runs BEGIN SELECT count(*) FROM (" + ENDLESS + "); END"], "trigger graphtape did not make"),
    "virtual table": (["ALTER TABLE calls RENAME TO calls_kept", "CREATE VIRTUAL TABLE calls USING rtree(id, a, b)"], "virtual table"),
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_store_with_sql_of_its_own_is_refused_in_one_line(tmp_path, kind):
    db = _recorded(tmp_path)
    statements, why = HOSTILE[kind]
    _tamper(db, *statements)
    for argv in (["runs"], ["runs", "--json"], ["show", "last"], ["stats"]):
        # In a child process with a deadline: the view made every one of these hang.
        proc = subprocess.run([sys.executable, "-m", "graphtape", "--db", str(db), *argv], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and why in proc.stderr, (argv, proc.stderr[-500:])
    with pytest.raises(StoreError, match=why):
        open_store(db)
    with pytest.raises(StoreError, match=why):
        Recorder(db)


def test_graphtapes_own_store_with_its_triggers_opens(tmp_path, capsys):
    db = _recorded(tmp_path)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'trigger'").fetchone()[0] == 5
    conn.close()
    assert main(["--db", str(db), "runs", "--tag", "t"]) == 0
    assert "ok" in capsys.readouterr().out
