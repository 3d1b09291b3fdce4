"""What a node asks a person is part of what a replay compares: a graph that now asks otherwise
diverges at that node, though the recorded answer goes on and the state ends the same."""

from __future__ import annotations

from typing import TypedDict

from conftest import load_agent
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.types import Command, interrupt

from graphtape import Recorder, open_store, replay


class Refund(TypedDict, total=False):
    order: str
    approved: str


def _desk(changed: bool = False):
    def ask(state: Refund) -> dict:
        asked = {"refund": state["order"], "amount": 90 if changed else 40}  # the amount shown changed
        return {"approved": str(interrupt(asked))}

    inner = StateGraph(Refund)
    inner.add_node("ask", ask)
    inner.add_edge(START, "ask")
    b = StateGraph(Refund)
    b.add_node("desk", inner.compile())
    b.add_edge(START, "desk")
    return b.compile(checkpointer=InMemorySaver())


def test_a_node_that_asks_a_person_something_else_diverges_there(tmp_path):
    db = str(tmp_path / "ask.db")
    config = {"configurable": {"thread_id": "t"}}
    with Recorder(db) as rec:
        desk = rec.attach(_desk(), name="desk")
        desk.invoke({"order": "IQ1"}, config)
        assert desk.invoke(Command(resume="yes"), config) == {"order": "IQ1", "approved": "yes"}
    store = open_store(db)
    try:
        (run,) = store.list_runs()
    finally:
        store.close()
    assert not replay(run.id, _desk(), db=db).diverged
    result = replay(run.id, _desk(changed=True), db=db)
    first = result.first_divergence
    assert first is not None, result.report()
    assert (first.kind, first.ns, first.node) == ("arguments", "desk", "ask"), result.report()
    assert [d.ns for d in result.divergences] == ["desk"], result.report()  # told once, where it was asked
    assert first.recorded == [["ask", {"amount": 40, "refund": "IQ1"}]] and first.actual == [["ask", {"amount": 90, "refund": "IQ1"}]]


def _two_refunds():
    @tool
    def refund(order_id: str) -> str:
        """Refund an order once a person agrees."""
        return f"refund {order_id}: {interrupt({'refund': order_id})}"

    def decide(messages: list) -> AIMessage:
        if not isinstance(messages[-1], ToolMessage):
            calls = [{"name": "refund", "args": {"order_id": o}, "id": o.lower(), "type": "tool_call"} for o in ("LR1", "LR2")]
            return AIMessage("", tool_calls=calls)
        return AIMessage("done")

    model = load_agent("scripted_model").ScriptedChatModel(script=decide, model_name="refund-model")
    return create_agent(model, [refund], checkpointer=InMemorySaver())


def test_tools_that_asked_in_parallel_replay_live_without_their_fresh_interrupt_ids(tmp_path):
    """Each tool call runs as a task of its own, so its interrupt's id (quoted in the call's
    recorded GraphInterrupt) is drawn afresh every run: a live replay that asks the same is clean."""
    db = str(tmp_path / "live.db")
    config = {"configurable": {"thread_id": "t"}}
    with Recorder(db) as rec:
        agent = rec.attach(_two_refunds(), name="refunds")
        out = agent.invoke({"messages": [("user", "Refund LR1 and LR2.")]}, config)
        agent.invoke(Command(resume={i.id: "yes" for i in out["__interrupt__"]}), config)
    store = open_store(db)
    try:
        (run,) = store.list_runs()
    finally:
        store.close()
    result = replay(run.id, _two_refunds(), db=db, mode="live")
    assert not result.diverged, result.report()
