"""Tools with ``response_format="content_and_artifact"`` that answer in content blocks, as every
tool langchain-mcp-adapters loads from an MCP server does, replayed and overridden.

An override is the user's stand-in for the tool's function. For such a tool LangChain demands a
``(content, artifact)`` two-tuple from the function; an override returning the content alone made
the replay fail in the tools node (a ValueError) instead of diverging where the answer differs.
"""

from __future__ import annotations

import asyncio

import pytest
from ecosystem_shapes import call, scripted
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool, ToolException

from graphtape import Recorder, replay

RAN: list[str] = []  # each live call of a tool below: the replay must make none


async def _add(a: int, b: int) -> tuple[list[dict], dict]:
    RAN.append("add")
    return [{"type": "text", "text": str(a + b)}], {"structured_content": {"result": a + b}}


async def _fail(x: str) -> tuple[list[dict], dict]:
    RAN.append("fail")
    raise ToolException(f"Error executing tool fail: no luck with {x}")


def _tools() -> list:
    made = dict(response_format="content_and_artifact", handle_tool_error=True)
    return [
        StructuredTool.from_function(coroutine=_add, name="add", description="Add two numbers.", **made),
        StructuredTool.from_function(coroutine=_fail, name="fail", description="Always fails.", **made),
    ]


def _model(messages: list) -> AIMessage:
    done = [m for m in messages if isinstance(m, ToolMessage)]
    if not done:
        return AIMessage("", tool_calls=[call("add", "c1", a=2, b=3), call("fail", "c2", x="y")])
    return AIMessage("done")


def agent():
    return create_agent(scripted("mcp-like-model", _model), _tools())


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> tuple[str, str]:
    db = str(tmp_path_factory.mktemp("artifact") / "runs.db")
    with Recorder(db) as rec:
        asyncio.run(rec.attach(agent(), name="mcp-like").ainvoke({"messages": [HumanMessage("go")]}))
        rec.flush()
        return db, rec.last_run_id


def _tool_messages(result) -> dict[str, ToolMessage]:
    return {m.name: m for m in result.final_state["messages"] if isinstance(m, ToolMessage)}


def test_a_strict_replay_answers_content_blocks_and_tool_errors_from_the_recording(recorded):
    db, run_id = recorded
    RAN.clear()
    result = replay(run_id, agent(), db=db)
    assert not result.diverged, result.report()
    assert RAN == []
    got = _tool_messages(result)
    assert got["add"].content[0]["text"] == "5" and got["add"].artifact == {"structured_content": {"result": 5}}
    assert got["fail"].status == "error"


@pytest.mark.parametrize("stand_in", [lambda a, b: str(a * b), lambda a, b: [{"type": "text", "text": str(a * b)}]])
def test_an_override_returning_content_alone_diverges_in_the_tools_node(recorded, stand_in):
    db, run_id = recorded
    result = replay(run_id, agent(), db=db, overrides={"add": stand_in})
    first = result.first_divergence
    assert first is not None and first.kind != "error" and first.node == "tools", result.report()
    message = _tool_messages(result)["add"]
    assert "6" in str(message.content) and message.artifact is None


def test_an_override_returning_content_and_artifact_keeps_both(recorded):
    db, run_id = recorded
    result = replay(run_id, agent(), db=db, overrides={"add": lambda a, b: (str(a * b), {"n": a * b})})
    assert result.first_divergence is not None and result.first_divergence.kind != "error", result.report()
    message = _tool_messages(result)["add"]
    assert message.content == "6" and message.artifact == {"n": 6}
