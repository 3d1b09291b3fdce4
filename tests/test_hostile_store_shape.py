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
    # SQL run on every row written: a replay records into the store it reads.
    "expression index": (["CREATE INDEX evil ON steps(length(hex(zeroblob(400000000 + seq))))"], "index evil is on an expression"),
    "partial index on an expression": (["CREATE INDEX evil ON calls(run_id) WHERE length(hex(zeroblob(400000000))) > 0"], "index evil is on an expression"),
    "facets view": (["DROP TABLE run_facets", f"CREATE VIEW run_facets AS SELECT 'tag' kind, 't' value, e.i run_id FROM ({ENDLESS}) e"], "its run_facets is a view"),
    "check constraint": (
        ["ALTER TABLE blobs RENAME TO blobs_kept", "CREATE TABLE blobs (hash VARCHAR(32) PRIMARY KEY, zipped BOOLEAN, data BLOB CHECK (length(hex(zeroblob(400000000))) > 0))"],
        "CHECK constraint or a computed default",
    ),
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
    # Its indexes, partial ones included, are plain: an index a user adds on columns is too.
    _tamper(db, "CREATE INDEX IF NOT EXISTS mine ON steps (run_id, created_at DESC) WHERE summary IS NOT NULL")
    assert main(["--db", str(db), "runs"]) == 0
    capsys.readouterr()


def test_a_million_references_to_one_blob_cost_what_they_expand_to(tmp_path, capsys):
    """A step's state holding one blob of 2,000 strings a million times: decoded once, it was
    counted once, and show --json, the TUI's value view and its JSON then built it as two
    billion values. Each reference now pays for what it holds: refused in one line."""
    import hashlib
    import zlib

    import orjson

    from graphtape.recorder.store import pack, unpack
    from graphtape.tui.data import to_json

    db = _recorded(tmp_path)
    blob = orjson.dumps([f"item-{i}" for i in range(2000)])
    ref = hashlib.blake2b(blob, digest_size=16).hexdigest()
    conn = sqlite3.connect(db)
    conn.execute("INSERT OR REPLACE INTO blobs (hash, zipped, data) VALUES (?, 1, ?)", (ref, zlib.compress(blob)))
    run_id, seq, payload = conn.execute("SELECT run_id, seq, payload FROM steps WHERE step = 0").fetchone()
    tree = unpack(payload)
    tree["s"]["v"]["n"] = [{"$b": ref}] * 1_000_000
    conn.execute("UPDATE steps SET payload = ?, is_key = 1 WHERE run_id = ? AND seq = ?", (pack(tree), run_id, seq))
    conn.commit()
    conn.close()
    for argv in (["show", run_id, "--step", "0", "--json"], ["show", run_id, "--step", "0"]):
        assert main(["--db", str(db), *argv]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "expands to more than" in err, err
    store = open_store(db)
    try:
        with pytest.raises(StoreError, match="expands to more than"):
            store.state_at(run_id, 0)
        deferred = store.state_at(run_id, 0, deferred=True)["n"]  # what the TUI holds: read when shown
        with pytest.raises(StoreError, match="expands to more than"):
            to_json(deferred)  # the store's error, not orjson's TypeError (which crashed the TUI)
    finally:
        store.close()


DAMAGED_CELLS = {
    "runs.started_at": ("UPDATE runs SET started_at = 'yesterday'", "RunInfo.started_at"),
    "runs.status": ("UPDATE runs SET status = x'00ff'", "RunInfo.status"),
    "steps.flags": ("UPDATE steps SET flags = 'lots'", "StepInfo.flags"),
    "steps.duration_ms": ("UPDATE steps SET duration_ms = 'slow'", "StepInfo.duration_ms"),
}


@pytest.mark.parametrize("cell", sorted(DAMAGED_CELLS))
async def test_a_cell_of_another_type_is_damage_said_in_one_line_by_the_cli_and_the_tui(tmp_path, capsys, cell):
    """SQLite keeps any type in any column: a run or step field that is not what graphtape writes is
    'damaged data' where the record is built, not a traceback wherever the field is first used
    (the TUI printed one and exited)."""
    from graphtape.tui.app import build_app

    db = _recorded(tmp_path)
    statement, field = DAMAGED_CELLS[cell]
    _tamper(db, statement)
    code = main(["--db", str(db), "show", "last"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "holds damaged data" in err and field in err, err
    app = build_app(str(db), None)
    async with app.run_test(size=(120, 30)) as pilot:
        for _ in range(20):
            await pilot.pause(0.1)
        await pilot.press("enter")
        for _ in range(20):
            await pilot.pause(0.1)
        assert app.is_running and app.return_code is None  # an unhandled error ends the app (and the test)


# A hand-edited row holds a value of another type (SQLite keeps any type in any column): each
# command that reads it either works or refuses in one line, never "unexpected ... report it".
TYPED = {
    "versions not a mapping": ("UPDATE runs SET versions = '[1]'", ["show", "last"], 0, None),
    "config not a mapping": ("UPDATE runs SET config = '[1,2]'", ["show", "last"], 0, None),
    "flags not a number": ("UPDATE steps SET flags = 'x' WHERE step = 0", ["export", "last", "-o", "-"], 2, "holds damaged data"),
    "step not a number": ("UPDATE steps SET step = 'abc' WHERE step = 0", ["export", "last", "-o", "-"], 2, "holds damaged data"),
}


@pytest.mark.parametrize("edit", list(TYPED), ids=list(TYPED))
def test_a_wrongly_typed_column_is_read_or_refused_in_one_line(tmp_path, capsys, edit):
    statement, argv, code, said = TYPED[edit]
    db = _recorded(tmp_path)
    _tamper(db, statement)
    assert main(["--db", str(db), *argv]) == code
    err = capsys.readouterr().err
    assert "unexpected" not in err and "Traceback" not in err
    assert (said in err and len(err.strip().splitlines()) == 1) if said else err == ""
