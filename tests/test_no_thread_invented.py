"""A graph without a checkpointer, run without a thread, sees no thread under graphtape either.

graphtape lends such a run a saver of its own; LangGraph does not need a thread id for it, so
none is put in the run's config: nodes, the user's callbacks and trace metadata (LangSmith groups
runs into threads by it) see what they see bare. The run is still stored, under a thread named
after it.
"""

from __future__ import annotations

from typing import Any, TypedDict

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langgraph.graph import END, START, StateGraph

from graphtape import Recorder, open_store


class S(TypedDict, total=False):
    n: int
    seen: str


class Metadata(BaseCallbackHandler):
    def __init__(self) -> None:
        self.threads: list[Any] = []

    def on_chain_start(self, serialized, inputs, *, metadata=None, **kwargs) -> None:  # noqa: ANN001
        self.threads.append((metadata or {}).get("thread_id"))


def _graph():
    def look(s: S, config) -> dict:
        return {"n": s["n"] + 1, "seen": repr(config["configurable"].get("thread_id"))}

    b = StateGraph(S)
    b.add_node("look", look)
    b.add_node("again", lambda s: {"n": s["n"] + 1})
    b.add_edge(START, "look")
    b.add_edge("look", "again")
    b.add_edge("again", END)
    return b.compile()


@pytest.mark.parametrize("call", ["invoke", "stream", "ainvoke"])
async def test_nodes_and_callbacks_see_no_thread_as_bare(tmp_path, call):
    db = tmp_path / "gt.db"
    seen = {}
    with Recorder(db) as rec:
        for who, graph in (("bare", _graph()), ("recorded", rec.attach(_graph(), name="look"))):
            handler = Metadata()
            config = {"callbacks": [handler]}
            if call == "invoke":
                out = graph.invoke({"n": 0}, config)
            elif call == "stream":
                out = list(graph.stream({"n": 0}, config, stream_mode="updates"))
            else:
                out = await graph.ainvoke({"n": 0}, config)
            seen[who] = (out, sorted(set(map(repr, handler.threads))))
        run_id = rec.last_run_id
    assert seen["bare"][1] == ["None"]
    assert seen["recorded"] == seen["bare"]
    store = open_store(db)
    try:
        run = store.get_run(run_id)
        assert run.status == "ok" and run.step_count == 4 and run.thread_id == f"graphtape-{run_id}"
        assert store.state_at(run_id, 1)["seen"] == "None"
    finally:
        store.close()


def test_runs_without_a_thread_keep_their_checkpoints_apart(tmp_path):
    """Two runs at once on the lent saver, each keyed by its own run: neither sees the other's."""
    from concurrent.futures import ThreadPoolExecutor

    with Recorder(tmp_path / "gt.db") as rec:
        graph = rec.attach(_graph(), name="look")
        with ThreadPoolExecutor(8) as pool:
            outs = list(pool.map(lambda n: graph.invoke({"n": n}), range(32)))
    assert [o["n"] for o in outs] == [n + 2 for n in range(32)]
    store = open_store(tmp_path / "gt.db")
    try:
        runs = store.list_runs(limit=100)
        assert len(runs) == 32 and {r.status for r in runs} == {"ok"} and {r.step_count for r in runs} == {4}
    finally:
        store.close()


@pytest.mark.parametrize("watched", [False, True], ids=["invoked", "streamed for progress"])
def test_a_replay_of_a_run_given_no_thread_gives_its_nodes_none_either(tmp_path, watched):
    """What a node read of its thread replays as it was: none, from the start or mid-run, also when
    the replay streams its checkpoints (progress, a window). Its run is stored under a thread of its own."""
    from graphtape import replay

    db = tmp_path / "gt.db"
    with Recorder(db) as rec:
        rec.attach(_graph(), name="look").invoke({"n": 0})
        run_id = rec.last_run_id
    store = open_store(db)
    try:
        for start in (-1, 0):
            kwargs = {"progress": lambda *_: None} if watched else {}
            result = replay(run_id, _graph(), store=store, from_step=start, mode="strict", **kwargs)
            assert not result.diverged, result.report()
            assert result.final_state == {"n": 2, "seen": "None"}
            assert store.get_run(result.run_id).thread_id.startswith("graphtape-replay-")
    finally:
        store.close()
