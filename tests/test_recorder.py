"""Recorder behaviour: tee over the user's saver, faults, strict mode, durability, kills, secrets."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

import operator

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from pydantic import SecretStr

from graphtape.recorder import Durability, Recorder, RecorderFault, open_store


class S(TypedDict):
    n: int
    notes: Annotated[list, operator.add]


def step(state: S) -> dict:
    return {"n": state["n"] + 1, "notes": [f"n={state['n']}"]}


def chain(length: int = 3, node=step, checkpointer=None):
    b = StateGraph(S)
    names = [f"s{i}" for i in range(length)]
    for name in names:
        b.add_node(name, node)
    b.add_edge(START, names[0])
    for a, c in zip(names, names[1:]):
        b.add_edge(a, c)
    return b.compile(checkpointer=checkpointer)


def test_tee_keeps_users_checkpointer_working(recorder_factory, tmp_path):
    with SqliteSaver.from_conn_string(str(tmp_path / "memory.db")) as saver:
        plain = chain(checkpointer=InMemorySaver())
        rec = recorder_factory()
        graph = rec.attach(chain(checkpointer=saver))
        config = {"configurable": {"thread_id": "conv-1"}}
        first = graph.invoke({"n": 0, "notes": []}, config)
        second = graph.invoke({"n": 0, "notes": []}, config)  # memory: state carries over
        expected_first = plain.invoke({"n": 0, "notes": []}, config)
        expected_second = plain.invoke({"n": 0, "notes": []}, config)
        assert (first, second) == (expected_first, expected_second)
        history = list(saver.list(config))
        assert len(history) == len(list(plain.checkpointer.list(config)))
        assert graph.get_state(config).values == second
        rec.flush()
        assert rec.store.count_runs() == 2


def test_graph_without_checkpointer_stays_without_memory(recorder_factory):
    rec = recorder_factory()
    graph = rec.attach(chain())
    config = {"configurable": {"thread_id": "same"}}
    assert graph.invoke({"n": 0, "notes": []}, config) == graph.invoke({"n": 0, "notes": []}, config)
    assert chain().invoke({"n": 0, "notes": []}) == graph.invoke({"n": 0, "notes": []})


def test_attach_leaves_original_graph_untouched(recorder_factory):
    original = chain()
    rec = recorder_factory()
    rec.attach(original)
    assert original.checkpointer is None
    original.invoke({"n": 0, "notes": []})
    rec.flush()
    assert rec.store.count_runs() == 0


def test_batch_and_with_config_copies_are_recorded(recorder_factory):
    rec = recorder_factory()
    graph = rec.attach(chain()).with_config({"tags": ["copied"]})
    outs = graph.batch([{"n": 0, "notes": []}, {"n": 10, "notes": []}])
    assert [o["n"] for o in outs] == [3, 13]
    rec.flush()
    runs = rec.store.list_runs()
    assert len(runs) == 2 and {r.status for r in runs} == {"ok"}


class Opaque:
    """Not serializable: no dataclass, no pydantic, no __dict__ worth showing."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<Opaque thing>"


def test_unserializable_value_is_marked_and_counted_not_raised(recorder_factory):
    def odd(state: S):
        return {"notes": [Opaque()]}

    rec = recorder_factory()
    graph = rec.attach(chain(1, node=odd))
    out = graph.invoke({"n": 0, "notes": []})
    assert isinstance(out["notes"][0], Opaque)
    rec.flush()
    run = rec.store.get_run("last")
    assert run.status == "ok" and run.faults >= 1
    state = rec.store.state_at(run.id, 1)
    assert state["notes"][0]["unserializable"] is True and "Opaque thing" in state["notes"][0]["repr"]


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_strict_mode_raises_recorder_faults(recorder_factory, durability):
    """In every durability: under async and exit the writer's thread encodes, and a strict run
    waits for it at its end, so the fault raises from invoke, not only in a log line."""

    def odd(state: S):
        return {"notes": [Opaque()]}

    rec = recorder_factory(durability=durability, strict=True)
    with pytest.raises(RecorderFault):
        rec.attach(chain(1, node=odd)).invoke({"n": 0, "notes": []})


def test_bad_durability_names_valid_values():
    with pytest.raises(ValueError, match="'async', 'sync', 'exit'"):
        Durability.parse("eventually")


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_full_disk_never_breaks_the_graph(tmp_path, durability):
    """SQLite's own "database or disk is full" (capped page count) mid-run."""
    import sqlalchemy as sa

    rec = Recorder(tmp_path / "full.db", durability=durability)
    big = chain(30, node=lambda s: {"n": s["n"] + 1, "notes": ["x" * 5000 + str(s["n"])]})
    rec.attach(chain(1)).invoke({"n": 0, "notes": []})
    rec.flush()

    def cap(dbapi_conn, _record):
        cur = dbapi_conn.cursor()
        pages = cur.execute("PRAGMA page_count").fetchone()[0]
        cur.execute(f"PRAGMA max_page_count = {pages}")
        cur.close()

    with rec.writer._io:  # no write under way: connections can be replaced
        sa.event.listen(rec.store.engine, "connect", cap)
        rec.store.reset_connections()
    out = rec.attach(big).invoke({"n": 0, "notes": []})
    assert out == big.invoke({"n": 0, "notes": []})
    rec.flush()
    assert rec.fault_count > 0
    with rec.writer._io:  # a retry of the kept rows may be due any time
        sa.event.remove(rec.store.engine, "connect", cap)
        rec.store.reset_connections()
    rec.attach(chain(1)).invoke({"n": 0, "notes": []})
    rec.close()
    assert open_store(tmp_path / "full.db").get_run("last").status == "ok"


def test_sync_durability_commits_each_step_before_the_next(tmp_path):
    db = str(tmp_path / "sync.db")
    rec = Recorder(db, durability="sync")
    seen: list[int] = []

    def peek(state: S):
        reader = open_store(db)
        run = reader.get_run("last")
        seen.append(len([s for s in reader.list_steps(run.id) if not s.pending]))
        reader.close()
        return {"n": state["n"] + 1}

    rec.attach(chain(4, node=peek)).invoke({"n": 0, "notes": []})
    # Before node k runs, the input step, step 0 and the k previous steps are committed.
    assert seen == [2, 3, 4, 5]
    rec.close()


def test_sync_durability_commits_a_call_with_its_superstep(tmp_path):
    """A tool call made in a step is committed with that step (one commit, not two): a node
    of the next step sees both; inside the step, after the call returned, neither is in yet."""
    from langchain_core.tools import tool

    @tool
    def lookup(q: str) -> str:
        """Look something up."""
        return f"found {q}"

    db = str(tmp_path / "sync-calls.db")
    rec = Recorder(db, durability="sync")
    seen: list[tuple[int, int]] = []

    def counts() -> tuple[int, int]:
        reader = open_store(db)
        try:
            run = reader.get_run("last")
            return len([s for s in reader.list_steps(run.id) if not s.pending]), len(reader.calls(run.id))
        finally:
            reader.close()

    def ask(state: S):
        lookup.invoke({"q": str(state["n"])})
        seen.append(counts())  # the call returned; its step is not over
        return {"n": state["n"] + 1}

    def after(state: S):
        seen.append(counts())
        return {"n": state["n"] + 1}

    b = StateGraph(S)
    b.add_node("ask", ask)
    b.add_node("after", after)
    b.add_edge(START, "ask")
    b.add_edge("ask", "after")
    b.add_edge("after", END)
    rec.attach(b.compile()).invoke({"n": 0, "notes": []})
    rec.close()
    assert seen == [(2, 0), (3, 1)]
    assert len(open_store(db).calls(rec.last_run_id)) == 1


def _stored_steps(db: str) -> int:
    reader = open_store(db)
    try:
        runs = reader.list_runs()
        return len(reader.list_steps(runs[0].id)) if runs else 0
    finally:
        reader.close()


def _steps_seen_by_a_node(db: str, durability: str, length: int = 4, wait_for_rows: float = 0.0, node: Any = None) -> tuple[list[int], Recorder]:
    """Each node counts, from a second connection, the steps of the run already in the store
    (waiting up to ``wait_for_rows`` seconds for the first to show)."""
    rec = Recorder(db, durability=durability)
    seen: list[int] = []
    count = lambda: _stored_steps(db)  # noqa: E731

    def peek(state: S):
        deadline = time.monotonic() + wait_for_rows
        n = count()
        while not n and time.monotonic() < deadline:
            time.sleep(0.02)
            n = count()
        seen.append(n)
        return node(state) if node is not None else {"n": state["n"] + 1}

    rec.attach(chain(length, node=peek)).invoke({"n": 0, "notes": []})
    return seen, rec


def test_async_durability_leaves_a_busy_graph_alone_until_it_ends(tmp_path, monkeypatch):
    """A graph that waits on no call, and not between steps, is not joined by the writer at every
    step: its steps pile up and go in when it ends (or every BUSY_MAX_S, here out of reach)."""
    from graphtape.recorder import writer

    monkeypatch.setattr(writer, "BUSY_MAX_S", 60.0)
    monkeypatch.setattr(writer, "PAUSE_S", 30.0)  # steps 10 ms apart are "busy" here

    def busy(state: S):
        time.sleep(0.01)
        return {"n": state["n"] + 1}

    seen, rec = _steps_seen_by_a_node(str(tmp_path / "busy.db"), "async", length=8, node=busy)
    assert seen == [0] * 8  # nothing written while a step came every 10 ms
    assert rec.flush()
    assert len(open_store(str(tmp_path / "busy.db")).list_steps(rec.last_run_id)) == 10  # input, START, 8 nodes
    rec.close()


def test_async_durability_writes_while_the_graph_waits_on_a_call(tmp_path, monkeypatch):
    """A tool (or model, or HTTP) call starting is a moment the graph will likely wait: the
    steps before it go in meanwhile, without a flush and long before BUSY_MAX_S."""
    from langchain_core.tools import tool

    from graphtape.recorder import writer

    monkeypatch.setattr(writer, "BUSY_MAX_S", 60.0)
    monkeypatch.setattr(writer, "PAUSE_S", 30.0)
    db = str(tmp_path / "waits.db")

    @tool
    def slow_lookup(q: str) -> str:
        """Waits (up to 10 s) until the run's steps show in the store, like a slow service."""
        deadline = time.monotonic() + 10
        while not _stored_steps(db) and time.monotonic() < deadline:
            time.sleep(0.02)
        return q

    def ask(state: S):
        slow_lookup.invoke({"q": str(state["n"])})
        seen.append(_stored_steps(db))
        return {"n": state["n"] + 1}

    seen: list[int] = []
    rec = Recorder(db)
    rec.attach(chain(2, node=ask)).invoke({"n": 0, "notes": []})
    assert seen[0] >= 2 and seen == sorted(seen)  # the input step and START at least, then more
    rec.close()


def test_async_durability_writes_when_the_graph_waits_between_steps(tmp_path, monkeypatch):
    """Steps that come PAUSE_S or more apart tell a graph that waits on something no call shows
    (a sleep, a database): the writer goes while it waits again.

    The first two nodes wait a little over PAUSE_S (the gap that rings the writer's bell); the
    third waits, as long as it takes (up to 10 s, not a fixed slice), for the store to show the
    input, START and step 1. Nothing else wakes the writer before the run ends (BUSY_MAX_S is out
    of reach and no call starts), so that wait ends early only if the pauses woke it."""
    from graphtape.recorder import writer

    monkeypatch.setattr(writer, "BUSY_MAX_S", 60.0)
    db = str(tmp_path / "between.db")
    seen: list[int] = []
    gap = writer.PAUSE_S * 4

    def waits(state: S):
        seen.append(_stored_steps(db))  # each node counts before it waits
        if state["n"] < 2:
            time.sleep(gap)
        else:
            deadline = time.monotonic() + 10
            while _stored_steps(db) < 3 and time.monotonic() < deadline:
                time.sleep(0.02)
            seen.append(_stored_steps(db))
        return {"n": state["n"] + 1}

    rec = Recorder(db, durability="async")
    rec.attach(chain(3, node=waits)).invoke({"n": 0, "notes": []})
    assert seen[-1] >= 3 and seen == sorted(seen), seen  # written while the run went on, without a flush
    rec.close()


def test_async_durability_writes_within_busy_max_while_a_node_waits_on_anything(tmp_path, monkeypatch):
    """A node waiting on something graphtape does not see (a sleep, a socket) gets its run's
    steps written within BUSY_MAX_S, even before any step came late."""
    from graphtape.recorder import writer

    monkeypatch.setattr(writer, "BUSY_MAX_S", 0.2)
    monkeypatch.setattr(writer, "PAUSE_S", 30.0)
    seen, rec = _steps_seen_by_a_node(str(tmp_path / "sleeps.db"), "async", length=3, wait_for_rows=10.0)
    assert seen[0] >= 2 and seen == sorted(seen)
    rec.close()


def test_a_flush_does_not_wait_for_the_writer_to_wake(tmp_path, monkeypatch):
    from graphtape.recorder import writer

    monkeypatch.setattr(writer, "BUSY_MAX_S", 60.0)
    rec = Recorder(str(tmp_path / "flush.db"))
    took: list[float] = []

    def flushing(state: S):
        start = time.monotonic()
        assert rec.flush(20)
        took.append(time.monotonic() - start)
        return {"n": state["n"] + 1}

    rec.attach(chain(3, node=flushing)).invoke({"n": 0, "notes": []})
    assert max(took) < 10
    rec.close()


def test_a_call_known_to_be_quick_does_not_wake_the_writer():
    """Only calls a graph is likely to wait on wake the writer: HTTP always, others when they
    took SLOW_MS or more last time (or were never seen)."""
    from graphtape.recorder.call_waits import SLOW_MS, CallWaits

    waits = CallWaits()
    assert waits.may_wait("model", "scripted") and waits.may_wait("http", "GET example.com")
    waits.took("model", "scripted", SLOW_MS / 10)
    waits.took("tool", "search", SLOW_MS * 10)
    waits.took("http", "GET example.com", 0.1)
    assert not waits.may_wait("model", "scripted")
    assert waits.may_wait("tool", "search") and waits.may_wait("http", "GET example.com")
    assert waits.may_wait("model", "other")  # per name
    for i in range(5000):
        waits.took("tool", f"generated-{i}", 0.1)
    assert len(waits._last_ms) <= 1024


@pytest.mark.parametrize("durability", ["async", "exit"])
def test_an_idle_writer_wakes_only_where_it_may_have_work(tmp_path, monkeypatch, durability):
    """``async`` looks at least every BUSY_MAX_S (work may wait on an unseen pause); ``exit``
    writes nothing before a run ends, so it sleeps until told: a writer woken while the graph
    is busy on the CPU costs the graph's thread."""
    from graphtape.recorder import writer

    monkeypatch.setattr(writer, "BUSY_MAX_S", 0.01)
    rounds: list[float] = []
    serve = writer.Writer._serve_one
    monkeypatch.setattr(writer.Writer, "_serve_one", lambda self, wait: (rounds.append(time.monotonic()), serve(self, wait))[1])
    rec = Recorder(str(tmp_path / f"idle-{durability}.db"), durability=durability)
    time.sleep(0.3)
    if durability == "exit":
        assert len(rounds) == 1  # the one wait it is still in
    else:
        assert len(rounds) >= 5
    rec.close()


def test_exit_durability_writes_the_run_when_it_ends(tmp_path):
    db = str(tmp_path / "exit.db")
    seen, rec = _steps_seen_by_a_node(db, "exit")
    assert seen == [0, 0, 0, 0]  # nothing of the run reached the store while it ran
    assert rec.flush()
    store = open_store(db)
    run = store.get_run("last")
    assert (run.status, run.durability, run.step_count) == ("ok", "exit", 6)
    assert [s.step for s in store.list_steps(run.id)] == [-1, 0, 1, 2, 3, 4]
    assert store.state_at(run.id, 4)["n"] == 4
    store.close()
    rec.close()


def test_exit_durability_writes_without_a_flush_once_the_run_ends(tmp_path):
    db = str(tmp_path / "exit.db")
    rec = Recorder(db, durability="exit")
    rec.attach(chain(3)).invoke({"n": 0, "notes": []})
    deadline = time.monotonic() + 20
    run = None
    while time.monotonic() < deadline:
        store = open_store(db)
        runs = store.list_runs()
        run = runs[0] if runs and runs[0].status == "ok" else None
        store.close()
        if run is not None:
            break
        time.sleep(0.05)
    assert run is not None and run.step_count == 5
    rec.close()


def test_exit_durability_lets_a_long_run_write_once_it_holds_too_much(tmp_path, monkeypatch):
    from graphtape.recorder import writer

    monkeypatch.setattr(writer, "HOLD_MAX", 3)  # a long run: memory stays bounded
    db = str(tmp_path / "exit.db")
    seen, rec = _steps_seen_by_a_node(db, "exit", length=3, wait_for_rows=10)
    rec.flush()
    assert seen[-1] > 0  # rows went in while the run still ran
    rec.close()


KILLED_SCRIPT = textwrap.dedent(
    """
    import os, sys, time, operator
    from typing import Annotated, Any, TypedDict
    from langgraph.graph import StateGraph, START
    from graphtape.recorder import Recorder

    class S(TypedDict):
        n: int

    def step(state):
        if state["n"] == int(sys.argv[2]):
            os._exit(9)  # the process dies mid-run, no cleanup
        time.sleep(0.02)  # a node that does some work, like a real agent's
        return {"n": state["n"] + 1}

    b = StateGraph(S)
    b.add_node("loop", step)
    b.add_edge(START, "loop")
    b.add_conditional_edges("loop", lambda s: "loop")
    rec = Recorder(sys.argv[1], durability=sys.argv[3])
    rec.attach(b.compile()).invoke({"n": 0}, {"recursion_limit": 1000})
    """
)


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_killed_run_keeps_committed_steps_and_is_marked_interrupted(tmp_path, durability):
    db = str(tmp_path / "killed.db")
    script = tmp_path / "killed.py"
    script.write_text(KILLED_SCRIPT)
    proc = subprocess.run([sys.executable, str(script), db, "7", durability], cwd=Path(__file__).parents[1], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 9, proc.stderr
    store = open_store(db)
    run = store.get_run("last")
    assert (run.status, run.status_reason) == ("interrupted", "killed")
    steps = [s for s in store.list_steps(run.id) if not s.pending]
    if durability == "sync":
        # Every superstep before the one that died was committed.
        assert max(s.step for s in steps) == 7
    for s in steps:
        if s.step >= 0:
            assert store.state_at(run.id, s.step)["n"] == s.step
    store.close()
    # The next recording into the same file works.
    rec = Recorder(db)
    rec.attach(chain(2)).invoke({"n": 0, "notes": []})
    rec.close()
    assert open_store(db).get_run("last").status == "ok"


class Counted(TypedDict):
    n: int


def _counting_graph(stop_at: int = 7):
    """The killed script's graph, for its replay: a node that fails where the process died, so a
    replay that went past what was recorded would show it."""

    def step(state: Counted) -> dict:
        if state["n"] == stop_at:
            raise RuntimeError("past what the recording holds")
        return {"n": state["n"] + 1}

    b = StateGraph(Counted)
    b.add_node("loop", step)
    b.add_edge(START, "loop")
    b.add_conditional_edges("loop", lambda s: "loop")
    return b.compile()


def test_a_killed_run_replays_up_to_its_last_recorded_step(tmp_path):
    db = str(tmp_path / "killed.db")
    script = tmp_path / "killed.py"
    script.write_text(KILLED_SCRIPT)
    proc = subprocess.run([sys.executable, str(script), db, "7", "sync"], cwd=Path(__file__).parents[1], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 9, proc.stderr
    store = open_store(db)
    try:
        run_id = store.get_run("last").id
    finally:
        store.close()
    _replays_up_to(db, run_id, 7, "killed")


def _replays_up_to(db: str, run_id: str, last: int, how: str) -> None:
    """From the start, from the middle, and as a fixture (whose steps keep no checkpoint ids)."""
    from graphtape.replay import replay
    from graphtape.replay.fixture import export_fixture, import_fixture

    from graphtape.replay.testgen import render_test

    store = open_store(db)
    try:
        fixture = export_fixture(store, run_id)
        fixture_run = import_fixture(store, fixture).run_id
    finally:
        store.close()
    here = Path(db).parent
    assert "assert result.status == 'ok'" in render_test(fixture, here / "f.json", here / "test_f.py", "agent:graph")  # as the replay ends
    for source, start in ((run_id, None), (run_id, 3), (fixture_run, None)):
        result = replay(source, _counting_graph(stop_at=last), from_step=start, db=db, mode="strict", on_miss="stop")
        assert result.status == "ok" and not result.diverged, result.report()
        assert result.final_state == {"n": last}
        assert any(f"{how} after step {last}" in note for note in result.notes)


def test_a_cancelled_run_replays_up_to_its_last_recorded_step(tmp_path):
    """``task.cancel()`` mid-run (Ctrl-C alike): nothing after the last finished step was recorded."""
    db = str(tmp_path / "cancelled.db")
    reached = asyncio.Event()

    async def step(state: Counted) -> dict:
        if state["n"] == 5:
            reached.set()
            await asyncio.sleep(60)
        return {"n": state["n"] + 1}

    b = StateGraph(Counted)
    b.add_node("loop", step)
    b.add_edge(START, "loop")
    b.add_conditional_edges("loop", lambda s: "loop")

    async def run_and_cancel() -> None:
        with Recorder(db) as rec:
            task = asyncio.ensure_future(rec.attach(b.compile()).ainvoke({"n": 0}))
            await asyncio.wait_for(reached.wait(), 30)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(run_and_cancel())
    store = open_store(db)
    try:
        run = store.get_run("last")
        assert (run.status, run.status_reason) == ("interrupted", "cancelled")
    finally:
        store.close()
    _replays_up_to(db, run.id, 5, "cancelled")


def test_secrets_never_reach_the_database(recorder_factory, sqlite_url):
    planted = {
        "openai": "sk-proj-AbCdEf0123456789AbCdEf0123456789",
        "bearer": "Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig12345",
        "password": "hunter2-very-secret",
        "secretstr": "pydantic-secret-value-42",
        "custom": "ACME-INTERNAL-7788-9900",
    }

    class Secretive(TypedDict):
        messages: Annotated[list, add_messages]
        account: dict

    def node(state: Secretive):
        return {"messages": [AIMessage(content=f"using key {planted['openai']} and {planted['bearer']}")]}

    b = StateGraph(Secretive)
    b.add_node("leak", node)
    b.add_edge(START, "leak")
    rec = recorder_factory(redact_patterns=[r"ACME-INTERNAL-\d{4}-\d{4}"], durability="sync")
    graph = rec.attach(b.compile())
    graph.invoke(
        {
            "messages": [HumanMessage(content=f"my code is {planted['custom']}")],
            "account": {"password": planted["password"], "api": SecretStr(planted["secretstr"]), "token_count": 12},
        }
    )
    rec.close()
    raw = b"".join(p.read_bytes() for p in Path(sqlite_url).parent.iterdir() if p.name.startswith("graphtape.db"))
    for name, secret in planted.items():
        assert secret.encode() not in raw, f"{name} secret leaked into the database"
    store = open_store(sqlite_url)
    run = store.get_run("last")
    assert run.redactions >= 5
    state = store.state_at(run.id, 1)
    assert state["account"]["token_count"] == 12  # counts are not secrets
    assert "[REDACTED]" in state["messages"][1]["content"]


def test_graphtape_db_env_sets_default_store(tmp_path, monkeypatch):
    target = tmp_path / "from-env.db"
    monkeypatch.setenv("GRAPHTAPE_DB", str(target))
    monkeypatch.chdir(tmp_path)
    rec = Recorder()
    rec.attach(chain(1)).invoke({"n": 0, "notes": []})
    rec.close()
    assert target.exists() and not (tmp_path / "graphtape.db").exists()
    assert open_store(str(target)).count_runs() == 1


def test_threads_record_concurrently_without_mixing_runs(recorder_factory):
    rec = recorder_factory()
    graph = rec.attach(chain(4))
    errors: list[BaseException] = []

    def worker(start: int) -> None:
        try:
            for k in range(5):
                graph.invoke({"n": start + k * 100, "notes": []})
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i * 1000,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    rec.flush()
    runs = rec.store.list_runs()
    assert len(runs) == 30
    for run in runs:
        steps = [s for s in rec.store.list_steps(run.id) if not s.pending]
        assert [s.nodes for s in steps][2:] == [["s0"], ["s1"], ["s2"], ["s3"]]
        first = rec.store.state_at(run.id, 0)["n"]
        assert rec.store.state_at(run.id, 4)["n"] == first + 4


def test_run_record_has_graph_structure_config_and_versions(recorder_factory):
    rec = recorder_factory()
    rec.attach(chain(2), name="pipeline", graph_ref="myapp.graphs:pipeline").invoke({"n": 1, "notes": []}, {"configurable": {"thread_id": "t-9", "user": "ana"}})
    rec.flush()
    detail = rec.store.run_detail("last")
    assert detail.run.graph_ref == "myapp.graphs:pipeline" and detail.run.thread_id == "t-9"
    assert detail.inputs == {"n": 1, "notes": []}
    assert detail.config["configurable"] == {"thread_id": "t-9", "user": "ana"}
    assert {"source": "s0", "target": "s1"} in detail.graph["edges"]
    assert "langgraph" in detail.versions and detail.run.started_at <= detail.run.ended_at
    json.dumps(detail.graph)


def test_steps_after_a_failed_write_still_read_back_correctly(tmp_path):
    """A failed write is kept and written with later work: every step stored, every state right."""
    import sqlalchemy as sa

    rec = Recorder(tmp_path / "lost.db", durability="sync", lock_wait=0.2)
    failing = {"on": False}

    @sa.event.listens_for(rec.store.engine, "before_cursor_execute")
    def fail_step_inserts(conn, cursor, statement, params, context, executemany):
        if failing["on"] and statement.startswith("INSERT INTO steps"):
            raise sa.exc.OperationalError(statement, params, Exception("disk I/O error"))

    def node(state: S):
        failing["on"] = state["n"] in (3, 4)
        return {"n": state["n"] + 1, "notes": [f"note{state['n']}" * 50]}

    out = rec.attach(chain(10, node=node)).invoke({"n": 0, "notes": []})
    assert out["n"] == 10
    run_id = rec.last_run_id
    rec.flush()
    stored = [s.step for s in rec.store.list_steps(run_id) if not s.pending and s.step >= 0]
    assert stored == list(range(11)) and rec.fault_count == 1
    for step_no in stored:
        state = rec.store.state_at(run_id, step_no)
        assert state["n"] == step_no and len(state["notes"]) == step_no
    rec.close()


def test_a_store_refusing_writes_is_tried_once_on_the_graphs_thread(tmp_path):
    """Sync mode: a read-only refusal does not pass within ``lock_wait``, so the graph is not held
    retrying it; the background retry keeps the rows and writes them once the store takes them."""
    import sqlalchemy as sa

    rec = Recorder(tmp_path / "refusing.db", durability="sync")
    refusing = {"on": False}
    graph_thread_tries = []

    @sa.event.listens_for(rec.store.engine, "before_cursor_execute")
    def refuse_step_inserts(conn, cursor, statement, params, context, executemany):
        if refusing["on"] and statement.startswith("INSERT INTO steps"):
            graph_thread_tries.append(threading.current_thread() is threading.main_thread())
            raise sa.exc.OperationalError(statement, params, Exception("attempt to write a readonly database"))

    def node(state: S):
        refusing["on"] = state["n"] == 2
        return {"n": state["n"] + 1, "notes": []}

    rec.attach(chain(5, node=node)).invoke({"n": 0, "notes": []})
    assert graph_thread_tries.count(True) == 1
    assert rec.flush() is True
    stored = [s.step for s in rec.store.list_steps(rec.last_run_id) if not s.pending and s.step >= 0]
    assert stored == list(range(6)) and rec.fault_count == 1
    rec.close()


def test_flush_waits_for_the_rows_a_background_retry_is_writing(tmp_path):
    """Sync mode after a fault: rows the retry thread has taken out are not written yet; flush waits for them."""
    import sqlalchemy as sa

    rec = Recorder(tmp_path / "retry.db", durability="sync", lock_wait=0.2)
    phase = {"failing": False}

    @sa.event.listens_for(rec.store.engine, "before_cursor_execute")
    def fail_then_slow_the_retry(conn, cursor, statement, params, context, executemany):
        if not statement.startswith("INSERT INTO steps"):
            return
        if phase["failing"]:
            raise sa.exc.OperationalError(statement, params, Exception("disk I/O error"))
        if threading.current_thread().name == "graphtape-writer":
            time.sleep(0.3)  # the retry's commits outlast the run: one is under way when the caller flushes

    def node(state: S):
        phase["failing"] = state["n"] == 3
        return {"n": state["n"] + 1, "notes": []}

    rec.attach(chain(6, node=node)).invoke({"n": 0, "notes": []})
    assert rec.flush() is True
    stored = [s.step for s in rec.store.list_steps(rec.last_run_id) if not s.pending and s.step >= 0]
    assert stored == list(range(7))
    rec.close()


class _Twice(TypedDict):
    n: int


def test_exit_durability_with_the_graphs_own_saver_says_only_the_last_superstep_is_recorded(tmp_path, caplog):
    import logging

    b = StateGraph(_Twice)
    b.add_node("a", lambda s: {"n": s["n"] + 1})
    b.add_node("h", lambda s: {"n": s["n"] * 2})
    b.add_edge(START, "a")
    b.add_edge("a", "h")
    b.add_edge("h", END)
    db = tmp_path / "exit.db"
    with caplog.at_level(logging.WARNING, logger="graphtape"), Recorder(db) as rec:
        graph = rec.attach(b.compile(checkpointer=InMemorySaver()))
        for thread in ("x", "y"):
            assert graph.invoke({"n": 1}, {"configurable": {"thread_id": thread}}, durability="exit") == {"n": 4}
        run_id = rec.last_run_id
    said = [r.getMessage() for r in caplog.records if "durability='exit'" in r.getMessage()]
    assert len(said) == 1, said  # once per recorder, not per run
    store = open_store(db)
    try:
        assert any("only that superstep is recorded" in line for line in store.run_detail(run_id).fault_log)
    finally:
        store.close()


def test_a_node_that_may_hand_off_but_does_not_is_recorded_as_ending_the_run(tmp_path):
    """A swarm agent's shape: its handoffs are declared Command destinations and it has no edge
    out, so a reply without a handoff ends the run there, and the recording shows that way out."""
    from langgraph.types import Command

    b = StateGraph(_Twice)
    b.add_node("a", lambda s: Command(update={"n": s["n"] + 1}), destinations=("b",))
    b.add_node("b", lambda s: {"n": 0})
    b.add_edge(START, "a")
    db = tmp_path / "ends.db"
    with Recorder(db) as rec:
        assert rec.attach(b.compile()).invoke({"n": 1}) == {"n": 2}
        run_id = rec.last_run_id
    store = open_store(db)
    try:
        last = store.list_steps(run_id)[-1].step
        routes = [(r.source, r.kind, r.destinations) for r in store.step_detail(run_id, last).routes]
    finally:
        store.close()
    assert routes == [("a", "static", ["__end__"])], routes


def test_a_recorder_shows_where_it_records_never_the_password(tmp_path, pg_server):
    with Recorder(tmp_path / "r.db") as rec:
        assert repr(rec).startswith("Recorder(") and str(tmp_path / "r.db") in repr(rec) and "durability='async'" in repr(rec), repr(rec)
    import sqlalchemy as sa

    url = sa.engine.make_url(pg_server).set(password="hunter2").render_as_string(hide_password=False)
    rec = Recorder(url, durability="sync")
    try:
        shown = repr(rec)
        assert "hunter2" not in shown and "***" in shown and "durability='sync'" in shown, shown
    finally:
        rec.close(0.5)
