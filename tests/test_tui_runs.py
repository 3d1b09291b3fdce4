"""The runs list: columns that fit, every column sorts both ways, the forked filter, the fork label,
an empty store that still answers q and ?, the cursor, and thousands of runs. Pilot tests on real
recorded runs, and on synthetic ones from the store benchmark."""

from __future__ import annotations

import sys
from typing import TypedDict

import pytest
import sqlalchemy as sa
from conftest import ROOT, load_agent
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.types import interrupt
from textual.widgets import Input, Static
from textual.widgets._footer import FooterKey
from textual.worker import WorkerCancelled

from graphtape.recorder import Recorder, open_store
from graphtape.replay import fork, replay
from graphtape.tui.app import build_app
from graphtape.tui.screens.prompts import HelpScreen
from graphtape.tui.screens.run import RunScreen
from graphtape.tui.screens.runs import COLUMNS, RunsScreen
from graphtape.tui.widgets.runs_table import RunsTable

sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_store  # noqa: E402  (the benchmark's synthetic runs, shaped like recorded ones)

ALL_LABELS = ["name", "id", "status", "steps", "started", "duration", "from", "graph", "redacted", "faults"]


class Count(TypedDict):
    n: int


def _ask(state: Count):
    return {"n": interrupt("approve?")}


def _fail(state: Count):
    raise RuntimeError("payment API returned 500")


@pytest.fixture(scope="module")
def lineage_db(tmp_path_factory):
    """Demo runs (happy, incident), an error run, an interrupted one, a run whose recorder
    died, a replay and a fork of the happy run; the incident has redactions, the error run faults."""
    db = str(tmp_path_factory.mktemp("tui-runs") / "runs.db")
    ra = load_agent("reason_act")
    with Recorder(db) as rec:
        rec.attach(ra.build_graph("happy"), name="demo:happy").invoke(ra.inputs_for("happy"))
        rec.flush()
        happy = rec.last_run_id
        b = StateGraph(Count)
        b.add_node("fail", _fail)
        b.add_edge(START, "fail")
        with pytest.raises(RuntimeError):
            rec.attach(b.compile(), name="broken").invoke({"n": 0})
        rec.flush()
        broken = rec.last_run_id
        b2 = StateGraph(Count)
        b2.add_node("ask", _ask)
        b2.add_edge(START, "ask")
        rec.attach(b2.compile(checkpointer=InMemorySaver()), name="needs-approval").invoke({"n": 0}, {"configurable": {"thread_id": "t"}})
        rec.attach(ra.build_graph("incident"), name="demo:incident").invoke(ra.inputs_for("incident"))
        rec.flush()
        incident = rec.last_run_id
        rec.attach(ra.build_graph("happy"), name="crashed").invoke(ra.inputs_for("happy"))
        rec.flush()
        crashed = rec.last_run_id
    replayed = replay(happy, ra.build_graph("happy"), db=db).run_id
    store = open_store(db)
    try:
        step = store.list_steps(happy)[1].step
    finally:
        store.close()
    forked = fork(happy, ra.build_graph("happy"), step, {"retries": 1}, db=db).run_id
    engine = sa.create_engine(f"sqlite:///{db}")
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE runs SET redactions=3 WHERE id=:id"), {"id": incident})
        conn.execute(sa.text("UPDATE runs SET faults=2 WHERE id=:id"), {"id": broken})
        conn.execute(sa.text("UPDATE runs SET status='interrupted', status_reason='killed' WHERE id=:id"), {"id": crashed})
    engine.dispose()
    return {"db": db, "happy": happy, "replay": replayed, "fork": forked, "crashed": crashed}


@pytest.fixture
def empty_db(tmp_path):
    db = str(tmp_path / "empty.db")
    open_store(db, create=True).close()
    return db


async def settle(app, pilot) -> None:
    """Until the store is open and no worker has run for a few ticks (a screen's worker may start
    a tick after the one before it ends: the store opening, then the runs loading)."""
    quiet = 0
    for _ in range(200):
        await pilot.pause(0.02)
        try:
            await app.workers.wait_for_complete()
        except WorkerCancelled:
            continue  # an exclusive worker replaced by a newer one
        busy = any(w.is_running for w in app.workers) or type(app.screen).__name__ == "LoadingScreen"
        quiet = 0 if busy else quiet + 1
        if quiet >= 3:
            break
    await pilot.pause(0.05)


def header(table: RunsTable) -> str:
    """The table's header line as it shows on screen (scrolled columns left out)."""
    return table.render_line(0).text


def cell(table: RunsTable, run_id: str, key: str) -> str:
    return str(table.get_cell(run_id, key))


def shown_rows(table: RunsTable) -> range:
    """Indexes of the runs whose rows are on screen now (below the header)."""
    top = int(table.scroll_offset.y)
    return range(top, min(len(table.runs), top + table.scrollable_content_region.height - 1))


def title(screen: RunsScreen) -> str:
    return str(screen.query_one("#runs-title", Static).render())


async def test_every_column_fits_at_120_and_the_lead_columns_at_80(lineage_db):
    app = build_app(lineage_db["db"])
    async with app.run_test(size=(120, 34)) as pilot:
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, RunsScreen) and len(screen.runs) == 7
        table = screen.query_one(RunsTable)
        assert table.virtual_size.width <= table.scrollable_content_region.width, "the table scrolls sideways at 120"
        assert header(table).split() == [*ALL_LABELS[:4], "started", "▼", *ALL_LABELS[5:]]
        assert cell(table, lineage_db["fork"], "status") == "ok"  # a short word, whatever the run's origin
        waiting = next(r for r in screen.runs if r.name == "needs-approval")
        assert (waiting.status_reason, cell(table, waiting.id, "status")) == ("interrupt", "interrupted")
        assert cell(table, lineage_db["crashed"], "status") == "killed"  # the reason, where it says more

        await pilot.resize_terminal(80, 24)
        await settle(app, pilot)
        # The id (what every command takes) stays in view, whole, beside the name.
        assert header(table).split()[:7] == ["name", "id", "status", "steps", "started", "▼", "duration"]
        assert cell(table, lineage_db["fork"], "id") == lineage_db["fork"][:8]
        assert table.scrollable_content_region.width <= 80


async def test_the_fork_and_the_replay_say_what_they_come_from(lineage_db):
    app = build_app(lineage_db["db"])
    async with app.run_test(size=(120, 34)) as pilot:
        await settle(app, pilot)
        table = app.screen.query_one(RunsTable)
        parent = lineage_db["happy"][:8]
        assert cell(table, lineage_db["fork"], "from") == f"fork of {parent}"
        assert cell(table, lineage_db["replay"], "from") == f"replay of {parent}"
        assert cell(table, lineage_db["happy"], "from") == ""
        assert cell(table, lineage_db["happy"], "id") == parent
        assert "⑂" not in table.render_line(1).text + table.render_line(2).text


def _is_sorted(values: list, descending: bool) -> bool:
    return values == sorted(values, reverse=descending)


# What each column sorts by, written out apart from the screen's own table of columns.
SORTS = {
    "name": (lambda r: r.name.lower(), False),
    "status": (lambda r: r.status, False),
    "from": (lambda r: r.parent_run_id is None, False),  # forks and replays first
    "steps": (lambda r: r.step_count, True),
    "started": (lambda r: r.started_at, True),
    "duration": (lambda r: r.duration_s, True),
    "id": (lambda r: r.id, False),
    "graph": (lambda r: r.graph_name.lower(), False),
    "red": (lambda r: r.redactions, True),
    "faults": (lambda r: r.faults, True),
}


async def test_o_sorts_by_every_column_and_O_reverses_each(lineage_db):
    app = build_app(lineage_db["db"])
    async with app.run_test(size=(120, 34)) as pilot:
        await settle(app, pilot)
        screen = app.screen
        table = screen.query_one(RunsTable)
        newest = screen.runs[0].id
        seen = []
        for _ in COLUMNS:
            key = screen.sort_key
            seen.append(key)
            value, descending = SORTS[key]
            label = next(c.label for c in COLUMNS if c.key == key)
            arrow = "▼" if descending else "▲"
            assert _is_sorted([value(r) for r in screen.runs], descending), key
            assert f"sorted by {label} {arrow}" in title(screen)
            assert f"{label} {arrow}" in header(table)
            await pilot.press("O")
            assert _is_sorted([value(r) for r in screen.runs], not descending), f"{key} reversed"
            assert f"sorted by {label} {'▲' if descending else '▼'}" in title(screen)
            await pilot.press("o")
        assert sorted(seen) == sorted(SORTS) and screen.sort_key == "started"
        # The extremes each sort puts first are the runs a person sorts to find.
        await pilot.press("o", "o", "o", "o", "o")  # duration, from, graph, redacted, faults
        assert screen.sort_key == "faults" and screen.runs[0].faults == 2
        await pilot.press("O")
        assert screen.runs[-1].faults == 2
        # The cursor stayed on the run it started on (the newest) through every sort.
        assert screen.runs[table.cursor_row].id == newest
        await pilot.press("enter")
        await settle(app, pilot)
        assert isinstance(app.screen, RunScreen) and app.screen.run.id == newest


async def test_clicking_a_header_sorts_by_it_and_again_reverses(lineage_db):
    app = build_app(lineage_db["db"])
    async with app.run_test(size=(120, 34)) as pilot:
        await settle(app, pilot)
        screen = app.screen
        table = screen.query_one(RunsTable)
        x = header(table).index("redacted") + 1
        await pilot.click(RunsTable, offset=(x, 0))
        assert screen.sort_key == "red" and screen.descending
        assert screen.runs[0].redactions == 3
        await pilot.click(RunsTable, offset=(header(table).index("redacted") + 1, 0))
        assert screen.sort_key == "red" and not screen.descending
        assert screen.runs[-1].redactions == 3


async def test_s_reaches_forked_and_replayed_when_the_store_has_them(lineage_db):
    app = build_app(lineage_db["db"])
    async with app.run_test(size=(120, 34)) as pilot:
        await settle(app, pilot)
        screen = app.screen
        shown = []
        for _ in range(8):
            await pilot.press("s")
            await settle(app, pilot)
            shown.append(screen.status_filter)
        assert shown == ["ok", "error", "interrupted", "incomplete", "running", "forked", "replayed", None]
        await pilot.press("s", "s", "s", "s", "s", "s")
        await settle(app, pilot)
        # "forked" lists forks only, as its name says; replays have their own filter.
        assert screen.status_filter == "forked" and "status=forked" in title(screen)
        assert [r.id for r in screen.runs] == [lineage_db["fork"]]
        await pilot.press("s")
        await settle(app, pilot)
        assert screen.status_filter == "replayed" and [r.id for r in screen.runs] == [lineage_db["replay"]]
        await pilot.press("slash", *"incident", "enter")  # the text filter narrows them too
        await settle(app, pilot)
        assert screen.runs == [] and app.focused is None
        assert "No run matches the filter (Esc clears it)" in str(screen.query_one("#runs-empty", Static).render())


async def test_esc_clears_every_filter_on_an_empty_and_a_full_list(lineage_db):
    app = build_app(lineage_db["db"])
    async with app.run_test(size=(120, 34)) as pilot:
        await settle(app, pilot)
        screen = app.screen
        everything = len(screen.runs)
        # A status filter alone that matches nothing: the list says Esc clears it, and it does.
        await pilot.press("s", "s", "s", "s", "s")
        await settle(app, pilot)
        assert screen.status_filter == "running" and screen.runs == []
        assert "Esc clears it" in str(screen.query_one("#runs-empty", Static).render())
        await pilot.press("escape")
        await settle(app, pilot)
        assert screen.status_filter is None and len(screen.runs) == everything
        assert "status=" not in title(screen) and isinstance(app.focused, RunsTable)
        # Status and text filters with runs still shown: Esc clears both.
        await pilot.press("s")
        await settle(app, pilot)
        await pilot.press("slash", *"demo", "enter")
        await settle(app, pilot)
        assert screen.status_filter == "ok" and screen.text_filter == "demo" and 0 < len(screen.runs) < everything
        await pilot.press("escape")
        await settle(app, pilot)
        assert (screen.status_filter, screen.text_filter) == (None, "") and len(screen.runs) == everything
        assert not screen.query_one("#runs-filter", Input).display


@pytest.mark.parametrize("width", [80, 120])
async def test_a_run_with_recorder_faults_shows_them_at_any_width(lineage_db, width):
    app = build_app(lineage_db["db"])
    async with app.run_test(size=(width, 24)) as pilot:
        await settle(app, pilot)
        screen = app.screen
        table = screen.query_one(RunsTable)
        faulty = next(r for r in screen.runs if r.faults)
        lines = [table.render_line(y).text for y in range(1, table.size.height)]
        row = next(line for line in lines if faulty.id[:8] in line)
        assert ("faults" in header(table)) == (width == 120)
        if width == 120:  # the column is in view: the status cell stays plain
            assert not screen.column_fit.faults_in_status and "⚠" not in row
            assert row.rstrip().endswith(str(faulty.faults))
        else:  # scrolled out of view: the status cell carries the count
            assert screen.column_fit.faults_in_status
            assert f"error ⚠{faulty.faults}" in row, row
            assert not any("⚠" in line for line in lines if line.strip() and faulty.id[:8] not in line)


async def test_an_empty_store_still_answers_q_and_help_and_shows_them(empty_db):
    app = build_app(empty_db)
    async with app.run_test(size=(100, 20)) as pilot:
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, RunsScreen) and screen.runs == []
        assert "no runs yet" in str(screen.query_one("#runs-empty", Static).render())
        assert not isinstance(app.focused, Input), "a hidden filter box would swallow the keys"
        footer: dict[str, str] = {}
        for _ in range(50):  # the footer recomposes after the bindings change
            footer = {k.key: k.description for k in screen.query(FooterKey)}
            if footer:
                break
            await pilot.pause(0.02)
        assert {"slash", "s", "o", "r", "question_mark", "q"} <= set(footer)
        assert footer["q"] == "Quit" and footer["question_mark"] == "Keys"
        await pilot.press("question_mark")
        await settle(app, pilot)
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await settle(app, pilot)
        assert app.screen is screen
        for _ in range(6):  # no forks here: six presses come back to all
            await pilot.press("s")
            await settle(app, pilot)
        assert screen.status_filter is None
        await pilot.press("slash", *"zzz", "enter")
        await settle(app, pilot)
        assert app.focused is None and screen.text_filter == "zzz"
        await pilot.press("q")
        await pilot.pause()
        assert app.return_code == 0


async def test_cursor_keys_and_paging_move_the_selection_and_enter_opens_it(lineage_db):
    app = build_app(lineage_db["db"])
    async with app.run_test(size=(120, 8)) as pilot:  # five rows show: paging matters
        await settle(app, pilot)
        screen = app.screen
        table = screen.query_one(RunsTable)
        assert app.focused is table and table.cursor_row == 0
        await pilot.press("down", "down")
        assert table.cursor_row == 2
        await pilot.press("up")
        assert table.cursor_row == 1
        page = table.scrollable_content_region.height - 2
        await pilot.press("pagedown")
        assert table.cursor_row == 1 + page and table.cursor_row in shown_rows(table)
        await pilot.press("end")
        assert table.cursor_row == len(screen.runs) - 1 and table.cursor_row in shown_rows(table)
        assert screen.runs[-1].id[:8] in table.render_line(table.scrollable_content_region.height - 1).text
        await pilot.press("down")  # already on the last run: it stays
        assert table.cursor_row == len(screen.runs) - 1
        await pilot.press("pageup")
        assert table.cursor_row == len(screen.runs) - 1 - page
        await pilot.press("home")
        assert table.cursor_row == 0 and table.scroll_offset.y == 0
        await pilot.press("down", "down", "down", "enter")
        await settle(app, pilot)
        assert isinstance(app.screen, RunScreen) and app.screen.run.id == screen.runs[3].id


async def test_a_click_selects_a_run_and_a_click_on_the_selected_run_opens_it(lineage_db):
    app = build_app(lineage_db["db"])
    async with app.run_test(size=(120, 34)) as pilot:
        await settle(app, pilot)
        screen = app.screen
        table = screen.query_one(RunsTable)
        await pilot.click(RunsTable, offset=(3, 3))  # the header is line 0: the third run
        assert table.cursor_row == 2 and app.screen is screen
        await pilot.click(RunsTable, offset=(3, 20))  # below the last run: nothing happens
        assert table.cursor_row == 2 and app.screen is screen
        await pilot.click(RunsTable, offset=(3, 3))
        await settle(app, pilot)
        assert isinstance(app.screen, RunScreen) and app.screen.run.id == screen.runs[2].id


async def test_the_selected_run_stays_selected_across_sorts_and_resizes(lineage_db):
    app = build_app(lineage_db["db"])
    async with app.run_test(size=(120, 34)) as pilot:
        await settle(app, pilot)
        screen = app.screen
        table = screen.query_one(RunsTable)
        await pilot.press("down", "down", "down")
        chosen = screen.runs[3].id
        for keys in (("o",), ("O",), ("o", "o", "o")):
            await pilot.press(*keys)
            assert screen.runs[table.cursor_row].id == chosen, keys
        await pilot.click(RunsTable, offset=(header(table).index("name") + 1, 0))
        assert screen.sort_key == "name" and screen.runs[table.cursor_row].id == chosen
        await pilot.resize_terminal(80, 12)
        await settle(app, pilot)
        assert screen.column_fit.short_time, "the narrow layout was drawn"
        assert screen.runs[table.cursor_row].id == chosen and table.cursor_row in shown_rows(table)
        await pilot.press("r")  # a new read starts again from the top
        await settle(app, pilot)
        assert table.cursor_row == 0


@pytest.fixture(scope="module")
def many_db(tmp_path_factory):
    """Three thousand synthetic runs, written the way the store benchmark fills its stores."""
    db = str(tmp_path_factory.mktemp("tui-many") / "many.db")
    store = open_store(db, create=True)
    try:
        bench_store.fill(store, 3000, chunk=1000)
    finally:
        store.close()
    return db


async def test_thousands_of_runs_load_sort_and_the_last_is_reached_with_end(many_db):
    app = build_app(many_db)
    async with app.run_test(size=(120, 34)) as pilot:
        await settle(app, pilot)
        screen = app.screen
        table = screen.query_one(RunsTable)
        assert len(screen.runs) == 3000 and table.virtual_size.height == 3001
        assert "3000 shown" in title(screen)
        # The id (what every command takes) stays in view, whole, beside the name.
        assert header(table).split()[:7] == ["name", "id", "status", "steps", "started", "▼", "duration"]
        assert cell(table, screen.runs[0].id, "id") == screen.runs[0].id[:8]
        await pilot.press("pagedown", "pagedown")
        assert table.cursor_row == 2 * (table.scrollable_content_region.height - 2) and table.cursor_row in shown_rows(table)
        await pilot.press("end")
        last = screen.runs[-1]
        assert table.cursor_row == 2999 and 2999 in shown_rows(table)
        assert last.id[:8] in table.render_line(table.scrollable_content_region.height - 1).text
        await pilot.click(RunsTable, offset=(1, 0))  # sort by name: the oldest run moves, the cursor follows it
        assert _is_sorted([r.name.lower() for r in screen.runs], False)
        assert screen.runs[table.cursor_row].id == last.id and table.cursor_row in shown_rows(table)
        await pilot.press("enter")
        await settle(app, pilot)
        assert isinstance(app.screen, RunScreen) and app.screen.run.id == last.id


@pytest.mark.parametrize("started", [1e308, -1e18])
async def test_a_time_no_clock_can_show_is_a_question_mark_not_a_crash(tmp_path, capsys, started):
    """A damaged or hostile store's timestamps: the runs list, the CLI's listing and stats show
    ``?`` where the time would go."""
    from graphtape.recorder import schema as S
    from graphtape.tui.cli import main

    class One(TypedDict):
        n: int

    b = StateGraph(One)
    b.add_node("a", lambda s: {"n": s["n"] + 1})
    b.add_edge(START, "a")
    db = str(tmp_path / "times.db")
    with Recorder(db) as rec:
        rec.attach(b.compile()).invoke({"n": 0})
        rec.flush()
        run_id = rec.last_run_id
    engine = sa.create_engine(f"sqlite:///{db}")
    with engine.begin() as conn:
        conn.execute(sa.update(S.runs).values(started_at=started, ended_at=float("inf")))
    engine.dispose()
    app = build_app(db)
    async with app.run_test(size=(120, 34)) as pilot:
        await settle(app, pilot)
        table = app.screen.query_one(RunsTable)
        assert cell(table, run_id, "started") == "?"
    for argv in (["runs"], ["stats"], ["show", run_id]):
        assert main(["--db", db, *argv]) == 0
        out = capsys.readouterr().out
        assert "unexpected" not in out and "Traceback" not in out
    assert main(["--db", db, "runs"]) == 0 and "  ?  " in capsys.readouterr().out
