"""The user's callbacks reach LangGraph as they were given, with graphtape's handler beside them.

A config LangChain rejects (a lone handler instead of a list) must fail under graphtape as it fails
bare: dropping it quietly would make a run pass while debugging and fail in production.
"""

from __future__ import annotations

from typing import TypedDict

import pytest
from langchain_core.callbacks import BaseCallbackHandler, CallbackManager
from langgraph.graph import END, START, StateGraph

from graphtape import Recorder, open_store


class S(TypedDict):
    n: int


class Starts(BaseCallbackHandler):
    def __init__(self) -> None:
        self.names: list[str] = []

    def on_chain_start(self, serialized, inputs, *, name=None, **kwargs) -> None:  # noqa: ANN001
        self.names.append(name)


def _graph():
    b = StateGraph(S)
    b.add_node("a", lambda s: {"n": s["n"] + 1})
    b.add_edge(START, "a")
    b.add_edge("a", END)
    return b.compile()


def _outcome(graph, config) -> str:
    try:
        return repr(graph.invoke({"n": 0}, config))
    except Exception as exc:  # noqa: BLE001 - the outcome under test
        return f"{type(exc).__name__}: {exc}"


def test_a_lone_handler_fails_as_bare(tmp_path):
    with Recorder(tmp_path / "gt.db") as rec:
        bare = _outcome(_graph(), {"callbacks": Starts()})
        recorded = _outcome(rec.attach(_graph(), name="lone"), {"callbacks": Starts()})
    assert bare.startswith("AttributeError")
    assert recorded == bare


@pytest.mark.parametrize("shape", ["list", "manager"])
def test_the_users_handlers_still_run_and_the_run_is_recorded(tmp_path, shape):
    handler = Starts()
    callbacks = [handler] if shape == "list" else CallbackManager(handlers=[handler], inheritable_handlers=[handler])
    db = tmp_path / "gt.db"
    with Recorder(db) as rec:
        out = rec.attach(_graph(), name="kept").invoke({"n": 0}, {"callbacks": callbacks})
    assert out == {"n": 1}
    assert "a" in handler.names
    store = open_store(db)
    try:
        assert [(r.name, r.status) for r in store.list_runs()] == [("kept", "ok")]
    finally:
        store.close()
