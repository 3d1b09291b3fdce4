"""``gc`` on a crafted store does work in proportion to its rows, in a bounded number of statements.

Blobs were followed a level at a time, a statement per level: a chain of blobs thousands deep
cost thousands of statements (100,000 took minutes). Kept forks' parents were found by passing
over every fork until nothing changed: a long chain listed in the wrong order took a pass per link.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from pathlib import Path

from sqlalchemy import event

from graphtape.recorder import open_store
from graphtape.tui.cli import main

DEPTH = 3_000  # blobs in a chain, each referring to the next
TINY = 20_000  # tiny blobs, all referred to by one run's inputs
FORKS = 3_000  # runs each forked from the one before; only the last is recent
DOOMED = 500  # a chain of blobs only an old run reaches


def _hash(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:32]


def _chain(prefix: str, n: int) -> list[tuple[str, int, bytes]]:
    return [(_hash(f"{prefix}{i}"), 0, json.dumps({"$b": _hash(f"{prefix}{i + 1}")}).encode() if i + 1 < n else b'"end"') for i in range(n)]


def _crafted(tmp_path: Path) -> str:
    db = str(tmp_path / "crafted.db")
    open_store(db, create=True).close()
    now = time.time()
    conn = sqlite3.connect(db)
    blobs = _chain("c", DEPTH) + _chain("d", DOOMED) + [(_hash(f"t{i}"), 0, json.dumps(i).encode()) for i in range(TINY)]
    conn.executemany("INSERT INTO blobs (hash, zipped, data) VALUES (?, ?, ?)", blobs)

    def run(rid: str, ended: float, parent: str | None = None, inputs: object = None) -> None:
        conn.execute(
            "INSERT INTO runs (id, name, graph_name, status, started_at, ended_at, inputs, parent_run_id, step_count, redactions, faults)"
            " VALUES (?, 'x', 'g', 'ok', ?, ?, ?, ?, 0, 0, 0)",
            (rid, ended - 1, ended, None if inputs is None else json.dumps(inputs), parent),
        )

    run("deep", now, inputs={"$b": _hash("c0")})
    run("wide", now, inputs=[{"$b": _hash(f"t{i}")} for i in range(TINY)])
    run("old", now - 10**6, inputs={"$b": _hash("d0")})
    for i in reversed(range(FORKS)):  # newest first: the order that made a pass per link
        run(f"f{i}", now if i == FORKS - 1 else now - 10**6, parent=f"f{i - 1}" if i else None)
    conn.commit()
    conn.close()
    return db


def test_gc_of_a_crafted_store_takes_a_bounded_number_of_statements(tmp_path):
    db = _crafted(tmp_path)
    store = open_store(db)
    statements = []
    event.listen(store.engine, "before_cursor_execute", lambda *args: statements.append(1))
    try:
        report = store.gc(86400)
    finally:
        store.close()
    assert report.run_ids == ["old"]
    assert report.kept_fork_parents == FORKS - 1
    assert report.blobs == DOOMED
    assert len(statements) < 400  # following the chain a level per statement took over 2 * DEPTH

    conn = sqlite3.connect(db)
    kept = {h for (h,) in conn.execute("SELECT hash FROM blobs")}
    conn.close()
    assert len(kept) == DEPTH + TINY and _hash(f"c{DEPTH - 1}") in kept and _hash("d0") not in kept


def test_gc_dry_run_of_a_crafted_store_reports_and_keeps_everything(tmp_path, capsys):
    db = _crafted(tmp_path)
    assert main(["gc", "--older-than", "1d", "--dry-run", "--json", "--db", db]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["runs"] == 1 and report["blobs"] == DOOMED and report["kept_fork_parents"] == FORKS - 1
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT count(*) FROM blobs").fetchone()[0] == DEPTH + DOOMED + TINY
    conn.close()
