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
