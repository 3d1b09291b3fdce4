"""A runaway agent (a chat loop stopped by the recursion limit) stays readable.

Each model call's inputs are the whole conversation so far: 1,200 calls hand the model about
720,000 messages in all, stored once each and shared. The decoder's budget against crafted
blobs that multiply is per recorded value (one call), so a long honest run is shown,
listed and replayed, not refused as hostile.
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
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
