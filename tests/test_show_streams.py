"""``graphtape show --json RUN`` writes a long run as it reads it, a page of steps at a time.

It built every step's view, then one string of the whole document with ``json``'s
Python encoder (indenting turns its C encoder off), then scanned that string for
control characters: 15 s and a few hundred MB for a run of 10,000 steps. The
document written is the one it wrote before, key for key and byte for byte.
"""

from __future__ import annotations

import io
import json
import sys
import tracemalloc
from typing import TypedDict

import pytest
from langgraph.graph import END, START, StateGraph

from graphtape import Recorder, open_store
from graphtape.tui.cli import main
from graphtape.tui.json_stream import write_object
from graphtape.tui.views import run_view


class Count(TypedDict):
    n: int
    until: int
    note: str


def _counter():
    def tick(s: Count) -> dict:
        return {"n": s["n"] + 1, "note": f"tick {s['n']} → next " + "x" * 200}  # one non-ASCII character a step

    b = StateGraph(Count)
    b.add_node("tick", tick)
    b.add_edge(START, "tick")
    b.add_conditional_edges("tick", lambda s: "tick" if s["n"] < s["until"] else END, ["tick", END])
    return b.compile()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    db = str(tmp_path_factory.mktemp("show") / "gt.db")
    ids = {}
    with Recorder(db) as rec:
        app = rec.attach(_counter(), name="counter")
        for steps in (400, 1600):
            app.invoke({"n": 0, "until": steps, "note": ""}, {"recursion_limit": steps + 10})
            ids[steps] = rec.last_run_id
    return db, ids


class _Counting(io.TextIOBase):
    """An output that keeps only how much was written (what a pipe to ``jq`` holds: nothing)."""

    def __init__(self) -> None:
        self.size = 0

    def write(self, text: str) -> int:
        self.size += len(text)
        return len(text)


def _show_json(db: str, run_id: str) -> tuple[int, int]:
    """(peak bytes traced, characters written) of ``show RUN --json``."""
    out = _Counting()
    real, sys.stdout = sys.stdout, out
    main(["show", run_id, "--db", db, "--json"])  # warmed: what is measured is the command's own work
    out.size = 0
    tracemalloc.start()
    try:
        assert main(["show", run_id, "--db", db, "--json"]) == 0
        return tracemalloc.get_traced_memory()[1], out.size
    finally:
        tracemalloc.stop()
        sys.stdout = real


def test_show_json_writes_the_document_it_always_wrote(runs, capsys):
    db, ids = runs
    store = open_store(db)
    try:
        view = run_view(store, ids[400])
    finally:
        store.close()
    assert main(["show", ids[400], "--db", db, "--json"]) == 0
    out = capsys.readouterr().out
    assert out == json.dumps(view, ensure_ascii=False, indent=2, default=str) + "\n"
    assert len(json.loads(out)["steps"]) == 402 and "tick 399 → next" in out


def test_show_json_of_four_times_the_steps_holds_a_page_not_the_run(runs):
    db, ids = runs
    short_peak, short_size = _show_json(db, ids[400])
    long_peak, long_size = _show_json(db, ids[1600])
    # Holding the run's view and then its text cost nine times the text written (18 MB more for
    # 1,200 steps more); read and written a page at a time, what grows is the step numbers.
    assert long_peak - short_peak < 2 * (long_size - short_size), (short_peak, long_peak, long_size - short_size)


@pytest.mark.parametrize(
    "head, items",
    [
        ({"a": {}, "b": [], "c": {"x": [1, {"y": None}]}}, []),
        ({"n": 2**70, "keys": {1: "one", None: "none"}, "text": "é\u2028\ud800"}, [{"z": []}, [], "s", 1.5, {"deep": {"er": [[]]}}]),
        ({}, [{"only": True}]),
    ],
)
def test_write_object_lays_out_what_json_dumps_does(head, items):
    out = io.StringIO()
    write_object(out, head, "items", iter(items))
    assert out.getvalue() == json.dumps({**head, "items": items}, ensure_ascii=False, indent=2, default=str) + "\n"
