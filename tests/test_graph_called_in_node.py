"""A recorded graph called from inside another graph's node, with no config of its own.

LangGraph runs ``inner.invoke(x)`` made in a node as a subgraph of that node's task: it
inherits the task's config, checkpoints under the parent's thread, and its ``interrupt()``
pauses the parent. Attaching graphtape to the inner graph must not turn it into a run of its
own (with a thread, a saver and a config that would cut it from its parent).
"""

from __future__ import annotations

import operator
from typing import Annotated

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict

from graphtape import Recorder, open_store, replay


class Inner(TypedDict):
    x: int
    trail: Annotated[list[str], operator.add]


class Outer(TypedDict):
    x: int
    out: list[str]


def _asking_inner():
    def ask(s: Inner, config) -> dict:
        answer = interrupt({"q": s["x"]})
        return {"x": s["x"] + answer, "trail": [f"thread={config['configurable'].get('thread_id')}"]}

    b = StateGraph(Inner)
    b.add_node("ask", ask)
    b.add_edge(START, "ask")
    b.add_edge("ask", END)
    return b.compile()


def _doubling_inner():
    b = StateGraph(Inner)
    b.add_node("double", lambda s: {"x": s["x"] * 2, "trail": ["double"]})
    b.add_edge(START, "double")
    b.add_edge("double", END)
    return b.compile()


def _outer(inner, *, is_async: bool = False):
    def prep(s: Outer) -> dict:
        return {"x": s["x"] + 1}

    def call(s: Outer) -> dict:
        got = inner.invoke({"x": s["x"], "trail": []})  # no config: LangGraph hands down the task's
        return {"x": got["x"], "out": got["trail"]}

    async def acall(s: Outer) -> dict:
        got = await inner.ainvoke({"x": s["x"], "trail": []})
        return {"x": got["x"], "out": got["trail"]}

    b = StateGraph(Outer)
    b.add_node("prep", prep)
    b.add_node("call", acall if is_async else call)
    b.add_edge(START, "prep")
    b.add_edge("prep", "call")
    b.add_edge("call", END)
    return b


def _strip_ids(result: dict) -> dict:
    return {k: ([i.value for i in v] if k == "__interrupt__" else v) for k, v in result.items()}


def test_an_interrupt_inside_a_recorded_graph_called_in_a_node_pauses_the_parent(tmp_path):
    inner = _asking_inner()
    outcomes = {}
    with Recorder(tmp_path / "gt.db") as rec:
        for who, graph in (("bare", inner), ("recorded", rec.attach(inner, name="inner"))):
            parent = _outer(graph).compile(checkpointer=InMemorySaver())
            config = {"configurable": {"thread_id": "T1"}}
            first = parent.invoke({"x": 1, "out": []}, config)
            outcomes[who] = (_strip_ids(first), parent.invoke(Command(resume=10), config))
    assert outcomes["bare"][0]["__interrupt__"] == [{"q": 2}]
    assert outcomes["recorded"] == outcomes["bare"]
    assert outcomes["recorded"][1] == {"x": 12, "out": ["thread=T1"]}  # the parent's thread, not one of graphtape's


async def test_an_interrupt_inside_a_recorded_graph_awaited_in_a_node_pauses_the_parent(tmp_path):
    inner = _asking_inner()
    with Recorder(tmp_path / "gt.db") as rec:
        parent = _outer(rec.attach(inner, name="inner"), is_async=True).compile(checkpointer=InMemorySaver())
        config = {"configurable": {"thread_id": "T1"}}
        first = await parent.ainvoke({"x": 1, "out": []}, config)
        assert [i.value for i in first["__interrupt__"]] == [{"q": 2}]
        assert await parent.ainvoke(Command(resume=10), config) == {"x": 12, "out": ["thread=T1"]}


def test_a_recorded_graph_called_in_a_recorded_node_is_recorded_as_its_subgraph(tmp_path):
    """Its steps are the parent's subgraph namespace, not nodes of the parent's step, so the
    parent's strict replay matches."""
    db = tmp_path / "gt.db"
    with Recorder(db) as rec:
        parent = rec.attach(_outer(rec.attach(_doubling_inner(), name="inner")).compile(), name="outer")
        assert parent.invoke({"x": 1, "out": []}) == {"x": 4, "out": ["double"]}
        run_id = rec.last_run_id
    store = open_store(db)
    try:
        assert [r.name for r in store.list_runs()] == ["outer"]  # the inner call is no run of its own
        steps = store.step_details(run_id)
        assert [t.node for d in steps for t in d.tasks] == ["__start__", "prep", "call"]
        subgraphs = [n for n in store.namespaces(run_id) if n]
        assert [n.split(":")[0] for n in subgraphs] == ["call"]
        assert any(t.node == "double" for d in store.step_details(run_id, subgraphs[0]) for t in d.tasks)
        result = replay(run_id, _outer(_doubling_inner()).compile(), store=store)
        assert not result.diverged, result.report()
    finally:
        store.close()


class Remembered(TypedDict):
    seen: Annotated[list, operator.add]
    q: str


class Asking(TypedDict):
    q: str
    out: str


def _with_a_remembering_subgraph():
    """A node invokes a subgraph compiled with ``checkpointer=True``: LangGraph names its
    namespace by the node alone (no task id), so the subgraph keeps memory across calls."""
    from conftest import load_agent
    from langchain_core.messages import AIMessage, HumanMessage

    model = load_agent("scripted_model").ScriptedChatModel(script=lambda msgs: AIMessage(f"[{msgs[-1].content}]"), model_name="sm")
    inner = StateGraph(Remembered)
    inner.add_node("remember", lambda s: {"seen": [model.invoke([HumanMessage(s["q"])]).content]})
    inner.add_edge(START, "remember")
    inner.add_edge("remember", END)
    sub = inner.compile(checkpointer=True)
    outer = StateGraph(Asking)
    outer.add_node("parent", lambda s: {"out": "|".join(sub.invoke({"q": s["q"]})["seen"])})
    outer.add_edge(START, "parent")
    outer.add_edge("parent", END)
    return outer.compile(checkpointer=InMemorySaver())


def test_a_subgraph_with_its_own_memory_is_linked_to_the_task_that_ran_it(tmp_path):
    """Its steps belong to the node's task, so show lists them under it and a fixture keeps
    them (with the model call inside): the generated test replays it offline."""
    from graphtape.replay.fixture import export_fixture, import_fixture

    db = tmp_path / "gt.db"
    with Recorder(db) as rec:
        out = rec.attach(_with_a_remembering_subgraph(), name="remembering").invoke({"q": "one", "out": ""}, {"configurable": {"thread_id": "t"}})
        run_id = rec.last_run_id
    assert out == {"q": "one", "out": "[one]"}
    store = open_store(db)
    try:
        (task,) = [t for d in store.step_details(run_id) for t in d.tasks if t.node == "parent"]
        assert task.subgraph_ns == ["parent"]
        fixture = export_fixture(store, run_id)
        (sub,) = fixture["subgraphs"]
        assert [c["name"] for s in sub["steps"] for c in s.get("calls") or []] == ["ScriptedChatModel:sm"]
        imported = import_fixture(store, fixture).run_id
        result = replay(imported, _with_a_remembering_subgraph(), store=store, mode="strict")
        assert not result.diverged, result.report()
        assert result.served.get("model") == 1
    finally:
        store.close()
