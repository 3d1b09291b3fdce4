"""A persistent subgraph (``checkpointer=True``) a replay resumes goes on as recorded.

Resumed at its input step (the replay starts at the root step before it runs), it counts the
steps left to its recursion limit as the recording did: a prebuilt agent puts that count into
every ``Send`` it makes, so one step more is a divergence where nothing changed. Resumed in its
own namespace (``ns=``), it starts from the step asked for."""

from __future__ import annotations

from conftest import load_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import create_react_agent

from graphtape import Recorder, open_store, replay

ScriptedChatModel = load_agent("scripted_model").ScriptedChatModel


@tool
def lookup(order_id: str) -> str:
    """Where an order is."""
    return f"order {order_id} is in transit"


def _desk(messages: list) -> AIMessage:
    asked = sum(isinstance(m, HumanMessage) for m in messages)
    last = messages[-1]
    if not isinstance(last, ToolMessage) or last.tool_call_id != f"m{asked}":
        return AIMessage("", tool_calls=[{"name": "lookup", "args": {"order_id": f"M{asked}"}, "id": f"m{asked}", "type": "tool_call"}])
    return AIMessage(f"turn {asked}: {last.content}")


def _front():
    desk = create_react_agent(ScriptedChatModel(script=_desk, model_name="desk-model"), [lookup], checkpointer=True, name="desk")
    b = StateGraph(MessagesState)
    b.add_node("greet", lambda s: {"messages": [AIMessage("one moment")]})
    b.add_node("desk", desk)
    b.add_edge(START, "greet")
    b.add_edge("greet", "desk")
    b.add_edge("desk", END)
    return b.compile(checkpointer=InMemorySaver())


def _two_turns(tmp_path) -> str:
    """A store holding two turns of one thread of ``_front``."""
    db = str(tmp_path / "memory.db")
    config = {"configurable": {"thread_id": "t"}}
    with Recorder(db) as rec:
        front = rec.attach(_front(), name="front")
        front.invoke({"messages": [HumanMessage("Where is M1?")]}, config)
        front.invoke({"messages": [HumanMessage("And M2?")]}, config)
    return db


def test_a_memory_resumed_at_its_input_counts_its_steps_left_as_recorded(tmp_path):
    db = _two_turns(tmp_path)
    store = open_store(db)
    try:
        runs = sorted(store.list_runs(), key=lambda run: run.started_at)
        greeted = [next(d.step.step for d in store.step_details(run.id, "") if [t.node for t in d.tasks] == ["greet"]) for run in runs]
    finally:
        store.close()
    for run, step in zip(runs, greeted):  # the desk's memory is put back at its input, for the next step to run
        result = replay(run.id, _front(), db=db, from_step=step)
        assert not result.diverged, result.report()


def test_a_replay_in_the_memorys_own_namespace_resumes_at_the_step_asked_for(tmp_path):
    """``--ns desk --from-step k``: the desk resumes at its step k of that turn, not at what the
    root step before it remembered (its input step), which would make its calls over again."""
    db = _two_turns(tmp_path)
    store = open_store(db)
    try:
        runs = sorted(store.list_runs(), key=lambda run: run.started_at)
        spots = [(run, d.step.step) for run in runs for d in store.step_details(run.id, "desk") if d.step.checkpoint_id]
    finally:
        store.close()
    assert len(spots) >= 8, spots  # each turn's stretch: its input step and the agent's steps
    for run, step in spots:
        result = replay(run.id, _front(), db=db, from_step=step, ns="desk")
        assert not result.diverged, (step, result.report())
