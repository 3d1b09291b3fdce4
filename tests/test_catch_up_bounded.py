"""A graph that waits for a backlogged writer to catch up is never held by a store that stops
answering: once the writer takes nothing more (it is inside a write the store does not answer,
or waits on a lock), the graph goes on and the work stays queued, in order, for the writer."""

from __future__ import annotations

import threading
import time
from typing import TypedDict

import sqlalchemy as sa
from langgraph.graph import END, START, StateGraph
from test_silent_store import _PausableProxy

from graphtape.recorder import Recorder, open_store, writer


class S(TypedDict):
    i: int


def _steps(n: int, hooks: dict):
    def step(s: S) -> dict:
        if s["i"] in hooks:
            hooks[s["i"]]()
        time.sleep(0.006)  # waits between steps: the writer goes meanwhile
        return {"i": s["i"] + 1}

    b = StateGraph(S)
    b.add_node("step", step)
    b.add_edge(START, "step")
    b.add_conditional_edges("step", lambda s: "step" if s["i"] < n else END)
    return b.compile()


def _invoke_within(graph, value: dict, seconds: float) -> list:
    out: list = []
    runner = threading.Thread(target=lambda: out.append(graph.invoke(value)), daemon=True)
    runner.start()
    runner.join(seconds)
    assert not runner.is_alive(), "the run waits on the writer for good"
    return out


def test_a_server_gone_silent_does_not_hold_a_graph_waiting_for_the_writer(pg_url, monkeypatch) -> None:
    monkeypatch.setattr(writer, "BACKLOG_MAX_S", 0.0)  # every submit waits for the writer to catch up
    url = sa.engine.make_url(pg_url)
    proxy = _PausableProxy(url.host or "127.0.0.1", url.port or 5432)
    via_proxy = url.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    try:
        rec = Recorder(via_proxy, durability="async", lock_wait=0.5)
        out = _invoke_within(rec.attach(_steps(12, {3: proxy.flowing.clear})), {"i": 0}, 60)
        assert out == [{"i": 12}]
        run_id = rec.last_run_id
        proxy.flowing.set()  # the server answers again: what waited is written
        assert rec.flush(30)
        rec.close()
    finally:
        proxy.close()
    store = open_store(pg_url)
    try:
        assert store.get_run(run_id).status == "ok"
        assert [s.step for s in store.list_steps(run_id) if s.step >= 0] == list(range(13))
    finally:
        store.close()


def test_a_locked_store_does_not_slow_a_graph_waiting_for_the_writer_to_its_lock_waits(tmp_path, monkeypatch) -> None:
    """Another process holds the SQLite file's write lock for most of the run. The writer tries
    the store again on a backoff, not after each step it encodes (each try waited ``lock_wait``,
    2 s, for the lock: a 40-step run took 80 s); once the lock goes, every step is written."""
    import sqlite3

    monkeypatch.setattr(writer, "BACKLOG_MAX_S", 0.0)  # every submit waits for the writer to catch up
    db = tmp_path / "locked.db"
    holder: list[sqlite3.Connection] = []

    def lock() -> None:
        conn = sqlite3.connect(db, timeout=0, isolation_level=None, check_same_thread=False)  # taken in the run's thread
        conn.execute("BEGIN IMMEDIATE")
        holder.append(conn)

    rec = Recorder(db, durability="async")
    out = _invoke_within(rec.attach(_steps(40, {3: lock})), {"i": 0}, 30)
    assert out == [{"i": 40}]
    holder[0].execute("ROLLBACK")
    holder[0].close()
    rec.close()
    store = open_store(db)
    try:
        run = store.get_run("last")
        assert run.status == "ok" and [s.step for s in store.list_steps(run.id) if s.step >= 0] == list(range(41))
    finally:
        store.close()


class _Waiting:
    """A value graphtape cannot encode whose ``repr`` waits on something (a lazy client's backend)."""

    released = threading.Event()

    def __repr__(self) -> str:
        _Waiting.released.wait(60)
        return "<waiting>"


class W(TypedDict):
    i: int
    client: object


def test_a_value_whose_description_waits_does_not_hold_a_graph_waiting_for_the_writer(tmp_path, monkeypatch) -> None:
    """The writer, encoding a step, describes a value whose ``repr`` waits (it never ends while
    the run goes on): the graph waiting for the writer to catch up goes on after ENCODE_WAIT_S,
    and once the value answers every step is written."""
    monkeypatch.setattr(writer, "BACKLOG_MAX_S", 0.0)
    monkeypatch.setattr(writer, "ENCODE_WAIT_S", 0.5)
    monkeypatch.setattr(_Waiting, "released", threading.Event())

    def step(s: W) -> dict:
        time.sleep(0.006)
        return {"i": s["i"] + 1, "client": _Waiting() if s["i"] == 2 else None}

    b = StateGraph(W)
    b.add_node("step", step)
    b.add_edge(START, "step")
    b.add_conditional_edges("step", lambda s: "step" if s["i"] < 12 else END)
    rec = Recorder(tmp_path / "waits.db", durability="async")
    out = _invoke_within(rec.attach(b.compile()), {"i": 0, "client": None}, 30)
    assert out == [{"i": 12, "client": None}]
    _Waiting.released.set()
    rec.close()
    store = open_store(tmp_path / "waits.db")
    try:
        run = store.get_run("last")
        assert run.status == "ok" and [s.step for s in store.list_steps(run.id) if s.step >= 0] == list(range(13))
    finally:
        store.close()
