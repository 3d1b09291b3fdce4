"""A recording made before graphtape stored the routes of an edge from several nodes still
replays clean: such an edge decides nothing, and where the run went is compared by the nodes
of the next step."""

from __future__ import annotations

import operator
import sqlite3
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph

from graphtape import Recorder, replay
from graphtape.replay import diff_runs
from graphtape.recorder.store.payloads import pack, unpack


class Notes(TypedDict, total=False):
    notes: Annotated[list[str], operator.add]


def _graph(publish_goes_to: str = END):
    b = StateGraph(Notes)
    b.add_node("legal", lambda s: {"notes": ["legal ok"]})
    b.add_node("finance", lambda s: {"notes": ["finance ok"]})
    b.add_node("publish", lambda s: {"notes": ["published"]})
    b.add_node("archive", lambda s: {"notes": ["archived"]})
    b.add_edge(START, "legal")
    b.add_edge(START, "finance")
    b.add_edge(["legal", "finance"], "publish")
    b.add_edge("publish", publish_goes_to)
    if publish_goes_to != END:
        b.add_edge(publish_goes_to, END)
    return b.compile()


def _drop_join_routes(db: str, run_id: str) -> int:
    """Rewrite the run's steps as a graphtape that stored no join route wrote them."""
    dropped = 0
    with sqlite3.connect(db) as conn:
        for row_id, payload in conn.execute("SELECT id, payload FROM steps WHERE run_id = ?", (run_id,)).fetchall():
            tree = unpack(payload)
            routes = tree.get("r") or []
            kept = [r for r in routes if not (r.get("kind") == "static" and r.get("dest") == ["publish"])]
            if len(kept) != len(routes):
                dropped += len(routes) - len(kept)
                tree["r"] = kept
                conn.execute("UPDATE steps SET payload = ? WHERE id = ?", (pack(tree), row_id))
    return dropped


def test_a_recording_without_join_routes_replays_clean(tmp_path):
    db = str(tmp_path / "old.db")
    with Recorder(db) as rec:
        rec.attach(_graph()).invoke({"notes": []})
        rec.flush()
        run_id = rec.last_run_id
    assert _drop_join_routes(db, run_id) == 2  # legal → publish, finance → publish

    result = replay(run_id, _graph(), db=db, mode="strict")
    assert not result.diverged, result.report()


def test_a_join_that_goes_elsewhere_still_diverges(tmp_path):
    db = str(tmp_path / "old.db")
    with Recorder(db) as rec:
        rec.attach(_graph()).invoke({"notes": []})
        rec.flush()
        run_id = rec.last_run_id
    _drop_join_routes(db, run_id)

    result = replay(run_id, _graph(publish_goes_to="archive"), db=db, mode="strict")
    assert result.diverged
    first = result.first_divergence
    assert first.kind == "route" and first.node == "publish", result.report()


def test_diff_takes_an_older_recording_of_a_join_as_the_same_run(tmp_path):
    db = str(tmp_path / "both.db")
    with Recorder(db) as rec:
        graph = rec.attach(_graph())
        graph.invoke({"notes": []})
        rec.flush()
        older = rec.last_run_id
        graph.invoke({"notes": []})
        rec.flush()
        today = rec.last_run_id
    _drop_join_routes(db, older)

    assert diff_runs(older, today, db=db).first_difference is None
