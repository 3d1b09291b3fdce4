"""A store's write error is said with what it means for the run: the driver's words alone
(``database is locked``) leave the reader asking whether the run failed and the rows are gone."""

from __future__ import annotations

import logging
import sqlite3

from conftest import bump_graph

from graphtape import Recorder, open_store
from graphtape.recorder.errors import StoreError
from graphtape.recorder.fault_hints import fault_hint


def test_a_locked_store_is_said_as_a_lock_the_run_outlives(tmp_path, caplog):
    db = tmp_path / "g.db"
    caplog.set_level(logging.WARNING, logger="graphtape")
    rec = Recorder(db, durability="sync", lock_wait=0.2)
    graph = rec.attach(bump_graph())
    graph.invoke({"n": 0})
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    assert graph.invoke({"n": 1}) == {"n": 2}  # the run goes on
    holder.execute("COMMIT")
    holder.close()
    rec.close()

    said = [r.getMessage() for r in caplog.records if r.name == "graphtape" and "locked" in r.getMessage()]
    assert said and "another connection holds the SQLite file's write lock; the run goes on" in said[0], said
    assert "\n" not in said[0]
    store = open_store(str(db))
    try:
        assert len(store.list_runs()) == 2  # and its rows were written once the lock was let go
    finally:
        store.close()


def test_only_a_drivers_error_gets_a_meaning():
    assert fault_hint(OSError(28, "No space left on device")).startswith(": the disk is full; the run goes on")
    assert fault_hint(RuntimeError("server closed the connection unexpectedly")).startswith(": the connection to the database server was lost")
    assert fault_hint(RuntimeError('connection to server at "127.0.0.1", port 5433 failed: Connection refused')).startswith(": the database server cannot be reached")
    assert fault_hint(StoreError("the store never took 1 run (database is locked): saved to x.db")) == ""  # says it itself
    assert fault_hint(ValueError("something else")) == ""
