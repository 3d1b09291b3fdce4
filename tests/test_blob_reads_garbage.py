"""Reading a run's blobs leaves no reference cycles: its trees are freed when the read is done,
not at the collector's next full pass (a test session replays many fixtures, and a replay raises
the collector's threshold)."""

from __future__ import annotations

import gc
import operator
from typing import Annotated, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from graphtape import Recorder, open_store


class Chat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    turns: Annotated[int, operator.add]


def _answer(state: Chat) -> dict:
    # Long text goes to blobs of its own, referenced from the message's blob.
    return {"messages": [AIMessage(content="answer " * 200 + str(state["turns"]))], "turns": 1}


def test_reading_a_runs_calls_and_states_leaves_no_cyclic_garbage(tmp_path):
    b = StateGraph(Chat)
    b.add_node("answer", _answer)
    b.add_edge(START, "answer")
    b.add_conditional_edges("answer", lambda s: "answer" if s["turns"] < 6 else END)
    db = str(tmp_path / "g.db")
    with Recorder(db) as rec:
        rec.attach(b.compile()).invoke({"messages": [HumanMessage(content="hi")], "turns": 0})
        rec.flush()
        run_id = rec.last_run_id
    open_store(db).step_details(run_id, "")  # the first read of the process compiles its statements

    # Other threads of the session (a recorder's writer, a failing connection's traceback) may
    # leave cycles of their own while the collector is off: a read that makes cycles makes them
    # every time, so the fewest found over a few reads is the read's own.
    found = []
    for _ in range(3):
        store = open_store(db)  # a fresh store each time: nothing read before is kept parsed
        try:
            gc.collect()
            gc.disable()
            try:
                details = store.step_details(run_id, "")
                frames = list(store.frames(run_id, ""))
                found.append(gc.collect())
            finally:
                gc.enable()
        finally:
            store.close()
        if found[-1] == 0:
            break
    assert len(details) == len(frames) > 6
    assert min(found) == 0, f"{found} objects in reference cycles after reading the run"
