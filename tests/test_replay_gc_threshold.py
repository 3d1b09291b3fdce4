"""A replay raises the youngest GC generation's threshold while it runs and leaves the process's as it found it."""

from __future__ import annotations

import gc
import threading

import pytest
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from graphtape.recorder import Recorder
from graphtape.replay import ReplayError, replay
from graphtape.replay.gc_threshold import YOUNG_THRESHOLD, fewer_collections


@pytest.fixture(autouse=True)
def _threshold_kept():
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


class Count(TypedDict):
    n: int


def counting_graph(seen: list[int]):
    """Two nodes; each notes the threshold it ran under (outside the state, so replays stay clean)."""

    def step(state: Count) -> dict:
        seen.append(gc.get_threshold()[0])
        return {"n": state["n"] + 1}

    b = StateGraph(Count)
    b.add_node("a", step)
    b.add_node("b", step)
    b.add_edge(START, "a")
    b.add_edge("a", "b")
    b.add_edge("b", END)
    return b.compile()


def test_a_replay_runs_under_the_raised_threshold_and_restores_the_process_threshold(tmp_path):
    gc.set_threshold(700, 10, 10)
    db = str(tmp_path / "gc.db")
    recorded: list[int] = []
    with Recorder(db) as rec:
        rec.attach(counting_graph(recorded)).invoke({"n": 0})
        rec.flush()
        run_id = rec.last_run_id
    assert recorded == [700, 700]  # recording leaves the user's process alone

    replayed: list[int] = []
    result = replay(run_id, counting_graph(replayed), db=db, mode="strict")
    assert not result.diverged, result.report()
    assert replayed == [YOUNG_THRESHOLD, YOUNG_THRESHOLD]
    assert gc.get_threshold() == (700, 10, 10)


def test_a_replay_that_fails_restores_the_threshold(tmp_path):
    gc.set_threshold(700, 10, 10)
    db = str(tmp_path / "gc.db")
    with Recorder(db) as rec:
        rec.attach(counting_graph([])).invoke({"n": 0})
        rec.flush()
        run_id = rec.last_run_id
    with pytest.raises(ReplayError, match="no completed step 99"):
        replay(run_id, counting_graph([]), 99, db=db)
    assert gc.get_threshold() == (700, 10, 10)


def test_nested_and_concurrent_replays_share_one_raise():
    gc.set_threshold(700, 10, 10)
    inside, leave = threading.Event(), threading.Event()
    seen: list[int] = []

    def other() -> None:
        with fewer_collections():
            inside.set()
            leave.wait(10)
            seen.append(gc.get_threshold()[0])

    t = threading.Thread(target=other)
    t.start()
    assert inside.wait(10)
    with fewer_collections():
        with fewer_collections():
            assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, 10)
    assert gc.get_threshold()[0] == YOUNG_THRESHOLD  # the other thread's replay still runs
    leave.set()
    t.join(10)
    assert seen == [YOUNG_THRESHOLD]
    assert gc.get_threshold() == (700, 10, 10)


@pytest.mark.parametrize("theirs", [(0, 10, 10), (50_000, 10, 10)], ids=["collection-off", "higher"])
def test_a_threshold_the_user_chose_is_left_alone(theirs):
    gc.set_threshold(*theirs)
    with fewer_collections():
        assert gc.get_threshold() == theirs
    assert gc.get_threshold() == theirs


def test_a_threshold_changed_during_a_replay_stands():
    gc.set_threshold(700, 10, 10)
    with fewer_collections():
        gc.set_threshold(1234, 5, 5)
    assert gc.get_threshold() == (1234, 5, 5)
