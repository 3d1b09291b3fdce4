"""A fork runs live a tool whose injected inputs its edit changed, and answers the others from the recording.

LangChain keeps a tool's injected arguments (``InjectedState``, ``InjectedStore``, a ``ToolRuntime``)
out of what it reports to callbacks, so a tool that reads only the state is recorded as called with
``{}``. Matched on that alone, a fork that edits the state got the recording's answer back, the one
the old state gave ("account of ada" after the edit made the customer bob).
"""

from __future__ import annotations

from typing import Annotated, Any

import pytest
import replay_graphs as G
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.config import get_store
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.managed import RemainingSteps
from langgraph.prebuilt import InjectedState, InjectedStore, ToolNode, ToolRuntime, create_react_agent, tools_condition
from langgraph.store.memory import InMemoryStore

from graphtape.recorder import Recorder, open_store
from graphtape.replay import fork, replay

LIVE: list[str] = []  # the tools that ran their own code, in order


@tool
def account(state: Annotated[dict, InjectedState]) -> str:
    """The account of the customer, read from the whole state."""
    LIVE.append("account")
    return f"account of {state['customer']} ({state['tier']})"


@tool
def greeting(customer: Annotated[str, InjectedState("customer")]) -> str:
    """A greeting for the customer, from that one state key."""
    LIVE.append("greeting")
    return f"hello {customer}"


@tool
def tier_of(runtime: ToolRuntime) -> str:
    """The customer's tier, read from the runtime's state."""
    LIVE.append("tier_of")
    return f"tier {runtime.state['tier']}"


TOOLS = [account, greeting, tier_of]


class Desk(MessagesState):
    customer: str
    tier: str
    remaining_steps: RemainingSteps  # create_react_agent's schema needs it; a managed value, never compared


def _model() -> Any:
    def answer(messages: list[Any]) -> AIMessage:
        if isinstance(messages[-1], ToolMessage):
            return AIMessage("; ".join(m.content for m in messages if isinstance(m, ToolMessage)))
        return AIMessage("", tool_calls=[{"name": t.name, "args": {}, "id": f"call-{t.name}", "type": "tool_call"} for t in TOOLS])

    return G.ScriptedChatModel(script=answer, model_name="desk")


def _tool_node_graph(tier: str | None = None) -> Any:
    """The agent and a ToolNode; with ``tier``, the agent also sets the customer's tier (today's code)."""
    model = _model().bind_tools(TOOLS)
    b = StateGraph(Desk)
    b.add_node("agent", lambda s: {"messages": [model.invoke(s["messages"])], **({"tier": tier} if tier else {})})
    b.add_node("tools", ToolNode(TOOLS))
    b.add_edge(START, "agent")
    b.add_conditional_edges("agent", tools_condition)
    b.add_edge("tools", "agent")
    return b.compile()


def _prebuilt_graph() -> Any:
    # Each tool call goes to the ToolNode as a Send carrying the state (ToolCallWithContext).
    return create_react_agent(_model(), TOOLS, state_schema=Desk)


BUILDS = {"tool-node": _tool_node_graph, "create_react_agent": _prebuilt_graph}


def _record(db: str, graph: Any, inputs: dict) -> str:
    with Recorder(db) as rec:
        rec.attach(graph).invoke(inputs)
        rec.flush()
        return rec.last_run_id


def _answers(result: Any) -> dict[str, str]:
    return {m.name: m.content for m in result.final_state["messages"] if isinstance(m, ToolMessage)}


@pytest.mark.parametrize("shape", sorted(BUILDS))
def test_a_fork_runs_live_the_tools_whose_injected_state_its_edit_changed(tmp_path, shape):
    build = BUILDS[shape]
    db = str(tmp_path / "desk.db")
    run_id = _record(db, build(), {"messages": [HumanMessage("who am I?")], "customer": "ada", "tier": "gold"})
    store = open_store(db)
    try:
        asked = next(c for c in store.calls(run_id) if c.kind == "tool")
        assert asked.inputs == {}  # the state a tool is handed is not among its recorded arguments
    finally:
        store.close()
    at = asked.step - 1  # after the agent asked for the tools

    LIVE.clear()
    same = replay(run_id, build(), db=db)
    assert not same.diverged and LIVE == [] and same.served["tool"] == 3, same.report()
    unchanged = fork(run_id, build(), at, {"customer": "ada"}, db=db)  # an edit that changes nothing
    assert LIVE == [] and unchanged.served["tool"] == 3, unchanged.report()

    # The tier: the tools that read the whole state (or the runtime's) run live; the greeting reads only the customer.
    tier = fork(run_id, build(), at, {"tier": "silver"}, db=db)
    assert sorted(LIVE) == ["account", "tier_of"], tier.report()
    assert _answers(tier) == {"account": "account of ada (silver)", "greeting": "hello ada", "tier_of": "tier silver"}

    LIVE.clear()
    bob = fork(run_id, build(), at, {"customer": "bob"}, db=db)
    assert sorted(LIVE) == ["account", "greeting", "tier_of"], bob.report()
    assert _answers(bob) == {"account": "account of bob (gold)", "greeting": "hello bob", "tier_of": "tier gold"}
    told = {d.what: (d.kind, d.recorded, d.actual) for d in bob.divergences if d.node == "tools"}
    assert told["tool call 'greeting' was handed other state (customer) than its recording (it ran live)"] == ("arguments", {"customer": "ada"}, {"customer": "bob"})
    assert "tool call 'account' was handed other state (customer) than its recording (it ran live)" in told, bob.report()


def test_a_re_recording_runs_live_the_tools_todays_graph_hands_another_state(tmp_path):
    db = str(tmp_path / "desk.db")
    run_id = _record(db, _tool_node_graph(), {"messages": [HumanMessage("who am I?")], "customer": "ada", "tier": "gold"})
    LIVE.clear()
    strict = replay(run_id, _tool_node_graph(tier="silver"), db=db)  # strict: never live, the state divergence says it
    assert LIVE == [] and any(d.kind == "state" for d in strict.divergences), strict.report()
    again = replay(run_id, _tool_node_graph(tier="silver"), db=db, on_miss="live")  # how a fixture is re-recorded
    assert sorted(LIVE) == ["account", "tier_of"], again.report()
    assert _answers(again) == {"account": "account of ada (silver)", "greeting": "hello ada", "tier_of": "tier silver"}


class Prefs(MessagesState):
    tone: str


@tool
def recall(store: Annotated[Any, InjectedStore()]) -> str:
    """The tone the user asked for, from memory."""
    LIVE.append("recall")
    item = store.get(("prefs",), "tone")
    return f"tone is {item.value['tone'] if item else 'unknown'}"


def _memory_graph(store: Any) -> Any:
    def remember(state: Prefs) -> dict:
        get_store().put(("prefs",), "tone", {"tone": state["tone"]})
        return {}

    def answer(messages: list[Any]) -> AIMessage:
        if isinstance(messages[-1], ToolMessage):
            return AIMessage(messages[-1].content)
        return AIMessage("", tool_calls=[{"name": "recall", "args": {}, "id": "call-recall", "type": "tool_call"}])

    model = G.ScriptedChatModel(script=answer, model_name="prefs").bind_tools([recall])
    b = StateGraph(Prefs)
    b.add_node("remember", remember)
    b.add_node("agent", lambda s: {"messages": [model.invoke(s["messages"])]})
    b.add_node("tools", ToolNode([recall]))
    b.add_edge(START, "remember")
    b.add_edge("remember", "agent")
    b.add_conditional_edges("agent", tools_condition)
    b.add_edge("tools", "agent")
    return b.compile(store=store)


def test_a_tool_whose_memories_a_forks_edit_rewrote_runs_live_and_reads_them_live(tmp_path):
    db = str(tmp_path / "prefs.db")
    run_id = _record(db, _memory_graph(InMemoryStore()), {"messages": [HumanMessage("hi")], "tone": "warm"})
    today = InMemoryStore()  # the store as it is now: empty

    LIVE.clear()
    same = fork(run_id, _memory_graph(today), 0, {"tone": "warm"}, db=db)  # the node writes the memory it wrote then
    assert LIVE == [] and _answers(same) == {"recall": "tone is warm"}, same.report()

    cold = fork(run_id, _memory_graph(today), 0, {"tone": "cold"}, db=db)
    # The tool ran, and its read went live with it: it sees what the fork wrote, not the recording's answer.
    assert LIVE == ["recall"] and _answers(cold) == {"recall": "tone is cold"}, cold.report()
    told = next(d for d in cold.divergences if d.node == "tools")
    assert told.what == "tool call 'recall' was handed other memories (prefs/tone) than its recording (it ran live)"
    assert (told.recorded, told.actual) == ({"prefs/tone": {"tone": "warm"}}, {"prefs/tone": {"tone": "cold"}})
    assert list(today.search(("prefs",))) == []  # a fork never writes to the graph's store
