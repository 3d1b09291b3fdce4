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
