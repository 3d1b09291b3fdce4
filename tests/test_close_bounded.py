"""Closing a recorder against a store another process keeps locked is bounded by the close's
own timeout: no try made while closing waits for the lock longer than that (SQLite's busy
timeout was the writer's ``lock_wait`` for each of them, 2 s, so ``close(timeout=0.2)`` took
6 s), and what the store did not take is saved to a rescue file, whole once imported."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import sqlalchemy as sa
from test_faults import NODES, START_STATE, check_steps, looping, plain_result

from graphtape.recorder import Recorder, open_store
from graphtape.tui.cli import main


def test_closing_against_a_locked_store_waits_for_the_lock_no_longer_than_the_close_may(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("GRAPHTAPE_RESCUE_DIR", str(tmp_path))
    db = tmp_path / "locked.db"
    rec = Recorder(db, durability="sync")
    holder: list[sqlite3.Connection] = []

    def lock() -> None:
        conn = sqlite3.connect(db, timeout=0, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")  # another process's write lock, held past the close
        holder.append(conn)

    assert rec.attach(looping({4: lock})).invoke(START_STATE) == plain_result()
    run_id = rec.last_run_id
    waits: list[int] = []  # the lock waits (ms) the writer's connections are given while closing

    def seen(conn, cursor, statement, parameters, context, executemany) -> None:
        if "busy_timeout" in statement:
            waits.append(int(statement.split("=")[1]))

    sa.event.listen(rec.writer.store.engine, "before_cursor_execute", seen)
    rec.close(timeout=0.2)
    holder[0].execute("ROLLBACK")
    holder[0].close()
    assert waits and max(waits) <= 200, waits

    (rescued,) = tmp_path.glob("graphtape-rescued-*.db")
    assert main(["--db", str(db), "import-rescue", str(rescued)]) == 0
    store = open_store(db)
    try:
        assert (store.get_run(run_id).status, store.get_run(run_id).status_reason) == ("ok", None)
        assert check_steps(store, run_id) == list(range(NODES + 1))
    finally:
        store.close()
