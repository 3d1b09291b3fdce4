"""Small real graphs for the run-diff tests: a retry loop, two versions of one graph, a stamped state.

Each builder takes the knob that makes two recorded runs differ.
"""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph


class FetchState(TypedDict, total=False):
    query: str
    attempts: int
    result: str
    answer: str


def retry_graph(failures: int):
    """`fetch` calls a flaky tool (failing ``failures`` times, then answering) and retries until it answers; then `answer`."""
    left = {"failures": failures}

    @tool
    def flaky_search(q: str) -> str:
        """Search, over a connection that drops."""
        if left["failures"] > 0:
            left["failures"] -= 1
            raise ConnectionError("connection reset")
        return f"found {q}"

    def fetch(state: FetchState) -> dict:
        try:
            return {"result": flaky_search.invoke({"q": state["query"]}), "attempts": state.get("attempts", 0) + 1}
        except ConnectionError:
            return {"result": "", "attempts": state.get("attempts", 0) + 1}

    def retry_or_answer(state: FetchState) -> str:
        return "answer" if state.get("result") else "fetch"

    b = StateGraph(FetchState)
    b.add_node("fetch", fetch)
    b.add_node("answer", lambda s: {"answer": f"answer: {s['result']}"})
    b.add_edge(START, "fetch")
    b.add_conditional_edges("fetch", retry_or_answer, ["fetch", "answer"])
    b.add_edge("answer", END)
    return b.compile()


class PipeState(TypedDict, total=False):
    x: int
    log: Annotated[list[str], operator.add]


def versioned_graph(version: int):
    """v1: load -> score -> END; v2 adds an `audit` node after score."""
    b = StateGraph(PipeState)
    b.add_node("load", lambda s: {"log": ["load"]})
    b.add_node("score", lambda s: {"x": s["x"] * 2, "log": ["score"]})
    b.add_edge(START, "load")
    b.add_edge("load", "score")
    if version >= 2:
        b.add_node("audit", lambda s: {"log": ["audit"]})
        b.add_edge("score", "audit")
        b.add_edge("audit", END)
    else:
        b.add_edge("score", END)
    return b.compile(name=f"pipeline-v{version}")


class StampState(TypedDict, total=False):
    x: int
    stamp: str


def stamped_graph(stamp: str):
    """One node that doubles x and writes ``stamp`` (a value that changes every run, like a clock)."""
    b = StateGraph(StampState)
    b.add_node("work", lambda s: {"x": s["x"] * 2, "stamp": stamp})
    b.add_edge(START, "work")
    b.add_edge("work", END)
    return b.compile()


def failing_graph(fail: bool):
    """`work` doubles x, or raises when ``fail``."""

    def work(state: StampState) -> dict:
        if fail:
            raise ValueError(f"cannot work on {state['x']}")
        return {"x": state["x"] * 2}

    b = StateGraph(StampState)
    b.add_node("work", work)
    b.add_edge(START, "work")
    b.add_edge("work", END)
    return b.compile()


class LookState(TypedDict, total=False):
    order: str
    status: str


def timeout_graph(tool_delay: float, linger: float = 0.0):
    """`check` asks a status tool with a 0.1 s timeout (the tool takes ``tool_delay``); `reply` then takes ``linger`` seconds.

    With a slow tool and a long enough ``linger``, the timed-out call returns while the run is
    still going: it is recorded with its output, after its node stopped waiting for it.
    """
    import concurrent.futures
    import contextvars
    import time

    @tool
    def order_status(order: str) -> str:
        """The order's live status."""
        time.sleep(tool_delay)
        return "in transit"

    def check(state: LookState, config) -> dict:
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        future = pool.submit(contextvars.copy_context().run, order_status.invoke, {"order": state["order"]}, config)
        pool.shutdown(wait=False)
        try:
            return {"status": future.result(timeout=0.1)}
        except TimeoutError:
            return {"status": "unknown (timed out)"}

    def reply(state: LookState) -> dict:
        time.sleep(linger)
        return {}

    b = StateGraph(LookState)
    b.add_node("check", check)
    b.add_node("reply", reply)
    b.add_edge(START, "check")
    b.add_edge("check", "reply")
    b.add_edge("reply", END)
    return b.compile()
