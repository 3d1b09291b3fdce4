"""Recorded graphs served the way LangGraph's server serves them.

LangGraph's server (``langgraph dev``, the platform) refuses to load an exported
graph that holds a checkpointer, and does not run the graph a module exports:
for each request it runs ``graph.copy(update={"checkpointer": ..., "store":
...})`` with its own saver and store, asynchronously. Before, attaching gave every
graph a checkpointer (the dev server would not start), and a copy ran outside
graphtape's saver and store (its runs were listed with no state and no memory
reads, and their replays read today's memories). Real compiled graphs, LangGraph's
own savers and stores, a real store file.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command, interrupt
from test_store_capture import Visit, greet

from graphtape.recorder import Recorder, open_store
from graphtape.replay import replay


class Asked(Visit, total=False):
    answer: str


def ask(state: Asked) -> dict[str, Any]:
    return {"answer": interrupt(f"{state['greeting']}: how are you?")}


def builder(with_question: bool = False) -> StateGraph:
    b = StateGraph(Asked)
    b.add_node("greet", greet)
    b.add_edge(START, "greet")
    if with_question:
        b.add_node("ask", ask)
        b.add_edge("greet", "ask")
        b.add_edge("ask", END)
    else:
        b.add_edge("greet", END)
    return b


def served(app: Any, saver: Any, store: Any) -> Any:
    """What LangGraph's server runs for one request: the exported graph with its saver and store."""
    return app.copy(update={"checkpointer": saver, "store": store})


@pytest.fixture
def db(tmp_path):
    return str(tmp_path / "served.db")


def steps_and_calls(db: str, run_id: str) -> tuple[list[Any], list[Any]]:
    store = open_store(db)
    try:
        return store.list_steps(run_id), store.calls(run_id)
    finally:
        store.close()


def test_a_copy_with_the_servers_saver_and_store_records_state_and_memory(db):
    saver, memory = InMemorySaver(), InMemoryStore()
    with Recorder(db) as rec:
        app = rec.attach(builder().compile(), name="greeter")
        for thread in ("t1", "t2"):  # a copy per request, as the server makes them
            out = served(app, saver, memory).invoke({"user": "ada"}, {"configurable": {"thread_id": thread}})
        rec.flush()
        run_id = rec.last_run_id
    assert out["greeting"] == "hello again ada"
    steps, calls = steps_and_calls(db, run_id)
    assert [s.nodes for s in steps] == [[], ["__start__"], ["greet"]]
    assert [(c.kind, c.name) for c in calls] == [("store", "get"), ("store", "put")]
    assert memory.get(("users", "ada"), "profile").value == {"name": "ada", "visits": 2}  # the server's store got every write
    assert saver.get_tuple({"configurable": {"thread_id": "t2"}}).checkpoint["channel_values"]["greeting"] == "hello again ada"
    store = open_store(db)
    try:
        run = store.get_run(run_id)
        assert (run.name, run.status) == ("greeter", "ok")
        assert store.run_detail(run_id).output["greeting"] == "hello again ada"
    finally:
        store.close()
    # The recorded memory answers the replay: a fresh store (CI, another machine) replays the returning user.
    result = replay(run_id, builder().compile(store=InMemoryStore()), db=db, mode="strict")
    assert not result.diverged, result.first_divergence


def test_an_async_run_of_a_served_copy_is_recorded(db):
    saver, memory = InMemorySaver(), InMemoryStore()

    async def go(app: Any) -> list[Any]:
        return [chunk async for chunk in served(app, saver, memory).astream({"user": "bo"}, {"configurable": {"thread_id": "a1"}})]

    with Recorder(db) as rec:
        app = rec.attach(builder().compile())
        chunks = asyncio.run(go(app))
        rec.flush()
        run_id = rec.last_run_id
    assert chunks == [{"greet": {"greeting": "hello bo"}}]
    steps, calls = steps_and_calls(db, run_id)
    assert [s.nodes for s in steps] == [[], ["__start__"], ["greet"]]
    assert [(c.kind, c.name) for c in calls] == [("store", "get"), ("store", "put")]


def test_a_question_asked_in_one_served_copy_is_answered_in_the_next_as_one_run(db):
    saver, memory = InMemorySaver(), InMemoryStore()
    config = {"configurable": {"thread_id": "h1"}}
    with Recorder(db) as rec:
        app = rec.attach(builder(with_question=True).compile())
        first = served(app, saver, memory).invoke({"user": "cy"}, config)
        asked = rec.last_run_id
        second = served(app, saver, memory).invoke(Command(resume="fine"), config)
        rec.flush()
        answered = rec.last_run_id
    assert first["__interrupt__"][0].value == "hello cy: how are you?"
    assert second["answer"] == "fine"
    assert answered == asked  # the resume goes on in the run that asked
    steps, _ = steps_and_calls(db, asked)
    assert [s.nodes for s in steps][-1] == ["ask"]
    store = open_store(db)
    try:
        assert store.get_run(asked).status == "ok"
    finally:
        store.close()


def test_a_copy_without_a_saver_keeps_no_memory_and_is_recorded(db):
    saver = InMemorySaver()
    with Recorder(db) as rec:
        app = rec.attach(builder().compile(checkpointer=saver, store=InMemoryStore()))
        bare = app.copy(update={"checkpointer": None})
        bare.invoke({"user": "di"}, {"configurable": {"thread_id": "n1"}})
        rec.flush()
        run_id = rec.last_run_id
        assert bare.checkpointer is None
        with pytest.raises(ValueError, match="No checkpointer"):
            bare.get_state({"configurable": {"thread_id": "n1"}})  # as LangGraph says of a graph without memory
    steps, calls = steps_and_calls(db, run_id)
    assert [s.nodes for s in steps] == [[], ["__start__"], ["greet"]] and len(calls) == 2
    assert saver.get_tuple({"configurable": {"thread_id": "n1"}}) is None


def test_a_copy_with_another_config_or_name_is_recorded_as_before(db):
    memory = InMemoryStore()
    with Recorder(db) as rec:
        app = rec.attach(builder().compile(store=memory))
        tagged = app.with_config({"tags": ["beta"]})
        assert tagged.checkpointer is app.checkpointer and tagged.store is app.store  # nothing lent: nothing rewrapped
        tagged.invoke({"user": "ed"})
        renamed = served(app, InMemorySaver(), memory).copy(update={"name": "front-desk"})
        renamed.invoke({"user": "ed"}, {"configurable": {"thread_id": "r1"}})
        rec.flush()
        run_id = rec.last_run_id
    store = open_store(db)
    try:
        runs = store.list_runs()
        assert sorted(r.name for r in runs) == ["LangGraph", "front-desk"]
        assert all(len(store.list_steps(r.id)) == 3 for r in runs)
        assert store.get_run(run_id).name == "front-desk"
    finally:
        store.close()


def test_an_exported_graph_without_memory_holds_no_saver_and_each_run_is_lent_one(db):
    b = StateGraph(Asked)
    b.add_node("ask", ask)
    b.add_edge(START, "ask")
    b.add_edge("ask", END)
    with Recorder(db) as rec:
        app = rec.attach(b.compile())
        assert app.checkpointer is None and app.store is None  # what the dev server checks before it serves a graph
        asked = app.invoke({"greeting": "hi fy"}, {"configurable": {"thread_id": "q1"}})
        rec.flush()
        run_id = rec.last_run_id
    assert asked["__interrupt__"][0].value == "hi fy: how are you?"  # interrupt() found the lent saver
    steps, _ = steps_and_calls(db, run_id)
    assert [s.nodes for s in steps] == [[], ["__start__"], ["ask"]]


def test_a_served_runs_memory_is_answered_when_the_exported_graph_has_no_store(db):
    memory = InMemoryStore()
    with Recorder(db) as rec:
        app = rec.attach(builder().compile())
        for thread in ("s1", "s2"):
            served(app, InMemorySaver(), memory).invoke({"user": "gu"}, {"configurable": {"thread_id": thread}})
        rec.flush()
        run_id = rec.last_run_id
    exported = builder().compile()  # what `graphtape replay --graph agent.py:graph` gets: no store of its own
    result = replay(run_id, exported, db=db, mode="strict")
    assert not result.diverged, result.first_divergence
    assert result.served["store"] == 2
    live = replay(run_id, exported, db=db, mode="live")  # today's graph as it is: no store, and it says so
    assert live.diverged and "NoneType" in str(live.error)


def test_an_async_run_after_a_breakpoint_keeps_its_first_step_with_an_async_only_saver(db, tmp_path):
    async def go() -> list[Any]:
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "lg.db")) as saver:
            with Recorder(db) as rec:
                app = rec.attach(builder(with_question=True).compile(checkpointer=saver, store=InMemoryStore(), interrupt_before=["ask"]))
                config = {"configurable": {"thread_id": "b1"}}
                [c async for c in app.astream({"user": "hal"}, config)]
                [c async for c in app.astream(None, config)]  # goes on past the breakpoint: the thread's checkpoint is its first step
                rec.flush()
                return [rec.last_run_id]

    (run_id,) = asyncio.run(go())
    steps, _ = steps_and_calls(db, run_id)
    # The saver's sync API is refused on the event loop: the run starts off it, so its first step is there.
    assert [(s.step, s.nodes) for s in steps][0] == (1, [])


def test_a_saver_lent_through_the_runs_config_is_recorded_through_and_keeps_its_memory(db):
    saver = InMemorySaver()
    with Recorder(db) as rec:
        app = rec.attach(builder().compile(store=InMemoryStore()))
        app.invoke({"user": "ivy"}, {"configurable": {"thread_id": "c1", "__pregel_checkpointer": saver}})  # as LangGraph lends a subgraph its parent's
        rec.flush()
        run_id = rec.last_run_id
    steps, calls = steps_and_calls(db, run_id)
    assert [s.nodes for s in steps] == [[], ["__start__"], ["greet"]] and len(calls) == 2
    assert saver.get_tuple({"configurable": {"thread_id": "c1"}}).checkpoint["channel_values"]["greeting"] == "hello ivy"


class FarSaver(InMemorySaver):
    """A saver across a slow link, once ``far`` is set: reading a thread's checkpoint takes a while."""

    far = False

    def get_tuple(self, config: Any) -> Any:
        if self.far:
            time.sleep(0.4)
        return super().get_tuple(config)


def test_a_run_cancelled_while_it_is_being_opened_ends_cancelled_not_running(db):
    saver = FarSaver()
    config = {"configurable": {"thread_id": "x1"}}

    async def go(rec: Recorder, app: Any) -> str:
        await app.ainvoke({"user": "jo"}, config)  # stops at the breakpoint
        first = rec.last_run_id
        saver.far = True
        going_on = asyncio.ensure_future(app.ainvoke(None, config))  # opening it reads the thread's checkpoint
        await asyncio.sleep(0.1)
        going_on.cancel()  # the server cancels a run whose client went away
        with pytest.raises(asyncio.CancelledError):
            await going_on
        deadline = time.monotonic() + 20
        while rec.last_run_id == first and time.monotonic() < deadline:
            await asyncio.sleep(0.05)  # the opening finishes in its thread
        await asyncio.sleep(0.1)
        return rec.last_run_id

    with Recorder(db) as rec:
        app = rec.attach(builder(with_question=True).compile(checkpointer=saver, store=InMemoryStore(), interrupt_before=["ask"]))
        cancelled = asyncio.run(go(rec, app))
        rec.flush()
    store = open_store(db)
    try:
        run = store.get_run(cancelled)
        assert (run.status, run.status_reason) == ("interrupted", "cancelled")
        assert [(r.status, r.status_reason) for r in store.list_runs()].count(("running", None)) == 0
    finally:
        store.close()


class ServerRuntime:
    """What a server may seed a run's config with instead of a ``Runtime``: a context and a store."""

    def __init__(self, store: Any) -> None:
        self.context = None
        self.store = store


@pytest.mark.parametrize("seed", ["Runtime", "look-alike"])
def test_a_store_lent_through_the_runs_runtime_is_recorded(db, seed):
    # LangGraph runs with the store of a Runtime in the run's config (a graph factory's, under
    # LangGraph's server; a parent graph's, for a graph run inside a node), not the graph's.
    from langgraph._internal._constants import CONFIG_KEY_RUNTIME
    from langgraph.runtime import Runtime

    memory = InMemoryStore()
    memory.put(("users", "ed"), "profile", {"name": "ed", "visits": 1})
    runtime = Runtime(store=memory) if seed == "Runtime" else ServerRuntime(memory)
    with Recorder(db) as rec:
        app = rec.attach(builder().compile())  # exported without a store, as the server wants it
        out = app.invoke({"user": "ed"}, {"configurable": {"thread_id": "r1", CONFIG_KEY_RUNTIME: runtime}})
        rec.flush()
        run_id = rec.last_run_id
    assert out["greeting"] == "hello again ed"
    assert memory.get(("users", "ed"), "profile").value["visits"] == 2  # the lent store got the write
    _, calls = steps_and_calls(db, run_id)
    assert [(c.kind, c.name) for c in calls] == [("store", "get"), ("store", "put")]
    # The graph as exported holds no store: the replay answers the returning user from the recording.
    result = replay(run_id, builder().compile(), db=db, mode="strict")
    assert not result.diverged, result.first_divergence
