"""A state key several tasks of one step write (parallel nodes, ``Send`` packets) diverges in the
name of the task whose write changed, not of whichever wrote it first."""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

from langchain_core.tools import tool
from langgraph.graph import START, StateGraph
from langgraph.types import Send

from graphtape import Recorder, open_store, replay


@tool
def lookup(order_id: str) -> str:
    """Where an order is."""
    return f"order {order_id} is in transit"


class Fan(TypedDict, total=False):
    orders: list[str]
    found: Annotated[list[str], operator.add]


def _fan_out():
    b = StateGraph(Fan)
    b.add_node("plan", lambda s: {})
    b.add_node("audit", lambda s: {"found": ["audited"]})  # writes `found` in the same step, unchanged
    b.add_node("fetch", lambda s: {"found": [lookup.invoke({"order_id": s["order"]})]})
    b.add_edge(START, "plan")
    b.add_edge("plan", "audit")
    b.add_conditional_edges("plan", lambda s: [Send("fetch", {"order": o}) for o in s["orders"]])
    return b.compile()


def test_the_task_whose_write_changed_is_named_among_the_steps_writers(tmp_path):
    db = str(tmp_path / "fan.db")
    with Recorder(db) as rec:
        rec.attach(_fan_out(), name="fan").invoke({"orders": ["F1", "F2"]})
    store = open_store(db)
    try:
        (run,) = store.list_runs()
        writers = [t.node for t in store.step_detail(run.id, 2, "").tasks if "found" in t.writes]
    finally:
        store.close()
    assert writers[0] == "audit" and writers.count("fetch") == 2, writers  # the unchanged writer comes first
    result = replay(run.id, _fan_out(), db=db, overrides={"lookup": lambda order_id: "lost"})
    first = result.first_divergence
    assert first is not None, result.report()
    assert (first.kind, first.step, first.node) == ("state", 2, "fetch"), result.report()
