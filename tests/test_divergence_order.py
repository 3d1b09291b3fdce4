"""Divergences come in run order however deep the subgraph: a node two subgraphs down that
changed is told before what its parent subgraph's step made of it, whatever the step numbers."""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

from conftest import load_agent
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, StateGraph

from graphtape import Recorder, open_store, replay


class Log(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    noted: str


def _nested(changed: bool = False):
    inner = StateGraph(Log)
    inner.add_node("read", lambda s: {"log": ["read"]})
    inner.add_node("judge", lambda s: {"log": ["JUDGED" if changed else "judged"]})  # the inner graph's step 2
    inner.add_edge(START, "read")
    inner.add_edge("read", "judge")
    middle = StateGraph(Log)
    middle.add_node("front", inner.compile())  # the middle graph's step 1
    middle.add_edge(START, "front")
    root = StateGraph(Log)
    root.add_node("desk", middle.compile())
    root.add_edge(START, "desk")
    return root.compile()


def _recorded(db: str, graph, name: str):
    """The run of ``graph`` recorded into ``db`` (its only one)."""
    with Recorder(db) as rec:
        rec.attach(graph, name=name).invoke({"log": []})
    store = open_store(db)
    try:
        (run,) = store.list_runs()
    finally:
        store.close()
    return run


def test_a_node_two_subgraphs_deep_is_named_before_its_parents_steps(tmp_path):
    db = str(tmp_path / "deep.db")
    run = _recorded(db, _nested(), "deep")
    result = replay(run.id, _nested(changed=True), db=db)
    first = result.first_divergence
    assert first is not None, result.report()
    # The inner graph's judge (its step 2) changed the log; the middle graph's step 1 and the
    # root's step 1 only carry it up.
    assert (first.kind, first.ns, first.step, first.node) == ("state", "desk|front", 2, "judge"), result.report()
    assert [d.ns for d in result.divergences] == ["desk|front", "desk", ""], result.report()


def _desk_twice(changed: bool = False):
    """The same subgraph node runs twice (root steps 1 and 2), its model call in each run; a
    subgraph beside its first run writes something else too when changed."""
    model = load_agent("scripted_model").ScriptedChatModel(script=lambda ms: AIMessage(f"noted {len(ms)}"), model_name="desk-model")

    def ask(s: Log) -> dict:
        said = model.invoke([HumanMessage(f"{'URGENT ' if changed else ''}turn {len(s['log'])}")])
        return {"log": [said.content]}

    inner = StateGraph(Log)
    inner.add_node("ask", ask)
    inner.add_edge(START, "ask")
    root = StateGraph(Log)
    root.add_node("desk", inner.compile())
    note = StateGraph(Log)
    note.add_node("write", lambda s: {"noted": "URGENT" if changed else "normal"})
    note.add_edge(START, "write")
    root.add_node("note", note.compile())  # a subgraph beside the desk's first run, done before the miss
    root.add_edge(START, "desk")
    root.add_edge(START, "note")
    root.add_conditional_edges("desk", lambda s: "desk" if len(s["log"]) < 2 else END)
    return root.compile()


def test_a_miss_in_the_first_run_of_a_subgraph_run_twice_is_placed_in_that_run(tmp_path):
    """The replay stops in the subgraph's first run: the miss there is told first in its root
    step (a subgraph's divergence before its parent step's), not placed at the root step of the
    subgraph's last recorded run, after the subgraph beside it."""
    db = str(tmp_path / "twice.db")
    run = _recorded(db, _desk_twice(), "twice")
    result = replay(run.id, _desk_twice(changed=True), db=db)
    first = result.first_divergence
    assert first is not None, result.report()
    assert (first.kind, first.ns, first.node) == ("arguments", "desk", "ask"), result.report()
