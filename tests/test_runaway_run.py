"""A runaway agent (a chat loop stopped by the recursion limit) stays readable.

Each model call's inputs are the whole conversation so far: 1,200 calls hand the model about
720,000 messages in all, stored once each and shared. The decoder's budget against crafted
blobs that multiply is per recorded value (one call), so a long honest run is shown,
listed and replayed, not refused as hostile.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.errors import GraphRecursionError
from langgraph.graph import START, MessagesState, StateGraph

from graphtape import Recorder, open_store, replay
from graphtape.tui.cli import main

CALLS = 1200


class Thinking(BaseChatModel):
    @property
    def _llm_type(self) -> str:
        return "thinking"

    def _generate(self, messages: list, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        usage = {"input_tokens": 10 * len(messages), "output_tokens": 7, "total_tokens": 10 * len(messages) + 7}
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=f"thinking {len(messages)}", usage_metadata=usage))])


def _loop():
    model = Thinking()
    b = StateGraph(MessagesState)
    b.add_node("agent", lambda s: {"messages": [model.invoke(s["messages"])]})
    b.add_edge(START, "agent")
    b.add_conditional_edges("agent", lambda s: "agent", ["agent"])
    return b.compile()


def test_a_run_stopped_by_the_recursion_limit_after_many_model_calls_is_shown_and_replayed(tmp_path, capsys):
    db = tmp_path / "gt.db"
    config = {"recursion_limit": CALLS}
    with Recorder(db) as rec:
        try:
            rec.attach(_loop(), name="runaway").invoke({"messages": [HumanMessage("go")]}, config)
        except GraphRecursionError:
            pass
        run_id = rec.last_run_id
    store = open_store(db)
    try:
        calls = store.calls(run_id)
        assert len(calls) == CALLS
        assert len(calls[-1].inputs["messages"]) == CALLS and calls[-1].output["content"] == f"thinking {CALLS}"
        result = replay(run_id, _loop(), store=store)
        assert not result.diverged, result.report()
        assert result.served["model"] == CALLS
    finally:
        store.close()
    assert main(["--db", str(db), "show", run_id]) == 0
    assert f"thinking {CALLS}" in capsys.readouterr().out


class Searching(BaseChatModel):
    """Asks for another search every turn, never satisfied: a runaway ReAct loop."""

    @property
    def _llm_type(self) -> str:
        return "searching"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Searching:
        return self

    def _generate(self, messages: list, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        call = {"name": "search", "args": {"q": "more"}, "id": f"c{len(messages)}", "type": "tool_call"}
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content="", tool_calls=[call]))])


@tool
def search(q: str) -> str:
    """Search the web: a page of text each time."""
    return ("lorem ipsum dolor sit amet " * 80)[:PAGE]


PAGE = 2000  # bytes a search returns
TURNS = 60  # model calls: 120 messages of which 60 pages, every model call and Send holding all so far
READ_BUDGET = 2 * 1024 * 1024  # every page of every prompt, summed over the run: about 3.7 MB


def _runaway_react_run(db: Any) -> str:
    """A ``create_react_agent`` run stopped by the recursion limit: its Sends carry the whole state too."""
    from langgraph.prebuilt import create_react_agent

    with Recorder(db) as rec:
        try:
            rec.attach(create_react_agent(Searching(), [search]), name="runaway").invoke({"messages": [HumanMessage("research everything")]}, {"recursion_limit": 2 * TURNS})
        except GraphRecursionError:
            pass
        return rec.last_run_id


def test_a_runaway_loop_of_long_prompts_is_shown_though_its_prompts_together_exceed_a_read(tmp_path, monkeypatch, capsys):
    """``show`` sums calls up and names each route's destination: it reads no prompt and no Send's
    state, so a loop whose prompts together exceed what one read may build is shown (each step,
    read alone, stays within it: ``--step`` and the TUI show it whole)."""
    from graphtape.recorder.store import read_guard
    from graphtape.tui.step_reader import StepReader

    db = tmp_path / "gt.db"
    run_id = _runaway_react_run(db)
    monkeypatch.setattr(read_guard, "MAX_READ_BYTES", READ_BUDGET)
    capsys.readouterr()
    assert main(["--db", str(db), "show", run_id]) == 0, capsys.readouterr().err
    assert "agent → __end__" in capsys.readouterr().out
    assert main(["--db", str(db), "show", run_id, "--json"]) == 0, capsys.readouterr().err
    view = json.loads(capsys.readouterr().out)
    assert view["call_totals"] == {"model": TURNS, "tool": TURNS - 1}
    last, send = [(s["step"], r) for s in view["steps"] for r in s["routes"] if r["kind"] == "send"][-1]
    assert send["sends"][0]["node"] == "tools" and f"--step {last}" in send["sends"][0]["arg"]
    assert main(["--db", str(db), "show", run_id, "--step", str(last), "--json"]) == 0, capsys.readouterr().err
    step = json.loads(capsys.readouterr().out)
    (route,) = step["routes"]
    assert len(route["sends"][0]["arg"]["state"]["messages"]) == 2 * TURNS - 2  # one step in full: the Send's whole state
    assert len(step["calls"][0]["inputs"]["messages"]) == 2 * TURNS - 3  # the prompt: all but the reply
    store = open_store(db)
    try:
        steps = store.list_steps(run_id)
        shown = StepReader(store, run_id).read(steps, len(steps) - 1)  # what the TUI's run screen reads for a step
        assert shown.transcript_total == 2 * TURNS and len(shown.calls) == 1
    finally:
        store.close()


def test_each_call_of_a_runaway_loop_is_read_within_its_own_budget(tmp_path, monkeypatch):
    """A whole run's calls (replay, a run diff) are one read of the store, but each call's value
    pays for what it expands to on its own: a loop's prompts together exceed what one read may
    build and are all read back, each whole, and the run replays."""
    from langgraph.prebuilt import create_react_agent

    from graphtape.recorder.store import read_guard

    db = tmp_path / "gt.db"
    run_id = _runaway_react_run(db)
    monkeypatch.setattr(read_guard, "MAX_READ_BYTES", READ_BUDGET)
    store = open_store(db)
    try:
        calls = store.calls(run_id)
        prompts = [len(c.inputs["messages"]) for c in calls if c.kind == "model"]
        assert prompts == list(range(1, 2 * TURNS, 2))  # every prompt whole: the question, then each turn's two messages
        assert all(len(c.output["content"]) == PAGE for c in calls if c.kind == "tool")
        result = replay(run_id, create_react_agent(Searching(), [search]), store=store)
        assert not result.diverged, result.report()
        assert result.served == {"model": TURNS, "tool": TURNS - 1}
    finally:
        store.close()
