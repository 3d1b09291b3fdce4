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
