"""Saves to graphtape's own in-memory savers run in place, not through LangGraph's thread pool.

Real compiled graphs, LangGraph's own executors and savers, a real store file. The saver
graphtape lends a graph without memory (and a replay's) is asked on the thread that runs the
graph; a user's saver keeps LangGraph's hop; LangGraph's ``submit`` is its own again once the
last run ends; a failing save still fails the run; an async save that does wait is finished by
asyncio; and what is recorded is the same either way.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.pregel._executor import AsyncBackgroundExecutor, BackgroundExecutor

from graphtape.recorder import Recorder, inline_saves
from graphtape.recorder.saver import RunScopedSaver

LANGGRAPH_SUBMIT = BackgroundExecutor.__dict__["submit"]
LANGGRAPH_ASUBMIT = AsyncBackgroundExecutor.__dict__["submit"]


class Count(TypedDict):
    n: int
    seen: list


def counter_graph(checkpointer: Any = None, nodes: int = 3) -> Any:
    def bump(state: Count) -> dict:
        return {"n": state["n"] + 1, "seen": [*state["seen"], threading.get_ident()]}

    b = StateGraph(Count)
    names = [f"n{i}" for i in range(nodes)]
    for name in names:
        b.add_node(name, bump)
    b.add_edge(START, names[0])
    for a, z in zip(names, names[1:]):
        b.add_edge(a, z)
    b.add_edge(names[-1], END)
    return b.compile(checkpointer=checkpointer)


class NotesThreads:
    """A saver that notes the thread each save runs on."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[int] = []

    def put(self, config, checkpoint, metadata, new_versions):  # type: ignore[override]
        self.threads.append(threading.get_ident())
        return super().put(config, checkpoint, metadata, new_versions)

    def put_writes(self, config, writes, task_id, task_path=""):  # type: ignore[override]
        self.threads.append(threading.get_ident())
        super().put_writes(config, writes, task_id, task_path)


class WatchedSaver(NotesThreads, RunScopedSaver):
    """graphtape's in-memory saver."""


class WatchedMemory(NotesThreads, InMemorySaver):
    """A user's saver."""


@pytest.fixture
def rec(tmp_path):
    r = Recorder(str(tmp_path / "inline.db"))
    yield r
    r.close()


def test_graphtape_saver_is_asked_on_the_graph_thread(rec):
    saver = WatchedSaver()
    graph = rec.attach(counter_graph(checkpointer=saver))
    out = graph.invoke({"n": 0, "seen": []}, {"configurable": {"thread_id": "t"}})
    assert out["n"] == 3
    # A sequential graph's nodes run on the caller's thread; each save ran there too.
    assert set(out["seen"]) == {threading.get_ident()}
    assert len(saver.threads) >= 7  # input + 3 steps, and each task's writes
    assert set(saver.threads) == {threading.get_ident()}
    rec.flush(30)
    assert [s.step for s in rec.store.list_steps(rec.last_run_id)] == [-1, 0, 1, 2, 3]


def test_a_users_saver_keeps_langgraphs_hop(rec):
    saver = WatchedMemory()
    graph = rec.attach(counter_graph(checkpointer=saver))
    graph.invoke({"n": 0, "seen": []}, {"configurable": {"thread_id": "t"}})
    assert saver.threads and threading.get_ident() not in saver.threads


def test_langgraph_gets_its_submit_back_when_the_last_run_ends(rec):
    graph = rec.attach(counter_graph())
    seen: list[Any] = []

    def look(state: Count) -> dict:
        seen.append(BackgroundExecutor.__dict__["submit"])
        return {"n": state["n"]}

    b = StateGraph(Count)
    b.add_node("look", look)
    b.add_edge(START, "look")
    b.add_edge("look", END)
    looking = rec.attach(b.compile())
    assert BackgroundExecutor.__dict__["submit"] is LANGGRAPH_SUBMIT
    looking.invoke({"n": 0, "seen": []})
    assert seen[0] is not LANGGRAPH_SUBMIT and seen[0].__wrapped__ is LANGGRAPH_SUBMIT  # wrapped during the run
    assert BackgroundExecutor.__dict__["submit"] is LANGGRAPH_SUBMIT
    assert AsyncBackgroundExecutor.__dict__["submit"] is LANGGRAPH_ASUBMIT
    assert not inline_saves.installed()
    # A run that fails gives it back too.
    with pytest.raises(KeyError):
        graph.invoke({"seen": []})
    assert BackgroundExecutor.__dict__["submit"] is LANGGRAPH_SUBMIT


def test_a_wrapper_put_on_top_meanwhile_is_left_in_place():
    inline_saves.acquire()
    ours = BackgroundExecutor.__dict__["submit"]

    def theirs(self, fn, *args, **kwargs):
        return ours(self, fn, *args, **kwargs)

    BackgroundExecutor.submit = theirs
    try:
        inline_saves.release()
        assert BackgroundExecutor.__dict__["submit"] is theirs
    finally:
        BackgroundExecutor.submit = LANGGRAPH_SUBMIT


class FailingSaver(RunScopedSaver):
    def put(self, config, checkpoint, metadata, new_versions):  # type: ignore[override]
        if metadata.get("step", -1) >= 1:
            raise OSError("the saver broke")
        return super().put(config, checkpoint, metadata, new_versions)


def test_a_failing_save_fails_the_run_as_langgraph_would(rec):
    # LangGraph raises a failed background save when the run ends; run in place, it still does.
    with pytest.raises(OSError, match="the saver broke"):
        counter_graph(checkpointer=FailingSaver()).invoke({"n": 0, "seen": []}, {"configurable": {"thread_id": "bare"}})
    graph = rec.attach(counter_graph(checkpointer=FailingSaver()))
    with pytest.raises(OSError, match="the saver broke"):
        graph.invoke({"n": 0, "seen": []}, {"configurable": {"thread_id": "t"}})
    assert not inline_saves.installed()


class StoppedSaver(RunScopedSaver):
    """A save during which the person presses Ctrl+C."""

    def put(self, config, checkpoint, metadata, new_versions):  # type: ignore[override]
        if metadata.get("step", -1) >= 1:
            raise KeyboardInterrupt
        return super().put(config, checkpoint, metadata, new_versions)


def test_ctrl_c_during_a_save_in_place_stops_the_run_at_once(rec):
    graph = rec.attach(counter_graph(checkpointer=StoppedSaver(), nodes=5))
    seen: list[int] = []
    with pytest.raises(KeyboardInterrupt):
        for chunk in graph.stream({"n": 0, "seen": []}, {"configurable": {"thread_id": "t"}}, stream_mode="values"):
            seen.append(chunk["n"])
    assert max(seen) <= 2  # not held until the run's end while the other nodes ran
    rec.flush(30)
    assert rec.store.get_run(rec.last_run_id).status_reason == "cancelled"
    assert not inline_saves.installed()


class WaitingSaver(RunScopedSaver):
    """An async saver whose saves do wait on the event loop: asyncio finishes them."""

    def __init__(self) -> None:
        super().__init__()
        self.waited = 0

    async def aput(self, config, checkpoint, metadata, new_versions):  # type: ignore[override]
        await asyncio.sleep(0)
        self.waited += 1
        return self.put(config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config, writes, task_id, task_path=""):  # type: ignore[override]
        await asyncio.sleep(0.001)
        self.waited += 1
        self.put_writes(config, writes, task_id, task_path)


class TaskWatchingSaver(RunScopedSaver):
    """An async saver that never waits, noting the asyncio task each save runs in."""

    def __init__(self) -> None:
        super().__init__()
        self.tasks: list[Any] = []

    async def aput(self, config, checkpoint, metadata, new_versions):  # type: ignore[override]
        self.tasks.append(asyncio.current_task())
        return self.put(config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config, writes, task_id, task_path=""):  # type: ignore[override]
        self.tasks.append(asyncio.current_task())
        self.put_writes(config, writes, task_id, task_path)


async def test_async_saves_run_in_place_or_are_finished_by_asyncio(rec):
    watching = TaskWatchingSaver()
    graph = rec.attach(counter_graph(checkpointer=watching, nodes=4))
    out = await graph.ainvoke({"n": 0, "seen": []}, {"configurable": {"thread_id": "a"}})
    assert out["n"] == 4
    # In place: in the task that runs the graph, not in a task of their own per save.
    assert len(watching.tasks) >= 9 and set(watching.tasks) == {asyncio.current_task()}
    first = rec.last_run_id
    waiting = WaitingSaver()
    graph2 = rec.attach(counter_graph(checkpointer=waiting, nodes=4))
    out2 = await graph2.ainvoke({"n": 0, "seen": []}, {"configurable": {"thread_id": "w"}})
    assert out2["n"] == 4 and waiting.waited >= 9
    rec.flush(30)
    for run_id in (first, rec.last_run_id):
        steps = rec.store.list_steps(run_id)
        assert [s.step for s in steps] == [-1, 0, 1, 2, 3, 4]
        assert rec.store.state_at(run_id, steps[-1].step)["n"] == 4
    assert not inline_saves.installed()


def test_what_is_recorded_is_the_same_with_saves_in_place(rec, monkeypatch):
    graph = rec.attach(counter_graph(nodes=5))
    graph.invoke({"n": 0, "seen": []})
    inline = rec.last_run_id
    monkeypatch.setattr(inline_saves, "_install", lambda: None)  # LangGraph's hops, as before
    graph.invoke({"n": 0, "seen": []})
    hopped = rec.last_run_id
    rec.flush(30)

    def shape(run_id: str) -> list[tuple]:
        out = []
        for s in rec.store.list_steps(run_id):
            state = dict(rec.store.state_at(run_id, s.step))
            state.pop("seen", None)  # thread ids
            out.append((s.step, s.nodes, s.summary, state))
        return out

    assert shape(inline) == shape(hopped)
    assert len(shape(inline)) == 7
