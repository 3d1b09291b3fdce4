"""LangGraph's ``DeltaChannel`` keeps its value out of checkpoints; the recorded states hold it.

The oracle is LangGraph itself: for every checkpoint of a thread, ``get_state_history``
rebuilds the channel from the saver, and the recorded state at that step must say the same.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

import pytest
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Overwrite, Send, interrupt
from typing_extensions import TypedDict

from graphtape.recorder import Recorder, open_store
from graphtape.recorder.errors import RecorderFault
from graphtape.replay import fork, replay


def concat(state: list, writes: list) -> list:
    out = list(state)
    for w in writes:
        out.extend(w if isinstance(w, list) else [w])
    return out


class State(TypedDict):
    log: Annotated[list, DeltaChannel(concat, snapshot_frequency=3)]
    n: int


def loop_graph(checkpointer=None, *, b_says: str = "b"):
    def a(s):
        return {"log": [f"a{s['n']}"], "n": s["n"] + 1}

    def b(s):
        return {"log": [f"{b_says}{s['n']}"]}

    g = StateGraph(State)
    g.add_node("a", a)
    g.add_node("b", b)
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_conditional_edges("b", lambda s: "a" if s["n"] < 3 else END)
    return g.compile(checkpointer=checkpointer)


def recorded(db: str, run_id: str, ns: str = "") -> dict[int, list | None]:
    store = open_store(db)
    try:
        return {step: values.get("log") for step, values in store.frames(run_id, ns)}
    finally:
        store.close()


def langgraph_says(graph, config) -> dict[int, list | None]:
    """What LangGraph rebuilds for each checkpoint of the thread (None: never written there)."""
    return {snap.metadata["step"]: snap.values.get("log") for snap in graph.get_state_history(config)}


def record_run(db: str, graph, inputs, config=None) -> tuple[str, dict]:
    with Recorder(db) as rec:
        out = rec.attach(graph).invoke(inputs, config)
        rec.flush()
        return rec.last_run_id, out


def goes_on(db: str, graph, config) -> tuple[str, list]:
    """Two runs on one thread: the second's id and its final ``log``."""
    with Recorder(db) as rec:
        recorded_graph = rec.attach(graph)
        recorded_graph.invoke({"log": ["x"], "n": 0}, config)
        out = recorded_graph.invoke({"log": ["y"], "n": 1}, config)
        rec.flush()
        return rec.last_run_id, out["log"]


def assert_as_langgraph_says(got: dict, truth: dict, first: int = 0) -> None:
    wrong = {step: (log, truth[step]) for step, log in got.items() if step >= first and log != truth[step]}
    assert got and not wrong, wrong


def test_every_recorded_state_holds_the_delta_channel_as_langgraph_rebuilds_it(tmp_path):
    db = str(tmp_path / "d.db")
    saver = InMemorySaver()
    config = {"configurable": {"thread_id": "t"}}
    run_id, out = record_run(db, loop_graph(saver), {"log": ["in"], "n": 0}, config)
    got = recorded(db, run_id)
    assert got[max(got)] == out["log"] == ["in", "a0", "b1", "a1", "b2", "a2", "b3"]
    assert_as_langgraph_says(got, langgraph_says(loop_graph(saver), config))
    assert got[-1] is None  # the input step: nothing written to it yet


def test_a_graph_without_memory_records_it_too(tmp_path):
    db = str(tmp_path / "d.db")
    run_id, out = record_run(db, loop_graph(), {"log": ["in"], "n": 0})
    got = recorded(db, run_id)
    assert [got[s] for s in sorted(got) if s >= 0][:3] == [["in"], ["in", "a0"], ["in", "a0", "b1"]]
    assert got[max(got)] == out["log"]
    store = open_store(db)
    try:
        assert store.run_detail(run_id).output["log"] == out["log"]  # the run's output, as returned
    finally:
        store.close()


def test_a_thread_that_goes_on_starts_from_what_its_saver_rebuilds(tmp_path):
    db = str(tmp_path / "d.db")
    saver = InMemorySaver()
    config = {"configurable": {"thread_id": "t"}}
    second, final = goes_on(db, loop_graph(saver), config)
    got = recorded(db, second)
    assert_as_langgraph_says(got, langgraph_says(loop_graph(saver), config))
    assert got[max(got)] == final and final[:8] == ["x", "a0", "b1", "a1", "b2", "a2", "b3", "y"]


def test_a_strict_replay_matches_from_any_step_and_a_changed_writer_diverges_on_it(tmp_path):
    db = str(tmp_path / "d.db")
    run_id, _ = record_run(db, loop_graph(), {"log": ["in"], "n": 0})
    for step in (-1, 2, 4):
        result = replay(run_id, loop_graph(), step, db=db, mode="strict")
        assert not result.diverged, result.report()
        replayed = recorded(db, result.run_id)
        assert {s: v for s, v in recorded(db, run_id).items() if s >= step} == replayed
    changed = replay(run_id, loop_graph(b_says="B"), 2, db=db, mode="strict")
    assert changed.diverged
    assert "log" in changed.report()


def test_a_fork_edit_goes_through_the_reducer(tmp_path):
    db = str(tmp_path / "d.db")
    run_id, _ = record_run(db, loop_graph(), {"log": ["in"], "n": 0})
    result = fork(run_id, loop_graph(), 2, {"log": ["edited"]}, as_node="b", db=db)
    got = recorded(db, result.run_id)
    assert got[min(got)] == ["in", "a0", "b1", "edited"]
    assert got[max(got)][-1] == "b3" and got[max(got)][:4] == ["in", "a0", "b1", "edited"]


def test_a_resume_applies_its_command_update_before_the_step(tmp_path):
    def ask(s):
        answer = interrupt("more?")
        return {"log": [f"ask:{answer}"]}

    def build(saver):
        g = StateGraph(State)
        g.add_node("ask", ask)
        g.add_node("done", lambda s: {"log": ["done"]})
        g.add_edge(START, "ask")
        g.add_edge("ask", "done")
        g.add_edge("done", END)
        return g.compile(checkpointer=saver)

    db = str(tmp_path / "d.db")
    saver = InMemorySaver()
    config = {"configurable": {"thread_id": "t"}}
    with Recorder(db) as rec:
        graph = rec.attach(build(saver))
        graph.invoke({"log": ["in"], "n": 0}, config)
        out = graph.invoke(Command(resume="yes", update={"log": ["human"]}), config)
        rec.flush()
        run_id = rec.last_run_id
    assert out["log"] == ["in", "human", "ask:yes", "done"]
    got = recorded(db, run_id)
    truth = langgraph_says(build(saver), config)
    assert got[max(got)] == out["log"]
    # Step 0 as it was when it ran; LangGraph's view of it now shows the update stored on it.
    assert got[0] == ["in"] and truth[0] == ["in", "human"]
    assert_as_langgraph_says(got, truth, first=1)


def test_an_overwrite_and_parallel_writers_land_in_langgraph_order(tmp_path):
    class Fan(TypedDict):
        log: Annotated[list, DeltaChannel(concat)]
        n: int

    def split(s):
        return [Send("worker", {"log": [], "n": i}) for i in range(4)]

    g = StateGraph(Fan)
    g.add_node("start", lambda s: {"log": Overwrite(["reset"])})
    g.add_node("worker", lambda s: {"log": [f"w{s['n']}"]})
    g.add_node("end", lambda s: {"log": ["end"]})
    g.add_edge(START, "start")
    g.add_conditional_edges("start", split, ["worker"])
    g.add_edge("worker", "end")
    g.add_edge("end", END)
    db = str(tmp_path / "d.db")
    run_id, out = record_run(db, g.compile(), {"log": ["dropped"], "n": 0})
    got = recorded(db, run_id)
    assert got[max(got)] == out["log"]
    assert out["log"][0] == "reset" and sorted(out["log"][1:5]) == ["w0", "w1", "w2", "w3"]
    assert replay(run_id, g.compile(), db=db, mode="strict").diverged is False


def test_a_subgraph_recorded_async_holds_its_delta_channel(tmp_path):
    inner = StateGraph(State)
    inner.add_node("sub", lambda s: {"log": [f"sub{s['n']}"], "n": s["n"] + 10})
    inner.add_edge(START, "sub")
    inner.add_edge("sub", END)
    outer = StateGraph(State)
    outer.add_node("child", inner.compile())
    outer.add_node("after", lambda s: {"log": ["after"]})
    outer.add_edge(START, "child")
    outer.add_edge("child", "after")
    outer.add_edge("after", END)
    db = str(tmp_path / "d.db")

    async def go():
        with Recorder(db) as rec:
            out = await rec.attach(outer.compile()).ainvoke({"log": ["in"], "n": 1})
            rec.flush()
            return out, rec.last_run_id

    out, run_id = asyncio.run(go())
    assert out["log"][-1] == "after" and "sub1" in out["log"]
    store = open_store(db)
    try:
        ns = [n for n in store.namespaces(run_id) if n.startswith("child")]
    finally:
        store.close()
    sub = recorded(db, run_id, ns[0])
    assert sub[max(sub)][-1] == "sub1"
    assert recorded(db, run_id)[max(recorded(db, run_id))] == out["log"]


_seen_by_once: set = set()


def once(state: list, writes: list) -> list:
    """Not deterministic, against DeltaChannel's contract: asked again the same, it fails."""
    key = repr((state, writes))
    if key in _seen_by_once:
        raise ValueError("asked twice")
    _seen_by_once.add(key)
    return concat(state, writes)


class Odd(TypedDict):
    log: Annotated[list, DeltaChannel(once)]


def test_a_reducer_that_fails_only_when_asked_again_costs_the_value_never_the_run(tmp_path):
    _seen_by_once.clear()
    g = StateGraph(Odd)
    g.add_node("a", lambda s: {"log": ["a"]})
    g.add_edge(START, "a")
    g.add_edge("a", END)
    db = str(tmp_path / "d.db")
    run_id, out = record_run(db, g.compile(), {"log": ["in"]})
    assert out["log"] == ["in", "a"]
    got = recorded(db, run_id)
    assert all(log is None for log in got.values())  # left out, not recorded wrong
    store = open_store(db)
    try:
        assert store.get_run(run_id).faults >= 1
    finally:
        store.close()
    _seen_by_once.clear()
    with Recorder(str(tmp_path / "strict.db"), strict=True) as rec, pytest.raises(RecorderFault):
        rec.attach(g.compile()).invoke({"log": ["in"]})


def test_a_thread_kept_in_postgres_goes_on_from_what_postgres_saver_rebuilds(pg_url, tmp_path):
    from langgraph.checkpoint.postgres import PostgresSaver

    conninfo = pg_url.replace("postgresql+psycopg://", "postgresql://")
    config = {"configurable": {"thread_id": "pg"}}
    with PostgresSaver.from_conn_string(conninfo) as saver:
        saver.setup()
        db = str(tmp_path / "d.db")
        run_id, final = goes_on(db, loop_graph(saver), config)
        truth = langgraph_says(loop_graph(saver), config)
    got = recorded(db, run_id)
    assert got[max(got)] == final and len(final) == 12
    assert_as_langgraph_says(got, truth)


def test_an_async_saver_seeds_a_thread_that_goes_on(tmp_path):
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    db = str(tmp_path / "d.db")
    config = {"configurable": {"thread_id": "a"}}

    async def go():
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "lg.db")) as saver:
            with Recorder(db) as rec:
                graph = rec.attach(loop_graph(saver))
                await graph.ainvoke({"log": ["x"], "n": 0}, config)
                out = await graph.ainvoke({"log": ["y"], "n": 1}, config)
                rec.flush()
                run_id = rec.last_run_id
            truth = {s.metadata["step"]: s.values.get("log") async for s in loop_graph(saver).aget_state_history(config)}
            return run_id, out["log"], truth

    run_id, final, truth = asyncio.run(go())
    got = recorded(db, run_id)
    assert got[max(got)] == final and final[7] == "y"
    assert_as_langgraph_says(got, truth)
