"""What a run stores as its input is what the caller passed, however LangGraph changes it later.

``add_messages`` gives every message an id, in place, on the caller's own objects. The input
(run row and input step) must be read before that, or identical runs store different inputs.
Both durabilities, on a background writer kept busy so encoding happens late.
"""

from __future__ import annotations

from typing import Annotated, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from graphtape import Recorder, open_store


class Chat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def _graph():
    b = StateGraph(Chat)
    b.add_node("reply", lambda s: {"messages": [AIMessage("ok")]})
    b.add_edge(START, "reply")
    b.add_edge("reply", END)
    return b.compile()


@pytest.mark.parametrize("durability", ["async", "sync"])
def test_identical_runs_store_identical_inputs(tmp_path, durability):
    db = str(tmp_path / "runs.db")
    graph = _graph()
    with Recorder(db, durability=durability) as rec:
        app = rec.attach(graph, name="chat")
        for _ in range(3):
            history = [HumanMessage(f"message {i}") for i in range(400)]
            app.invoke({"messages": history})
            assert all(m.id for m in history)  # LangGraph did give the caller's messages ids
    store = open_store(db)
    try:
        runs = store.list_runs()
        inputs = [store.run_detail(r.id).inputs for r in runs]
        first_steps = [store.state_at(r.id, -1, internal=True) for r in runs]
    finally:
        store.close()
    assert len(runs) == 3
    assert all(m.get("id") is None for m in inputs[0]["messages"])  # as passed: without ids
    assert inputs[0] == inputs[1] == inputs[2]
    assert first_steps[0] == first_steps[1] == first_steps[2]


def _grows_subgraph_output():
    """langgraph-supervisor's ``full_history`` shape: a node runs a subgraph, then appends to the
    list the subgraph ended with (the very list its last checkpoint holds)."""
    inner_b = StateGraph(Chat)
    inner_b.add_node("answer", lambda s: {"messages": [AIMessage("inner answer")]})
    inner_b.add_edge(START, "answer")
    inner_b.add_edge("answer", END)
    inner = inner_b.compile()

    def call_inner(state: Chat, config) -> dict:
        out = inner.invoke(state, config)
        out["messages"].append(AIMessage("added after the subgraph ended"))
        return {"messages": out["messages"]}

    outer = StateGraph(Chat)
    outer.add_node("worker", call_inner)
    outer.add_edge(START, "worker")
    outer.add_edge("worker", END)
    return outer.compile()


def test_a_value_changed_in_place_after_its_checkpoint_is_stored_as_it_was(tmp_path):
    import threading

    db = str(tmp_path / "runs.db")
    release = threading.Event()
    with Recorder(db) as rec:  # async: values are encoded on the writer thread
        rec.writer.submit(lambda: release.wait(10) and None)  # the writer is busy: every encode happens after the run
        app = rec.attach(_grows_subgraph_output(), name="grows")
        app.invoke({"messages": [HumanMessage("hi")]})
        release.set()
    store = open_store(db)
    try:
        run = store.list_runs()[0]
        sub = next(ns for ns in store.namespaces(run.id) if ns)
        last = [s for s in store.list_steps(run.id, sub) if s.checkpoint_id][-1]
        inner_final = [m["content"] for m in store.state_at(run.id, last.step, sub)["messages"]]
        outer_final = [m["content"] for m in store.state_at(run.id, 1)["messages"]]
    finally:
        store.close()
    assert inner_final == ["hi", "inner answer"]  # not the message appended after the subgraph ended
    assert outer_final == ["hi", "inner answer", "added after the subgraph ended"]


async def test_the_input_step_of_an_async_run_is_the_input_as_passed(tmp_path):
    """With ainvoke, LangGraph hands the saver the input checkpoint after the first step has begun,
    by when add_messages has given the caller's messages ids: the step still holds them as passed."""
    db = str(tmp_path / "runs.db")
    with Recorder(db) as rec:
        app = rec.attach(_graph(), name="chat")
        for _ in range(3):
            await app.ainvoke({"messages": [HumanMessage(f"message {i}") for i in range(50)]})
    store = open_store(db)
    try:
        first_steps = [store.state_at(r.id, -1, internal=True)["__start__"] for r in store.list_runs()]
    finally:
        store.close()
    assert len(first_steps) == 3 and first_steps[0] == first_steps[1] == first_steps[2]
    assert all(m.get("id") is None for m in first_steps[0]["messages"])
