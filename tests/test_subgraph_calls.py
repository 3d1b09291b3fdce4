"""A step's calls include those made in the subgraphs it ran.

A supervisor (langgraph-supervisor) runs each agent as a subgraph: every model and tool call
is made one namespace down, so the root steps showed no calls at all ("No tool, model or HTTP
calls in this step") although the run made eleven. The run screen's calls column, its Calls
tab, ``graphtape show`` and ``show --step`` now count and list them under the step that ran
the subgraph, each naming where it was made (``tracker › agent``).
"""

from __future__ import annotations

import asyncio
import time
from contextlib import closing
from typing import Annotated, TypedDict

import pytest
from conftest import load_agent
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, interrupt

from graphtape.recorder import Recorder, open_store
from graphtape.tui.app import build_app
from graphtape.tui.cli import main
from graphtape.tui.widgets.timeline import Timeline

Scripted = load_agent("scripted_model").ScriptedChatModel


@tool
def lookup_order(order_id: str) -> str:
    """Where an order is."""
    return f"order {order_id} is in transit"


@tool
def refund(amount: int) -> str:
    """Refund an amount."""
    return f"refunded {amount}"


def _turns(messages: list) -> int:
    return sum(isinstance(m, AIMessage) for m in messages)


def _supervisor():
    from langgraph.prebuilt import create_react_agent
    from langgraph_supervisor import create_supervisor

    def tracker_model(messages):
        if not isinstance(messages[-1], AIMessage) and any(getattr(m, "name", None) == "lookup_order" for m in messages):
            return AIMessage(content="C3 is in transit.")
        return AIMessage(content="", tool_calls=[{"name": "lookup_order", "args": {"order_id": "C3"}, "id": "t1"}])

    def payer_model(messages):
        if any(getattr(m, "name", None) == "refund" for m in messages):
            return AIMessage(content="Refunded 7.")
        return AIMessage(content="", tool_calls=[{"name": "refund", "args": {"amount": 7}, "id": "p1"}])

    def boss_model(messages):
        done = {getattr(m, "name", None) for m in messages}
        if "tracker" not in done:
            return AIMessage(content="", tool_calls=[{"name": "transfer_to_tracker", "args": {}, "id": "h1"}])
        if "payer" not in done:
            return AIMessage(content="", tool_calls=[{"name": "transfer_to_payer", "args": {}, "id": "h2"}])
        return AIMessage(content="Tracked and paid.")

    tracker = create_react_agent(Scripted(script=tracker_model, model_name="tracker-model"), [lookup_order], name="tracker")
    payer = create_react_agent(Scripted(script=payer_model, model_name="payer-model"), [refund], name="payer")
    return create_supervisor([tracker, payer], model=Scripted(script=boss_model, model_name="boss-model")).compile()


@pytest.fixture
def supervisor_run(store_url: str) -> tuple[str, str]:
    with Recorder(store_url) as rec:
        rec.attach(_supervisor(), name="supervisor").invoke({"messages": [HumanMessage("Track C3 and refund 7.")]})
        return store_url, rec.last_run_id


def test_a_supervisors_calls_count_under_the_steps_that_ran_its_agents(supervisor_run):
    url, run_id = supervisor_run
    with closing(open_store(url)) as store:
        steps = {s.step: s.nodes for s in store.list_steps(run_id, "")}
        assert store.call_counts(run_id) == {}  # the root itself made none: every call is an agent's
        counts = store.call_counts(run_id, with_subgraphs=True)
        by_node: dict[str, dict[str, int]] = {}
        for step, c in counts.items():
            (node,) = steps[step]
            for kind, n in c.items():
                by_node.setdefault(node, {}).setdefault(kind, 0)
                by_node[node][kind] += n
        # The supervisor decided three times (two handoffs and the answer), each agent called its model twice and its tool once.
        assert by_node == {"supervisor": {"model": 3, "tool": 2}, "tracker": {"model": 2, "tool": 1}, "payer": {"model": 2, "tool": 1}}
        totals, _ = store.call_totals(run_id)
        assert sum(n for c in counts.values() for k, n in c.items() if k != "failed") == sum(totals.values())
        tracker_step = next(s for s, nodes in steps.items() if nodes == ["tracker"])
        listed = store.calls(run_id, step=tracker_step, ns="", with_subgraphs=True)
        assert [(c.kind, c.name) for c in listed] == [("model", "ScriptedChatModel:tracker-model"), ("tool", "lookup_order"), ("model", "ScriptedChatModel:tracker-model")]
        assert all(c.ns.startswith("tracker:") for c in listed)
        assert store.calls(run_id, step=tracker_step, ns="") == []  # without the flag: the root's own, as before


class Outer(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


class _SlowSaver(InMemorySaver):
    """A saver that takes its time over each save, as a remote database does under load."""

    def put(self, config, checkpoint, metadata, new_versions):
        time.sleep(0.2)
        return super().put(config, checkpoint, metadata, new_versions)

    async def aput(self, config, checkpoint, metadata, new_versions):
        await asyncio.sleep(0.2)
        return await super().aput(config, checkpoint, metadata, new_versions)


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_calls_stay_with_their_step_when_the_savers_saves_lag(tmp_path, is_async):
    """LangGraph saves a step's checkpoint in the background while the next step runs: a
    step's time is when its checkpoint was made, not when the saver got round to it."""
    db = str(tmp_path / "slow.db")
    config = {"configurable": {"thread_id": "t"}}
    with Recorder(db) as rec:
        graph = rec.attach(_asking_graph(_SlowSaver()), name="asking")
        if is_async:
            asyncio.run(graph.ainvoke({"messages": [HumanMessage("go")]}, config))
        else:
            graph.invoke({"messages": [HumanMessage("go")]}, config)
        run_id = rec.last_run_id
    with closing(open_store(db)) as store:
        steps = {s.step: s.nodes for s in store.list_steps(run_id, "")}
        prep = next(s for s, n in steps.items() if n == ["prep"])
        child = next(s for s, n in steps.items() if n == ["child"])
        counts = store.call_counts(run_id, with_subgraphs=True)
        assert counts[prep] == {"model": 1}
        assert counts[child] == {"model": 1}  # asked before its human answered
        assert [c.ns.split(":")[0] for c in store.calls(run_id, step=prep, ns="", with_subgraphs=True)] == [""]


def _asking_graph(saver=None):
    """A root node runs a subgraph whose node calls a model, asks a human, then calls it again."""
    model = Scripted(script=lambda m: AIMessage(content=f"answer {_turns(m)}"), model_name="inner-model")

    def ask(state):
        first = model.invoke(state["messages"])
        answer = interrupt("approve?")
        second = model.invoke([*state["messages"], first, HumanMessage(answer)])
        return {"messages": [first, second]}

    inner = StateGraph(Outer)
    inner.add_node("ask", ask)
    inner.add_edge(START, "ask")
    outer = StateGraph(Outer)
    outer.add_node("prep", lambda s: {"messages": [model.invoke(s["messages"])]})
    outer.add_node("child", inner.compile())
    outer.add_edge(START, "prep")
    outer.add_edge("prep", "child")
    outer.add_edge("child", END)
    return outer.compile(checkpointer=saver or InMemorySaver())


def test_calls_of_a_subgraph_interrupted_then_resumed_stay_with_its_step(tmp_path):
    db = str(tmp_path / "ask.db")
    config = {"configurable": {"thread_id": "t"}}
    with Recorder(db) as rec:
        graph = rec.attach(_asking_graph(), name="asking")
        graph.invoke({"messages": [HumanMessage("go")]}, config)
        graph.invoke(Command(resume="yes"), config)
        run_id = rec.last_run_id
    with closing(open_store(db)) as store:
        steps = {s.step: s.nodes for s in store.list_steps(run_id, "")}
        prep = next(s for s, n in steps.items() if n == ["prep"])
        child = next(s for s, n in steps.items() if n == ["child"])
        counts = store.call_counts(run_id, with_subgraphs=True)
        # The subgraph's node ran twice (asked, then resumed): three model calls, all the child step's.
        assert counts[prep] == {"model": 1}
        assert counts[child] == {"model": 3}
        assert len(store.calls(run_id, step=child, ns="", with_subgraphs=True)) == 3


def test_show_counts_and_lists_a_steps_subgraph_calls(supervisor_run, capsys):
    url, run_id = supervisor_run
    assert main(["--db", url, "show", run_id]) == 0
    table = capsys.readouterr().out
    rows = [line for line in table.splitlines() if line.split()[:2][1:] == ["tracker"] and line.split()[0].isdigit()]
    assert rows and "2 model, 1 tool" in rows[0], table
    with closing(open_store(url)) as store:
        step = next(s.step for s in store.list_steps(run_id, "") if s.nodes == ["tracker"])
    assert main(["--db", url, "show", run_id, "--step", str(step)]) == 0
    page = capsys.readouterr().out
    assert "lookup_order" in page and "in subgraph tracker › tools" in page and "in subgraph tracker › agent" in page, page


async def test_the_run_screen_shows_an_agents_calls_on_its_supervisor_step(tmp_path):
    from test_tui import calls_of_step, settle

    db = str(tmp_path / "sup.db")
    with Recorder(db) as rec:
        rec.attach(_supervisor(), name="supervisor").invoke({"messages": [HumanMessage("Track C3 and refund 7.")]})
    app = build_app(db, "last")
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(app, pilot)
        screen = app.screen
        payer = next(s.step for s in screen.steps if s.nodes == ["payer"])
        assert screen.query_one(Timeline).calls[payer] == {"model": 2, "tool": 1}
        panel = await calls_of_step(app, pilot, payer)
        shown = [str(o.prompt) for o in panel.query_one("#call-list").options]
        assert len(shown) == 3 and "refund" in shown[1] and "payer › tools" in shown[1], shown
        assert not any("No tool, model or HTTP calls" in s for s in shown)
