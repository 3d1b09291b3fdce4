"""Comparing two recorded runs in the TUI: mark one and diff another, or pick which; the compare screen aligned."""

from __future__ import annotations

import pytest
from textual.widgets import OptionList, Static
from tui_helpers import record_demo_and_subgraph_runs, settle

from graphtape.tui.app import build_app
from graphtape.tui.screens.compare import CompareScreen
from graphtape.tui.screens.run import RunScreen
from graphtape.tui.screens.run_picker import RunPicker
from graphtape.tui.screens.runs import RunsScreen
from graphtape.tui.widgets.panels import TextPanel
from graphtape.tui.widgets.runs_table import RunsTable
from graphtape.tui.widgets.timeline import Timeline


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """The demo's happy and incident runs and two runs of a graph with a subgraph."""
    db = str(tmp_path_factory.mktemp("tui-diff") / "runs.db")
    return db, record_demo_and_subgraph_runs(db)


def select_run(screen: RunsScreen, run_id: str) -> None:
    table = screen.query_one(RunsTable)
    table.cursor = next(i for i, r in enumerate(screen.runs) if r.id == run_id)


def panel_text(screen, selector: str) -> str:
    return str(screen.query_one(selector, TextPanel).query_one(".panel-body", Static).render())


# -- comparing two runs -------------------------------------------------------------------------


async def test_mark_one_run_then_diff_another_opens_the_comparison_at_the_first_difference(store):
    db, ids = store
    app = build_app(db)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot)
        runs = app.screen
        assert isinstance(runs, RunsScreen)
        select_run(runs, ids["happy"])
        await pilot.press("m")
        assert runs.marked is not None and runs.marked.id == ids["happy"]
        assert "A: demo:happy" in str(runs.query_one("#runs-title", Static).render())
        select_run(runs, ids["incident"])
        await pilot.press("d")
        await settle(pilot, lambda: isinstance(app.screen, CompareScreen))
        compare = app.screen
        assert isinstance(compare, CompareScreen)
        diff = compare.result
        assert (diff.a.id, diff.b.id) == (ids["happy"], ids["incident"])
        header = str(compare.query_one("#compare-header", Static).render())
        assert "first difference: step 2 node 'act': call: tool 'lookup_order_status' timed out in demo:incident" in header
        # The first difference is selected (not the first row: the other inputs come before it).
        first = compare.divergences[compare.selected]
        assert first.first and compare.selected > 0 and compare.query_one("#divergence-list", OptionList).highlighted == compare.selected
        assert "FIRST step 2 node 'act': call:" in panel_text(compare, "#divergence-text")
        # Both timelines are aligned row by row: the incident's retries face gap rows.
        left, right = compare.query_one("#compare-original", Timeline), compare.query_one("#compare-new", Timeline)
        assert [s.step if s else None for s in left.steps] == [-1, 0, 1, 2, None, None, None, None, 3]
        assert [s.step if s else None for s in right.steps] == [-1, 0, 1, 2, 3, 4, 5, 6, 7]
        assert left.cursor == right.cursor == 3
        assert compare.pair == (2, 2) and compare.diff_title.startswith("A step 2 → B step 2")
        changed = {e.path: (e.old, e.new) for e in compare.diff_entries}
        assert changed["retries"] == (0, 1) and changed["intermediate_steps[0].observation.status"] == ("ok", "timeout")
        assert not [p for p in changed if p.endswith(".id") or p.endswith("tool_call_id")]  # ids never count
        assert changed["messages[2].status"] == ("success", "error")
        assert right.marks[3].plain == "+" and left.marks[2].plain == "≠"

        await pilot.press("n")  # the next difference: state at the same step
        await settle(pilot)
        assert compare.selected == compare.divergences.index(first) + 1
        extra = next(i for i, d in enumerate(compare.divergences) if d.kind == "extra")
        while compare.selected < extra:
            await pilot.press("n")
        await settle(pilot, lambda: compare.pair == (2, 3))
        # A step only B has: diffed against the last step both runs share; A's timeline shows its gap row.
        assert compare.diff_title.startswith("A step 2 → B step 3") and left.cursor == right.cursor == 4
        assert left.steps[left.cursor] is None
        await pilot.press("p")
        await settle(pilot)
        assert compare.selected == extra - 1

        # Moving one timeline moves the other to the aligned row.
        right.focus()
        right.cursor = 8
        await settle(pilot, lambda: compare.pair == (3, 7))
        assert left.cursor == 8 and compare.diff_title.startswith("A step 3 → B step 7")
        answers = {e.path: (e.old, e.new) for e in compare.diff_entries}
        assert "delivered" in answers["agent_outcome.answer"][1]

        await pilot.press("o")  # run B opens at the step selected
        await settle(pilot, lambda: isinstance(app.screen, RunScreen))
        opened = app.screen
        assert isinstance(opened, RunScreen) and opened.run_id == ids["incident"] and opened.steps[opened.index].step == 7
        await pilot.press("escape")
        await settle(pilot, lambda: app.screen is compare)
        await pilot.press("escape")
        await settle(pilot, lambda: isinstance(app.screen, RunsScreen))
        assert isinstance(app.screen, RunsScreen)


async def test_diff_without_a_mark_asks_which_run_to_compare_with(store):
    db, ids = store
    app = build_app(db)
    async with app.run_test(size=(120, 32)) as pilot:
        await settle(pilot)
        runs = app.screen
        select_run(runs, ids["sub4"])
        await pilot.press("d")
        await settle(pilot, lambda: isinstance(app.screen, RunPicker))
        picker = app.screen
        assert isinstance(picker, RunPicker)
        listing = picker.query_one("#picker-runs", OptionList)
        offered = [listing.get_option_at_index(i).id for i in range(listing.option_count)]
        assert ids["sub4"] not in offered and offered[0] == ids["sub1"]  # the same graph first
        await pilot.press(*"demo:hap")  # typing filters
        assert [listing.get_option_at_index(i).id for i in range(listing.option_count)] == [ids["happy"]]
        await pilot.press("escape")
        await settle(pilot)
        assert app.screen is runs
        await pilot.press("d")
        await settle(pilot, lambda: isinstance(app.screen, RunPicker))
        await pilot.press("enter")  # the highlighted one: the other run of the same graph
        await settle(pilot, lambda: isinstance(app.screen, CompareScreen))
        compare = app.screen
        assert isinstance(compare, CompareScreen) and (compare.result.a.id, compare.result.b.id) == (ids["sub1"], ids["sub4"])
        first = compare.divergences[compare.selected]
        # The first difference is inside the subgraph: its states are read in each run's own namespace.
        assert first.ns == "child" and first.node == "s2" and compare.pair == (2, 2)
        assert compare.pair_ns[0].startswith("child:") and compare.pair_ns[1].startswith("child:")
        assert "in child" in compare.diff_title
        assert {e.path: (e.old, e.new) for e in compare.diff_entries}["n"] == (3, 6)  # s1 doubled 1, then s2 added 1 in A, 4 in B
        # The root timelines stand at the step that entered the subgraph.
        left = compare.query_one("#compare-original", Timeline)
        assert left.steps[left.cursor].step == 2 and left.steps[left.cursor].nodes == ["child"]


async def test_one_enter_in_the_pickers_filter_picks_the_first_match(store):
    db, ids = store
    app = build_app(db)
    async with app.run_test(size=(120, 32)) as pilot:
        await settle(pilot)
        runs = app.screen
        select_run(runs, ids["incident"])
        await pilot.press("d")
        await settle(pilot, lambda: isinstance(app.screen, RunPicker))
        picker = app.screen
        await pilot.press(*"nothing-like-this", "enter")  # no match: the picker stays, saying so
        await settle(pilot)
        assert app.screen is picker and "no other run matches" in str(picker.query_one("#picker-runs", OptionList).get_option_at_index(0).prompt)
        box = picker.query_one("#picker-filter")
        box.value = ""
        box.focus()
        await pilot.press(*"happy", "enter")
        await settle(pilot, lambda: isinstance(app.screen, CompareScreen))
        compare = app.screen
        assert isinstance(compare, CompareScreen) and (compare.result.a.id, compare.result.b.id) == (ids["happy"], ids["incident"])


async def test_two_runs_that_behaved_the_same_say_so(store):
    db, ids = store
    app = build_app(db)
    async with app.run_test(size=(120, 32)) as pilot:
        await settle(pilot)
        app.compare_runs(ids["happy"], ids["happy"])
        await settle(pilot, lambda: isinstance(app.screen, CompareScreen))
        compare = app.screen
        assert compare.divergences == [] and "behaved the same" in str(compare.query_one("#compare-header", Static).render())
        assert "no differences" in panel_text(compare, "#divergence-text").lower()
        await pilot.press("n")  # nothing to move to: says so, does not fail
        await settle(pilot)
        assert app.screen is compare
        await pilot.press("q")  # q quits here as on every other screen
        await pilot.pause()
        assert app.return_code == 0 and not app.is_running


async def test_compare_paths_keep_their_tails_gap_rows_fit_and_v_shows_the_difference_in_full(store):
    from rich.style import Style

    from graphtape.tui.screens.prompts import ValueScreen
    from graphtape.tui.widgets.diff_view import DiffView

    db, ids = store
    app = build_app(db)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        app.compare_runs(ids["happy"], ids["incident"])
        await settle(pilot, lambda: isinstance(app.screen, CompareScreen))
        compare = app.screen
        await settle(pilot, lambda: compare.pair == (2, 2))
        # Gap rows say so within the nodes column, not cut to "(no step he…".
        left = compare.query_one("#compare-original", Timeline)
        gaps = [left.draw_row(i, "", Style()).text for i, s in enumerate(left.steps) if s is None]
        assert gaps and all("(no step)" in row and "…" not in row for row in gaps), gaps
        # Sibling paths cut to the diff's path column still read apart: their tails stay.
        view = compare.query_one("#compare-diff", DiffView)
        long = [e.path for e in view.entries if e.path.startswith("intermediate_steps[0].")]
        assert len(long) >= 3
        lines = [view._draw(i, view.scrollable_content_region.width, Style()).text for i in range(2, 2 + len(view._rows))]
        paths = [line[2 : 2 + min(view._path_width, int(view.scrollable_content_region.width * 0.35))].strip() for line in lines]
        shown = [p for p in paths if p.startswith("inter")]
        assert len(shown) == len(long) and len(set(shown)) == len(shown), shown
        assert any(p.endswith("observation.status") for p in shown), shown
        # v: the selected difference and the states' diff, in full.
        d = compare.divergences[compare.selected]
        await pilot.press("v")
        await settle(pilot, lambda: isinstance(app.screen, ValueScreen))
        viewer = app.screen
        assert isinstance(viewer, ValueScreen)
        assert d.what in viewer.text and "intermediate_steps[0].observation.status" in viewer.text
        assert viewer.title_text.startswith(f"difference {compare.selected + 1} of {len(compare.divergences)}")
        await pilot.press("escape")
        await settle(pilot)
        assert app.screen is compare
