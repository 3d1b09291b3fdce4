"""A subgraph with memory of its own (``compile(checkpointer=True)``), replayed from the middle of a run.

Such a subgraph keeps one namespace, named after its node, for every run of that node: each
run adds an input step and the steps after it. A replay that starts mid-run puts back what it
remembered by then, so the replay's steps there go on from that step, under the recording's
numbers, and are compared from there: the stretches before it are not missing, and a change
inside a later stretch is reported in the subgraph, at its step.
"""

from __future__ import annotations

import operator
from typing import Annotated

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from graphtape import Recorder, open_store, replay


class Memo(TypedDict):
    q: int
    seen: Annotated[list, operator.add]


class Loop(TypedDict):
    n: int
    out: Annotated[list, operator.add]


class Shared(TypedDict):
    n: int
    q: int
    seen: Annotated[list, operator.add]


def _memo(changed_from: int | None):
    """The subgraph: remembers ``q * 10``; from ``q == changed_from`` on, today's code adds 1."""

    def remember(s: Memo) -> dict:
        return {"seen": [s["q"] * 10 + (1 if changed_from is not None and s["q"] >= changed_from else 0)]}

    b = StateGraph(Memo)
    b.add_node("remember", remember)
    b.add_edge(START, "remember")
    b.add_edge("remember", END)
    return b.compile(checkpointer=True)


def _called_in_a_node(*, own_saver: bool, changed_from: int | None = None):
    """A node calls the subgraph four times over (``sub.invoke`` in its code)."""
    sub = _memo(changed_from)

    def call(s: Loop) -> dict:
        return {"n": s["n"] + 1, "out": [list(sub.invoke({"q": s["n"] + 1})["seen"])]}

    b = StateGraph(Loop)
    b.add_node("call", call)
    b.add_edge(START, "call")
    b.add_conditional_edges("call", lambda s: END if s["n"] >= 4 else "call")
    return b.compile(checkpointer=InMemorySaver() if own_saver else None)


def _added_as_a_node(*, own_saver: bool, changed_from: int | None = None):
    """The subgraph is a node of its own, run four times between the steps of another."""
    b = StateGraph(Shared)
    b.add_node("bump", lambda s: {"n": s["n"] + 1, "q": s["n"] + 1})
    b.add_node("memo", _memo(changed_from))
    b.add_edge(START, "bump")
    b.add_edge("bump", "memo")
    b.add_conditional_edges("memo", lambda s: END if s["n"] >= 4 else "bump")
    return b.compile(checkpointer=InMemorySaver() if own_saver else None)


SHAPES = {
    "called in a node": (_called_in_a_node, "call", {"n": 0, "out": []}),
    "added as a node": (_added_as_a_node, "memo", {"n": 0, "q": 0, "seen": []}),
}


def _recorded(db, shape: str, own_saver: bool) -> str:
    make, _, inputs = SHAPES[shape]
    with Recorder(db) as rec:
        graph = rec.attach(make(own_saver=own_saver), name="memo")
        graph.invoke(inputs, {"configurable": {"thread_id": "t"}} if own_saver else None)
        rec.flush()
        return rec.last_run_id


@pytest.mark.parametrize("own_saver", [True, False], ids=["parent with a saver", "parent without"])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_replay_from_mid_run_matches_and_finds_a_change_inside_the_subgraph(tmp_path, shape, own_saver):
    db = tmp_path / "gt.db"
    make, ns, _ = SHAPES[shape]
    run_id = _recorded(db, shape, own_saver)
    store = open_store(db)
    try:
        assert ns in store.namespaces(run_id)
        memo_steps = store.list_steps(run_id, ns)
        assert [s.step for s in memo_steps if s.source == "input"] == [-1, 2, 5, 8]  # one stretch per run of the node
        # The third run of the subgraph (q == 3) remembered 30: its `remember` step is the stretch's last.
        changed_at = next(s.step for s in memo_steps if s.step > 5 and "remember" in s.nodes)
        ran = [d.step.step for d in store.step_details(run_id) if any(t.node == ns for t in d.tasks)]
        third = ran[2]  # the root step that ran it
        for start in [s.step for s in store.list_steps(run_id) if s.step < third]:
            same = replay(run_id, make(own_saver=own_saver), store=store, from_step=start, mode="strict")
            assert not same.diverged, f"from step {start}: {same.report()}"
            changed = replay(run_id, make(own_saver=own_saver, changed_from=3), store=store, from_step=start, mode="strict")
            first = changed.first_divergence
            assert (first.kind, first.ns, first.step, first.node) == ("state", ns, changed_at, "remember"), f"from step {start}: {changed.report()}"
            assert first.recorded[-1] == 30 and first.actual[-1] == 31
    finally:
        store.close()


def test_a_window_ends_inside_a_subgraph_with_memory_where_the_root_step_does(tmp_path):
    """``to_step`` compares up to a root step: the subgraph's later runs are after it, not missing."""
    db = tmp_path / "gt.db"
    run_id = _recorded(db, "called in a node", own_saver=True)
    store = open_store(db)
    try:
        for start in (-1, 0, 1):
            window = replay(run_id, _called_in_a_node(own_saver=True), store=store, from_step=start, to_step=2, mode="strict")
            assert not window.diverged, f"from step {start}: {window.report()}"
            changed = replay(run_id, _called_in_a_node(own_saver=True, changed_from=2), store=store, from_step=start, to_step=2, mode="strict")
            assert (changed.first_divergence.ns, changed.first_divergence.node) == ("call", "remember"), changed.report()
    finally:
        store.close()


def _nested(changed: bool = False):
    """Three levels, the two inner ones compiled with ``checkpointer=True``: ``outer`` runs
    ``top`` (a node), which runs ``mid`` (a node), whose ``leaf`` doubles ``n`` (``+ 1`` when changed)."""
    leaf = StateGraph(Loop)
    leaf.add_node("leaf", lambda s: {"n": s["n"] * 2 + (1 if changed else 0), "out": ["leaf"]})
    leaf.add_edge(START, "leaf")
    mid = StateGraph(Loop)
    mid.add_node("mid", leaf.compile(checkpointer=True))
    mid.add_node("after_mid", lambda s: {"out": ["after_mid"]})
    mid.add_edge(START, "mid")
    mid.add_edge("mid", "after_mid")
    top = StateGraph(Loop)
    top.add_node("top", mid.compile(checkpointer=True))
    top.add_node("end", lambda s: {"out": ["end"]})
    top.add_edge(START, "top")
    top.add_edge("top", "end")
    return top.compile(checkpointer=InMemorySaver())


def _record_turns(db: str, graph, inputs: list[dict]) -> list[str]:
    config = {"configurable": {"thread_id": "turns"}}
    runs = []
    with Recorder(db) as rec:
        app = rec.attach(graph)
        for value in inputs:
            app.invoke(value, config)
            rec.flush()
            runs.append(rec.last_run_id)
    return runs


def test_a_subgraph_with_memory_added_as_a_node_is_linked_to_the_task_that_ran_it(tmp_path):
    """Its namespace is the node's name alone (no task id): the step's task that ran it names it,
    at every level, as a subgraph compiled per invocation is named by its task."""
    db = str(tmp_path / "linked.db")
    (run_id,) = _record_turns(db, _nested(), [{"n": 1, "out": []}])
    store = open_store(db)
    try:
        ran = {t.node: t.subgraph_ns for ns in ("", "top") for d in store.step_details(run_id, ns) for t in d.tasks}
    finally:
        store.close()
    assert ran["top"] == ["top"]
    assert ran["mid"] == ["top|mid"]
    assert ran["end"] == [] and ran["after_mid"] == []


def test_a_later_turn_of_nested_subgraphs_with_memory_replays_clean_and_finds_a_change(tmp_path):
    """The second turn's inner subgraph goes on from what it remembered of the first, at every depth."""
    db = str(tmp_path / "nested.db")
    runs = _record_turns(db, _nested(), [{"n": 1, "out": []}, {"n": 2, "out": []}, {"n": 3, "out": []}])
    store = open_store(db)
    try:
        starts = {run_id: [None, *(s.step for s in store.list_steps(run_id, ""))] for run_id in runs}
    finally:
        store.close()
    for run_id in runs:
        for step in starts[run_id]:
            result = replay(run_id, _nested(), step, db=db, mode="strict")
            assert result.status == "ok" and not result.diverged, (step, result.report())
    changed = replay(runs[1], _nested(changed=True), db=db, mode="strict")
    first = changed.first_divergence
    assert first is not None and first.ns == "top|mid" and first.node == "leaf", changed.report()
