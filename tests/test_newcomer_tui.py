"""What a newcomer meets in the TUI, pressed key by key on the demo's own runs (issue 15).

The timeout told as what happened, focus that lands somewhere visible, copy and save that say
where things went, export and fork that keep what was typed, a fork's lineage in words, and
the keys the footer keeps at 80x24.
"""

from __future__ import annotations

import json
import os

import pytest
from textual.widgets import Input, OptionList, Static
from textual.widgets._footer import FooterKey
from tui_helpers import settle

from graphtape.recorder import Recorder, open_store
from graphtape.tui.app import build_app
from graphtape.tui.demo import record_demo
from graphtape.tui.files import clipboard_blocked
from graphtape.tui.screens.compare import CompareScreen, verdict
from graphtape.tui.screens.prompts import ForkPrompt, PathPrompt, ReplayPrompt, RunInfoScreen, ValueScreen
from graphtape.tui.screens.run import RunScreen
from graphtape.tui.screens.runs import COLUMNS, LINEAGE_STYLE, status_text
from graphtape.tui.widgets.panels import CallsPanel, TextPanel
from graphtape.tui.widgets.state_tree import StateTree
from graphtape.tui.widgets.timeline import Timeline, step_cells


@pytest.fixture(scope="module")
def incident(tmp_path_factory):
    """The demo's incident, recorded the way `graphtape demo` records it (its graph reference included)."""
    db = str(tmp_path_factory.mktemp("newcomer-tui") / "demo.db")
    _, runs = record_demo(db, "incident")
    return db, runs[0].run.id


def runs_in(db: str) -> list:
    store = open_store(db)
    try:
        return store.list_runs()
    finally:
        store.close()


def shown(widget: Static, width: int = 200) -> str:
    """What a Static shows, as plain text (a Group of Rich renderables included)."""
    from rich.console import Console

    console = Console(width=width, record=True, file=open(os.devnull, "w"))
    console.print(widget.content)
    return console.export_text()


def notices(app) -> list[str]:
    return [f"{n.title or ''} {n.message}" for n in app._notifications]


async def test_a_timed_out_call_says_its_node_gave_up_and_the_call_went_on(incident):
    db, run_id = incident
    app = build_app(db, run_id)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        screen = app.screen
        await pilot.press("5")
        await settle(pilot)
        calls = screen.query_one(CallsPanel)
        row = str(calls.query_one("#call-list", OptionList).get_option_at_index(0).prompt)
        detail = shown(calls.query_one("#call-detail", Static))
        status = str(screen.query_one("#run-status", Static).render())
    assert "lookup_order_status" in row and "gave up after" in row and "Unfinished" not in row
    assert "abandoned: its node stopped waiting after" in detail and "ms and went on" in detail
    assert "Unfinished" not in detail
    assert "1 call(s) timed out (their node stopped waiting)" in status


async def test_tab_lands_on_a_state_line_and_v_then_opens_that_value(incident):
    db, run_id = incident
    app = build_app(db, run_id)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(app.focused, Timeline)
        await pilot.press("tab")
        tree = screen.query_one(StateTree)
        assert app.focused is tree and tree.cursor_line == 0  # a visible cursor, not nothing
        await pilot.press("down")
        assert tree.cursor_line == 1
        key = tree.selected_value()[0][0]
        await pilot.press("v")
        await settle(pilot, lambda: isinstance(app.screen, ValueScreen))
        assert isinstance(app.screen, ValueScreen) and app.screen.title_text == key  # the value, not the whole state
        await pilot.press("escape")
        # Stepping keeps the cursor on the same key.
        await pilot.press("right")
        await settle(pilot)
        assert tree.selected_value()[0] == [key]
        # Tab goes back to the timeline, never to the tab strip.
        await pilot.press("tab")
        assert isinstance(app.focused, Timeline)


async def test_tab_in_the_replay_prompt_moves_to_a_field_that_shows_it_has_the_keys(incident):
    db, run_id = incident
    app = build_app(db, run_id)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        await pilot.press("r")
        await settle(pilot)
        prompt = app.screen
        assert isinstance(prompt, ReplayPrompt) and isinstance(app.focused, OptionList)
        field = prompt.query_one("#graph-input", Input)
        unfocused = field.styles.border_top
        await pilot.press("tab")
        assert app.focused is field and field.styles.border_top != unfocused  # outlined while it takes the keys
        before = field.value
        await pilot.press("end", *"x")
        assert field.value == before + "x"  # typed text lands where the outline is
        await pilot.press("tab")
        assert isinstance(app.focused, OptionList)
        await pilot.press("y")  # typing on the mode list goes to the field, not nowhere
        assert field.value.endswith("y") and app.focused is field


async def test_copy_says_it_was_sent_and_says_when_the_terminal_will_not_take_it(incident, monkeypatch):
    db, run_id = incident
    for name in ("TMUX", "STY", "TERM_PROGRAM"):
        monkeypatch.delenv(name, raising=False)
    app = build_app(db, run_id)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        await pilot.press("tab", "c")
        await settle(pilot)
        assert json.loads(app.clipboard) == "Has my order A-1042 arrived yet?"  # the value under the cursor
        assert any("Copied input" in n and "OSC 52" in n for n in notices(app))
        app.clear_notifications()
        monkeypatch.setenv("STY", "1234.pts-0.host")  # inside GNU screen, which drops OSC 52
        await pilot.press("c")
        await settle(pilot)
        said = notices(app)
    assert any("Copy may not arrive" in n and "GNU screen" in n and "s saves" in n for n in said), said


def test_clipboard_blocked_names_what_drops_the_copy():
    assert clipboard_blocked({}) is None
    assert clipboard_blocked({"TMUX": "/tmp/tmux-0/default,1,0"}, lambda name: "on") is None
    said = clipboard_blocked({"TMUX": "/tmp/tmux-0/default,1,0"}, lambda name: "external")
    assert "set-clipboard is external" in said and "set -g set-clipboard on" in said
    assert clipboard_blocked({"TMUX": "x"}, lambda name: None) is None  # cannot tell: say nothing
    assert "GNU screen" in clipboard_blocked({"STY": "1.pts"})
    assert "macOS Terminal" in clipboard_blocked({"TERM_PROGRAM": "Apple_Terminal"})


async def test_s_shows_where_the_state_goes_takes_a_folder_and_asks_before_replacing(incident, tmp_path, monkeypatch):
    db, run_id = incident
    monkeypatch.chdir(tmp_path)
    (tmp_path / "saved").mkdir()
    app = build_app(db, run_id)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        step = app.screen.steps[app.screen.index].step
        await pilot.press("s")
        await settle(pilot)
        prompt = app.screen
        assert isinstance(prompt, PathPrompt)
        texts = " ".join(str(w.render()) for w in prompt.query(Static))
        assert str(tmp_path) in texts  # the directory a relative path goes to is named
        # The dialog sits in the middle of the screen.
        box = prompt.query_one(".prompt").region
        assert abs(box.x - (120 - box.right)) <= 1
        field = prompt.query_one("#export-path", Input)
        default = field.value
        field.value = "saved/"
        await pilot.pause(0.1)
        target = tmp_path / "saved" / default
        assert f"→ {target}" in str(prompt.query_one("#export-where", Static).render())
        await pilot.press("enter")
        await settle(pilot, lambda: target.exists())
        assert json.loads(target.read_text())["input"] == "Has my order A-1042 arrived yet?"
        assert target.stat().st_mode & 0o777 == 0o600
        assert any(f"step {step}" in n for n in notices(app))
        target.write_text("mine")
        await pilot.press("s")
        await settle(pilot)
        app.screen.query_one("#export-path", Input).value = "saved"
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, PathPrompt) and "exists: press Enter again" in str(app.screen.query_one("#export-error", Static).render())
        assert target.read_text() == "mine"
        await pilot.press("enter")
        await settle(pilot, lambda: target.read_text() != "mine")
        store = open_store(db)
        try:
            assert json.loads(target.read_text()) == json.loads(json.dumps(store.state_at(run_id, step)))
        finally:
            store.close()


async def test_x_replaces_an_existing_fixture_only_after_a_second_enter(incident, tmp_path, monkeypatch):
    db, run_id = incident
    monkeypatch.chdir(tmp_path)
    existing = tmp_path / "fixtures" / "runs" / "demo-incident.json"
    existing.parent.mkdir(parents=True)
    existing.write_text("my edited fixture")
    app = build_app(db, run_id)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        await pilot.press("x")
        await settle(pilot)
        prompt = app.screen
        assert isinstance(prompt, PathPrompt) and prompt.query_one("#export-path", Input).value == "fixtures/runs/demo-incident.json"
        await pilot.press("enter")
        await settle(pilot)
        assert app.screen is prompt and "exists: press Enter again to replace it" in str(prompt.query_one("#export-error", Static).render())
        assert existing.read_text() == "my edited fixture"
        await pilot.press("escape")  # changing one's mind keeps the file
        await settle(pilot)
        assert existing.read_text() == "my edited fixture"
        await pilot.press("x")
        await settle(pilot)
        await pilot.press("enter", "enter")
        await settle(pilot, lambda: existing.read_text() != "my edited fixture")
        assert json.loads(existing.read_text())["graphtape_fixture"]


async def test_a_fork_edit_the_state_refuses_reopens_the_prompt_with_what_was_typed(incident):
    db, run_id = incident
    app = build_app(db, run_id)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        before = len(runs_in(db))
        await pilot.press("f")
        await settle(pilot)
        await pilot.press(*"turnz=1")
        await pilot.press("enter")  # the recorded graph reference: shown first
        await pilot.press("enter")  # and agreed to
        await settle(pilot, lambda: isinstance(app.screen, ForkPrompt) and bool(str(app.screen.query_one("#fork-error", Static).render())))
        prompt = app.screen
        assert isinstance(prompt, ForkPrompt)
        assert prompt.query_one("#fork-edits", Input).value == "turnz=1"
        error = str(prompt.query_one("#fork-error", Static).render())
        assert "the state has no key 'turnz'" in error and "retries" in error
        assert len(runs_in(db)) == before  # nothing ran


async def test_a_fork_opens_with_its_lineage_its_edit_and_the_originals_step_numbers(incident):
    db, run_id = incident
    app = build_app(db, run_id)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        screen = app.screen
        original = [s.step for s in screen.steps]
        await pilot.press("f")
        await settle(pilot)
        await pilot.press(*"retries=9", "enter", "enter")
        await settle(pilot, lambda: isinstance(app.screen, CompareScreen))
        compare = app.screen
        assert isinstance(compare, CompareScreen) and compare.result.error is None
        fork_id = compare.result.run_id
        await pilot.press("o")  # open the fork itself
        await settle(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.run_id == fork_id)
        fork_screen = app.screen
        header = str(fork_screen.query_one("#run-header", Static).render())
        at = compare.result.from_step
        assert f"fork of {run_id[:8]} at step {at}" in header and "⑂" not in header
        steps = [s.step for s in fork_screen.steps]
        # The edit is step {at} (the step forked after), then the original's numbering goes on.
        assert steps == list(range(at, at + len(steps))) and at in original
        assert str(step_cells(fork_screen.steps[0], {})[2]) == "(update)"
        assert fork_screen.run.step_count == len(steps)  # the fork's own steps, not its last step number + 1
        await pilot.press("i")
        await settle(pilot, lambda: isinstance(app.screen, RunInfoScreen))
        assert app.screen.edit["update"] == {"retries": 9}


def test_a_fork_that_raised_says_so_first_and_lineage_is_never_error_red():
    from graphtape.recorder.records import RunInfo
    from graphtape.replay.result import Divergence, ReplayResult

    result = ReplayResult("b" * 16, "a" * 16, 3, "", "live", [Divergence("state", 4, "act", "x", 1, 2)], "error", error="TypeError: bad operand", kind="fork")
    text = verdict(result).plain
    assert text.index("the fork raised TypeError: bad operand") < text.index("1 difference")
    failed_fork = RunInfo("b" * 16, "x", "g", "error", 0.0, 1.0, 8, parent_run_id="a" * 16, fork_step=3, tags=["fork-of:" + "a" * 16])
    label = status_text(failed_fork)
    lineage = next(span for span in label.spans if "fork of" in label.plain[span.start : span.end])
    assert label.plain == "error  fork of aaaaaaaa at step 3" and str(lineage.style) == LINEAGE_STYLE
    # The runs list's "from" column too (what the web page showed in red).
    cell = next(c for c in COLUMNS if c.key == "from").cell(failed_fork)
    assert cell.plain == "fork of aaaaaaaa" and str(cell.style) == LINEAGE_STYLE and "red" not in LINEAGE_STYLE


async def test_at_80x24_the_footer_keeps_copy_replay_fork_and_export(incident):
    db, run_id = incident
    app = build_app(db, run_id)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        shown = {}
        for _ in range(40):
            shown = {k.key: k for k in app.screen.query(FooterKey)}
            if shown:
                break
            await pilot.pause(0.05)
        for key in ("c", "r", "f", "x"):
            assert key in shown and shown[key].region.right <= 80, key


def test_the_calls_column_counts_a_failing_tools_step(tmp_path):
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    @tool
    def refund(order_id: str) -> str:
        """Refund an order."""
        raise ConnectionError("payments API unreachable")

    b = StateGraph(MessagesState)
    b.add_node("agent", lambda s: {"messages": [AIMessage("refunding", tool_calls=[{"name": "refund", "args": {"order_id": "A1"}, "id": "c1"}])]})
    b.add_node("tools", ToolNode([refund], handle_tool_errors=False))
    b.add_edge(START, "agent")
    b.add_edge("agent", "tools")
    b.add_edge("tools", END)
    db = str(tmp_path / "runs.db")
    with Recorder(db) as rec:
        with pytest.raises(ConnectionError):
            rec.attach(b.compile()).invoke({"messages": [("user", "refund A1")]})
        run_id = rec.last_run_id
    store = open_store(db)
    try:
        steps, counts = store.list_steps(run_id), store.call_counts(run_id)
    finally:
        store.close()
    failing = next(s for s in steps if s.has_error)
    assert failing.pending and str(step_cells(failing, counts.get(failing.step, {}))[3]) == "T1 1✗"


async def test_the_routes_tab_points_at_the_users_own_frame_first(tmp_path, monkeypatch):
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    class S(TypedDict):
        n: int

    def settle_ledger(state):
        raise RuntimeError("ledger is locked")

    b = StateGraph(S)
    b.add_node("settle", settle_ledger)
    b.add_edge(START, "settle")
    b.add_edge("settle", END)
    monkeypatch.chdir(os.path.dirname(__file__))
    db = str(tmp_path / "runs.db")
    with Recorder(db) as rec:
        with pytest.raises(RuntimeError):
            rec.attach(b.compile()).invoke({"n": 1})
    app = build_app(db, "last")
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        await pilot.press("4")
        await settle(pilot)
        text = shown(app.screen.query_one("#routes-panel", TextPanel).query_one(".panel-body", Static))
    head = text.splitlines()
    assert head[0].startswith("✗ settle raised RuntimeError: ledger is locked")
    assert head[1].strip().startswith("at test_newcomer_tui.py:") and "in settle_ledger: raise RuntimeError" in head[1]


async def test_a_replay_opens_on_the_state_it_resumed_named_as_such(incident):
    from graphtape.replay import replay
    from graphtape.replay.loading import load_graph

    db, run_id = incident
    store = open_store(db)
    try:
        ref = store.get_run(run_id).graph_ref
    finally:
        store.close()
    result = replay(run_id, load_graph(ref), from_step=5, db=db)
    assert not result.diverged, result.report()
    app = build_app(db, result.run_id)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        screen = app.screen
        header = str(screen.query_one("#run-header", Static).render())
        timeline = screen.query_one(Timeline)
        first = timeline.steps[0]
        assert f"replay of {run_id[:8]}" in header and "at step" not in header.split("replay of")[1].split("·")[0]
        assert first.step == 5 and str(step_cells(first, {}, timeline.resumed_at)[2]) == "(resumed)"


@pytest.fixture(scope="module")
def stepless(tmp_path_factory):
    """A run that failed before its first step: invoked with no input, LangGraph raises at once."""
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    class S(TypedDict):
        n: int

    builder = StateGraph(S)
    builder.add_node("bump", lambda s: {"n": s["n"] + 1})
    builder.add_edge(START, "bump")
    builder.add_edge("bump", END)
    db = str(tmp_path_factory.mktemp("stepless") / "runs.db")
    with Recorder(db) as rec:
        with pytest.raises(Exception, match="no input"):
            rec.attach(builder.compile(), name="stepless").invoke(None)
        rec.flush()
        run_id = rec.last_run_id
    return db, run_id


@pytest.mark.parametrize(("key", "what"), [("r", "replay"), ("f", "fork"), ("x", "export"), ("v", "show"), ("s", "save"), ("c", "copy")])
async def test_a_run_with_no_steps_says_why_there_is_nothing_to_act_on(stepless, key, what):
    db, run_id = stepless
    app = build_app(db, run_id)
    async with app.run_test(size=(120, 36)) as pilot:
        for _ in range(100):
            await pilot.pause(0.05)
            if isinstance(app.screen, RunScreen) and app.screen.run is not None:
                break
        await pilot.press(key)
        await pilot.pause(0.1)
        # No prompt to fill in for nothing, and no "wait for the run to load" for a run that has loaded.
        assert isinstance(app.screen, RunScreen)
        said = notices(app)
        assert len(said) == 1 and "This run recorded no steps (it failed before its first: EmptyInputError" in said[0], said
        assert f"there is nothing to {what}" in said[0]
