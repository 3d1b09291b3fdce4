"""A recorded error whose class derives from ``OSError`` (``ConnectionError``, ``TimeoutError``, an
SDK's connection error) is raised in a replay as that class, so the graph's ``retry_on`` that
named it retries again: such built-ins make their own instances, and ``Exception.__new__``
refuses them."""

from __future__ import annotations

from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.types import RetryPolicy

from graphtape import Recorder, open_store, replay
from graphtape.replay.calls import rebuild_error


class Dropped(ConnectionError):
    """The courier's service dropped the connection."""


class Slow(TimeoutError):
    """The courier's service took too long."""


def _courier():
    tries = {"n": 0}

    @tool
    def track(order_id: str) -> str:
        """Track an order; the service drops the first connection."""
        tries["n"] += 1
        if tries["n"] == 1:
            raise Dropped("connection reset by peer")
        return f"{order_id} is in transit"

    def fetch(state: MessagesState) -> dict:
        return {"messages": [AIMessage(track.invoke({"order_id": "OS1"}))]}

    b = StateGraph(MessagesState)
    b.add_node("fetch", fetch, retry_policy=RetryPolicy(retry_on=Dropped, initial_interval=0.01, jitter=False))
    b.add_edge(START, "fetch")
    return b.compile()


def test_a_connection_error_of_the_graphs_own_class_is_retried_as_recorded(tmp_path):
    db = str(tmp_path / "courier.db")
    with Recorder(db) as rec:
        assert rec.attach(_courier(), name="courier").invoke({"messages": []})["messages"][-1].content == "OS1 is in transit"
    store = open_store(db)
    try:
        (run,) = store.list_runs()
    finally:
        store.close()
    result = replay(run.id, _courier(), db=db)
    assert not result.diverged, result.report()
    assert result.final_state["messages"][-1].content == "OS1 is in transit"


def test_an_os_error_subclass_is_rebuilt_as_itself_with_its_message():
    for cls in (Dropped, Slow):
        error = rebuild_error(cls.__name__, "gone", fields={"error_class": f"{__name__}.{cls.__qualname__}"})
        assert type(error) is cls and str(error) == "gone", (cls, type(error))
