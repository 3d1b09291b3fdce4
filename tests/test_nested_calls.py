"""Tool and model calls made inside another recorded call (a subagent run by a tool).

deepagents' ``task`` tool runs a whole agent graph inside one tool call. A strict replay answers
that tool call from the recording, so the calls nested in it are never made: they are not
"never made" calls nor differences, and an override of one makes the outer call run live so
the override takes effect.
"""

from __future__ import annotations

import asyncio

import pytest
from conftest import exported, imported, load_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.prebuilt import create_react_agent

from graphtape import Recorder, open_store, replay
from graphtape.replay.run_diff import diff_runs

ScriptedChatModel = load_agent("scripted_model").ScriptedChatModel


def _last_tool(messages, name):
    return next((m for m in reversed(messages) if isinstance(m, ToolMessage) and m.name == name), None)


def _inner_script(messages):
    found = _last_tool(messages, "lookup")
    if found is None:
        return AIMessage(content="", tool_calls=[{"name": "lookup", "args": {"topic": "tides"}, "id": "in-1"}])
    return AIMessage(content=f"inner found: {found.content}")


def _outer_script(messages):
    found = _last_tool(messages, "research")
    if found is None:
        return AIMessage(content="", tool_calls=[{"name": "research", "args": {"question": "tides?"}, "id": "out-1"}])
    return AIMessage(content=f"answer: {found.content}")


@tool
def lookup(topic: str) -> str:
    """Look a topic up."""
    return f"{topic} follow the moon"


def _graph():
    inner = create_react_agent(ScriptedChatModel(script=_inner_script, model_name="inner-1"), [lookup], name="inner")

    @tool
    def research(question: str) -> str:
        """Ask the research subagent."""
        out = inner.invoke({"messages": [HumanMessage(question)]})
        return out["messages"][-1].content

    @tool
    async def aresearch(question: str) -> str:
        """Ask the research subagent."""
        out = await inner.ainvoke({"messages": [HumanMessage(question)]})
        return out["messages"][-1].content

    return research, aresearch


def _agent(is_async: bool):
    research, aresearch = _graph()
    chosen = aresearch if is_async else research
    chosen.name = "research"
    return create_react_agent(ScriptedChatModel(script=_outer_script, model_name="outer-1"), [chosen], name="outer")


def _record(db, is_async: bool) -> str:
    graph = _agent(is_async)
    with Recorder(db) as rec:
        app = rec.attach(graph)
        inputs = {"messages": [HumanMessage("what moves the tides?")]}
        if is_async:
            asyncio.run(app.ainvoke(inputs))
        else:
            app.invoke(inputs)
        rec.flush()
        return rec.last_run_id


@pytest.fixture(params=["sync", "async"])
def recorded(request, tmp_path):
    is_async = request.param == "async"
    db = tmp_path / "gt.db"
    return db, _record(db, is_async), is_async


def _replay(db, run_id, is_async, **kw):
    if is_async:
        return asyncio.run(_areplay(db, run_id, **kw))
    return replay(run_id, _agent(False), db=db, **kw)


async def _areplay(db, run_id, **kw):
    return await asyncio.to_thread(replay, run_id, _agent(True), db=db, **kw)


def _read(db, fn):
    store = open_store(db)
    try:
        return fn(store)
    finally:
        store.close()


def test_the_subagents_calls_are_recorded_as_part_of_the_tool_call(recorded):
    db, run_id, _ = recorded
    calls = _read(db, lambda store: store.calls(run_id))
    research = next(c for c in calls if c.name == "research")
    nested = [c for c in calls if c.parent_call_id == research.call_id]
    assert sorted(c.name for c in nested) == ["ScriptedChatModel:inner-1", "ScriptedChatModel:inner-1", "lookup"]
    assert not [c for c in calls if c.kind in ("tool", "model") and c not in nested and c.parent_call_id]
    counts = _read(db, lambda store: store.call_totals(run_id)[0])
    assert counts == {"model": 4, "tool": 2}  # nested tool and model calls still count as calls


def test_a_strict_replay_answers_the_tool_and_leaves_nothing_unused(recorded):
    db, run_id, is_async = recorded
    result = _replay(db, run_id, is_async, require_all_used=True)
    assert not result.diverged, result.report()
    assert result.unused_calls == []
    assert result.served == {"tool": 1, "model": 2}  # the subagent's calls were not made


def test_diff_of_a_run_and_its_clean_replay_finds_no_difference(recorded):
    db, run_id, is_async = recorded
    result = _replay(db, run_id, is_async)
    diff = _read(db, lambda store: diff_runs(run_id, result.run_id, store=store))
    assert diff.same, [d.what for d in diff.differences]


def _wind(topic: str) -> str:
    return f"{topic} follow the wind"


def test_an_override_of_a_call_inside_the_tool_runs_the_tool_live(recorded):
    db, run_id, is_async = recorded
    result = _replay(db, run_id, is_async, overrides={"lookup": _wind})
    assert result.diverged, result.report()
    # The subagent's model is asked about the override's answer: no recording has that prompt.
    miss = next(d for d in result.divergences if "has no matching recording" in d.what)
    assert "inner-1" in miss.what and "follow the wind" in repr(miss.actual), result.report()
    assert result.served == {"tool": 0, "model": 2}  # the outer model's first call and the subagent's first


def test_the_subagent_run_live_sees_the_recursion_limit_it_was_recorded_with(recorded):
    db, run_id, is_async = recorded
    result = _replay(db, run_id, is_async, overrides={"lookup": _wind})
    # The first difference is the override's answer, not the subagent's remaining_steps (a tool
    # saw LangChain's default limit when recorded: the replay's lowered one must not reach it).
    first = result.first_divergence
    assert first.kind == "state" and "follow the wind" in repr(first.actual), result.report()
    assert "remaining_steps" not in result.report()


def test_an_override_inside_an_overridden_call_is_said_to_be_unused(recorded):
    db, run_id, is_async = recorded
    result = _replay(db, run_id, is_async, overrides={"research": lambda question: "tides follow the moon", "lookup": _wind})
    assert "override 'lookup' was never used: its calls were made inside tool call 'research'" in "\n".join(result.notes), result.notes


def test_an_override_inside_the_tool_changes_the_answer_when_misses_run_live(recorded):
    db, run_id, is_async = recorded
    result = _replay(db, run_id, is_async, overrides={"lookup": _wind}, on_miss="live")
    assert "follow the wind" in result.final_state["messages"][-1].content, result.report()
    # Only the two prompts the new answer changed went unasked (the research tool's was taken, it ran live).
    assert sorted(u["name"] for u in result.unused_calls) == ["ScriptedChatModel:inner-1", "ScriptedChatModel:outer-1"]


def test_a_fixture_keeps_which_call_a_call_was_made_in(recorded, tmp_path):
    db, run_id, is_async = recorded
    fixture = exported(db, run_id)
    calls = [c for part in [fixture, *fixture.get("subgraphs", [])] for s in part["steps"] for c in s.get("calls", [])]
    research = next(c for c in calls if c["name"] == "research")
    assert sorted(c["name"] for c in calls if c.get("part_of") == research["id"]) == ["ScriptedChatModel:inner-1", "ScriptedChatModel:inner-1", "lookup"]
    other = tmp_path / "other.db"
    copy = imported(other, fixture)
    result = _replay(other, copy, is_async, require_all_used=True)
    assert not result.diverged, result.report()
    assert result.unused_calls == []
    wind = _replay(other, copy, is_async, overrides={"lookup": _wind}, on_miss="live")
    assert "follow the wind" in wind.final_state["messages"][-1].content, wind.report()


def _summing_agent():
    summarizer = ScriptedChatModel(script=lambda messages: AIMessage(content="short: " + messages[-1].content), model_name="summary-1")

    @tool
    def summarize(text: str) -> str:
        """Summarize a text with a model."""
        return summarizer.invoke([HumanMessage(text)]).content

    def outer(messages):
        found = _last_tool(messages, "summarize")
        if found is None:
            return AIMessage(content="", tool_calls=[{"name": "summarize", "args": {"text": "long tides text"}, "id": "s-1"}])
        return AIMessage(content=f"answer: {found.content}")

    return create_react_agent(ScriptedChatModel(script=outer, model_name="outer-1"), [summarize])


def test_a_model_called_by_a_tool_itself_is_not_a_call_never_made(tmp_path):
    db = tmp_path / "gt.db"
    with Recorder(db) as rec:
        rec.attach(_summing_agent()).invoke({"messages": [HumanMessage("sum it up")]})
        rec.flush()
        run_id = rec.last_run_id
    result = replay(run_id, _summing_agent(), db=db, require_all_used=True)
    assert not result.diverged, result.report()
    assert result.unused_calls == []
    changed = replay(run_id, _summing_agent(), db=db, overrides={"summary-1": lambda messages: "brief"})
    first = changed.first_divergence  # the override took effect: the tool ran live and answered "brief"
    assert first is not None and first.kind == "state" and "'brief'" in repr(first.actual), changed.report()
