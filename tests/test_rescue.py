"""A store the recorder can never open loses no run: what it never took is saved to a rescue file."""

from __future__ import annotations

import operator
import secrets
from pathlib import Path
from typing import Annotated, TypedDict

import pytest
import sqlalchemy as sa
from langgraph.graph import END, START, StateGraph

from graphtape.recorder import Recorder, StoreError, open_store


class S(TypedDict):
    n: int
    seen: Annotated[list[int], operator.add]


def _graph():
    b = StateGraph(S)
    b.add_node("a", lambda s: {"n": s["n"] + 1, "seen": [s["n"]]})
    b.add_node("b", lambda s: {"n": s["n"] * 2, "seen": [s["n"]]})
    b.add_edge(START, "a")
    b.add_edge("a", "b")
    b.add_edge("b", END)
    return b.compile()


def _rescued(folder: Path) -> list[Path]:
    return sorted(folder.glob("graphtape-rescued-*.db"))


def test_runs_recorded_into_a_database_that_does_not_exist_are_rescued_whole(pg_server, tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GRAPHTAPE_RESCUE_DIR")  # the default: the working folder
    url = sa.engine.make_url(pg_server).set(database=f"no_such_db_{secrets.token_hex(4)}").render_as_string(hide_password=False)
    rec = Recorder(url)  # the program goes on: a recorder problem is not the agent's
    graph = rec.attach(_graph(), name="rescued")
    outputs = [graph.invoke({"n": n, "seen": []}) for n in (1, 5)]
    rec.close()
    err = caplog.text
    files = _rescued(tmp_path)
    assert len(files) == 1, err
    assert "the store never took 2 runs" in err and "does not exist" in err and str(files[0]) in err, err
    store = open_store(files[0])
    try:
        runs = sorted(store.list_runs(), key=lambda r: r.started_at)
        assert [r.name for r in runs] == ["rescued", "rescued"] and all(r.status == "ok" for r in runs)
        steps = [store.list_steps(r.id) for r in runs]
        assert [len(s) for s in steps] == [r.step_count for r in runs] and runs[0].step_count >= 3
        assert [store.state_at(r.id, s[-1].step)["n"] for r, s in zip(runs, steps)] == [o["n"] for o in outputs] == [4, 12]
    finally:
        store.close()


def test_a_sqlite_store_in_a_folder_not_made_yet_is_recorded_there(tmp_path):
    db = tmp_path / "runs" / "today" / "graphtape.db"
    with Recorder(db) as rec:
        rec.attach(_graph()).invoke({"n": 1, "seen": []})
    store = open_store(db)
    try:
        assert [r.status for r in store.list_runs()] == ["ok"]
    finally:
        store.close()


@pytest.mark.parametrize("driver", ["psycopg2", "pg8000", "asyncpg"])
def test_a_postgresql_driver_that_is_not_installed_is_said_at_once(driver, tmp_path):
    try:
        __import__(driver)
        pytest.skip(f"{driver} is installed here")
    except ImportError:
        pass
    with pytest.raises(StoreError, match=f"driver '{driver}' is not installed"):
        Recorder(f"postgresql+{driver}://u:hunter2@127.0.0.1/x")


def test_the_rows_left_of_a_partly_stored_run_take_the_blobs_they_use_and_only_those() -> None:
    """At close, what is left of a run the store holds part of is offered to the store with the
    kept blobs it references, through other blobs too; a blob written before is not in the pool,
    and another run's blobs stay out."""
    import orjson

    from graphtape.recorder.rescue import blobs_used, describe_rows
    from graphtape.recorder.store import Batch
    from graphtape.recorder.store.payloads import pack, squeeze

    pool = {
        "h-nested": (False, orjson.dumps({"msg": {"$b": "h-long"}})),
        "h-long": squeeze(orjson.dumps("x" * 5000)),  # compressed: read through zlib
        "h-call": (False, orjson.dumps("a call's long answer")),
        "h-other-run": (False, orjson.dumps("not this run's")),
    }
    assert pool["h-long"][0]
    rest = Batch(
        steps=[{"run_id": "r1", "ns": "", "step": 5, "payload": pack({"s": {"messages": [{"$b": "h-nested"}, {"$b": "h-written-before"}]}})}],
        calls=[{"run_id": "r1", "output": orjson.dumps({"$b": "h-call"}).decode(), "inputs": '{"q": 1}'}],
        runs_update=[("r1", {"status": "ok", "fault_log": None})],
    )
    assert blobs_used(rest, pool) == {h: pool[h] for h in ("h-nested", "h-long", "h-call")}
    assert describe_rows(rest) == "run r1: step 5, 1 call, its end"


class Log(TypedDict):
    n: int
    log: Annotated[list, operator.add]
    big: str  # never changes: each step's delta is small beside a keyframe, so steps are deltas


def _with_a_subgraph_after(step: int, last: int):
    """Root steps of one node adding to a list (deltas on the step before), with a subgraph run
    in the superstep after root step ``step``: its steps come between two root steps."""
    inner = StateGraph(Log)
    inner.add_node("inner", lambda s: {"log": ["inner"]})
    inner.add_edge(START, "inner")
    inner.add_edge("inner", END)
    b = StateGraph(Log)
    b.add_node("work", lambda s: {"n": s["n"] + 1, "log": [s["n"]]})
    b.add_node("sub", inner.compile())
    b.add_edge(START, "work")
    b.add_conditional_edges("work", lambda s: "sub" if s["n"] == step else ("work" if s["n"] < last else END))
    b.add_edge("sub", "work")
    return b.compile()


def test_a_rescue_file_holds_no_delta_on_a_step_the_store_refused(tmp_path: Path, monkeypatch, caplog) -> None:
    """The store refuses root step 5 for good, then fails on the subgraph's steps after it with a
    fault that passes ("locked"), and its file is deleted before that passes: the rows it did not
    take go to a rescue file at close. The root steps after 5, deltas on it, are not among them
    (imported, each would read a state the graph never had); the run's end says they are left out."""
    import sqlite3
    import threading

    monkeypatch.setenv("GRAPHTAPE_RESCUE_DIR", str(tmp_path))
    db = tmp_path / "refused.db"
    rec = Recorder(db, durability="exit")  # the run's rows are written in one batch at its end
    engine = rec.writer.store.engine
    locked_once = threading.Event()

    def on_connect(dbapi_conn, _record) -> None:
        dbapi_conn.create_function("locked_once", 0, lambda: locked_once.set() or 1)

    sa.event.listen(engine, "connect", on_connect)
    engine.dispose()  # every connection from here on knows the function
    conn = sqlite3.connect(db)
    conn.execute("CREATE TRIGGER refuse_5 BEFORE INSERT ON steps WHEN NEW.step = 5 AND NEW.ns = '' BEGIN SELECT RAISE(ABORT, 'step 5 breaks a rule'); END")
    conn.execute("CREATE TRIGGER lock_sub BEFORE INSERT ON steps WHEN NEW.ns != '' AND locked_once() BEGIN SELECT RAISE(ABORT, 'database is locked'); END")
    conn.commit()
    conn.close()

    graph = _with_a_subgraph_after(5, 10)
    start = {"n": 0, "log": [], "big": secrets.token_hex(5000)}
    assert rec.attach(graph).invoke(start) == graph.invoke(start)
    assert locked_once.wait(30)
    db.unlink()  # while the writer keeps the rows the lock held back: nothing more is written there
    rec.close(timeout=1)

    (rescued,) = _rescued(tmp_path)
    conn = sqlite3.connect(rescued)
    try:
        rows = conn.execute("SELECT step, ns, is_key FROM steps ORDER BY seq").fetchall()
    finally:
        conn.close()
    root = [(step, is_key) for step, ns, is_key in rows if ns == ""]
    assert not root or root[0][1], rows  # a root step rescued after the refused one starts afresh
    said = [r.getMessage() for r in caplog.records if r.name == "graphtape"]
    assert any("left out" in line and "steps 6-7" in line for line in said), said


def test_listing_a_rescue_file_of_a_partly_stored_run_says_what_it_is_and_how_to_put_it_back(tmp_path: Path, monkeypatch, capsys) -> None:
    """The store's file is deleted mid-run: the rest of the run goes to a rescue file with no run
    of its own. Listing it, or showing its last run, says so in one line with the command that
    imports it, not "no runs yet: record some"."""
    from test_faults import START_STATE, looping, plain_result, remove_db

    from graphtape.tui.cli import main

    monkeypatch.setenv("GRAPHTAPE_RESCUE_DIR", str(tmp_path))
    db = tmp_path / "gone.db"
    rec = Recorder(db, durability="sync")
    assert rec.attach(looping({5: lambda: remove_db(db)})).invoke(START_STATE) == plain_result()
    rec.close()
    (rescued,) = _rescued(tmp_path)
    capsys.readouterr()
    assert main(["--db", str(rescued), "runs"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert f"{rescued} is a rescue file holding the rest of 1 run recorded into {db}" in line, line
    assert line.endswith(f"graphtape --db {db} import-rescue {rescued}"), line
    assert main(["--db", str(rescued), "show", "last"]) != 0
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "is a rescue file" in err and "import-rescue" in err, err
