"""Tools handed a ``ToolRuntime`` that their explicit argument schema leaves out (deepagents'
file tools, langchain's ``write_todos``), replayed: the replay records them called with their
arguments only, as the recording holds them, and an override is handed those arguments.

LangChain finds such a runtime in the wrapped function's signature and keeps it out of what
the callbacks see. The replay's stand-in for the tool must do the same, or the replay's run
holds the whole runtime (its config, its internals' reprs) as the call's arguments and
``graphtape diff`` of a run and its clean replay reports every such call as changed.
"""

from __future__ import annotations

import pytest
from ecosystem_shapes import call, scripted
from langchain.agents import create_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool
from pydantic import BaseModel

from graphtape import Recorder, open_store, replay
from graphtape.replay import diff_runs


class Where(BaseModel):
    order_id: str


def _track(order_id: str, runtime: ToolRuntime) -> str:
    return f"order {order_id} is in transit ({len(runtime.state['messages'])} messages in)"


def _model(messages: list) -> AIMessage:
    done = [m for m in messages if isinstance(m, ToolMessage)]
    if not done:
        return AIMessage("", tool_calls=[call("track", "c1", order_id="RT1")])
    return AIMessage(f"Tracked: {done[-1].content}")


def agent():
    track = StructuredTool.from_function(func=_track, name="track", description="Where an order is.", args_schema=Where)
    return create_agent(scripted("runtime-model", _model), [track])


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> tuple[str, str]:
    db = str(tmp_path_factory.mktemp("runtime") / "runs.db")
    with Recorder(db) as rec:
        rec.attach(agent(), name="runtime").invoke({"messages": [HumanMessage("Where is RT1?")]})
        rec.flush()
        return db, rec.last_run_id


def _tool_inputs(db: str, run_id: str) -> list:
    store = open_store(db)
    try:
        return [c.inputs for c in store.calls(run_id) if c.kind == "tool"]
    finally:
        store.close()


def test_a_replay_records_the_tool_called_with_its_arguments_only(recorded):
    db, run_id = recorded
    assert _tool_inputs(db, run_id) == [{"order_id": "RT1"}]
    result = replay(run_id, agent(), db=db)
    assert not result.diverged, result.report()
    assert _tool_inputs(db, result.run_id) == [{"order_id": "RT1"}]
    assert not diff_runs(run_id, result.run_id, db=db).differences


def test_an_override_is_handed_the_tools_arguments(recorded):
    db, run_id = recorded
    result = replay(run_id, agent(), db=db, overrides={"track": lambda order_id: f"order {order_id} is lost"})
    first = result.first_divergence
    assert first is not None and first.node == "tools", result.report()
    assert "is lost" in result.report()
