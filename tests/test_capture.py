"""Capture coverage on real compiled LangGraph graphs: routes, calls, subgraphs, interrupts.

Every test builds a real graph, records it into a real SQLite store and reads
the recording back through the store API.
"""

from __future__ import annotations

import asyncio
import operator
from dataclasses import dataclass, field
from typing import Annotated, Literal, TypedDict

import pytest
from conftest import load_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import GraphRecursionError
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, Send, interrupt
from pydantic import BaseModel

scripted = load_agent("scripted_model")


def _steps(store, run_id, ns=""):
    return [(s.step, s.nodes) for s in store.list_steps(run_id, ns) if not s.pending]


def _all_routes(store, run_id, ns=""):
    out = []
    for s in store.list_steps(run_id, ns):
        out.extend(store.step_detail(run_id, s.step, ns).routes if not s.pending else [])
    return out


# -- a small loop with a conditional edge -------------------------------------------


class Counter(TypedDict):
    n: int
    log: Annotated[list[str], operator.add]


def bump(state: Counter) -> dict:
    return {"n": state["n"] + 1, "log": [f"bump{state['n']}"]}


def check(state: Counter) -> dict:
    return {"log": ["check"]}


def keep_going(state: Counter) -> Literal["bump", "done"]:
    return "bump" if state["n"] < 3 else "done"


def counter_graph(checkpointer=None):
    b = StateGraph(Counter)
    b.add_node("bump", bump)
    b.add_node("check", check)
    b.add_node("done", lambda s: {"log": ["done"]})
    b.add_edge(START, "bump")
    b.add_edge("bump", "check")
    b.add_conditional_edges("check", keep_going)
    b.add_edge("done", END)
    return b.compile(checkpointer=checkpointer)


def test_output_unchanged_and_every_superstep_recorded(recorder_factory):
    rec = recorder_factory()
    plain = counter_graph().invoke({"n": 0, "log": []})
    graph = rec.attach(counter_graph(), name="counter", tags=["unit"])
    assert graph.invoke({"n": 0, "log": []}) == plain
    rec.flush()
    run = rec.store.get_run("last")
    assert (run.name, run.status, run.tags) == ("counter", "ok", ["unit"])
    steps = _steps(rec.store, run.id)
    assert [n for _, n in steps if n] == [["__start__"], ["bump"], ["check"], ["bump"], ["check"], ["bump"], ["check"], ["done"]]
    # Random access: the state after each step is the full snapshot at that step.
    last = steps[-1][0]
    assert rec.store.state_at(run.id, last) == plain
    assert rec.store.state_at(run.id, 2)["n"] == 1


def test_conditional_and_static_routes_are_told_apart(recorder_factory):
    rec = recorder_factory()
    graph = rec.attach(counter_graph())
    graph.invoke({"n": 0, "log": []})
    rec.flush()
    run_id = rec.last_run_id
    routes = _all_routes(rec.store, run_id)
    static = [r for r in routes if r.kind == "static"]
    conditional = [r for r in routes if r.kind == "conditional"]
    assert {(r.source, tuple(r.destinations)) for r in static} == {("__start__", ("bump",)), ("bump", ("check",)), ("done", ("__end__",))}
    assert all(r.router is None for r in static)
    assert [(r.router, r.returned, r.destinations) for r in conditional] == [
        ("keep_going", "bump", ["bump"]),
        ("keep_going", "bump", ["bump"]),
        ("keep_going", "done", ["done"]),
    ]
    detail = rec.store.step_detail(run_id, 2)
    assert "check → bump (keep_going returned 'bump')" in detail.step.summary
    assert detail.next == ["bump"]


def test_path_map_resolves_router_return_values(recorder_factory):
    b = StateGraph(Counter)
    b.add_node("bump", bump)
    b.add_edge(START, "bump")
    b.add_conditional_edges("bump", lambda s: s["n"] >= 2, {True: END, False: "bump"})
    rec = recorder_factory()
    rec.attach(b.compile()).invoke({"n": 0, "log": []})
    rec.flush()
    routes = [r for r in _all_routes(rec.store, rec.last_run_id) if r.kind == "conditional"]
    assert [(r.returned, r.destinations) for r in routes] == [(False, ["bump"]), (True, ["__end__"])]


# -- Send fan-out and Command ------------------------------------------------------------


class MapState(TypedDict):
    topics: list[str]
    jokes: Annotated[list[str], operator.add]


def fan_out(state: MapState):
    return [Send("write", {"topics": [t], "jokes": []}) for t in state["topics"]]


def map_reduce_graph():
    b = StateGraph(MapState)
    b.add_node("plan", lambda s: {})
    b.add_node("write", lambda s: {"jokes": [f"joke about {s['topics'][0]}"]})
    b.add_edge(START, "plan")
    b.add_conditional_edges("plan", fan_out, ["write"])
    b.add_edge("write", END)
    return b.compile()


def test_send_fan_out_records_packets_and_parallel_tasks(recorder_factory):
    rec = recorder_factory()
    out = rec.attach(map_reduce_graph()).invoke({"topics": ["cats", "dogs", "owls"], "jokes": []})
    assert sorted(out["jokes"]) == ["joke about cats", "joke about dogs", "joke about owls"]
    rec.flush()
    run_id = rec.last_run_id
    plan_step = rec.store.step_detail(run_id, 1)
    (route,) = plan_step.routes
    assert route.kind == "send" and route.router == "fan_out"
    assert [p["arg"]["topics"] for p in route.sends] == [["cats"], ["dogs"], ["owls"]]
    write_step = rec.store.step_detail(run_id, 2)
    assert [t.node for t in write_step.tasks] == ["write"] * 3
    assert sorted(t.writes["jokes"][0] for t in write_step.tasks) == sorted(out["jokes"])
    assert "plan ⇉ 3× write via fan_out" in plan_step.step.summary


class CmdState(TypedDict):
    hops: int
    trail: Annotated[list[str], operator.add]


def hop(state: CmdState) -> Command[Literal["hop", "land"]]:
    if state["hops"] < 2:
        return Command(goto="hop", update={"hops": state["hops"] + 1, "trail": ["hop"]})
    return Command(goto="land", update={"trail": ["to-land"]})


def test_command_goto_is_recorded_as_command_route(recorder_factory):
    b = StateGraph(CmdState)
    b.add_node("hop", hop)
    b.add_node("land", lambda s: {"trail": ["landed"]})
    b.add_edge(START, "hop")
    rec = recorder_factory()
    out = rec.attach(b.compile()).invoke({"hops": 0, "trail": []})
    assert out["trail"][-1] == "landed"
    rec.flush()
    commands = [r for r in _all_routes(rec.store, rec.last_run_id) if r.kind == "command"]
    assert [r.destinations for r in commands] == [["hop"], ["hop"], ["land"]]
    assert commands[-1].returned["update"] == {"trail": ["to-land"]}


def test_command_parent_from_subgraph(recorder_factory):
    class S(TypedDict):
        value: str

    def escape(state: S):
        return Command(graph=Command.PARENT, goto="after", update={"value": "escaped"})

    sub_b = StateGraph(S)
    sub_b.add_node("escape", escape)
    sub_b.add_edge(START, "escape")
    sub = sub_b.compile()
    b = StateGraph(S)
    b.add_node("sub", sub, destinations=("after",))
    b.add_node("after", lambda s: {"value": s["value"] + "+after"})
    b.add_edge(START, "sub")
    rec = recorder_factory()
    assert rec.attach(b.compile()).invoke({"value": ""}) == {"value": "escaped+after"}
    rec.flush()
    run_id = rec.last_run_id
    sub_ns = [ns for ns in rec.store.namespaces(run_id) if ns.startswith("sub:")]
    assert sub_ns, "subgraph steps carry their namespace"
    routes = [r for ns in sub_ns for r in _all_routes(rec.store, run_id, ns)] + _all_routes(rec.store, run_id)
    parent_cmds = [r for r in routes if r.kind == "parent-command"]
    # LangGraph hands the Command to the parent graph's task that ran the subgraph.
    assert parent_cmds and parent_cmds[0].destinations == ["after"] and parent_cmds[0].source == "sub"
    run = rec.store.get_run(run_id)
    assert run.status == "ok"


# -- subgraphs -----------------------------------------------------------------------------


def test_subgraph_steps_are_namespaced_and_linked_to_parent_task(recorder_factory):
    class S(TypedDict):
        n: int

    inner = StateGraph(S)
    inner.add_node("double", lambda s: {"n": s["n"] * 2})
    inner.add_node("inc", lambda s: {"n": s["n"] + 1})
    inner.add_edge(START, "double")
    inner.add_edge("double", "inc")
    outer = StateGraph(S)
    outer.add_node("prep", lambda s: {"n": s["n"] + 10})
    outer.add_node("child", inner.compile())
    outer.add_edge(START, "prep")
    outer.add_edge("prep", "child")
    rec = recorder_factory()
    assert rec.attach(outer.compile()).invoke({"n": 1}) == {"n": 23}
    rec.flush()
    run_id = rec.last_run_id
    namespaces = rec.store.namespaces(run_id)
    assert namespaces[0] == "" and len(namespaces) == 2 and namespaces[1].startswith("child:")
    child_ns = namespaces[1]
    assert [n for _, n in _steps(rec.store, run_id, child_ns) if n] == [["__start__"], ["double"], ["inc"]]
    assert rec.store.state_at(run_id, 1, child_ns) == {"n": 22}
    parent_step = [s for s in rec.store.list_steps(run_id) if s.nodes == ["child"]][0]
    (task,) = rec.store.step_detail(run_id, parent_step.step).tasks
    assert task.subgraph_ns == [child_ns]


# -- interrupts and resume -----------------------------------------------------------------


class Approval(TypedDict):
    request: str
    decision: str


def ask(state: Approval) -> dict:
    answer = interrupt({"question": f"approve {state['request']}?"})
    return {"decision": answer}


def test_interrupt_and_resume_are_events_of_one_run(recorder_factory):
    b = StateGraph(Approval)
    b.add_node("ask", ask)
    b.add_edge(START, "ask")
    saver = InMemorySaver()
    rec = recorder_factory()
    graph = rec.attach(b.compile(checkpointer=saver))
    config = {"configurable": {"thread_id": "approval-1"}}
    first = graph.invoke({"request": "refund", "decision": ""}, config)
    assert first["__interrupt__"][0].value == {"question": "approve refund?"}
    rec.flush()
    run = rec.store.get_run("last")
    assert (run.status, run.status_reason) == ("interrupted", "interrupt")
    assert graph.invoke(Command(resume="yes"), config)["decision"] == "yes"
    rec.flush()
    assert rec.store.count_runs() == 1, "a resume continues the interrupted run"
    run = rec.store.get_run(run.id)
    assert run.status == "ok"
    events = [(e.kind, e.value) for s in rec.store.list_steps(run.id) for e in rec.store.step_detail(run.id, s.step).events]
    assert ("interrupt", {"question": "approve refund?"}) in events
    assert ("resume", "yes") in events
    # The user's own checkpointer kept working through the tee.
    assert saver.get_tuple(config).checkpoint["channel_values"]["decision"] == "yes"


def test_a_node_that_asks_twice_has_its_questions_and_answers_in_the_order_they_came(recorder_factory):
    """interrupt() -> answer -> interrupt() again -> answer: each answer follows its question."""

    def twice(state: Approval) -> dict:
        first = interrupt("which refund?")
        second = interrupt(f"approve {first}?")
        return {"request": first, "decision": second}

    b = StateGraph(Approval)
    b.add_node("twice", twice)
    b.add_edge(START, "twice")
    rec = recorder_factory()
    graph = rec.attach(b.compile(checkpointer=InMemorySaver()))
    config = {"configurable": {"thread_id": "twice"}}
    graph.invoke({"request": "", "decision": ""}, config)
    graph.invoke(Command(resume="R7"), config)
    assert graph.invoke(Command(resume="yes"), config) == {"request": "R7", "decision": "yes"}
    rec.flush()
    run = rec.store.get_run("last")
    events = [(e.kind, e.value) for s in rec.store.list_steps(run.id) for e in rec.store.step_detail(run.id, s.step).events if e.node == "twice"]
    assert events == [("interrupt", "which refund?"), ("resume", "R7"), ("interrupt", "approve R7?"), ("resume", "yes")]


# -- errors --------------------------------------------------------------------------------


def test_node_error_is_recorded_on_task_and_run(recorder_factory):
    def boom(state: Counter):
        raise ValueError("tool budget exceeded")

    b = StateGraph(Counter)
    b.add_node("bump", bump)
    b.add_node("boom", boom)
    b.add_edge(START, "bump")
    b.add_edge("bump", "boom")
    rec = recorder_factory()
    with pytest.raises(ValueError, match="tool budget exceeded"):
        rec.attach(b.compile()).invoke({"n": 0, "log": []})
    rec.flush()
    run = rec.store.get_run("last")
    assert (run.status, run.error_type, run.error_message) == ("error", "ValueError", "tool budget exceeded")
    failed = [s for s in rec.store.list_steps(run.id) if s.has_error]
    assert len(failed) == 1 and failed[0].nodes == ["boom"]
    (task,) = rec.store.step_detail(run.id, failed[0].step).tasks
    assert (task.error_type, task.error_message) == ("ValueError", "tool budget exceeded")


def test_recursion_limit_error(recorder_factory):
    b = StateGraph(Counter)
    b.add_node("bump", bump)
    b.add_edge(START, "bump")
    b.add_edge("bump", "bump")
    rec = recorder_factory()
    with pytest.raises(GraphRecursionError):
        rec.attach(b.compile()).invoke({"n": 0, "log": []}, {"recursion_limit": 5})
    rec.flush()
    run = rec.store.get_run("last")
    assert run.status == "error" and run.error_type == "GraphRecursionError"
    assert len([s for s in rec.store.list_steps(run.id) if not s.pending and s.nodes == ["bump"]]) == 5


# -- state schemas and reducers ------------------------------------------------------------


@dataclass
class DataState:
    items: Annotated[list[int], operator.add] = field(default_factory=list)
    total: int = 0


class PydState(BaseModel):
    items: Annotated[list[int], operator.add] = []
    total: int = 0


def keep_max(old: int | None, new: int) -> int:
    return max(old or 0, new)


class CustomState(TypedDict):
    items: Annotated[list[int], operator.add]
    total: Annotated[int, keep_max]


@pytest.mark.parametrize("schema", [DataState, PydState, CustomState], ids=["dataclass", "pydantic", "custom-reducer"])
def test_state_schemas_and_reducers(recorder_factory, schema):
    def add(state):
        items = state["items"] if isinstance(state, dict) else state.items
        return {"items": [len(items) + 1], "total": 5 if len(items) == 0 else 3}

    b = StateGraph(schema)
    b.add_node("a", add)
    b.add_node("b", add)
    b.add_edge(START, "a")
    b.add_edge("a", "b")
    rec = recorder_factory()
    out = rec.attach(b.compile()).invoke({"items": [], "total": 0})
    rec.flush()
    run_id = rec.last_run_id
    final = rec.store.state_at(run_id, max(s.step for s in rec.store.list_steps(run_id)))
    expected_total = out["total"] if isinstance(out, dict) else out.total
    assert final == {"items": [1, 2], "total": expected_total}
    assert expected_total == (5 if schema is CustomState else 3)


# -- tool and model calls -----------------------------------------------------------------


def test_react_agent_calls_with_parallel_tools(recorder_factory):
    react = load_agent("react_agent")
    rec = recorder_factory()
    graph = rec.attach(react.build_graph(), name="react")
    out = graph.invoke(react.inputs_for())
    assert out["messages"][-1].content == react.FINAL_ANSWER
    rec.flush()
    run_id = rec.last_run_id
    calls = rec.store.calls(run_id)
    models = [c for c in calls if c.kind == "model"]
    tools = [c for c in calls if c.kind == "tool"]
    assert len(models) >= 2 and len(tools) >= 2
    first = models[0]
    assert first.node == "agent" and first.step is not None
    assert first.inputs["messages"][-1]["type"] == "human"
    assert {t["function"]["name"] for t in first.inputs["tools"]} >= {"lookup_order_status"}
    assert first.output["type"] == "ai" and len(first.output["tool_calls"]) == 2
    assert first.total_tokens and first.input_tokens and first.latency_ms is not None
    parallel = [t for t in tools if t.step == tools[0].step]
    assert len(parallel) == 2 and {t.node for t in parallel} == {"tools"}
    assert {t.inputs["order_id"] for t in parallel if t.name == "lookup_order_status"} == {"A-1042", "B-2077"}
    assert all(t.output["type"] == "tool" for t in parallel)
    # Messages in state are structured messages, not repr strings.
    final_state = rec.store.state_at(run_id, max(s.step for s in rec.store.list_steps(run_id)))
    assert [m["type"] for m in final_state["messages"]][:2] == ["human", "ai"]
    typed = rec.store.state_at(run_id, max(s.step for s in rec.store.list_steps(run_id)), typed=True)
    assert isinstance(typed["messages"][1], AIMessage) and isinstance(typed["messages"][2], ToolMessage)
    assert typed["messages"] == out["messages"]


def test_streamed_model_calls_are_captured_like_plain_ones(recorder_factory):
    react = load_agent("react_agent")
    rec = recorder_factory()
    graph = rec.attach(react.build_graph())
    chunks = list(graph.stream(react.inputs_for(), stream_mode="messages"))
    assert chunks, "the user's stream is unchanged"
    rec.flush()
    models = [c for c in rec.store.calls(rec.last_run_id) if c.kind == "model"]
    assert models and all(m.streamed for m in models)
    assert len(models[0].output["tool_calls"]) == 2
    assert models[-1].output["content"] == react.FINAL_ANSWER


def test_astream_events_and_async_graph(recorder_factory):
    react = load_agent("react_agent")
    rec = recorder_factory()
    graph = rec.attach(react.build_graph())

    async def main():
        kinds = set()
        async for ev in graph.astream_events(react.inputs_for(), version="v2"):
            kinds.add(ev["event"])
        out = await graph.ainvoke(react.inputs_for())
        return kinds, out

    kinds, out = asyncio.run(main())
    assert "on_chat_model_stream" in kinds
    assert out["messages"][-1].content == react.FINAL_ANSWER
    rec.flush()
    runs = rec.store.list_runs()
    assert len(runs) == 2 and all(r.status == "ok" for r in runs)
    for run in runs:
        calls = rec.store.calls(run.id)
        assert sum(c.kind == "tool" for c in calls) == 3
        assert sum(c.kind == "model" for c in calls) == 3


def test_calls_in_parallel_branches_are_attributed_to_their_branch(recorder_factory):
    @tool
    def weather(city: str) -> str:
        """Weather for a city."""
        return f"sunny in {city}"

    class S(TypedDict):
        out: Annotated[list[str], operator.add]

    def branch(city):
        def run(state: S):
            return {"out": [weather.invoke({"city": city})]}

        return run

    b = StateGraph(S)
    b.add_node("paris", branch("Paris"))
    b.add_node("oslo", branch("Oslo"))
    b.add_edge(START, "paris")
    b.add_edge(START, "oslo")
    rec = recorder_factory()
    rec.attach(b.compile()).invoke({"out": []})
    rec.flush()
    calls = rec.store.calls(rec.last_run_id)
    assert {(c.node, c.inputs["city"]) for c in calls} == {("paris", "Paris"), ("oslo", "Oslo")}
    step = rec.store.step_detail(rec.last_run_id, calls[0].step)
    by_node = {t.node: t.task_id for t in step.tasks}
    assert {c.task_id for c in calls} == {by_node["paris"], by_node["oslo"]}


def test_tool_error_is_recorded(recorder_factory):
    @tool
    def flaky(x: int) -> int:
        """Always fails."""
        raise RuntimeError("upstream 503")

    class S(TypedDict):
        note: str

    def use(state: S):
        try:
            flaky.invoke({"x": 1})
        except RuntimeError as exc:
            return {"note": str(exc)}
        return {"note": "ok"}

    b = StateGraph(S)
    b.add_node("use", use)
    b.add_edge(START, "use")
    rec = recorder_factory()
    rec.attach(b.compile()).invoke({"note": ""})
    rec.flush()
    (call,) = rec.store.calls(rec.last_run_id)
    assert (call.name, call.error_type, call.error_message) == ("flaky", "RuntimeError", "upstream 503")


def test_model_call_inside_node_any_provider(recorder_factory):
    model = scripted.ScriptedChatModel(script=[AIMessage(content="hello there")])

    class S(TypedDict):
        messages: Annotated[list, add_messages]

    b = StateGraph(S)
    b.add_node("chat", lambda s: {"messages": [model.invoke(s["messages"])]})
    b.add_edge(START, "chat")
    rec = recorder_factory()
    rec.attach(b.compile()).invoke({"messages": [HumanMessage(content="hi")]})
    rec.flush()
    (call,) = rec.store.calls(rec.last_run_id)
    assert call.kind == "model" and "ScriptedChatModel" in call.name
    assert call.inputs["messages"][0]["content"] == "hi"
    assert call.output["content"] == "hello there"
