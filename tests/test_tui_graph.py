"""The run screen's graph view: the recorded graph, the step's nodes and route lit up, subgraphs, a small terminal."""

from __future__ import annotations

import pytest
from replay_graphs import sub_graph
from tui_helpers import record_demo_and_subgraph_runs, settle

from graphtape.recorder import Recorder
from graphtape.tui.app import build_app
from graphtape.tui.graph_layout import GraphLayout
from graphtape.tui.screens.run import RunScreen
from graphtape.tui.widgets.graph_view import GraphView


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """The demo's happy and incident runs and two runs of a graph with a subgraph."""
    db = str(tmp_path_factory.mktemp("tui-diff") / "runs.db")
    return db, record_demo_and_subgraph_runs(db)


def drawn(view: GraphView, name: str) -> list[str]:
    """The main drawing's rows holding node ``name``'s label, as drawn for the current step."""
    layout = view.drawings[0].layout
    box = layout.boxes[name]
    return [layout.line(y, *view.marks).plain for y in range(box.y, box.y + 3)]


async def test_graph_tab_draws_the_recorded_graph_and_follows_the_steps(store):
    db, ids = store
    app = build_app(db, ids["incident"])
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunScreen)
        await pilot.press("colon", "2", "enter")  # step 2: act, whose status lookup timed out
        await settle(pilot)
        assert screen.steps[screen.index].step == 2
        await pilot.press("7")
        view = screen.query_one(GraphView)
        await settle(pilot, lambda: view.drawings is not None)
        layout = view.drawings[0].layout
        assert view.drawings[0].title == "graph reason_act:incident"
        assert set(layout.boxes) == {"__start__", "reason", "act", "give_up", "__end__"}
        # Edges are annotated with how often the run took them.
        assert layout.counts[("reason", "act")] == 3 and layout.counts[("act", "reason")] == 3 and layout.counts[("reason", "__end__")] == 1
        assert ("act", "give_up") not in layout.counts  # in the structure, never taken
        assert "3×" in "".join(layout.line(y).plain for y in range(layout.height))
        # Step 2: act ran (heavy box), and its route back to reason is the one just taken.
        assert view.marks == ({"act"}, {("act", "reason")}, set())
        assert drawn(view, "act")[0].strip().startswith("┏") and drawn(view, "reason")[0].strip().startswith("┌")
        await pilot.press("right")
        await settle(pilot)
        assert screen.steps[screen.index].step == 3 and view.marks == ({"reason"}, {("reason", "act")}, set())
        assert drawn(view, "reason")[0].strip().startswith("┏") and drawn(view, "act")[0].strip().startswith("┌")
        await pilot.press("G")
        await settle(pilot)
        assert view.marks[1] == {("reason", "__end__")}
        # The route's own styling: the taken edge's cells are heavy, the others light.
        styled = [layout.line(y, *view.marks) for y in range(layout.height)]
        heavy = "".join(ch for t in styled for ch in t.plain if ch in "┃━┏┓┗┛┳┻")
        assert heavy, "the route just taken is drawn in heavy lines"
        never = layout.line(layout.boxes["give_up"].y + 1)
        assert any(span.style.dim for span in never.spans if "give_up" in never.plain[span.start : span.end]), "a node the run never ran is dimmed"


async def test_graph_view_keeps_the_step_in_view_on_a_small_terminal(store):
    db, ids = store
    app = build_app(db, ids["incident"])
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        screen = app.screen
        await pilot.press("7")
        view = screen.query_one(GraphView)
        await settle(pilot, lambda: view.drawings is not None)
        await pilot.press("G")  # the last step: reason, and the route to __end__ at the bottom of the drawing
        await settle(pilot)
        await pilot.pause(0.2)
        top = view.rows.index((0, 0))
        box = view.drawings[0].layout.boxes["reason"]
        visible = range(int(view.scroll_offset.y), int(view.scroll_offset.y) + view.scrollable_content_region.height)
        assert top + box.y in visible and top + box.y + 2 in visible


async def test_graph_view_shows_subgraphs_and_a_subgraph_namespace_draws_its_own_graph(store):
    db, ids = store
    app = build_app(db, ids["sub1"])
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        screen = app.screen
        await pilot.press("7")
        view = screen.query_one(GraphView)
        await settle(pilot, lambda: view.drawings is not None)
        titles = [d.title for d in view.drawings]
        assert titles == ["the run's graph", "subgraph child: ran 1 time in this run"]
        assert view.drawings[0].layout.boxes["child"].label == "child ▸"
        assert set(view.drawings[1].layout.boxes) == {"__start__", "s1", "s2", "s3", "__end__"}
        assert view.drawings[1].layout.counts[("s1", "s2")] == 1
        # Into the subgraph (Subgraphs tab at the step that entered it): its graph is the one drawn.
        while screen.steps[screen.index].nodes != ["child"]:
            await pilot.press("right")
            await settle(pilot)
        await pilot.press("6")
        await settle(pilot)
        await pilot.press("tab")
        await pilot.press("enter")
        await settle(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen is not screen)
        inner = app.screen
        assert inner.ns.startswith("child:")
        await pilot.press("7")
        inner_view = inner.query_one(GraphView)
        await settle(pilot, lambda: inner_view.drawings is not None)
        assert inner_view.drawings[0].title == "subgraph child"
        assert set(inner_view.drawings[0].layout.boxes) == {"__start__", "s1", "s2", "s3", "__end__"}


def test_layout_of_a_cycle_draws_both_directions_and_counts():
    layout = GraphLayout(
        ["reason", "act"],
        [("__start__", "reason"), ("reason", "act"), ("act", "reason"), ("reason", "__end__")],
        counts={("reason", "act"): 2, ("act", "reason"): 2, ("__start__", "reason"): 1, ("reason", "__end__"): 1},
        ran={"__start__", "reason", "act"},
    )
    text = "\n".join(line.plain for line in layout.lines())
    assert text.count("▼") == 3 and text.count("▲") == 1  # the loop back to reason is drawn upward
    assert text.count("2×") == 2 and text.count("1×") == 2
    assert layout.boxes["__start__"].rank < layout.boxes["reason"].rank < layout.boxes["act"].rank
    for name in ("reason", "act"):
        box = layout.boxes[name]
        assert name in layout.line(box.y + 1).plain


def _drawings(db: str, run_id: str) -> list:
    """The Graph tab's drawings of a run, read from the store as the TUI reads them."""
    from graphtape.recorder import open_store
    from graphtape.tui.graph_reader import read_graph

    store = open_store(db)
    try:
        return read_graph(store, run_id)
    finally:
        store.close()


def _record_sub_graph(db: str) -> str:
    """A run of the graph with a subgraph, recorded into ``db``; its id."""
    with Recorder(db) as rec:
        rec.attach(sub_graph(1), name="sub").invoke({"n": 1, "log": []})
        rec.flush()
        return rec.last_run_id


def test_a_run_recorded_without_a_structure_is_drawn_from_the_routes_it_took(tmp_path):
    import sqlalchemy as sa

    db = str(tmp_path / "bare.db")
    run_id = _record_sub_graph(db)
    engine = sa.create_engine(f"sqlite:///{db}")
    with engine.begin() as conn:  # as an import of LangGraph checkpoints leaves it: no graph recorded
        conn.execute(sa.text("UPDATE runs SET graph = NULL WHERE id = :id"), {"id": run_id})
    engine.dispose()
    drawings = _drawings(db, run_id)
    assert len(drawings) == 1 and "no graph structure was recorded with this run: drawn from the routes it took" in drawings[0].note
    layout = drawings[0].layout
    assert set(layout.boxes) == {"__start__", "pre", "child", "post", "__end__"}
    assert layout.counts[("pre", "child")] == 1


def test_a_recorded_graph_with_too_many_edges_is_listed_not_laid_out(tmp_path):
    """A received run whose structure holds thousands of edges (a layout of minutes, holding the
    TUI's quit) is described in one line instead of drawn; the recorded graph is data from elsewhere."""
    import json

    import sqlalchemy as sa

    from graphtape.tui.graph_reader import MAX_EDGES

    db = str(tmp_path / "wide.db")
    run_id = _record_sub_graph(db)
    engine = sa.create_engine(f"sqlite:///{db}")
    with engine.begin() as conn:
        graph = json.loads(conn.execute(sa.text("SELECT graph FROM runs WHERE id = :id"), {"id": run_id}).scalar_one())
        nodes = [f"n{i}" for i in range(200)]
        graph["nodes"] = graph.get("nodes", []) + nodes if isinstance(graph.get("nodes"), list) else nodes
        graph["edges"] = [{"source": a, "target": b} for i, a in enumerate(nodes) for b in nodes[i + 1 : i + 21]]
        conn.execute(sa.text("UPDATE runs SET graph = :g WHERE id = :id"), {"g": json.dumps(graph), "id": run_id})
    engine.dispose()
    drawings = _drawings(db, run_id)
    assert drawings[0].layout is None and f"more than {MAX_EDGES} edges" in drawings[0].note, drawings[0].note
