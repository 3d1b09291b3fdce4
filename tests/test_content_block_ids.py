"""Content-block ids are minted afresh every run, so they never make a divergence.

LangChain's ``create_text_block`` (which langchain-mcp-adapters uses for every MCP tool's answer)
gives each block an ``lc_<uuid4>`` id. Two runs of the same tool on the same input therefore hold
different ids: a live replay of an unchanged MCP agent diverged at every tool call, and
``graphtape diff`` of two such runs reported every tool message as changed.
"""

from __future__ import annotations

from ecosystem_shapes import call, scripted
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.messages.content import create_text_block
from langchain_core.tools import tool

from graphtape import Recorder, replay
from graphtape.replay import diff_runs
from graphtape.replay.normalize import Normalizer


@tool
def weather(city: str) -> list:
    """The weather in a city, as content blocks."""
    return [create_text_block(f"{city}: sunny"), create_text_block("22C")]


def _model(messages: list) -> AIMessage:
    if not any(isinstance(m, ToolMessage) for m in messages):
        return AIMessage("", tool_calls=[call("weather", "w1", city="Oslo")])
    return AIMessage("Sunny in Oslo.")


def agent():
    return create_agent(scripted("blocks-model", _model), [weather])


def _recorded_twice(db: str) -> tuple[str, str]:
    ids = []
    with Recorder(db) as rec:
        for _ in range(2):
            rec.attach(agent(), name="blocks").invoke({"messages": [HumanMessage("Weather in Oslo?")]})
            rec.flush()
            ids.append(rec.last_run_id)
    return ids[0], ids[1]


def test_a_live_replay_of_a_tool_answering_in_content_blocks_does_not_diverge(tmp_path):
    db = str(tmp_path / "runs.db")
    run_id, _ = _recorded_twice(db)
    result = replay(run_id, agent(), db=db, mode="live")
    assert not result.diverged, result.report()


def test_two_runs_differing_only_in_block_ids_are_the_same(tmp_path):
    db = str(tmp_path / "runs.db")
    a, b = _recorded_twice(db)
    assert diff_runs(a, b, db=db).same, diff_runs(a, b, db=db)


def test_a_changed_block_still_differs():
    def msg(text: str, block_id: str) -> dict:
        return {"type": "tool", "content": [{"type": "text", "text": text, "id": block_id}], "name": "weather"}

    n = Normalizer()
    assert n(msg("sunny", "lc_1")) == n(msg("sunny", "lc_2"))
    assert n(msg("sunny", "lc_1")) != n(msg("rain", "lc_1"))
