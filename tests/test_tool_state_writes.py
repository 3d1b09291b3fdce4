"""A tool that writes the graph's state itself, through the task's send function, replayed.

deepagents' ``StateBackend`` keeps an agent's files in a ``files`` channel that its tools write
through LangGraph's send function (and read back through the task's read function): the tool
returns only "Updated file ...". A replay that answers such a tool from the recording must make
the same writes, or its state loses the files at the tool's step; a fixture must carry them.
Here the shape is built from LangGraph and LangChain alone: a ``create_agent`` whose tool
writes a ``notes`` channel the way ``StateBackend`` writes its files.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import pytest
from ecosystem_shapes import call, scripted
from langchain.agents import AgentState, create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.config import get_config

from conftest import exported, imported
from graphtape import Recorder, open_store, replay
from graphtape.replay.fixture import dumps_fixture, parse_fixture

try:
    from langgraph._internal._constants import CONFIG_KEY_READ, CONFIG_KEY_SEND
except ImportError:  # an older LangGraph
    from langgraph.constants import CONFIG_KEY_READ, CONFIG_KEY_SEND  # type: ignore[no-redef]


def _merge(old: dict | None, new: dict | None) -> dict:
    return {**(old or {}), **(new or {})}


class Notes(AgentState):
    notes: Annotated[dict[str, str], _merge]


@tool
def save_note(key: str, text: str) -> str:
    """Keep a note in the agent's state."""
    configurable = get_config()["configurable"]
    kept = configurable[CONFIG_KEY_READ]("notes", True) or {}
    configurable[CONFIG_KEY_SEND]([("notes", {key: f"{text} (note {len(kept) + 1})"})])
    return f"saved {key}"


def _model(messages: list) -> AIMessage:
    done = [m for m in messages if isinstance(m, ToolMessage)]
    if len(done) < 2:
        key = ("first", "second")[len(done)]
        return AIMessage("", tool_calls=[call("save_note", f"n{len(done)}", key=key, text=f"order TS{len(done)} is late")])
    return AIMessage("Both noted.")


def agent() -> Any:
    return create_agent(scripted("notes-model", _model), [save_note], state_schema=Notes)


def _record(db: str, how: str) -> str:
    with Recorder(db) as rec:
        app = rec.attach(agent(), name=f"notes-{how}")
        given = {"messages": [HumanMessage("Note TS0 and TS1.")]}
        out = app.invoke(given) if how == "invoke" else asyncio.run(app.ainvoke(given))
        assert out["notes"] == {"first": "order TS0 is late (note 1)", "second": "order TS1 is late (note 2)"}
        rec.flush()
        return rec.last_run_id


@pytest.fixture(scope="module", params=["invoke", "ainvoke"])
def recorded(request, tmp_path_factory) -> tuple[str, str]:
    db = str(tmp_path_factory.mktemp("sends") / "runs.db")
    return db, _record(db, request.param)


def test_the_writes_a_tool_made_are_recorded_as_part_of_its_call(recorded):
    db, run_id = recorded
    store = open_store(db)
    try:
        calls = store.calls(run_id)
    finally:
        store.close()
    tools = {c.call_id: c for c in calls if c.kind == "tool"}
    sent = [c for c in calls if c.kind == "sent"]
    assert [(tools[c.parent_call_id].inputs["key"], c.name, c.output) for c in sent] == [
        ("first", "notes", {"first": "order TS0 is late (note 1)"}),
        ("second", "notes", {"second": "order TS1 is late (note 2)"}),
    ]


def test_a_strict_replay_makes_the_tools_writes_again(recorded):
    db, run_id = recorded
    result = replay(run_id, agent(), db=db)
    assert not result.diverged, result.report()
    assert result.final_state["notes"] == {"first": "order TS0 is late (note 1)", "second": "order TS1 is late (note 2)"}


def test_a_tool_answered_otherwise_diverges_where_its_writes_are_missing(recorded):
    db, run_id = recorded
    result = replay(run_id, agent(), db=db, overrides={"save_note": lambda key, text: f"saved {key}"})
    first = result.first_divergence
    assert first is not None and first.node == "tools" and "notes" in first.what, result.report()


def test_a_fixture_carries_the_tools_writes(recorded, tmp_path):
    db, run_id = recorded
    fixture = parse_fixture(dumps_fixture(exported(db, run_id)))
    assert fixture["graphtape_fixture"] == 4
    other = str(tmp_path / "fixture.db")
    result = replay(imported(other, fixture), agent(), db=other)
    assert not result.diverged, result.report()
