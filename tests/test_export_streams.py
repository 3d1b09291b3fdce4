"""Exporting a long run as a fixture holds what the fixture needs, not every step's state.

The exporter kept the encoded state after each step of the run until the end: a list
channel of 10,000 messages, one more each step, held 10,000 copies of the list
(1.2 GB for a 10,000-step run). It now reads the run a page of rows at a time and
hands each step on as soon as its rows are read, so its peak does not grow with the
number of steps beyond the file it builds.
"""

from __future__ import annotations

import operator
import tracemalloc
from typing import Annotated, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph

from graphtape import Recorder, open_store
from graphtape.replay.fixture import dumps_fixture, export_fixture

PREFILL = 20_000  # items already in the list when the run starts: each step's copy of it is 160 KB


class Log(TypedDict):
    n: int
    until: int
    log: Annotated[list, operator.add]


def _appender():
    def add(s: Log) -> dict:
        return {"n": s["n"] + 1, "log": [s["n"]]}

    b = StateGraph(Log)
    b.add_node("add", add)
    b.add_edge(START, "add")
    b.add_conditional_edges("add", lambda s: "add" if s["n"] < s["until"] else END, ["add", END])
    return b.compile()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    db = str(tmp_path_factory.mktemp("long") / "gt.db")
    ids = {}
    with Recorder(db) as rec:
        app = rec.attach(_appender(), name="appender")
        for steps in (50, 400):
            app.invoke({"n": 0, "until": steps, "log": list(range(PREFILL))}, {"recursion_limit": steps + 10})
            ids[steps] = rec.last_run_id
    return db, ids


def _peak_of_export(db: str, run_id: str) -> tuple[int, dict]:
    store = open_store(db)
    try:
        export_fixture(store, run_id)  # imports and caches warmed: what is measured is the export
        tracemalloc.start()
        try:
            fixture = export_fixture(store, run_id)
            return tracemalloc.get_traced_memory()[1], fixture
        finally:
            tracemalloc.stop()
    finally:
        store.close()


def test_exporting_eight_times_the_steps_does_not_hold_a_state_per_step(runs):
    db, ids = runs
    short_peak, short = _peak_of_export(db, ids[50])
    long_peak, long = _peak_of_export(db, ids[400])
    assert len(long["steps"]) == 401 and long["final_state"]["log"] == list(range(PREFILL)) + list(range(400))
    assert len(short["steps"]) == 51  # step 0 (the input written), then one per node
    grown = len(dumps_fixture(long)) - len(dumps_fixture(short))  # the file: 350 steps more, a few KB each
    # Holding each step's state cost 350 x 160 KB (56 MB) more; what the longer file needs is far less.
    assert long_peak - short_peak < 5 * 1024 * 1024 + 20 * grown, (short_peak, long_peak, grown)
