"""Divergences come in run order however deep the subgraph: a node two subgraphs down that
changed is told before what its parent subgraph's step made of it, whatever the step numbers."""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

from langgraph.graph import START, StateGraph

from graphtape import Recorder, open_store, replay


class Log(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


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


def test_a_node_two_subgraphs_deep_is_named_before_its_parents_steps(tmp_path):
    db = str(tmp_path / "deep.db")
    with Recorder(db) as rec:
        rec.attach(_nested(), name="deep").invoke({"log": []})
    store = open_store(db)
    try:
        (run,) = store.list_runs()
    finally:
        store.close()
    result = replay(run.id, _nested(changed=True), db=db)
    first = result.first_divergence
    assert first is not None, result.report()
    # The inner graph's judge (its step 2) changed the log; the middle graph's step 1 and the
    # root's step 1 only carry it up.
    assert (first.kind, first.ns, first.step, first.node) == ("state", "desk|front", 2, "judge"), result.report()
    assert [d.ns for d in result.divergences] == ["desk|front", "desk", ""], result.report()
