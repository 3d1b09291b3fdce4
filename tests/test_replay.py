"""Replay and fork on real compiled graphs: clean replays stay clean, every change is named.

Each test records a real graph with a real Recorder into a real store, then
replays it (today's code: the same graph, or one changed to cause a kind of
divergence) and checks what the replay reports.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import operator
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import pytest
import replay_graphs as G
from conftest import exported, imported, load_agent
from langchain.agents import AgentState, create_agent
from langchain.agents.middleware import ToolCallLimitMiddleware
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, StructuredTool, tool
from langgraph.channels import UntrackedValue
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.managed import RemainingSteps
from langgraph.prebuilt import ToolNode, ToolRuntime
from langgraph.types import Command, Send, interrupt
from pydantic import BaseModel
from typing_extensions import NotRequired, TypedDict

from graphtape.recorder import Recorder, open_store
from graphtape.recorder.records import FLAG_CARRIED
from graphtape.replay import ReplayError, ReplayMode, fork, replay
from graphtape.replay.normalize import IGNORED, Normalizer, ns_path


@pytest.fixture
def db(tmp_path):
    return str(tmp_path / "replay.db")


def record(db: str, graph, inputs, config=None, **attach) -> str:
    with Recorder(db) as rec:
        app = rec.attach(graph, **attach)
        try:
            app.invoke(inputs, config)
        except Exception:  # noqa: BLE001 - a failing run is recorded too
            pass
        rec.flush()
        return rec.last_run_id


def first(result, kind: str | None = None):
    assert result.divergences, result.report()
    d = result.divergences[0]
    assert d.first
    if kind is not None:
        assert d.kind == kind, result.report()
    return d


# -- unchanged graphs replay clean ------------------------------------------------------------

REASON_ACT = load_agent("reason_act")
REACT = load_agent("react_agent")

UNCHANGED = {
    "send-fan-out": (lambda: G.fan_graph(), {"items": [1, 2, 3]}),
    "command-goto": (lambda: G.cmd_graph(), {"x": 9}),
    "subgraph": (lambda: G.sub_graph(), {"n": 1}),
    "parallel-tool-calls": (lambda: G.chat_graph(), {"messages": [("user", "21?")]}),
    "prebuilt-react-agent": (lambda: REACT.build_graph(), REACT.inputs_for()),
    **{f"demo-{s}": (lambda s=s: REASON_ACT.build_graph(s), REASON_ACT.inputs_for(s)) for s in ("happy", "unknown_tool", "bad_input", "loop_limit")},
}


@pytest.mark.parametrize("name", sorted(UNCHANGED))
def test_unchanged_graph_replays_clean_in_strict_mode(db, name):
    build, inputs = UNCHANGED[name]
    run_id = record(db, build(), inputs)
    result = replay(run_id, build(), db=db)
    assert not result.diverged, result.report()
    assert result.status == "ok"
    store = open_store(db)
    try:
        source, new = store.run_detail(run_id), store.get_run(result.run_id)
        assert new.parent_run_id == run_id
        assert Normalizer()(store.run_detail(result.run_id).output) == Normalizer()(source.output)
        # The result's final state holds the graph's own types (messages as message objects).
        assert all(not isinstance(m, dict) for m in result.final_state.get("messages", []))
        recorded_calls = [c for c in store.calls(run_id) if c.step is not None and c.step > result.from_step]
        assert sum(result.served.values()) == len(recorded_calls)
    finally:
        store.close()


def test_incident_with_timeouts_replays_clean(db):
    """The tool the node gave up on (a timeout) is replayed as slow as it was, so it times out again."""
    run_id = record(db, REASON_ACT.build_graph("incident"), REASON_ACT.inputs_for("incident"))
    result = replay(run_id, REASON_ACT.build_graph("incident"), db=db)
    assert not result.diverged, result.report()
    assert result.final_state["retries"] == 2


def test_a_recording_cannot_make_a_replay_hold_its_answers_for_long(db, monkeypatch):
    """Latencies of hours (a damaged or hostile store) would hold each answer the longest a call
    may be held, with no end in all: a replay holds its answers at most MAX_HELD_S together,
    and says so."""
    import sqlalchemy as sa

    from graphtape.recorder import schema as S
    from graphtape.replay import answers

    run_id = record(db, REASON_ACT.build_graph("incident"), REASON_ACT.inputs_for("incident"))
    engine = sa.create_engine(f"sqlite:///{db}")
    with engine.begin() as conn:
        conn.execute(sa.update(S.calls).values(latency_ms=1e12))
    engine.dispose()
    monkeypatch.setattr(answers, "MAX_HELD_S", 0.3)
    result = replay(run_id, REASON_ACT.build_graph("incident"), db=db)
    assert any("as long as a replay holds them" in n for n in result.notes), result.notes


def test_replay_from_a_middle_step_resumes_there(db):
    run_id = record(db, G.chat_graph(), {"messages": [("user", "21?")]})
    result = replay(run_id, G.chat_graph(), from_step=2, db=db)
    assert not result.diverged, result.report()
    store = open_store(db)
    try:
        ran = [s.step for s in store.list_steps(result.run_id) if s.nodes]
        assert min(ran) == 3  # nothing before the restored step ran again
        assert result.served == {"tool": 0, "model": 1}
    finally:
        store.close()


def test_strict_mode_never_calls_a_live_tool_or_model(db):
    run_id = record(db, G.chat_graph(), {"messages": [("user", "21?")]})
    calls = []

    @tool
    def double(x: int) -> int:
        """Double a number."""
        calls.append(x)
        raise RuntimeError("live call in strict mode")

    # An empty script would raise if the model were asked live.
    graph = G.chat_graph(script=[], tools=(double, G.halve))
    result = replay(run_id, graph, db=db)
    assert not result.diverged, result.report()
    assert calls == []


def test_async_graph_replays_clean_from_inside_a_running_loop(db):
    async def go():
        with Recorder(db) as rec:
            await rec.attach(G.chat_graph(is_async=True)).ainvoke({"messages": [("user", "21?")]})
            rec.flush()
            run_id = rec.last_run_id
        return run_id, replay(run_id, G.chat_graph(is_async=True), db=db)

    run_id, result = asyncio.run(go())
    assert not result.diverged, result.report()
    assert result.served == {"tool": 2, "model": 2}


def test_interrupt_is_answered_with_the_recorded_resume_value(db):
    with Recorder(db) as rec:
        app = rec.attach(G.interrupt_graph(InMemorySaver()))
        cfg = {"configurable": {"thread_id": "t"}}
        app.invoke({"q": "ship it?"}, cfg)
        app.invoke(Command(resume="yes"), cfg)
        rec.flush()
        run_id = rec.last_run_id
    result = replay(run_id, G.interrupt_graph(InMemorySaver()), db=db)
    assert not result.diverged, result.report()
    assert result.final_state["answer"] == "done:yes"


@pytest.mark.parametrize("named", [False, True], ids=["LangGraph's default name", "named graph"])
def test_an_interrupt_answered_by_another_recorder_goes_on_in_the_run_that_asked(db, named):
    """Another process (here another Recorder on the same store) resumes the thread: the answer
    joins the interrupted run, whether the graph kept LangGraph's default name or not."""
    saver = InMemorySaver()  # the thread's memory, as a shared PostgresSaver would hold it
    graph = G.interrupt_graph(saver)
    if named:
        graph.name = "approvals"
    cfg = {"configurable": {"thread_id": "t"}}
    with Recorder(db) as asking:
        asking.attach(graph, graph_ref="replay_graphs:approvals").invoke({"q": "ship it?"}, cfg)
        asked = asking.last_run_id
    with Recorder(db) as answering:
        assert answering.attach(graph, graph_ref="replay_graphs:approvals").invoke(Command(resume="yes"), cfg)["answer"] == "done:yes"
        answered = answering.last_run_id
    assert answered == asked
    store = open_store(db)
    try:
        run = store.get_run(asked)
        assert run.status == "ok" and [s.step for s in store.list_steps(asked)] == [-1, 0, 1, 2]
    finally:
        store.close()
    result = replay(asked, G.interrupt_graph(InMemorySaver()), db=db)
    assert not result.diverged, result.report()


def test_a_thread_named_by_a_secret_is_stored_without_it_and_still_resumes(db):
    """A session token used as the thread id: the stored thread is a digest (no token in the
    file), and another Recorder resuming that thread still finds the run that asked."""
    token = "sk-proj-" + "Qw7" * 16
    cfg = {"configurable": {"thread_id": token}}
    saver = InMemorySaver()
    with Recorder(db) as asking:
        asking.attach(G.interrupt_graph(saver), graph_ref="replay_graphs:approvals").invoke({"q": "ship it?"}, cfg)
        asked = asking.last_run_id
    with Recorder(db) as other:  # another thread on the same graph must not be taken for it
        other.attach(G.interrupt_graph(saver), graph_ref="replay_graphs:approvals").invoke({"q": "other"}, {"configurable": {"thread_id": "sk-proj-" + "Zx9" * 16}})
    with Recorder(db) as answering:
        assert answering.attach(G.interrupt_graph(saver), graph_ref="replay_graphs:approvals").invoke(Command(resume="yes"), cfg)["answer"] == "done:yes"
        assert answering.last_run_id == asked
    store = open_store(db)
    try:
        runs = store.list_runs()
        assert len({r.thread_id for r in runs}) == 2 and all(token not in r.thread_id and r.thread_id.startswith("redacted-thread-") for r in runs)
        assert store.get_run(asked).status == "ok"
    finally:
        store.close()
    for path in Path(db).parent.glob(Path(db).name + "*"):
        assert token.encode() not in path.read_bytes()


@pytest.mark.parametrize("edits", [[{"q": "ship it today?"}], [{"approved": "pre-set"}], [{"q": "draft"}, {"q": "ship it today?"}]], ids=["one", "one, overwritten", "two"])
def test_a_state_edited_while_the_run_waits_at_an_interrupt_is_a_step_and_replays(db, edits):
    """interrupt -> graph.update_state(config, edit) (once or more) -> invoke(Command(resume=...)):
    each edit is recorded as the step it makes, and a replay (or a fixture's) puts them back before answering."""
    from graphtape.replay.fixture import export_fixture, import_fixture

    cfg = {"configurable": {"thread_id": "edit"}}
    with Recorder(db) as rec:
        app = rec.attach(G.interrupt_graph(InMemorySaver()))
        app.invoke({"q": "ship it?"}, cfg)
        for edit in edits:
            app.update_state(cfg, edit)
        assert app.invoke(Command(resume="yes"), cfg)["answer"] == "done:yes"
        rec.flush()
        run_id = rec.last_run_id
    store = open_store(db)
    try:
        steps = store.list_steps(run_id)
        updates = [s for s in steps if s.source == "update"]
        assert len(updates) == len(edits)
        assert [store.state_at(run_id, s.step)[k] for e, s in zip(edits, updates) for k in e] == [v for e in edits for v in e.values()]
        edited = updates[-1]
        key, value = next(iter(edits[-1].items()))
        assert [s.step for s in steps] == [-1, 0, 1, 2, *range(3, 3 + len(edits))]
        fixture_run = import_fixture(store, export_fixture(store, run_id)).run_id
    finally:
        store.close()
    for source, start in ((run_id, None), (run_id, 0), (run_id, edited.step), (fixture_run, None)):
        result = replay(source, G.interrupt_graph(InMemorySaver()), start, db=db, require_all_used=True)
        assert not result.diverged, f"{source} from {start}: {result.report()}"
        assert result.final_state["answer"] == "done:yes" and result.final_state[key] == (value if key == "q" else "yes")


class Noted(TypedDict, total=False):
    note: str
    log: Annotated[list, operator.add]


def _noting_graph():
    b = StateGraph(Noted)
    b.add_node("a", lambda s: {"log": ["a"]})
    b.add_node("b", lambda s: {"log": [f"b saw {s.get('note', 'nothing')}"]})
    b.add_node("ask", lambda s: {"log": [f"ask heard {interrupt('go on?')}"]})  # reached by a Command's goto only
    b.add_edge(START, "a")
    b.add_edge("a", "b")
    b.add_edge("b", END)
    b.add_edge("ask", END)
    return b.compile(checkpointer=InMemorySaver())


def test_a_command_goto_to_a_node_that_asks_is_recorded_once_and_replays_with_its_answer(db):
    """The Command's writes are put again by LangGraph with the answer: recorded once. The waiting
    task is not in LangGraph's state (a goto started it), and the replay still answers it."""
    cfg = {"configurable": {"thread_id": "cmd-ask"}}
    with Recorder(db) as rec:
        app = rec.attach(_noting_graph())
        app.invoke({"log": []}, cfg)
        app.invoke(Command(update={"note": "x"}, goto="ask"), cfg)
        assert app.invoke(Command(resume="yes"), cfg)["log"] == ["a", "b saw nothing", "ask heard yes"]
        rec.flush()
        run_id = rec.last_run_id
    store = open_store(db)
    try:
        events = [e.kind for s in store.list_steps(run_id) for e in store.step_detail(run_id, s.step).events]
    finally:
        store.close()
    assert events == ["update", "interrupt", "resume"]
    result = replay(run_id, _noting_graph(), db=db, require_all_used=True)
    assert not result.diverged, result.report()
    assert result.final_state["log"] == ["a", "b saw nothing", "ask heard yes"]


def test_a_run_invoked_with_a_command_on_a_thread_starts_from_the_thread_and_replays(db):
    """``invoke(Command(update=..., goto=...), config)`` on a thread that already ran: the run
    starts from the thread's checkpoint, and the Command is its input, in the replay too."""
    from graphtape.replay.fixture import export_fixture, import_fixture

    cfg = {"configurable": {"thread_id": "cmd"}}
    with Recorder(db) as rec:
        app = rec.attach(_noting_graph())
        app.invoke({"log": []}, cfg)
        out = app.invoke(Command(update={"note": "the edit"}, goto="b"), cfg)
        assert out["log"] == ["a", "b saw nothing", "b saw the edit"]
        rec.flush()
        run_id = rec.last_run_id
    store = open_store(db)
    try:
        steps = store.list_steps(run_id)
        assert [s.step for s in steps] == [2, 3] and store.step_detail(run_id, 3).tasks[0].node == "b"
        fixture_run = import_fixture(store, export_fixture(store, run_id)).run_id
    finally:
        store.close()
    for source in (run_id, fixture_run):
        result = replay(source, _noting_graph(), db=db, require_all_used=True)
        assert not result.diverged, result.report()
        assert result.final_state["log"] == ["a", "b saw nothing", "b saw the edit"]


class Counted(TypedDict, total=False):
    per_run: Annotated[int, UntrackedValue]  # LangGraph keeps it for one invocation, never in a checkpoint
    seen: list
    answer: str


def _per_run_graph():
    """``count`` sets an untracked value; ``ask`` interrupts; after the resume (a new invocation)
    ``look`` finds the value gone, as LangGraph resets it."""
    b = StateGraph(Counted)
    b.add_node("count", lambda s: {"per_run": 1, "seen": [s.get("per_run")]})
    b.add_node("ask", lambda s: {"answer": interrupt("go on?")})
    b.add_node("look", lambda s: {"seen": [*s["seen"], s.get("per_run")]})
    b.add_edge(START, "count")
    b.add_edge("count", "ask")
    b.add_edge("ask", "look")
    b.add_edge("look", END)
    return b.compile(checkpointer=InMemorySaver())


def test_an_untracked_value_put_back_for_a_replay_is_gone_after_its_resume(db):
    cfg = {"configurable": {"thread_id": "u"}}
    with Recorder(db) as rec:
        app = rec.attach(_per_run_graph())
        app.invoke({"seen": []}, cfg)
        assert app.invoke(Command(resume="yes"), cfg)["seen"] == [None, None]
        rec.flush()
        run_id = rec.last_run_id
    steps = _completed_steps(db, run_id)
    for step in steps:
        result = replay(run_id, _per_run_graph(), step, db=db)
        assert not result.diverged, f"from step {step}: {result.report()}"


class Asking(TypedDict, total=False):
    q: str
    a: str
    first: str


def _asks_then_calls_an_asking_subgraph():
    """A node that asks, then invokes (from its own code) a subgraph whose node asks too."""
    inner = StateGraph(Asking)
    inner.add_node("ask", lambda s: {"a": interrupt({"sub_q": s["q"]})})
    inner.add_edge(START, "ask")
    inner.add_edge("ask", END)
    sub = inner.compile()

    def calls_sub(s: Asking) -> dict:
        first = interrupt("first?")
        return {"first": first, "a": sub.invoke({"q": s["q"]})["a"]}

    outer = StateGraph(Asking)
    outer.add_node("calls_sub", calls_sub)
    outer.add_edge(START, "calls_sub")
    outer.add_edge("calls_sub", END)
    return outer.compile(checkpointer=InMemorySaver())


@pytest.mark.parametrize("by_id", [False, True], ids=["by value", "by interrupt id"])
def test_a_node_that_asks_then_calls_a_subgraph_that_asks_replays_both_answers(db, by_id):
    """The node's answer is recorded in the root's step, the subgraph's in the subgraph's own."""
    cfg = {"configurable": {"thread_id": "two-levels"}}
    with Recorder(db) as rec:
        app = rec.attach(_asks_then_calls_an_asking_subgraph())
        out = app.invoke({"q": "q?"}, cfg)
        for answer in ("A", "B"):
            out = app.invoke(Command(resume={i.id: answer for i in out["__interrupt__"]} if by_id else answer), cfg)
        assert out == {"q": "q?", "first": "A", "a": "B"}
        rec.flush()
        run_id = rec.last_run_id
    result = replay(run_id, _asks_then_calls_an_asking_subgraph(), db=db)
    assert not result.diverged, result.report()
    assert result.final_state == {"q": "q?", "first": "A", "a": "B"}


def test_subgraph_replays_from_its_own_step_not_from_its_start(db):
    run_id = record(db, G.sub_graph(), {"n": 1})
    store = open_store(db)
    try:
        child = next(n for n in store.namespaces(run_id) if n)
        after_s1 = next(s.step for s in store.list_steps(run_id, child) if "s1" in s.nodes)
    finally:
        store.close()
    result = replay(run_id, G.sub_graph(), from_step=after_s1, ns=child, db=db)
    assert not result.diverged, result.report()
    assert result.served == {"tool": 1, "model": 0}  # s3's call; s1 did not run again
    store = open_store(db)
    try:
        sub_ns = [n for n in store.namespaces(result.run_id) if n]
        assert [ns_path(n) for n in sub_ns] == ["child"]
        nodes = [t.node for d in store.step_details(result.run_id, sub_ns[0]) for t in d.tasks]
        assert "s1" not in nodes and "s3" in nodes
        assert result.final_state["n"] == ((1 * 2) + 1) * 2
    finally:
        store.close()


@pytest.mark.parametrize("start", [None, -1], ids=["its first step", "its input step"])
def test_a_subgraph_replayed_from_its_start_goes_on_after_its_input(db, start):
    """A subgraph resumed at its input step is given its input again by its parent task, so its
    __start__ does not run as recorded: the replay starts at the step after, and says so when asked for the input step."""
    run_id = record(db, G.sub_graph(), {"n": 1})
    store = open_store(db)
    try:
        child = next(n for n in store.namespaces(run_id) if n)
        first = store.list_steps(run_id, child)[0]
    finally:
        store.close()
    assert (first.step, first.source) == (-1, "input")
    result = replay(run_id, G.sub_graph(), from_step=start, ns=child, db=db, require_all_used=True)
    assert not result.diverged, result.report()
    assert result.from_step == 0 and result.final_state["n"] == ((1 * 2) + 1) * 2
    assert [n for n in result.notes if "input step" in n] == ([] if start is None else [result.notes[0]])


def test_a_subgraph_replayed_from_its_middle_counts_its_remaining_steps_as_recorded(db):
    """A subgraph resumed in its own namespace counts its recursion limit from where it resumes,
    as the root does: what it reads of remaining_steps must be what it read when recorded."""
    parent = StateGraph(Budget)
    parent.add_node("inner", budget_graph())
    parent.add_edge(START, "inner")
    parent.add_edge("inner", END)
    graph = parent.compile()
    with Recorder(db) as rec:
        out = rec.attach(graph).invoke({"n": 0}, {"recursion_limit": 8})
        rec.flush()
        run_id = rec.last_run_id
    assert out["seen"][-1] == 1
    store = open_store(db)
    try:
        inner = next(n for n in store.namespaces(run_id) if n)
        steps = [s.step for s in store.list_steps(run_id, inner) if s.checkpoint_id and s.step >= 0]
    finally:
        store.close()
    assert len(steps) >= 4
    for step in steps:
        result = replay(run_id, graph, step, ns=inner, db=db)
        assert not result.diverged, f"from step {step}: {result.report()}"
        assert result.final_state["seen"] == out["seen"]


class Trail(TypedDict, total=False):
    trail: Annotated[list, operator.add]


def nested_subgraphs(changed: str | None = None) -> Any:
    """root (p1, child) > child (c1, grand, c2) > grand (g1, g2): a subgraph inside a subgraph."""

    def node(name: str) -> Any:
        return lambda s: {"trail": [name + ("!" if name == changed else "")]}

    def chain(names: list[str], subs: dict[str, Any]) -> Any:
        b = StateGraph(Trail)
        for name in names:
            b.add_node(name, subs.get(name) or node(name))
        b.add_edge(START, names[0])
        for a, c in zip(names, names[1:]):
            b.add_edge(a, c)
        b.add_edge(names[-1], END)
        return b.compile()

    grand = chain(["g1", "g2"], {})
    child = chain(["c1", "grand", "c2"], {"grand": grand})
    return chain(["p1", "child"], {"child": child})


def test_a_subgraph_inside_a_subgraph_replays_on_its_own_and_its_parents_go_on_from_where_they_were(db):
    """Replaying the innermost namespace resumes the subgraph holding it too: that one is compared
    from the step it was put back after, not from its start (a false "missing step -1" before)."""
    run_id = record(db, nested_subgraphs(), {"trail": []})
    store = open_store(db)
    try:
        inner = next(n for n in store.namespaces(run_id) if n.count("|") == 1)
        steps = [s.step for s in store.list_steps(run_id, inner) if s.checkpoint_id and s.step >= 0]
    finally:
        store.close()
    for step in steps:
        result = replay(run_id, nested_subgraphs(), step, ns=inner, db=db)
        assert not result.diverged, f"from step {step}: {result.report()}"
    later = replay(run_id, nested_subgraphs(changed="c2"), steps[0], ns=inner, db=db)  # after the inner one ends
    assert later.diverged and first(later).ns == ns_path(inner.split("|")[0]) and first(later).node == "c2"
    inside = replay(run_id, nested_subgraphs(changed="g2"), steps[0], ns=inner, db=db)
    assert inside.diverged and first(inside).ns == ns_path(inner) and first(inside).node == "g2"


def test_replay_works_on_postgresql(pg_url):
    run_id = record(pg_url, G.fan_graph(), {"items": [4, 5]})
    assert not replay(run_id, G.fan_graph(), db=pg_url).diverged
    changed = replay(run_id, G.fan_graph(offset=1), db=pg_url)
    assert first(changed).kind == "arguments"


# -- each kind of divergence is detected and named ---------------------------------------------


def test_changed_command_goto_is_a_route_divergence(db):
    run_id = record(db, G.cmd_graph(threshold=5), {"x": 9})
    result = replay(run_id, G.cmd_graph(threshold=10), db=db)
    d = first(result, "route")
    assert d.node == "router"
    assert d.recorded[0]["destinations"] == ["big"] and d.actual[0]["destinations"] == ["small"]
    assert "small" in d.what and "big" in d.what


def test_changed_router_return_is_a_route_divergence_naming_the_router(db):
    run_id = record(db, G.chat_graph(), {"messages": [("user", "21?")]})
    result = replay(run_id, G.chat_graph(stop_word=""), db=db)  # ends where it used to call tools
    d = first(result, "route")
    assert d.node == "agent" and d.step == 1
    assert d.recorded[0]["router"] == "should_continue"
    assert d.recorded[0]["returned"] == "tools" and d.actual[0]["returned"] == "__end__"
    assert "should_continue" in d.headline() or "should_continue" in d.what


def test_tool_called_with_other_arguments_is_an_arguments_divergence_with_candidates(db):
    run_id = record(db, G.fan_graph(), {"items": [1, 2, 3]})
    result = replay(run_id, G.fan_graph(offset=1), db=db)
    d = first(result, "arguments")
    assert d.node == "worker"
    assert d.candidates and d.candidates[0]["differs"] == ["arguments"]
    assert d.actual in ({"x": 2}, {"x": 3}, {"x": 4})
    assert "has no matching recording" in d.what
    assert "closest recorded call" in d.render()


def test_changed_state_value_is_a_state_divergence_in_the_subgraph(db):
    run_id = record(db, G.sub_graph(step_add=1), {"n": 1})
    result = replay(run_id, G.sub_graph(step_add=2), db=db)
    d = first(result, "state")
    assert d.ns == "child" and d.node == "s2"
    assert (d.recorded, d.actual) == (3, 4)
    assert "-3" in d.diff and "+4" in d.diff


def test_model_answer_changed_in_tools_mode_is_a_call_divergence(db):
    run_id = record(db, G.chat_graph(G.chat_script(final="42")), {"messages": [("user", "21?")]})
    result = replay(run_id, G.chat_graph(G.chat_script(final="forty-two")), mode="tools", db=db)
    d = first(result, "call")
    assert d.node == "agent"
    assert d.recorded["content"] == "42" and d.actual["content"] == "forty-two"
    assert result.served["tool"] == 2 and result.served["model"] == 0


def test_extra_tool_call_is_an_extra_divergence(db):
    run_id = record(db, G.fan_graph(), {"items": [1]})

    def worker(state):  # now also calls `halve`

        G.halve.invoke({"x": 10})
        return {"results": [G.double.invoke({"x": state["items"][0]})]}

    b = StateGraph(G.FanState)
    b.add_node("plan", lambda s: {})
    b.add_node("worker", worker)
    b.add_edge(START, "plan")
    def fan(state):
        return [G.Send("worker", {"items": [i]}) for i in state["items"]]

    b.add_conditional_edges("plan", fan, ["worker"])
    b.add_edge("worker", END)
    result = replay(run_id, b.compile(), db=db)
    d = first(result, "extra")
    assert d.node == "worker" and "halve" in d.what


def test_other_nodes_in_a_step_is_a_route_divergence(db):
    run_id = record(db, G.fan_graph(), {"items": [1, 2]})

    def fan(state):  # now sends only the first item
        return [G.Send("worker", {"items": [i]}) for i in state["items"][:1]]

    def worker(state):
        return {"results": [G.double.invoke({"x": state["items"][0]})]}

    b = StateGraph(G.FanState)
    b.add_node("plan", lambda s: {})
    b.add_node("worker", worker)
    b.add_edge(START, "plan")
    b.add_conditional_edges("plan", fan, ["worker"])
    b.add_edge("worker", END)
    result = replay(run_id, b.compile(), db=db, require_all_used=True)
    kinds = {d.kind for d in result.divergences}
    assert "route" in kinds and "missing" in kinds, result.report()
    missing = next(d for d in result.divergences if d.kind == "missing")
    assert "double" in missing.what


def _fanned(packets):
    """plan sends ``packets(items)`` (items) to `worker`, one Send each; each worker doubles its item."""
    b = StateGraph(G.FanState)
    b.add_node("plan", lambda s: {})
    b.add_node("worker", lambda s: {"results": [2 * s["items"][0]]})

    def fan(state):
        return [G.Send("worker", {"items": [i]}) for i in packets(state["items"])]

    b.add_edge(START, "plan")
    b.add_conditional_edges("plan", fan, ["worker"])
    b.add_edge("worker", END)
    return b.compile()


def test_a_fan_out_that_sends_fewer_packets_to_a_node_says_how_many(db):
    run_id = record(db, _fanned(lambda items: items), {"items": [1, 2, 3]})
    result = replay(run_id, _fanned(lambda items: items[:2]), db=db)
    d = next(d for d in result.divergences if d.kind == "route" and d.node == "plan")
    # The same node either way: what changed is how many packets went to it.
    assert d.what == "route (fan) sent 2× worker instead of 3×", result.report()


def test_a_router_whose_packets_differ_past_the_headlines_cut_shows_where(db):
    run_id = record(db, _fanned(lambda items: items), {"items": [1, 2, 3]})
    result = replay(run_id, _fanned(lambda items: [*items[:-1], 30]), db=db)  # the last packet's item only
    d = next(d for d in result.divergences if d.kind == "route" and d.node == "plan")
    assert d.what.startswith("router (fan) returned …") and d.what.endswith("(same destinations)"), d.what
    shown, _, was = d.what.partition(" instead of ")
    assert '"items": [30]' in shown and '"items": [3]' in was, d.what


def test_recorded_calls_never_made_are_reported_only_when_required(db):
    run_id = record(db, G.chat_graph(), {"messages": [("user", "21?")]})
    # Without `halve` the ToolNode answers that call with an error message: the call is never made.
    relaxed = replay(run_id, G.chat_graph(node_tools=(G.double,)), db=db)
    required = replay(run_id, G.chat_graph(node_tools=(G.double,)), db=db, require_all_used=True)
    assert not any(d.kind == "missing" and "halve" in d.what for d in relaxed.divergences)
    assert any(d.kind == "missing" and "halve" in d.what for d in required.divergences), required.report()
    assert "halve" in [u["name"] for u in required.unused_calls]


def test_first_divergence_is_flagged_once_and_ordered_by_step(db):
    run_id = record(db, G.sub_graph(step_add=1), {"n": 1})
    result = replay(run_id, G.sub_graph(step_add=2), db=db)
    assert [d.first for d in result.divergences].count(True) == 1
    steps = [d.step for d in result.divergences if d.step is not None]
    assert steps == sorted(steps)
    assert result.report().splitlines()[1].startswith("FIRST ")


# -- errors, overrides, node mocks --------------------------------------------------------------


class CustomToolError(Exception):
    pass


class ErrState(TypedDict, total=False):
    caught: str


def erroring_graph(counter: list[int]):
    @tool
    def flaky(q: str) -> str:
        """Fails the way it failed in production."""
        counter.append(1)
        raise CustomToolError("upstream 503") if q == "custom" else ValueError("bad q")

    def node(state: ErrState) -> dict:
        out = []
        for q in ("plain", "custom"):
            try:
                flaky.invoke({"q": q})
            except ValueError as exc:  # must be a real ValueError again on replay
                out.append(f"ValueError:{exc}")
            except Exception as exc:  # noqa: BLE001
                out.append(f"{type(exc).__name__}:{exc}")
        return {"caught": "|".join(out)}

    b = StateGraph(ErrState)
    b.add_node("node", node)
    b.add_edge(START, "node")
    b.add_edge("node", END)
    return b.compile()


def test_recorded_tool_errors_are_raised_again_with_type_and_message(db):
    live_calls: list[int] = []
    run_id = record(db, erroring_graph(live_calls), {})
    assert len(live_calls) == 2
    result = replay(run_id, erroring_graph(live_calls), db=db)
    assert not result.diverged, result.report()
    assert len(live_calls) == 2  # answered from the recording
    assert result.final_state["caught"] == "ValueError:bad q|CustomToolError:upstream 503"


def test_override_answers_a_tool_with_the_users_function(db):
    run_id = record(db, G.chat_graph(), {"messages": [("user", "21?")]})
    result = replay(run_id, G.chat_graph(), db=db, overrides={"double": lambda x: 1000 + x})
    d = first(result)
    assert d.kind in ("state", "call")
    tool_messages = [m for m in result.final_state["messages"] if m.type == "tool"]
    assert "1021" in {m.content for m in tool_messages}
    # The divergence reads as the state the answer changed: the report names its cause beside it.
    store = open_store(db)
    step = next(c.step for c in store.calls(run_id) if c.name == "double")
    store.close()
    assert result.notes == [f"'double' was answered by its override (1 call: step {step} in 'tools')"], result.notes
    assert result.report().splitlines()[1] == f"note: {result.notes[0]}"


class IoState(TypedDict, total=False):
    fetched: str
    summary: str


def io_graph(hits: list[int]):
    def fetch(state: IoState) -> dict:
        hits.append(1)  # stands for a network read the replay must not repeat
        return {"fetched": f"page-{len(hits)}"}

    b = StateGraph(IoState)
    b.add_node("fetch", fetch)
    b.add_node("summarize", lambda s: {"summary": s["fetched"].upper()})
    b.add_edge(START, "fetch")
    b.add_edge("fetch", "summarize")
    b.add_edge("summarize", END)
    return b.compile()


def test_mocked_node_serves_its_recorded_update(db):
    hits: list[int] = []
    run_id = record(db, io_graph(hits), {})
    unmocked = replay(run_id, io_graph(hits), db=db)
    assert first(unmocked, "state").what.startswith("state key 'fetched'")
    before = len(hits)
    mocked = replay(run_id, io_graph(hits), db=db, mock_nodes=["fetch"])
    assert not mocked.diverged, mocked.report()
    assert len(hits) == before and mocked.final_state["summary"] == "PAGE-1"
    with pytest.raises(ReplayError, match="cannot mock node"):
        replay(run_id, io_graph(hits), db=db, mock_nodes=["nope"])


# -- fork --------------------------------------------------------------------------------------------


def test_fork_applies_the_edit_through_the_reducers_and_keeps_lineage(db):
    run_id = record(db, G.cmd_graph(threshold=5), {"x": 9})
    store = open_store(db)
    try:
        start = next(s.step for s in store.list_steps(run_id) if "__start__" in s.nodes)
    finally:
        store.close()
    result = fork(run_id, G.cmd_graph(threshold=5), start, {"x": 1}, as_node="__start__", db=db)
    assert result.kind == "fork" and result.status == "ok"
    assert result.final_state["path"] == ["router", "small"]
    d = first(result, "route")
    assert d.node == "router"
    store = open_store(db)
    try:
        run = store.get_run(result.run_id)
        assert (run.parent_run_id, run.fork_step) == (run_id, start)
        edit = store.run_detail(result.run_id).fork_edit
        assert edit["update"] == {"x": 1} and edit["as_node"] == "__start__" and edit["kind"] == "fork"
        children = [r.id for r in store.list_runs() if r.parent_run_id == run_id]
        assert result.run_id in children
        # The fork's first recorded step is the edited state it started from.
        steps = store.list_steps(result.run_id)
        assert store.state_at(result.run_id, steps[0].step)["x"] == 1
    finally:
        store.close()


class TwoAsks(TypedDict, total=False):
    q: str
    n: int
    answers: list


def _ask_twice(s: TwoAsks) -> dict:
    from langgraph.types import interrupt

    return {"answers": [s["q"], interrupt("first?"), interrupt("second?")]}


def asking_graph():
    g = StateGraph(TwoAsks)
    g.add_node("prep", lambda s: {"n": 1})
    g.add_node("ask", _ask_twice)
    g.add_edge(START, "prep")
    g.add_edge("prep", "ask")
    g.add_edge("ask", END)
    return g.compile(checkpointer=InMemorySaver())


@pytest.mark.parametrize("mode", ["strict", "live"])
def test_a_fork_before_an_interrupt_answers_it_as_recorded(db, mode):
    """The fork's edit is one more root step in the replay: the recorded resumes are found all the same."""
    cfg = {"configurable": {"thread_id": "asked"}}
    with Recorder(db) as rec:
        g = rec.attach(asking_graph())
        g.invoke({"q": "go"}, cfg)
        g.invoke(Command(resume="yes"), cfg)
        assert g.invoke(Command(resume="sure"), cfg)["answers"] == ["go", "yes", "sure"]
        rec.flush()
        run_id = rec.last_run_id
    store = open_store(db)
    try:
        prep = next(s.step for s in store.list_steps(run_id) if s.nodes == ["prep"])
    finally:
        store.close()
    result = fork(run_id, asking_graph(), prep, {"q": "edited"}, db=db, mode=mode)
    assert result.status == "ok", result.report()
    assert result.final_state["answers"] == ["edited", "yes", "sure"]


class NoteInput(BaseModel):
    text: str


def _note(text: str, runtime: ToolRuntime) -> str:
    return f"noted {text} for {runtime.tool_call_id}"


def runtime_tool():
    """A tool whose explicit args_schema leaves out the ToolRuntime its function takes, as
    langchain's TodoListMiddleware builds write_todos: LangChain keeps it from the callbacks."""
    return StructuredTool.from_function(_note, name="note", description="Take a note.", args_schema=NoteInput)


def test_a_tool_given_a_runtime_outside_its_args_schema_replays_clean(db):
    script = [AIMessage(content="", tool_calls=[G.tool_call("note", "c1", text="hi")]), AIMessage(content="done")]
    run_id = record(db, G.chat_graph(script, tools=[runtime_tool()]), {"messages": [HumanMessage("note hi")]})
    store = open_store(db)
    try:
        assert [c.inputs for c in store.calls(run_id) if c.kind == "tool"] == [{"text": "hi"}]
    finally:
        store.close()
    result = replay(run_id, G.chat_graph(script, tools=[runtime_tool()]), db=db, mode="strict")
    assert not result.diverged, result.report()
    assert result.served == {"tool": 1, "model": 2}


class Loops(TypedDict):
    n: int


def _completed_steps(db: str, run_id: str, ns: str = "") -> list[int]:
    """The steps of a run (of a namespace) a replay can start from."""
    store = open_store(db)
    try:
        return [s.step for s in store.list_steps(run_id, ns) if s.checkpoint_id]
    finally:
        store.close()


def looping_graph():
    """Loops while ``n`` is below the configurable ``loops`` (default 2): a node and a router read the run's config."""

    def more(s: Loops, config) -> str:
        return "work" if s["n"] < config["configurable"].get("loops", 2) else END

    b = StateGraph(Loops)
    b.add_node("work", lambda s: {"n": s["n"] + 1})
    b.add_edge(START, "work")
    b.add_conditional_edges("work", more, ["work", END])
    return b.compile()


@pytest.mark.parametrize("bind", ["after attach", "before attach"])
def test_config_bound_with_with_config_is_recorded_with_the_run(db, bind):
    """``graph.with_config(...)`` values reach the nodes as a call's config does: recorded with the
    run, so the graph replays the same without the binding (``--graph agent.py:graph``)."""
    bound = {"configurable": {"loops": 4}, "recursion_limit": 50}
    with Recorder(db) as rec:
        g = rec.attach(looping_graph()).with_config(bound) if bind == "after attach" else rec.attach(looping_graph().with_config(bound))
        assert g.invoke({"n": 0}) == {"n": 4}
        rec.flush()
        run_id = rec.last_run_id
    store = open_store(db)
    try:
        config = store.run_detail(run_id).config
    finally:
        store.close()
    assert config["configurable"]["loops"] == 4 and config["recursion_limit"] == 50
    result = replay(run_id, looping_graph(), db=db, mode="strict")
    assert not result.diverged, result.report()
    assert result.final_state == {"n": 4}


def test_a_bound_recursion_limit_stops_the_replay_where_it_stopped_the_run(db):
    with Recorder(db) as rec:
        g = rec.attach(looping_graph()).with_config(configurable={"loops": 100}, recursion_limit=5)
        with pytest.raises(Exception, match="[Rr]ecursion"):
            g.invoke({"n": 0})
        rec.flush()
        run_id = rec.last_run_id
    result = replay(run_id, looping_graph(), db=db, mode="strict")
    assert not result.diverged, result.report()
    assert result.status == "error"


class Budget(TypedDict, total=False):
    n: int
    seen: list
    remaining_steps: RemainingSteps


def budget_graph():
    """Loops until LangGraph says one step remains, noting what it said each time."""
    b = StateGraph(Budget)
    b.add_node("work", lambda s: {"n": s["n"] + 1, "seen": [*s.get("seen", []), s["remaining_steps"]]})
    b.add_edge(START, "work")
    b.add_conditional_edges("work", lambda s: END if s["remaining_steps"] <= 1 else "work", ["work", END])
    return b.compile()


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_a_run_that_met_its_recursion_limit_replays_from_every_step(db, is_async):
    """From a step near the end, the limit left is below 1, which LangGraph refuses: the replay
    still stops, and counts remaining steps, where the recording did."""
    graphs = {"runaway": looping_graph, "budget": budget_graph}
    runs = {}
    with Recorder(db) as rec:
        for name, build in graphs.items():
            g = rec.attach(build(), name=name)
            inputs, config = {"n": 0}, {"configurable": {"loops": 100}, "recursion_limit": 6}
            try:
                asyncio.run(g.ainvoke(inputs, config)) if is_async else g.invoke(inputs, config)
            except Exception as exc:  # noqa: BLE001
                assert name == "runaway" and "Recursion limit of 6" in str(exc)
            rec.flush()
            runs[name] = rec.last_run_id
    store = open_store(db)
    try:
        steps = {name: [s.step for s in store.list_steps(run_id) if s.checkpoint_id] for name, run_id in runs.items()}
    finally:
        store.close()
    assert steps["runaway"][-1] == 6 and steps["budget"][-1] >= 5
    for name, run_id in runs.items():
        for step in steps[name]:
            result = replay(run_id, graphs[name](), step, db=db)
            assert not result.diverged, f"{name} from step {step}: {result.report()}"
            assert result.status == ("error" if name == "runaway" else "ok")


def test_a_run_that_went_on_after_its_recursion_limit_and_met_it_again_replays_from_every_step(db):
    """``invoke(None)`` after a GraphRecursionError starts at the thread's checkpoint, not at an
    input step: LangGraph counts its limit from one step later than a fresh run's."""
    config = {"configurable": {"thread_id": "again", "loops": 100}, "recursion_limit": 5}
    with Recorder(db) as rec:
        g = rec.attach(looping_graph().copy(update={"checkpointer": InMemorySaver()}))
        for inputs in ({"n": 0}, None):
            with pytest.raises(Exception, match="Recursion limit of 5"):
                g.invoke(inputs, config)
        rec.flush()
        run_id = rec.last_run_id
    steps = _completed_steps(db, run_id)
    assert steps[0] == 5 and steps[-1] == 12  # from the first run's last checkpoint to where the limit stopped it again
    for step in steps:
        result = replay(run_id, looping_graph(), step, db=db)
        assert not result.diverged and result.status == "error", f"from step {step}: {result.report()}"


class Item(TypedDict, total=False):
    item: str
    results: Annotated[list, operator.add]


class Batch(TypedDict, total=False):
    items: list
    results: Annotated[list, operator.add]


def _review(s: Item) -> dict:
    from langgraph.types import interrupt

    return {"results": [f"{s['item']}:{interrupt('approve ' + s['item'] + '?')}"]}


def reviewing_graph(checkpointer=None):
    """A Send per item into a subgraph whose node asks a person: parallel interrupts, answered by id."""
    inner = StateGraph(Item)
    inner.add_node("review", _review)
    inner.add_edge(START, "review")
    inner.add_edge("review", END)
    b = StateGraph(Batch)
    b.add_node("worker", inner.compile())
    b.add_conditional_edges(START, lambda s: [Send("worker", {"item": x}) for x in s["items"]], ["worker"])
    b.add_edge("worker", END)
    return b.compile(checkpointer=checkpointer)


def test_parallel_interrupts_in_subgraphs_answered_by_id_replay_with_their_own_answers(db):
    """``Command(resume={id: value})`` reaches only the waiting subgraph tasks: the replay finds each
    answer there, and gives it to the same Send packet's task, whatever order the interrupts come in."""
    cfg = {"configurable": {"thread_id": "batch"}}
    answers = {"approve a?": "yes", "approve b?": "no", "approve c?": "later"}
    with Recorder(db) as rec:
        g = rec.attach(reviewing_graph(InMemorySaver()))
        asked = g.invoke({"items": ["a", "b", "c"]}, cfg)["__interrupt__"]
        out = g.invoke(Command(resume={i.id: answers[i.value] for i in asked}), cfg)
        rec.flush()
        run_id = rec.last_run_id
    assert sorted(out["results"]) == ["a:yes", "b:no", "c:later"]
    for _ in range(3):
        result = replay(run_id, reviewing_graph(), db=db, mode="strict")
        assert result.status == "ok" and not result.diverged, result.report()
        assert sorted(result.final_state["results"]) == ["a:yes", "b:no", "c:later"]


def reviewing_inside_graph(checkpointer=None):
    """One subgraph task that fans out a Send per item inside it: every interrupt surfaces under the one root task."""
    inner = StateGraph(Batch)
    inner.add_node("review", _review)
    inner.add_conditional_edges(START, lambda s: [Send("review", {"item": x}) for x in s["items"]], ["review"])
    inner.add_edge("review", END)
    b = StateGraph(Batch)
    b.add_node("inner", inner.compile())
    b.add_edge(START, "inner")
    b.add_edge("inner", END)
    return b.compile(checkpointer=checkpointer)


@pytest.mark.parametrize("at_once", [True, False], ids=["all at once", "one at a time"])
def test_parallel_interrupts_inside_one_subgraph_replay_with_their_own_answers(db, at_once):
    """The answers are recorded in the subgraph's steps, all under one root task: each goes to the
    task that asks the question it answered, whatever order LangGraph lists the interrupts in."""
    cfg = {"configurable": {"thread_id": "inside"}}
    answers = {"approve a?": "yes", "approve b?": "no", "approve c?": "later"}
    with Recorder(db) as rec:
        g = rec.attach(reviewing_inside_graph(InMemorySaver()))
        out = g.invoke({"items": ["a", "b", "c"]}, cfg)
        while "__interrupt__" in out:
            asked = out["__interrupt__"] if at_once else out["__interrupt__"][:1]
            out = g.invoke(Command(resume={i.id: answers[i.value] for i in asked}), cfg)
        rec.flush()
        run_id = rec.last_run_id
    assert sorted(out["results"]) == ["a:yes", "b:no", "c:later"]
    for _ in range(4):
        result = replay(run_id, reviewing_inside_graph(), db=db, mode="strict")
        assert result.status == "ok" and not result.diverged, result.report()
        assert sorted(result.final_state["results"]) == ["a:yes", "b:no", "c:later"]


def remembering_graph():
    """A subgraph compiled with ``checkpointer=True`` (one namespace, its node's name, for every
    task that runs it) whose node calls a chat model: its history lasts across the thread's turns."""
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    class Echo(GenericFakeChatModel):
        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            from langchain_core.outputs import ChatGeneration, ChatResult

            return ChatResult(generations=[ChatGeneration(message=AIMessage(f"echo {messages[-1].content} ({len(messages)})"))])

    model = Echo(messages=iter(()))
    inner = StateGraph(G.ChatState)
    inner.add_node("reply", lambda s: {"messages": [model.invoke(s["messages"])]})
    inner.add_edge(START, "reply")
    inner.add_edge("reply", END)
    outer = StateGraph(G.ChatState)
    outer.add_node("memory", inner.compile(checkpointer=True))
    outer.add_edge(START, "memory")
    outer.add_edge("memory", END)
    return outer


def test_calls_inside_a_subgraph_with_its_own_memory_are_answered(db):
    cfg = {"configurable": {"thread_id": "remembering"}}
    with Recorder(db) as rec:
        g = rec.attach(remembering_graph().compile(checkpointer=InMemorySaver()))
        runs = []
        for turn in ("hi", "again"):
            g.invoke({"messages": [HumanMessage(turn)]}, cfg)
            rec.flush()
            runs.append(rec.last_run_id)
    for run_id in runs:
        result = replay(run_id, remembering_graph().compile(), db=db, mode="strict")
        assert result.status == "ok" and not result.diverged, result.report()
        assert result.served["model"] == 1


LEAKED_KEY = "sk-proj-AbCdEf0123456789AbCdEf0123456789"


def _leaky(s: Loops) -> dict:
    raise ValueError(f"provider refused api_key={LEAKED_KEY}")


def test_the_replays_own_error_is_scrubbed_as_the_recorded_one_is(db):
    """A replay's report goes to terminals and CI logs: the live exception's text in it is
    scrubbed of secrets, as the recorder scrubs the one it stores."""
    b = StateGraph(Loops)
    b.add_node("call", _leaky)
    b.add_edge(START, "call")
    with Recorder(db) as rec:
        with pytest.raises(ValueError):
            rec.attach(b.compile()).invoke({"n": 0})
        rec.flush()
        run_id = rec.last_run_id
    result = replay(run_id, b.compile(), db=db, mode="strict")
    assert not result.diverged, result.report()
    assert result.error.startswith("ValueError: provider refused") and "[REDACTED]" in result.error
    assert LEAKED_KEY not in result.report() and LEAKED_KEY not in json.dumps(result.to_dict())


def test_fork_with_a_bad_edit_is_a_clear_error(db):
    run_id = record(db, G.cmd_graph(), {"x": 9})
    with pytest.raises(ReplayError, match="cannot apply the edit"):
        fork(run_id, G.cmd_graph(), 0, {"x": 1}, as_node="no_such_node", db=db)


def _share_of(state: Loops) -> str:
    return "work" if 10 // state["n"] > 1 else END


def test_a_fork_whose_edit_fails_in_the_users_router_says_where(db):
    """An edit applied as a node runs that node's routers on the edited state: one that raises
    is the user's own code, and the error points at it, not only at what it raised."""
    b = StateGraph(Loops)
    b.add_node("work", lambda s: {"n": s["n"] - 1})
    b.add_edge(START, "work")
    b.add_conditional_edges("work", _share_of)
    run_id = record(db, b.compile(), {"n": 4})
    with pytest.raises(ReplayError) as caught:
        fork(run_id, b.compile(), 0, {"n": 0}, as_node="work", db=db)
    said = str(caught.value)
    assert said.startswith("cannot apply the edit at step 0: ZeroDivisionError: integer division or modulo by zero"), said
    assert "(raised at " in said and " in _share_of: " in said and "test_replay.py:" in said, said


# -- inputs and helpers ------------------------------------------------------------------------------


def test_bad_arguments_are_clear_errors(db):
    run_id = record(db, G.cmd_graph(), {"x": 9})
    with pytest.raises(ValueError, match="use one of 'strict', 'tools', 'live'"):
        replay(run_id, G.cmd_graph(), db=db, mode="loose")
    with pytest.raises(ReplayError, match="no completed step 42"):
        replay(run_id, G.cmd_graph(), from_step=42, db=db)
    with pytest.raises(ReplayError, match="compiled LangGraph graph"):
        replay(run_id, object(), db=db)
    with pytest.raises(ReplayError, match="empty path segment"):
        replay(run_id, G.cmd_graph(), db=db, ignore=["messages..id"])


def test_modes_answer_the_right_kinds():
    assert ReplayMode.parse("strict").answers("model") and ReplayMode.parse("strict").answers("tool")
    assert ReplayMode.TOOLS.answers("tool") and not ReplayMode.TOOLS.answers("model")
    assert not ReplayMode.LIVE.answers("tool")


def test_normalizer_drops_volatile_ids_and_ignored_paths():
    msg = {"type": "ai", "content": "hi", "id": "run-1", "tool_calls": [{"name": "t", "args": {}, "id": "call_9"}], "response_metadata": {"created": 1}}
    n = Normalizer(["meta.*.at", "**.stamp"])
    out = n({"messages": [msg], "meta": {"a": {"at": 1, "keep": 2}}, "deep": {"x": {"stamp": 3}}})
    assert out["messages"] == [{"type": "ai", "content": "hi", "tool_calls": [{"name": "t", "args": {}}]}]
    assert out["meta"] == {"a": {"at": IGNORED, "keep": 2}}
    assert out["deep"] == {"x": {"stamp": IGNORED}}
    only_a = Normalizer(keys=["a"])
    assert only_a({"a": 1, "b": 2}) == only_a({"a": 1, "b": 3})
    assert ns_path("a:1f|b:2c") == "a|b" and ns_path("") == ""


class StampState(TypedDict, total=False):
    answer: str
    meta: dict


_STAMPS = itertools.count()


def stamped_graph():
    def node(state: StampState) -> dict:
        return {"answer": "ok", "meta": {"at": f"t{next(_STAMPS)}", "source": "db"}}  # differs on every run

    b = StateGraph(StampState)
    b.add_node("node", node)
    b.add_edge(START, "node")
    b.add_edge("node", END)
    return b.compile()


def test_ignore_paths_and_state_keys_limit_the_comparison(db):
    run_id = record(db, stamped_graph(), {})
    assert first(replay(run_id, stamped_graph(), db=db), "state").what == "state key 'meta' differs"
    assert not replay(run_id, stamped_graph(), db=db, ignore=["meta.at"]).diverged
    assert not replay(run_id, stamped_graph(), db=db, state_keys=["answer"]).diverged


def test_fork_inside_a_subgraph_edits_its_own_step(db):
    run_id = record(db, G.sub_graph(), {"n": 1})
    store = open_store(db)
    try:
        child = next(n for n in store.namespaces(run_id) if n)
        after_s2 = next(s.step for s in store.list_steps(run_id, child) if "s2" in s.nodes)
    finally:
        store.close()
    result = fork(run_id, G.sub_graph(), after_s2, {"n": 100}, as_node="s2", ns=child, mode="strict", db=db)
    assert result.status == "ok", result.report()
    assert result.final_state["n"] == 200  # s3 doubled the edited value; s1 and s2 did not run again
    d = first(result)
    assert d.kind in ("arguments", "state") and d.ns == "child"
    store = open_store(db)
    try:
        nodes = [t.node for n in store.namespaces(result.run_id) if n for d in store.step_details(result.run_id, n) for t in d.tasks]
        assert nodes.count("s1") == 0 and nodes.count("s3") == 1
    finally:
        store.close()


def test_a_node_that_streams_its_model_is_answered_from_the_recording(db):
    def graph(script):
        model = G.ScriptedChatModel(script=script)

        def agent(state: G.ChatState) -> dict:
            chunks = list(model.stream(state["messages"]))
            message = chunks[0]
            for c in chunks[1:]:
                message = message + c
            return {"messages": [G.AIMessage(content=message.content)]}

        b = StateGraph(G.ChatState)
        b.add_node("agent", agent)
        b.add_edge(START, "agent")
        b.add_edge("agent", END)
        return b.compile()

    run_id = record(db, graph(["a streamed answer, in many chunks"]), {"messages": [("user", "hi")]})
    result = replay(run_id, graph([]), db=db)  # an empty script would fail if asked live
    assert not result.diverged, result.report()
    assert result.served["model"] == 1
    assert result.final_state["messages"][-1].content == "a streamed answer, in many chunks"


def test_to_step_replays_a_window_and_compares_only_inside_it(db):
    run_id = record(db, G.chat_graph(), {"messages": [("user", "21?")]})
    window = replay(run_id, G.chat_graph(), to_step=2, db=db)
    assert not window.diverged, window.report()
    assert window.status == "ok"
    assert window.served == {"tool": 2, "model": 1}  # the final model turn (step 3) is outside
    store = open_store(db)
    try:
        assert max(s.step for s in store.list_steps(window.run_id)) == 2
    finally:
        store.close()
    changed = replay(run_id, G.chat_graph(G.chat_script(final="other")), mode="tools", to_step=2, db=db)
    assert not changed.diverged, changed.report()  # the changed answer comes after the window


def test_progress_is_reported_per_superstep(db):
    run_id = record(db, G.chat_graph(), {"messages": [("user", "21?")]})
    seen: list[tuple[str, int, int | None]] = []
    result = replay(run_id, G.chat_graph(), db=db, progress=lambda phase, done, total: seen.append((phase, done, total)))
    assert not result.diverged
    steps = [done for phase, done, _ in seen if phase == "replaying supersteps"]
    assert steps == sorted(steps) and steps[-1] == seen[0][2] == 4  # steps 0..3 after the input step
    assert seen[-1][0] == "comparing with the recording"


def test_fork_in_live_mode_compares_only_calls_after_the_fork(db):
    run_id = record(db, G.chat_graph(), {"messages": [("user", "21?")]})
    store = open_store(db)
    try:
        after_tools = next(s.step for s in store.list_steps(run_id) if "tools" in s.nodes)
    finally:
        store.close()
    result = fork(run_id, G.chat_graph(), after_tools, {"messages": [("user", "and now?")]}, as_node="tools", db=db)
    assert not [d for d in result.divergences if d.kind == "missing" and d.step is not None and d.step <= after_tools], result.report()


class Handoff(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    note: str


def handoff_graph():
    """Agent ``a`` (a subgraph) hands off to root node ``b`` with Command(graph=Command.PARENT)."""
    inner = StateGraph(Handoff)
    inner.add_node("decide", lambda s: Command(graph=Command.PARENT, goto="b", update={"log": ["a handed off"]}))
    inner.add_edge(START, "decide")
    b = StateGraph(Handoff)
    b.add_node("a", inner.compile(), destinations=("b",))
    b.add_node("b", lambda s: {"log": [f"b saw {s.get('note', 'nothing')}"]})
    b.add_edge(START, "a")
    b.add_edge("b", END)
    return b.compile()


def test_a_fork_after_a_handoff_to_the_parent_goes_where_the_handoff_went(db):
    """The handoff is the root node's route (kind parent-command): the edit is applied as that
    node's Command with the recorded goto, so the fork runs ``b`` instead of stopping after it."""
    run_id = record(db, handoff_graph(), {"log": []})
    store = open_store(db)
    try:
        after_a = next(s.step for s in store.list_steps(run_id) if s.nodes == ["a"])
        assert [r.kind for r in store.step_detail(run_id, after_a).routes] == ["parent-command"]
    finally:
        store.close()
    result = fork(run_id, handoff_graph(), after_a, {"note": "the edit"}, db=db)
    assert result.error is None, result.report()
    assert result.final_state["log"][-1] == "b saw the edit", result.final_state
    assert not [d for d in result.divergences if d.kind == "missing"], result.report()


def test_last_means_the_newest_recorded_run_not_a_replay(db):
    run_id = record(db, G.cmd_graph(), {"x": 9})
    result = replay(run_id, G.cmd_graph(), db=db)
    store = open_store(db)
    try:
        assert store.resolve_run("last") == run_id
        assert store.get_run(result.run_id).parent_run_id == run_id
    finally:
        store.close()


def test_send_packets_carrying_the_history_compare_equal_and_changed_ones_diverge(db):
    run_id = record(db, G.send_history_graph(), {"messages": [HumanMessage(content=f"hello {i}") for i in range(9)], "done": 0})
    assert not replay(run_id, G.send_history_graph(), db=db).diverged  # message ids differ: stored differently, equal once normalized
    result = replay(run_id, G.send_history_graph(suffix="!"), db=db)
    d = first(result, "route")
    assert d.node == "talk" and "same destinations" in d.what
    sent = [s["arg"]["messages"][-1]["content"] for s in d.actual[0]["sends"]]
    assert sent == ["task 0!", "task 1!"]
    assert [s["arg"]["messages"][-1]["content"] for s in d.recorded[0]["sends"]] == ["task 0", "task 1"]


def test_a_secret_the_replay_makes_is_redacted_though_recorded_text_is_not_scanned_again(db):
    key = "sk-" + "Zq9Xw8Vu7Ts6Rq5Po4Nm3Lk2"
    run_id = record(db, G.chat_graph(), {"messages": [("user", "21?")]})
    result = replay(run_id, G.chat_graph(), db=db, overrides={"double": lambda x: f"{x} {key}"})
    assert any(m.type == "tool" and m.content == "21 [REDACTED]" for m in result.final_state["messages"])  # the override answered
    store = open_store(db)
    try:
        stored = json.dumps(store.state_at(result.run_id, store.list_steps(result.run_id)[-1].step))
        recorded = json.dumps(store.state_at(run_id, store.list_steps(run_id)[-1].step))
    finally:
        store.close()
    assert key not in stored and "21 [REDACTED]" in stored  # the replay's own new text is scrubbed
    assert "21?" in stored and "21?" in recorded  # the recording's text is kept as it was


# -- a run that went on after an error: the tasks that had finished are carried over ----------


class Logged(TypedDict):
    log: Annotated[list, operator.add]


def _parallel_with_a_flaky_branch(fetches: list[str], fail: dict[str, bool]):
    """``a`` calls a tool, ``b`` fails while ``fail["b"]``; both run in one step, then ``c``."""

    @tool
    def fetch(q: str) -> str:
        """Fetch something."""
        fetches.append(q)
        return f"data for {q}"

    def b(state):
        if fail["b"]:
            raise RuntimeError("flaky service")
        return {"log": ["b ok"]}

    g = StateGraph(Logged)
    g.add_node("a", lambda s: {"log": [fetch.invoke({"q": "x"})]})
    g.add_node("b", b)
    g.add_node("c", lambda s: {"log": ["c"]})
    g.add_edge(START, "a")
    g.add_edge(START, "b")
    g.add_edge(["a", "b"], "c")
    g.add_edge("c", END)
    return g.compile(checkpointer=InMemorySaver())


def _failed_once(rec: Recorder, fetches: list[str], fail: dict[str, bool]) -> tuple[Any, dict]:
    """The flaky graph recorded failing once on thread ``t``, then made to succeed."""
    app = rec.attach(_parallel_with_a_flaky_branch(fetches, fail))
    config = {"configurable": {"thread_id": "t"}}
    with pytest.raises(RuntimeError, match="flaky"):
        app.invoke({"log": []}, config)
    fail["b"] = False
    return app, config


@pytest.mark.parametrize("mode", ["strict", "live"])
def test_a_run_that_went_on_after_an_error_replays_without_rerunning_finished_tasks(db, mode, capsys):
    fetches: list[str] = []
    fail = {"b": True}
    with Recorder(db) as rec:
        app, config = _failed_once(rec, fetches, fail)
        assert app.invoke(None, config)["log"] == ["data for x", "b ok", "c"]
        rec.flush()
        run_id = rec.last_run_id
    assert fetches == ["x"]  # LangGraph did not run `a` again: it applied what it wrote before the error
    store = open_store(db)
    try:
        step = store.step_detail(run_id, 1, typed=True)
        carried = {t.node: t.carried for t in step.tasks}
        assert carried["a"] is not None and ["log", ["data for x"]] in carried["a"] and carried["b"] is None
    finally:
        store.close()
    from graphtape.tui.cli import main

    assert main(["--db", db, "show", run_id, "--step", "1"]) == 0
    heads = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.startswith("  ") and " task " in line}
    assert "carried from an earlier run" in heads["a"] and "carried" not in heads["b"]
    result = replay(run_id, _parallel_with_a_flaky_branch(fetches, fail), db=db, mode=mode)
    assert not result.diverged, result.report()
    assert fetches == ["x"]  # live or answered, the replay did not run `a` either
    assert result.final_state["log"] == ["data for x", "b ok", "c"]


@pytest.mark.parametrize("mode", ["strict", "live"])
def test_a_run_sent_back_to_an_earlier_checkpoint_reruns_its_tasks_and_replays_so(db, mode):
    """Time travel: ``invoke(None, config)`` addressed to a past checkpoint. LangGraph forks there
    and runs the next step's tasks again, even those that had finished before an error."""
    fetches: list[str] = []
    fail = {"b": True}
    with Recorder(db) as rec:
        app, config = _failed_once(rec, fetches, fail)
        before = next(s for s in app.get_state_history(config) if set(s.next) == {"a", "b"})
        assert app.invoke(None, before.config)["log"] == ["data for x", "b ok", "c"]
        rec.flush()
        run_id = rec.last_run_id
    assert fetches == ["x", "x"]  # `a` ran again: its earlier write was not applied
    store = open_store(db)
    try:
        steps = store.list_steps(run_id)
        ran = {t.node: t.carried for s in steps for t in store.step_detail(run_id, s.step, typed=True).tasks}
        assert ran.keys() == {"a", "b", "c"} and not any(ran.values())
        assert not any(s.flags & FLAG_CARRIED for s in steps)
    finally:
        store.close()
    result = replay(run_id, _parallel_with_a_flaky_branch(fetches, fail), db=db, mode=mode)
    assert not result.diverged, result.report()
    assert fetches == (["x", "x", "x"] if mode == "live" else ["x", "x"])
    assert result.final_state["log"] == ["data for x", "b ok", "c"]


def _retried_tool_graph(attempts: list[str]):
    """A ToolNode whose tool fails once with ConnectionError; the node's RetryPolicy runs it again
    (the same tool call, same id, same arguments): two recordings of one call, one failed."""
    from langgraph.types import RetryPolicy

    @tool
    def lookup(order: str) -> str:
        """Where an order is."""
        attempts.append(order)
        if len(attempts) == 1:
            raise ConnectionError("upstream reset")
        return f"{order}: shipped"

    model = G.ScriptedChatModel(script=[AIMessage(content="", tool_calls=[G.tool_call("lookup", "c1", order="A1")]), AIMessage(content="shipped")]).bind_tools([lookup])
    b = StateGraph(G.ChatState)
    b.add_node("agent", lambda s: {"messages": [model.invoke(s["messages"])]})
    b.add_node("tools", ToolNode([lookup]), retry_policy=RetryPolicy(retry_on=ConnectionError, initial_interval=0.01, jitter=False))
    b.add_edge(START, "agent")
    b.add_conditional_edges("agent", lambda s: "tools" if s["messages"][-1].tool_calls else END, ["tools", END])
    b.add_edge("tools", "agent")
    return b.compile()


def test_a_retried_tool_call_replays_its_failed_attempt_first(db):
    """The failed attempt keeps no tool-call id (that is read from the ToolMessage it never made):
    it must still answer the first live attempt, or the replay skips the failure and its retry."""
    attempts: list[str] = []
    with Recorder(db) as rec:
        out = rec.attach(_retried_tool_graph(attempts)).invoke({"messages": [HumanMessage(content="Where is A1?")]})
        rec.flush()
        run_id = rec.last_run_id
    assert attempts == ["A1", "A1"] and out["messages"][-1].content == "shipped"
    result = replay(run_id, _retried_tool_graph(attempts), db=db, require_all_used=True)
    assert not result.diverged, result.report()
    assert attempts == ["A1", "A1"]  # answered from the recording
    store = open_store(db)
    try:
        replayed = [(c.name, c.error_type) for c in store.calls(result.run_id) if c.kind == "tool"]
    finally:
        store.close()
    assert replayed == [("lookup", "ConnectionError"), ("lookup", None)]


def test_a_breakpoint_resumed_with_the_checkpoints_own_config_ends_ok_and_replays(db):
    """``invoke(None, graph.get_state(config).config)``: the config names the checkpoint the
    breakpoint left, so LangGraph forks there. The run finishes, and is recorded as finished."""
    b = StateGraph(Loops)
    b.add_node("one", lambda s: {"n": s["n"] + 1})
    b.add_node("two", lambda s: {"n": s["n"] * 10})
    b.add_edge(START, "one")
    b.add_edge("one", "two")
    b.add_edge("two", END)
    config = {"configurable": {"thread_id": "bp"}}
    with Recorder(db) as rec:
        g = rec.attach(b.compile(checkpointer=InMemorySaver(), interrupt_before=["two"]))
        g.invoke({"n": 1}, config)
        assert g.invoke(None, g.get_state(config).config) == {"n": 20}
        assert g.get_state(config).next == ()
        rec.flush()
        run_id = rec.last_run_id
    store = open_store(db)
    try:
        assert store.get_run(run_id).status == "ok"
    finally:
        store.close()
    fresh = b.compile(checkpointer=InMemorySaver(), interrupt_before=["two"])
    result = replay(run_id, fresh, db=db)
    assert not result.diverged and result.final_state == {"n": 20}, result.report()


@pytest.mark.parametrize("where", ["interrupt_before", "interrupt_after"])
def test_breakpoints_passed_to_invoke_stop_the_replay_where_they_stopped_the_run(db, where):
    nodes = {"interrupt_before": ["tools"], "interrupt_after": ["agent"]}[where]
    config = {"configurable": {"thread_id": "ib"}}
    with Recorder(db) as rec:
        app = rec.attach(G.chat_graph().copy(update={"checkpointer": InMemorySaver()}))
        app.invoke({"messages": [HumanMessage("go")]}, config, **{where: nodes})
        assert app.get_state(config).next == ("tools",)
        rec.flush()
        run_id = rec.last_run_id
    result = replay(run_id, G.chat_graph(), db=db, require_all_used=True)
    assert not result.diverged, result.report()
    assert result.served == {"tool": 0, "model": 1}


def _two_tasks(ran: list[str], fail: dict[str, bool]):
    from langgraph.func import entrypoint, task

    @task
    def first(x: int) -> int:
        ran.append("first")
        return x + 1

    @task
    def second(x: int) -> int:
        ran.append("second")
        if fail["second"]:
            raise RuntimeError("second broke")
        return x * 2

    @entrypoint(checkpointer=InMemorySaver())
    def both(x: int) -> int:
        return second(first(x).result()).result()

    return both


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_an_entrypoint_that_went_on_after_an_error_replays_without_rerunning_its_finished_task(db, durability):
    """A functional API's @task calls are not in LangGraph's state: the finished one is named as
    the failed run recorded it, carried, and handed back to LangGraph by the replay."""
    ran: list[str] = []
    fail = {"second": True}
    cfg = {"configurable": {"thread_id": "tasks"}}
    with Recorder(db, durability=durability) as rec:
        app = rec.attach(_two_tasks(ran, fail))
        with pytest.raises(RuntimeError, match="second broke"):
            app.invoke(3, cfg)
        fail["second"] = False
        assert app.invoke(None, cfg) == 8
        rec.flush()
        run_id = rec.last_run_id
    assert ran == ["first", "second", "second"]  # LangGraph did not run `first` again
    store = open_store(db)
    try:
        carried = {t.node: t.carried is not None for s in store.list_steps(run_id) for t in store.step_detail(run_id, s.step).tasks}
    finally:
        store.close()
    assert carried == {"both": False, "first": True, "second": False}
    result = replay(run_id, _two_tasks(ran, fail), db=db, require_all_used=True)
    assert not result.diverged, result.report()
    assert result.final_state == 8 and ran == ["first", "second", "second", "second"]


# -- graphs with no named state channels: their value is their state ---------------------------


def _entrypoint_graph(factor: int):
    from langgraph.func import entrypoint, task

    @task
    def scale(x: int) -> int:
        return x * factor + 1

    @entrypoint(checkpointer=InMemorySaver())
    def scaled(n: int, *, previous=None) -> int:
        y = scale(n).result()
        return entrypoint.final(value=y, save=y * 10)

    return scaled


def _root_value_graph(factor: int):
    b = StateGraph(Annotated[list, operator.add])
    b.add_node("a", lambda items: [factor])
    b.add_edge(START, "a")
    b.add_edge("a", END)
    return b.compile()


@pytest.mark.parametrize("shape", ["entrypoint", "root value"])
def test_a_graph_without_named_state_channels_is_compared_by_its_value(db, shape):
    """An entrypoint's return and saved value, a root-value StateGraph's list: the whole state.
    A strict replay, and a fixture replayed, must see a change in them."""
    from graphtape.replay.fixture import export_fixture, import_fixture

    build, inputs, output, changed = {
        "entrypoint": (_entrypoint_graph, 1, 2, 1001),
        "root value": (_root_value_graph, ["start"], ["start", 1], ["start", 1000]),
    }[shape]
    with Recorder(db) as rec:
        assert rec.attach(build(1)).invoke(inputs, {"configurable": {"thread_id": "v"}}) == output
        rec.flush()
        run_id = rec.last_run_id
    store = open_store(db)
    try:
        assert store.run_detail(run_id).output == output
        last = store.list_steps(run_id)[-1].step
        state = store.state_at(run_id, last)
        assert state == ({"__end__": 2, "__previous__": 20} if shape == "entrypoint" else {"__root__": output})
        fixture_run = import_fixture(store, export_fixture(store, run_id)).run_id
    finally:
        store.close()
    same = replay(run_id, build(1), db=db)
    assert not same.diverged, same.report()
    assert same.final_state == output
    for source in (run_id, fixture_run):
        result = replay(source, build(1000), db=db)
        assert result.diverged and result.final_state == changed
        assert {d.kind for d in result.divergences} == {"state"}, result.report()


# -- long-term memory: a replay reads the graph's store and never writes to it ------------------


class Remembered(TypedDict, total=False):
    note: str
    seen: str


def _remembering_graph():
    from langgraph.store.memory import InMemoryStore

    def remember(state, *, store):
        store.put(("notes",), "last", {"text": state["note"]})
        return {"seen": store.get(("notes",), "last").value["text"]}  # reads back its own write

    g = StateGraph(Remembered)
    g.add_node("remember", remember)
    g.add_edge(START, "remember")
    g.add_edge("remember", END)
    return g.compile(store=InMemoryStore())


@pytest.mark.parametrize("how", ["replay", "fork"])
def test_a_replay_or_fork_never_writes_to_the_graphs_store(db, how):
    run_id = record(db, _remembering_graph(), {"note": "tea"})
    graph = _remembering_graph()
    graph.store.put(("notes",), "last", {"text": "what production holds"})
    if how == "replay":
        result = replay(run_id, graph, db=db, mode="strict")
        assert not result.diverged, result.report()
        assert result.final_state["seen"] == "tea"  # the node saw its own write
    else:
        result = fork(run_id, graph, 0, {"note": "coffee"}, db=db)
        assert result.final_state["seen"] == "coffee"
    assert graph.store.get(("notes",), "last").value == {"text": "what production holds"}


# -- a replay answers its own calls only: another thread's model keeps running live ------------


class Asked(TypedDict, total=False):
    q: str
    a: str


def test_a_replay_leaves_model_calls_of_other_threads_live(db):
    import threading

    inside, done = threading.Event(), threading.Event()

    def build(wait: bool):
        model = G.ScriptedChatModel(script=lambda m: AIMessage("answer to " + m[-1].content), model_name="m")

        def ask(state):
            if wait:
                inside.set()
                done.wait(10)  # another thread calls its own model while this replay is in the node
            return {"a": model.invoke([HumanMessage(state["q"])]).content}

        g = StateGraph(Asked)
        g.add_node("ask", ask)
        g.add_edge(START, "ask")
        g.add_edge("ask", END)
        return g.compile()

    run_id = record(db, build(False), {"q": "hi"})
    other = G.ScriptedChatModel(script=lambda m: AIMessage("live"), model_name="unrelated")
    seen: dict[str, str] = {}

    def unrelated():
        inside.wait(10)
        try:
            seen["out"] = other.invoke([HumanMessage("a request of its own")]).content
        except BaseException as exc:  # noqa: BLE001 - a replay's miss is a BaseException
            seen["out"] = type(exc).__name__
        done.set()

    thread = threading.Thread(target=unrelated)  # there before the replay began: not the replay's
    thread.start()
    result = replay(run_id, build(True), db=db, mode="strict")
    thread.join(10)
    assert seen["out"] == "live"
    assert not result.diverged, result.report()


# -- identical calls made at once: each gets its own recorded answer ---------------------------


class Sampled(TypedDict, total=False):
    q: str
    samples: Annotated[list, operator.add]


WAITS = {"order": [0.0, 0.03, 0.06]}  # how long each Send's task waits before calling: reversed in the replay


def _sampling_graph():
    import time

    answers = itertools.count(1)  # a sampled model: the same prompt, another answer each call
    model = G.ScriptedChatModel(script=lambda m: AIMessage(f"sample-{next(answers)}"), model_name="sampler")

    def sample(state):
        time.sleep(WAITS["order"][state["i"]])
        return {"samples": [model.invoke([HumanMessage(state["q"])]).content]}

    g = StateGraph(Sampled)
    g.add_node("sample", sample)
    g.add_conditional_edges(START, lambda s: [Send("sample", {"q": s["q"], "i": i}) for i in range(3)], ["sample"])
    g.add_edge("sample", END)
    return g.compile()


def test_identical_calls_of_parallel_sends_get_their_own_answers(db):
    run_id = record(db, _sampling_graph(), {"q": "2+2?"})
    WAITS["order"] = [0.06, 0.03, 0.0]  # the tasks now ask in the other order
    try:
        result = replay(run_id, _sampling_graph(), db=db, mode="strict")
    finally:
        WAITS["order"] = [0.0, 0.03, 0.06]
    assert not result.diverged, result.report()
    assert result.final_state["samples"] == ["sample-1", "sample-2", "sample-3"]


def test_identical_calls_of_parallel_sends_keep_their_answers_through_a_fixture(db, tmp_path):
    """A fixture holds each such task's path, so its replay tells the twins apart too."""
    from graphtape.replay.fixture import dumps_fixture, parse_fixture

    run_id = record(db, _sampling_graph(), {"q": "2+2?"})
    fixture = parse_fixture(dumps_fixture(exported(db, run_id)))
    assert [t.get("path") is not None for t in fixture["steps"][1]["tasks"]] == [True, True, True]
    other = str(tmp_path / "ci.db")
    WAITS["order"] = [0.06, 0.03, 0.0]
    try:
        result = replay(imported(other, fixture), _sampling_graph(), db=other, mode="strict")
    finally:
        WAITS["order"] = [0.0, 0.03, 0.06]
    assert not result.diverged, result.report()
    assert result.final_state["samples"] == ["sample-1", "sample-2", "sample-3"]


class Rolled(TypedDict, total=False):
    rolls: list


ROLL_ORDER = {"ids": ["c0", "c1", "c2"]}


def _dice_graph():
    rolled = itertools.count(1)

    @tool
    def roll(sides: int) -> str:
        """Roll a die."""
        return str(next(rolled))

    def node(state):
        out = [roll.invoke({"name": "roll", "args": {"sides": 6}, "id": cid, "type": "tool_call"}) for cid in ROLL_ORDER["ids"]]
        return {"rolls": sorted(f"{m.tool_call_id}={m.content}" for m in out)}

    g = StateGraph(Rolled)
    g.add_node("node", node)
    g.add_edge(START, "node")
    g.add_edge("node", END)
    return g.compile()


def test_identical_tool_calls_are_told_apart_by_their_tool_call_id(db):
    run_id = record(db, _dice_graph(), {})
    ROLL_ORDER["ids"] = ["c2", "c0", "c1"]
    try:
        result = replay(run_id, _dice_graph(), db=db, mode="strict")
    finally:
        ROLL_ORDER["ids"] = ["c0", "c1", "c2"]
    assert not result.diverged, result.report()
    assert result.final_state["rolls"] == ["c0=1", "c1=2", "c2=3"]


class Visit(TypedDict, total=False):
    seen: str
    answer: str


def _thread_reader(ask: bool = False) -> Any:
    """A node that reads the run's thread id (a session key, say) into the state; with ``ask``,
    a second node waits on a human answer."""

    def who(state: Visit, config) -> dict:  # noqa: ANN001
        return {"seen": str(config["configurable"].get("thread_id"))}

    def approve(state: Visit) -> dict:
        return {"answer": interrupt("ok?")}

    b = StateGraph(Visit)
    b.add_node("who", who)
    b.add_edge(START, "who")
    if ask:
        b.add_node("approve", approve)
        b.add_edge("who", "approve")
        b.add_edge("approve", END)
    else:
        b.add_edge("who", END)
    return b.compile(checkpointer=InMemorySaver() if ask else None)


def test_a_replay_runs_on_the_thread_the_recording_saw(tmp_path):
    """A node that reads its thread id replays clean: the replay's saver is its own, so it runs
    on the recorded thread's id."""
    db = tmp_path / "gt.db"
    with Recorder(db) as rec:
        graph = rec.attach(_thread_reader(), name="who")
        assert graph.invoke({}, {"configurable": {"thread_id": "user-42"}}) == {"seen": "user-42"}
        run_id = rec.last_run_id
    result = replay(run_id, _thread_reader(), db=db, mode="strict")
    assert not result.diverged, result.report()
    assert result.final_state == {"seen": "user-42"}


def test_a_replay_on_the_recorded_thread_never_continues_the_recorded_run(tmp_path):
    """The recording stopped at a question on thread t-1 and was answered there; a replay on the
    same thread id records runs of its own: the stored runs keep what they held."""
    db = tmp_path / "gt.db"
    with Recorder(db) as rec:
        graph = rec.attach(_thread_reader(ask=True), name="ask")
        config = {"configurable": {"thread_id": "t-1"}}
        graph.invoke({}, config)
        run_id = rec.last_run_id
        assert graph.invoke(Command(resume="yes"), config) == {"seen": "t-1", "answer": "yes"}
        assert rec.last_run_id == run_id
    store = open_store(db)
    try:
        before = [(r.id, r.status, len(store.list_steps(r.id))) for r in store.list_runs()]
    finally:
        store.close()
    result = replay(run_id, _thread_reader(ask=True), db=db, mode="strict")
    assert not result.diverged, result.report()
    assert result.final_state == {"seen": "t-1", "answer": "yes"}
    store = open_store(db)
    try:
        after = {r.id: (r.id, r.status, len(store.list_steps(r.id))) for r in store.list_runs()}
        assert [after[r[0]] for r in before] == before
        assert after[result.run_id][1] == "ok" and store.get_run(result.run_id).parent_run_id == run_id
    finally:
        store.close()


class AskedLog(TypedDict):
    log: Annotated[list, operator.add]


def _questions(n: int) -> Any:
    def ask(name: str) -> Any:
        return lambda state: {"log": [f"{name}:{interrupt(name)}"]}

    b = StateGraph(AskedLog)
    names = "ab"[:n]
    for name in names:
        b.add_node(name, ask(name))
        b.add_edge(START, name)
    b.add_node("j", lambda state: {"log": ["j"]})
    b.add_edge(list(names), "j")
    b.add_edge("j", END)
    return b.compile(checkpointer=InMemorySaver())


@pytest.mark.parametrize("questions", [1, 2])
def test_an_edit_sent_with_answers_by_interrupt_id_is_recorded_and_replayed(tmp_path, questions):
    """Command(resume={id: answer, ...}, update=...): LangGraph writes each answer under its own
    task, so the human's edit comes alone; it is still the run's event, and a replay sends it."""
    db = tmp_path / "gt.db"
    config = {"configurable": {"thread_id": "t"}}
    with Recorder(db) as rec:
        graph = rec.attach(_questions(questions), name="asked")
        asked = graph.invoke({"log": []}, config)["__interrupt__"]
        out = graph.invoke(Command(resume={i.id: f"yes-{i.value}" for i in asked}, update={"log": ["EDIT"]}), config)
        run_id = rec.last_run_id
    assert out["log"][0] == "EDIT" and out["log"][-1] == "j" and len(out["log"]) == questions + 2
    store = open_store(db)
    try:
        updates = [e.value for d in store.step_details(run_id) for e in d.events if e.kind == "update"]
    finally:
        store.close()
    assert updates == [[["log", ["EDIT"]]]]
    result = replay(run_id, _questions(questions), db=db, mode="strict")
    assert not result.diverged, result.report()
    assert result.final_state == out


def test_a_run_still_being_recorded_is_refused_by_replay_and_fork_in_one_line(tmp_path):
    """Its steps so far are not where it goes: a replay would report every step still to come
    as a divergence. Once it has ended, it replays clean."""
    import threading

    gate = threading.Event()

    def build() -> Any:
        b = StateGraph(AskedLog)
        b.add_node("first", lambda s: {"log": ["first"]})
        b.add_node("waits", lambda s: gate.wait(30) and {"log": ["waited"]})
        b.add_edge(START, "first")
        b.add_edge("first", "waits")
        b.add_edge("waits", END)
        return b.compile()

    db = tmp_path / "gt.db"
    rec = Recorder(db, durability="sync")
    running = threading.Thread(target=lambda: rec.attach(build(), name="slow").invoke({"log": []}))
    running.start()
    try:
        for _ in range(500):  # until the run has started and written its first steps
            if rec.last_run_id is not None:
                store = open_store(db)
                try:
                    if store.has_run(rec.last_run_id) and store.get_run(rec.last_run_id).step_count >= 2:
                        break
                finally:
                    store.close()
            gate.wait(0.02)
        run_id = rec.last_run_id
        with pytest.raises(ReplayError, match=f"run {run_id} is still being recorded: replay or fork it once it has ended"):
            replay(run_id, build(), db=db)
        with pytest.raises(ReplayError, match="still being recorded"):
            fork(run_id, build(), 0, {"log": ["edited"]}, db=db)
    finally:
        gate.set()
        running.join()
        rec.close()
    result = replay(run_id, build(), db=db)
    assert not result.diverged, result.report()


def test_a_live_resume_after_a_replay_on_the_same_thread_continues_the_recorded_run(tmp_path):
    """The replay runs on the recorded thread id (its nodes see it) but is stored under a
    thread of its own: the person answering later, in another process, resumes their run."""
    db = tmp_path / "gt.db"
    config = {"configurable": {"thread_id": "t-1"}}
    saver = InMemorySaver()

    def build() -> Any:
        graph = _thread_reader(ask=True)
        return graph.copy(update={"checkpointer": saver})

    with Recorder(db) as rec:
        rec.attach(build(), name="ask").invoke({}, config)
        run_id = rec.last_run_id
    result = replay(run_id, _thread_reader(ask=True), db=db, mode="strict")
    assert not result.diverged, result.report()
    with Recorder(db) as later:  # another process: found through the store, by thread
        out = later.attach(build(), name="ask").invoke(Command(resume="yes"), config)
        assert later.last_run_id == run_id
    assert out == {"seen": "t-1", "answer": "yes"}
    store = open_store(db)
    try:
        assert store.get_run(run_id).status == "ok"
        assert store.get_run(result.run_id).status == "interrupted"
        assert store.get_run(result.run_id).thread_id != "t-1"
    finally:
        store.close()


@pytest.mark.parametrize("durability", ["async", "exit"])
def test_a_run_just_recorded_replays_at_once_while_its_recorder_is_open(tmp_path, durability):
    """replay(rec.last_run_id, ..., db=...) right after invoke: the rows may still wait in the
    recorder's writer; the replay has them written first instead of finding no run."""
    db = tmp_path / "gt.db"
    with Recorder(db, durability=durability) as rec:
        graph = rec.attach(_thread_reader(), name="who")
        for n in range(5):
            graph.invoke({}, {"configurable": {"thread_id": f"t-{n}"}})
            result = replay(rec.last_run_id, _thread_reader(), db=db, mode="strict")
            assert not result.diverged, result.report()


class Priced(TypedDict, total=False):
    item: str
    total: str


def _nested_caches() -> tuple[Any, dict]:
    """A subgraph two levels down with a cached node and a cache of its own (and one level up,
    another): a fresh build has every cache empty, as a fresh process does."""
    from langgraph.cache.memory import InMemoryCache
    from langgraph.types import CachePolicy

    ran = {"n": 0}

    def price(s: Priced) -> dict:
        ran["n"] += 1
        return {"total": (s.get("total") or "") + f"p{len(s['item'])}"}

    deep = StateGraph(Priced)
    deep.add_node("price", price, cache_policy=CachePolicy(ttl=600))
    deep.add_edge(START, "price")
    deep.add_edge("price", END)
    mid = StateGraph(Priced)
    mid.add_node("pre", price, cache_policy=CachePolicy(ttl=600))
    mid.add_node("deep", deep.compile(cache=InMemoryCache()))
    mid.add_edge(START, "pre")
    mid.add_edge("pre", "deep")
    mid.add_edge("deep", END)
    top = StateGraph(Priced)
    top.add_node("sub", mid.compile(cache=InMemoryCache()))
    top.add_edge(START, "sub")
    top.add_edge("sub", END)
    return top.compile(), ran


def test_cache_hits_in_subgraphs_nested_two_deep_replay_as_hits(tmp_path):
    db = tmp_path / "gt.db"
    graph, _ = _nested_caches()
    with Recorder(db) as rec:
        recorded = rec.attach(graph, name="priced")
        recorded.invoke({"item": "apple"})
        miss_run = rec.last_run_id
        recorded.invoke({"item": "apple"})  # every cached node a hit now, at both depths
        hit_run = rec.last_run_id
    for run_id, runs in ((hit_run, 0), (miss_run, 2)):
        fresh, ran = _nested_caches()
        result = replay(run_id, fresh, db=db, mode="strict")
        assert not result.diverged, result.report()
        assert ran["n"] == runs  # the recording's hits are served, its misses run


def _squares(name: str | None) -> tuple[Any, list[int]]:
    """An entrypoint calling one cached ``@task`` in parallel with several arguments, then once more
    with the first: fresh, as a fresh process builds it (its cache empty)."""
    from langgraph.cache.memory import InMemoryCache
    from langgraph.func import entrypoint, task
    from langgraph.types import CachePolicy

    ran: list[int] = []

    @task(cache_policy=CachePolicy(ttl=600), **({"name": name} if name else {}))
    def square(x: int) -> int:
        ran.append(x)
        return x * x

    @entrypoint(cache=InMemoryCache())
    def squares(xs: list) -> dict:
        futures = [square(x) for x in xs]
        each = [f.result() for f in futures]
        # LangGraph puts a finished call's writes in the cache from its thread pool: given time to,
        # so the call again is a hit in the recording and in the replay alike.
        time.sleep(0.2)
        return {"each": each, "again": square(xs[0]).result()}

    return squares, ran


@pytest.mark.parametrize("name", [None, "custom_square"], ids=["named after its function", "given a name"])
def test_parallel_calls_of_a_cached_task_are_served_by_their_arguments(tmp_path, name):
    """Some calls hit what an earlier run cached, some miss, one hits what this run cached: each
    replays as it was recorded (by the digest of its arguments, not by its place in the order),
    from the store and from the run's fixture, in a fresh process's empty cache."""
    db = tmp_path / "gt.db"
    graph, _ = _squares(name)
    with Recorder(db) as rec:
        app = rec.attach(graph, name="squares")
        app.invoke([1, 2, 3])
        assert app.invoke([7, 2, 1, 9, 3]) == {"each": [49, 4, 1, 81, 9], "again": 49}
        rec.flush()
        run_id = rec.last_run_id
    store = open_store(db)
    try:
        def tasks(run: str) -> list[tuple[bool, str | None]]:
            return sorted((t.cached, t.cache_key is not None) for d in store.step_details(run) for t in d.tasks if t.node != "squares")

        assert tasks(run_id) == [(False, True)] * 2 + [(True, True)] * 4
        for source in (run_id, imported(db, exported(db, run_id))):
            fresh, ran = _squares(name)
            result = replay(source, fresh, store=store, mode="strict")
            assert not result.diverged, result.report()
            assert sorted(ran) == [7, 9] and result.final_state == {"each": [49, 4, 1, 81, 9], "again": 49}
            assert tasks(result.run_id) == tasks(run_id)
    finally:
        store.close()


_SDK = '''
class RateLimitError(Exception):
    pass


def call(counter):
    counter.append(1)
    if len(counter) == 1:
        raise RateLimitError("429 slow down")
    return "answer"
'''


@pytest.fixture
def two_sdks(tmp_path, monkeypatch):
    """Two loaded packages each with its own ``RateLimitError`` (as openai's and langsmith's are)."""
    import importlib

    from graphtape.replay import loaded_errors

    for pkg in ("gt_sdk_one", "gt_sdk_two"):
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text(_SDK)
    monkeypatch.syspath_prepend(str(tmp_path))
    mods = [importlib.import_module(p) for p in ("gt_sdk_one", "gt_sdk_two")]
    loaded_errors.forget()
    yield mods
    for p in ("gt_sdk_one", "gt_sdk_two"):
        sys.modules.pop(p, None)
    loaded_errors.forget()


@pytest.mark.parametrize(
    "raised",
    [
        "the second SDK's",
        "json's JSONDecodeError",
        "a class of the graph's module",
        "the graph's own RateLimitError",
        "httpx's 503 under the default retry_on",
        "openai's 429, its status code read",
    ],
)
def test_a_retry_on_the_recorded_error_class_retries_in_the_replay(db, two_sdks, raised):
    """A model call that failed once and was retried by ``RetryPolicy(retry_on=...)``: the replay
    raises the recorded error as the class the policy names (found among the loaded modules, the
    traceback telling two SDKs' ``RateLimitError`` apart; never imported), so it retries again.
    An SDK's error (httpx's, whose ``response`` LangGraph's default ``retry_on`` reads; openai's)
    is made with the attributes its ``__init__`` set, as recorded, none of its code run."""
    import json as json_module

    import httpx
    import openai
    from langgraph.types import RetryPolicy

    from graphtape.replay import ReplayMode

    sdk = two_sdks[1]
    counter: list[int] = []

    def flaky(messages: list) -> AIMessage:
        if raised == "the second SDK's":
            return AIMessage(sdk.call(counter))
        counter.append(1)
        if len(counter) == 1:
            if raised == "json's JSONDecodeError":
                json_module.loads('{"cut": ')
            if raised.startswith("httpx"):
                httpx.Response(503, request=httpx.Request("GET", "https://api.example/v1")).raise_for_status()
            if raised == "the graph's own RateLimitError":
                raise RateLimitError("slow down")
            if raised.startswith("openai"):
                response = httpx.Response(429, request=httpx.Request("POST", "https://api.example/v1/chat"), headers={"retry-after": "7"})
                raise openai.RateLimitError("Rate limit reached", response=response, body=None)
            raise _GraphsOwnError("try again")
        return AIMessage("answer")

    retry_on = {
        "the second SDK's": sdk.RateLimitError,
        "json's JSONDecodeError": ValueError,
        "a class of the graph's module": _GraphsOwnError,
        "the graph's own RateLimitError": RateLimitError,
        # What the SDK's error carries besides its message (its response) is kept and handed back.
        "openai's 429, its status code read": lambda e: isinstance(e, openai.RateLimitError) and e.status_code == 429 and e.response.headers["retry-after"] == "7",
    }.get(raised)
    Scripted = load_agent("scripted_model").ScriptedChatModel

    def graph() -> Any:
        model = Scripted(script=flaky)

        class S(TypedDict, total=False):
            answer: str

        b = StateGraph(S)
        policy = RetryPolicy(initial_interval=0.001, jitter=False, **({"retry_on": retry_on} if retry_on else {}))
        b.add_node("ask", lambda s: {"answer": model.invoke("q").content}, retry_policy=policy)
        b.add_edge(START, "ask")
        b.add_edge("ask", END)
        return b.compile()

    run_id = record(db, graph(), {})
    counter.clear()
    for source in (run_id, imported(db, exported(db, run_id))):  # a fixture keeps what the error carried too
        result = replay(source, graph(), db=db, mode=ReplayMode.STRICT)
        assert not result.diverged, result.report()
        assert result.final_state == {"answer": "answer"} and result.served["model"] == 2 and counter == []


class _GraphsOwnError(Exception):
    pass


class RateLimitError(Exception):
    """Named as langsmith's and langgraph_sdk's are (both always loaded): the traceback tells them apart."""


def _typed_tools_graph() -> Any:
    """A model asks three tools at once: a retriever returning Documents as its artifact, a tool
    returning a dict of non-JSON values, and one returning a Command whose update holds Documents;
    a last node fails unless each comes back with its own types."""
    import datetime
    import decimal

    from langchain_core.documents import Document

    Scripted = load_agent("scripted_model").ScriptedChatModel

    @tool(response_format="content_and_artifact")
    def retrieve(query: str):
        """Retrieve documents."""
        return f"docs on {query}", [Document(page_content=f"about {query}", metadata={"source": "kb/1"})]

    @tool
    def quote(item: str) -> dict:
        """Price an item."""
        return {"price": decimal.Decimal("9.50"), "until": datetime.datetime(2026, 1, 2, 3, 4), "dims": (1, 2), "tags": {"a"}, "raw": b"\x00\x01"}

    @tool
    def attach(tool_call_id: Annotated[str, InjectedToolCallId]) -> Command:
        """Attach documents to the state."""
        return Command(update={"docs": [Document(page_content="attached")], "messages": [ToolMessage("attached", tool_call_id=tool_call_id)]})

    @tool
    def direct(x: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> ToolMessage:
        """Answer with a message of its own."""
        return ToolMessage(f"direct {x}", tool_call_id=tool_call_id, artifact={"raw": [1, 2]})

    asked = [("retrieve", {"query": "refunds"}), ("quote", {"item": "x"}), ("attach", {}), ("direct", {"x": "q"})]
    calls = [{"name": n, "args": a, "id": f"c{i}", "type": "tool_call"} for i, (n, a) in enumerate(asked)]
    model = Scripted(script=lambda m: AIMessage("", tool_calls=calls) if isinstance(m[-1], HumanMessage) else AIMessage("done")).bind_tools([retrieve, quote, attach, direct])

    class S(TypedDict, total=False):
        messages: Annotated[list, add_messages]
        docs: list
        checked: str

    def check(state: S) -> dict:
        results = {m.name: m for m in state["messages"] if isinstance(m, ToolMessage)}
        assert [d.metadata["source"] for d in results["retrieve"].artifact] == ["kb/1"]
        assert [type(d).__name__ for d in state["docs"]] == ["Document"]
        assert [m.artifact for m in state["messages"] if isinstance(m, ToolMessage) and m.content == "direct q"] == [{"raw": [1, 2]}]
        return {"checked": "ok"}

    b = StateGraph(S)
    b.add_node("agent", lambda s: {"messages": [model.invoke(s["messages"])]})
    b.add_node("tools", ToolNode([retrieve, quote, attach, direct]))
    b.add_node("check", check)
    b.add_edge(START, "agent")
    b.add_conditional_edges("agent", lambda s: "tools" if s["messages"][-1].tool_calls else "check")
    b.add_edge("tools", "agent")
    b.add_edge("check", END)
    return b.compile()


def test_tools_answered_from_the_recording_return_their_own_types(db):
    """A tool's answer is what it returned, typed: Documents in an artifact and in a Command's
    update, Decimals, datetimes, tuples, sets and bytes, a ToolMessage of its own with its
    artifact; from the store and from the run's fixture."""
    run_id = record(db, _typed_tools_graph(), {"messages": [HumanMessage("go")]})
    for source in (run_id, imported(db, exported(db, run_id))):
        result = replay(source, _typed_tools_graph(), db=db, mode="strict")
        assert not result.diverged, result.report()
        assert result.final_state["checked"] == "ok" and result.served["tool"] == 4


class _Client:
    """Stands for an SDK client or a lock a node keeps in the state: no encoding of its own."""


def test_an_object_without_an_encoding_in_the_state_replays_without_diverging(db):
    """Kept as its repr, without the object's address (each run holds it elsewhere)."""

    class S(TypedDict, total=False):
        client: Any
        n: int

    def graph() -> Any:
        b = StateGraph(S)
        b.add_node("connect", lambda s: {"client": _Client(), "n": s["n"] + 1})
        b.add_edge(START, "connect")
        b.add_edge("connect", END)
        return b.compile()

    run_id = record(db, graph(), {"n": 0})
    store = open_store(db)
    try:
        kept = store.state_at(run_id, store.list_steps(run_id)[-1].step)["client"]
    finally:
        store.close()
    assert kept["unserializable"] is True and "_Client object" in kept["repr"] and " at 0x" not in kept["repr"]
    result = replay(run_id, graph(), db=db, mode="strict")
    assert not result.diverged, result.report()


def _asking_subgraph(depth: int) -> Any:
    """A root graph whose subgraph (nested ``depth`` deep) asks at an interrupt and reports a note
    a person may set in the subgraph's own state while it waits."""

    class S(TypedDict, total=False):
        q: str
        a: str
        note: str

    def ask(s: S) -> dict:
        return {"a": f"{interrupt({'q': s['q']})}:{s['q']}:{s.get('note', '-')}"}

    inner = StateGraph(S)
    inner.add_node("ask", ask)
    inner.add_edge(START, "ask")
    inner.add_edge("ask", END)
    sub = inner.compile()
    for _ in range(depth - 1):
        outer = StateGraph(S)
        outer.add_node("deeper", sub)
        outer.add_edge(START, "deeper")
        outer.add_edge("deeper", END)
        sub = outer.compile()
    top = StateGraph(S)
    top.add_node("sub", sub)
    top.add_node("shout", lambda s: {"a": s["a"].upper()})
    top.add_edge(START, "sub")
    top.add_edge("sub", "shout")
    top.add_edge("shout", END)
    return top.compile(checkpointer=InMemorySaver())


@pytest.mark.parametrize("depth", [1, 2])
def test_a_subgraph_state_edited_while_it_waits_is_recorded_and_replayed(db, depth):
    """update_state on the waiting subgraph's own config (LangGraph's documented way to edit it):
    the edit is a step of the subgraph, and a replay (or the fixture's) puts it back before answering."""
    cfg = {"configurable": {"thread_id": "sub-edit"}}
    with Recorder(db) as rec:
        app = rec.attach(_asking_subgraph(depth))
        app.invoke({"q": "go?"}, cfg)
        waiting = app.get_state(cfg, subgraphs=True).tasks[0].state
        while depth > 1 and waiting.tasks and waiting.tasks[0].state is not None:
            waiting = waiting.tasks[0].state  # the innermost subgraph, where the question waits
        app.update_state(waiting.config, {"note": "edited"})
        assert app.invoke(Command(resume="yes"), cfg)["a"] == "YES:GO?:EDITED"
        rec.flush()
        run_id = rec.last_run_id
    store = open_store(db)
    try:
        inner = max(store.namespaces(run_id), key=lambda n: (n != "", n.count("|")))
        assert [s.source for s in store.list_steps(run_id, inner)].count("update") == 1
    finally:
        store.close()
    for source in (run_id, imported(db, exported(db, run_id))):
        result = replay(source, _asking_subgraph(depth), db=db, mode="strict")
        assert not result.diverged, result.report()
        assert result.final_state["a"] == "YES:GO?:EDITED"


_RAN: list[str] = []


class LoudError(Exception):
    """A loaded exception class with code of its own: a recording naming it must not run it."""

    def __str__(self) -> str:
        _RAN.append("str")
        return "loud"

    def __del__(self) -> None:
        _RAN.append("del")


def test_a_recorded_error_never_runs_code_of_the_class_it_names():
    """A hostile recording can name any loaded class: one with code of its own (``__str__``,
    ``__del__``, ``__init__``) becomes a stand-in of that name, and none of its code runs."""
    import gc as gc_module

    from graphtape.replay.calls import RecordedError, rebuild_error

    error = rebuild_error("LoudError", "boom")
    assert isinstance(error, RecordedError) and not isinstance(error, LoudError) and type(error).__name__ == "LoudError"
    assert str(error) == "boom"
    del error
    gc_module.collect()
    assert _RAN == []


def test_a_recorded_exception_group_is_raised_as_a_stand_in_with_its_message():
    """ExceptionGroup wants its exceptions as well as a message: the stand-in is a plain one, not a TypeError."""
    from graphtape.replay.calls import RecordedError, rebuild_error

    for _ in range(2):  # the stand-in class is kept after the first
        error = rebuild_error("ExceptionGroup", "two failed")
        assert isinstance(error, RecordedError) and type(error).__name__ == "ExceptionGroup" and str(error) == "two failed"


def test_an_async_model_call_the_recording_cannot_answer_stops_the_replay_as_a_miss(tmp_path):
    """LangChain gathers async model calls and reads every result that is not an ``Exception`` as a
    ChatResult: the miss must come out as the miss, not as an AttributeError from LangChain."""
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from typing_extensions import TypedDict

    class Chat(TypedDict):
        messages: Annotated[list, add_messages]

    def build(prompt: str):
        model = FakeMessagesListChatModel(responses=[AIMessage("fine")])

        async def ask(state, config):  # config passed on: Python 3.10 cannot hand callbacks to async code otherwise
            return {"messages": [await model.ainvoke([("system", prompt), *state["messages"]], config)]}

        b = StateGraph(Chat)
        b.add_node("ask", ask)
        b.add_edge(START, "ask")
        b.add_edge("ask", END)
        return b.compile()

    db = str(tmp_path / "a.db")
    with Recorder(db) as rec:
        asyncio.run(rec.attach(build("be brief")).ainvoke({"messages": [("user", "hi")]}))
        run_id = rec.last_run_id
    assert not replay(run_id, build("be brief"), db=db).diverged
    result = replay(run_id, build("be verbose"), db=db)
    assert [d.kind for d in result.divergences] == ["arguments"] and "has no matching recording" in result.divergences[0].render(), result.report()
    assert result.error is None or "AttributeError" not in result.error, result.error


def test_a_resume_loads_state_through_the_graphs_saver_as_langgraph_does(tmp_path):
    """LangGraph hands a resumed node what its saver loaded: a tuple saved comes back a list. A
    failure that follows from that is the incident, and the replay must reproduce it."""
    from langgraph.types import Command, interrupt
    from typing_extensions import TypedDict

    class Point(TypedDict, total=False):
        point: tuple
        out: str

    def confirm(s):
        interrupt("ok?")
        return {"out": f"moved to {s['point'] + (0,)}"}  # a list after the load: TypeError

    b = StateGraph(Point)
    b.add_node("place", lambda s: {"point": (1, 2)})
    b.add_node("confirm", confirm)
    b.add_edge(START, "place")
    b.add_edge("place", "confirm")
    b.add_edge("confirm", END)
    graph = b.compile(checkpointer=InMemorySaver())
    db = str(tmp_path / "t.db")
    with Recorder(db) as rec:
        app = rec.attach(graph)
        cfg = {"configurable": {"thread_id": "t"}}
        app.invoke({}, cfg)
        with pytest.raises(TypeError):
            app.invoke(Command(resume="yes"), cfg)
        run_id = rec.last_run_id
    result = replay(run_id, graph, db=db)
    assert not result.diverged and result.error is not None and "TypeError" in result.error, result.report()


class Bumped(TypedDict, total=False):
    q: str
    count: int
    a: str


def test_a_fork_answers_calls_its_edit_did_not_change_from_the_recording(db):
    live = []

    def script(messages):
        live.append(messages[-1].content)
        return AIMessage("answer to " + messages[-1].content)

    def build():
        model = G.ScriptedChatModel(script=script, model_name="m")
        g = StateGraph(Bumped)
        g.add_node("bump", lambda s: {"count": s["count"] + 1})
        g.add_node("ask", lambda s: {"a": model.invoke([HumanMessage(s["q"])]).content})
        g.add_edge(START, "bump")
        g.add_edge("bump", "ask")
        g.add_edge("ask", END)
        return g.compile()

    run_id = record(db, build(), {"q": "why?", "count": 0})
    assert live == ["why?"]
    result = fork(run_id, build(), 1, {"count": 5}, db=db)  # the model's prompt does not read count
    assert live == ["why?"] and result.served.get("model") == 1, (live, result.report())
    assert result.final_state == {"q": "why?", "count": 5, "a": "answer to why?"}
    changed = fork(run_id, build(), 1, {"q": "how?"}, db=db)  # a prompt the edit changed runs live
    assert live == ["why?", "how?"] and changed.final_state["a"] == "answer to how?"


class Toned(TypedDict, total=False):
    x: int
    tone: str


def test_a_changed_with_config_default_is_a_difference_and_an_unbound_graph_runs_as_recorded(db, tmp_path):
    from langgraph.config import get_config

    def builder():
        g = StateGraph(Toned)
        g.add_node("say", lambda s: {"tone": get_config()["configurable"].get("tone", "none")})
        g.add_edge(START, "say")
        g.add_edge("say", END)
        return g.compile()

    def bound(tone: str):
        return builder().with_config({"configurable": {"tone": tone}})

    run_id = record(db, bound("formal"), {"x": 1})
    assert not replay(run_id, bound("formal"), db=db).diverged
    assert not replay(run_id, builder(), db=db).diverged  # the recorded default is handed to a graph without it
    changed = replay(run_id, bound("casual"), db=db)
    assert changed.diverged and changed.final_state["tone"] == "casual", changed.report()
    # An explicit configurable of the call stays the call's, whatever today's default.
    explicit = record(db, bound("formal"), {"x": 1}, {"configurable": {"tone": "curt"}})
    assert not replay(explicit, bound("casual"), db=db).diverged
    # A fixture carries which keys were the graph's defaults.
    fixture = exported(db, run_id)
    assert fixture["config"]["bound"] == ["tone"]
    again = imported(str(tmp_path / "other.db"), fixture)
    assert replay(again, bound("casual"), db=str(tmp_path / "other.db")).diverged


# -- parallel live calls are paired by what they were asked, not by when they finished ------------

LOOKUP = {"reversed": False, "lost": None}  # the replay's calls finish in the other order; one may answer otherwise


@tool
def lookup(order_id: str) -> str:
    """Look up an order."""
    return f"order {order_id}: {'LOST' if order_id == LOOKUP['lost'] else 'shipped'}"


def _lookup_graph():
    def staggered(request, handler):  # the parallel calls start (and finish) in an order set by the test
        n = int(request.tool_call["args"]["order_id"][1:])
        time.sleep(0.02 * (n if LOOKUP["reversed"] else 5 - n))
        return handler(request)

    script = [AIMessage(content="", tool_calls=[G.tool_call("lookup", f"c{i}", order_id=f"A{i}") for i in range(1, 5)]), AIMessage(content="done")]
    model = G.ScriptedChatModel(script=script).bind_tools([lookup])
    b = StateGraph(G.ChatState)
    b.add_node("agent", lambda s: {"messages": [model.invoke(s["messages"])]})
    b.add_node("tools", ToolNode([lookup], wrap_tool_call=staggered))
    b.add_edge(START, "agent")
    b.add_conditional_edges("agent", lambda s: "tools" if s["messages"][-1].tool_calls else END, ["tools", END])
    b.add_edge("tools", "agent")
    return b.compile()


def test_a_live_replay_pairs_parallel_tool_calls_by_their_arguments(db):
    run_id = record(db, _lookup_graph(), {"messages": [("user", "where are my orders?")]})
    LOOKUP["reversed"] = True
    try:
        same = replay(run_id, _lookup_graph(), db=db, mode="live")
        assert not same.diverged, same.report()
        LOOKUP["lost"] = "A2"  # a real change: one call answers otherwise
        changed = replay(run_id, _lookup_graph(), db=db, mode="live")
    finally:
        LOOKUP.update(reversed=False, lost=None)
    d = first(changed, "call")
    assert (d.step, d.node) == (2, "tools")
    assert "order A2: shipped" in json.dumps(d.recorded) and "order A2: LOST" in json.dumps(d.actual), changed.report()
    assert [x for x in changed.divergences if x.step == 2 and x.kind in ("arguments", "call")] == [d], changed.report()


class Questions(TypedDict, total=False):
    qs: list[str]
    answers: Annotated[list, operator.add]


ASK_WAITS = {"reversed": False}


def _asking_graph():
    model = G.ScriptedChatModel(script=lambda m: AIMessage(f"answer to {m[-1].content}"), model_name="asker")

    def ask(state):
        n = int(state["qs"][0][1:])
        time.sleep(0.02 * (n if ASK_WAITS["reversed"] else 5 - n))
        return {"answers": [model.invoke([HumanMessage(state["qs"][0])]).content]}

    g = StateGraph(Questions)
    g.add_node("ask", ask)
    g.add_conditional_edges(START, lambda s: [Send("ask", {"qs": [q]}) for q in s["qs"]], ["ask"])
    g.add_edge("ask", END)
    return g.compile()


def test_a_tools_mode_replay_pairs_parallel_model_calls_by_their_prompts(db):
    run_id = record(db, _asking_graph(), {"qs": ["q1", "q2", "q3", "q4"]})
    ASK_WAITS["reversed"] = True  # the Sends' model calls now finish in the other order
    try:
        result = replay(run_id, _asking_graph(), db=db, mode="tools")
    finally:
        ASK_WAITS["reversed"] = False
    assert not result.diverged, result.report()


# -- a call its node cancelled (asyncio.wait_for timing out) is held until the node gives up again ----


class Waited(TypedDict, total=False):
    out: str


@tool
async def slow_lookup(x: str) -> str:
    """A lookup slower than its caller waits."""
    await asyncio.sleep(0.5)
    return "slow " + x


def _waiting_graph(kind: str, nodes: str = "n", timeout: float = 0.1):
    def slow_model(messages):
        time.sleep(0.5)  # run in LangChain's executor: the stream awaiting it is what gets cancelled
        return AIMessage("slow answer")

    model = G.ScriptedChatModel(script=slow_model, model_name="slow")

    async def streamed(config) -> str:
        return "".join([str(chunk.content) async for chunk in model.astream([HumanMessage("hi")], config)])

    async def node(state: Waited, config) -> dict:
        call = slow_lookup.ainvoke({"x": "a"}, config) if kind == "tool" else streamed(config)
        try:
            got = await asyncio.wait_for(call, timeout)
        except asyncio.TimeoutError:
            return {"out": "timed out"}
        return {"out": str(got)}

    b = StateGraph(Waited)
    for name in nodes:  # parallel nodes alike (they write the same value)
        b.add_node(name, node)
        b.add_edge(START, name)
        b.add_edge(name, END)
    return b.compile()


@pytest.mark.parametrize("kind", ["tool", "model"])
def test_a_call_its_node_cancelled_on_a_timeout_is_replayed_as_slow_so_the_node_gives_up_again(db, kind):
    with Recorder(db) as rec:
        assert asyncio.run(rec.attach(_waiting_graph(kind)).ainvoke({"out": ""})) == {"out": "timed out"}
        rec.flush()
        run_id = rec.last_run_id
    result = replay(run_id, _waiting_graph(kind), db=db, mode="strict")
    assert result.error is None and not result.diverged, result.report()
    assert result.final_state == {"out": "timed out"}
    store = open_store(db)
    try:
        (recorded,) = [c for c in store.calls(run_id) if c.kind == kind]
        (replayed,) = [c for c in store.calls(result.run_id) if c.kind == kind]
    finally:
        store.close()
    # Abandoned (not failed with a CancelledError, whose message is a sentinel's address), with how long it was waited on.
    assert recorded.error_type == replayed.error_type == "Unfinished"
    assert "cancelled" in recorded.error_message and "object at 0x" not in recorded.error_message
    assert 90 <= recorded.latency_ms < 400


def test_show_says_a_call_its_node_cancelled_was_cancelled(db, capsys):
    from graphtape.tui.cli import main

    with Recorder(db) as rec:
        asyncio.run(rec.attach(_waiting_graph("tool")).ainvoke({"out": ""}))
        rec.flush()
        run_id = rec.last_run_id
    assert main(["--db", db, "show", run_id, "--step", "1"]) == 0
    out = capsys.readouterr().out
    assert "its node stopped waiting after" in out and "the call was cancelled" in out, out
    assert "object at 0x" not in out


def test_a_run_cancelled_during_a_call_replays_from_its_last_step_as_cancelled_again(db):
    """The run (not the node) was cancelled while a tool ran: the task ended cancelled, so the
    replay's does too, as the recording went, rather than failing with what the call could not say."""

    async def go() -> str:
        with Recorder(db) as rec:
            task = asyncio.ensure_future(rec.attach(_waiting_graph("tool", "nm", timeout=30)).ainvoke({"out": ""}))
            await asyncio.sleep(0.05)  # the nodes wait for the tool: cancel the run meanwhile
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            rec.flush()
            return rec.last_run_id

    run_id = asyncio.run(go())
    store = open_store(db)
    try:
        run = store.get_run(run_id)
        calls = store.calls(run_id)
        tasks = [t for d in store.step_details(run_id) for t in d.tasks if t.node in "nm"]
    finally:
        store.close()
    assert (run.status, run.status_reason) == ("interrupted", "cancelled")
    assert [c.error_type for c in calls] == ["Unfinished"] * 2 and [t.error_type for t in tasks] == ["CancelledError"] * 2
    # LangGraph cancels a step's other tasks with a sentinel object: its address is no message.
    assert not any("object at 0x" in (x.error_message or "") for x in [*calls, *tasks])
    result = replay(run_id, _waiting_graph("tool", "nm", timeout=30), db=db, from_step=0)
    assert result.status == "interrupted" and not result.diverged, result.report()


# -- a fork hands on the never-checkpointed channels (langchain's per-run call counters) -------------


@tool
def look_up(order_id: str) -> str:
    """Look up an order."""
    return f"order {order_id}: shipped"


class NotedAgentState(AgentState):
    note: NotRequired[str]


def _limited_agent():
    """create_agent with ToolCallLimitMiddleware(run_limit=1): the model asks two lookups in turn,
    and the limit, counted in an UntrackedValue channel, blocks the second."""

    def decide(messages):
        n = sum(isinstance(m, ToolMessage) for m in messages)
        if n < 2:
            return AIMessage(content="", tool_calls=[G.tool_call("look_up", f"c{n + 1}", order_id=f"A{n + 1}")])
        return AIMessage(content=f"last tool said: {messages[-1].content}")

    model = G.ScriptedChatModel(script=decide, model_name="limited")
    return create_agent(model, [look_up], state_schema=NotedAgentState, middleware=[ToolCallLimitMiddleware(tool_name="look_up", run_limit=1)])


def test_a_fork_keeps_the_per_run_call_counters_and_takes_an_edit_of_one(db):
    run_id = record(db, _limited_agent(), {"messages": [("user", "go")], "note": "a"})
    store = open_store(db)
    try:
        at = next(s.step for s in store.list_steps(run_id) if s.nodes == ["tools"])  # after the first lookup
        assert [s.nodes for s in store.list_steps(run_id) if s.step in (at - 2, at - 1)] == [["model"], ["ToolCallLimitMiddleware[look_up].after_model"]]
        assert store.state_at(run_id, at, internal=True)["run_tool_call_count"] == {"look_up": 1}
    finally:
        store.close()
    assert not replay(run_id, _limited_agent(), from_step=at, db=db).diverged
    kept = fork(run_id, _limited_agent(), at_step=at, update={"note": "b"}, db=db)
    assert [d for d in kept.divergences if d.what != "state key 'note' differs"] == [], kept.report()
    assert "limit" in kept.final_state["messages"][-1].content  # the second lookup is blocked, as recorded
    # Before any lookup, a count that says one was made: the limit blocks the first one too.
    spent = fork(run_id, _limited_agent(), at_step=at - 2, update={"run_tool_call_count": {"look_up": 1}}, db=db)
    assert "limit" in spent.final_state["messages"][-1].content
    assert not [m for m in spent.final_state["messages"] if "shipped" in str(m.content)], spent.report()
