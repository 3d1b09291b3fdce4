"""TUI replay, fork and export: press the keys on real recorded runs of real compiled graphs."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa
from textual.widgets import Input, Static
from tui_helpers import settle

from graphtape.recorder import Recorder, open_store
from graphtape.replay import read_fixture
from graphtape.replay.loading import load_graph
from graphtape.tui.app import build_app
from graphtape.tui.demo import agents_dir, record_demo
from graphtape.tui.screens.compare import CompareScreen
from graphtape.tui.screens.prompts import ForkPrompt, HelpScreen, ReplayPrompt, RunInfoScreen
from graphtape.tui.screens.run import RunScreen
from graphtape.tui.screens.runs import RunsScreen
from graphtape.tui.widgets.panels import TextPanel
from graphtape.tui.widgets.timeline import Timeline

AGENTS = agents_dir()

# A ticket router: `triage` asks a tool for a score, then routes on it. LIMIT is the knob a
# test turns to make today's code disagree with the recording.
TRIAGE = """
import operator
from typing import Annotated, TypedDict

from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph

LIMIT = {limit}


@tool
def score(ticket: str) -> int:
    \"\"\"How urgent a ticket is.\"\"\"
    return len(ticket)


class Ticket(TypedDict, total=False):
    ticket: str
    urgency: int
    trail: Annotated[list[str], operator.add]


def triage(state):
    return {{"urgency": score.invoke({{"ticket": state["ticket"]}}), "trail": ["triaged"]}}


def pick(state):
    return "escalate" if state["urgency"] > LIMIT else "reply"


b = StateGraph(Ticket)
b.add_node("triage", triage)
b.add_node("escalate", lambda s: {{"trail": ["paged on-call"]}})
b.add_node("reply", lambda s: {{"trail": ["sent a canned reply"]}})
b.add_edge(START, "triage")
b.add_conditional_edges("triage", pick, ["escalate", "reply"])
b.add_edge("escalate", END)
b.add_edge("reply", END)
graph = b.compile()
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A store with the demo's happy run, the triage graph's run (with and without a graph
    reference), and a copy of the triage file whose threshold routes the ticket elsewhere."""
    folder = tmp_path_factory.mktemp("tui-replay")
    (folder / "triage.py").write_text(TRIAGE.format(limit=5))
    (folder / "triage_changed.py").write_text(TRIAGE.format(limit=500))
    db = str(folder / "runs.db")
    _, demo = record_demo(db, "happy")
    ref = f"{folder / 'triage.py'}:graph"
    with Recorder(db) as rec:
        rec.attach(load_graph(ref), name="triage", graph_ref=ref).invoke({"ticket": "printer on fire"})
        rec.flush()
        triage = rec.last_run_id
        rec.attach(load_graph(ref), name="triage-unnamed").invoke({"ticket": "printer on fire"})
        rec.flush()
        unnamed = rec.last_run_id
    return {"folder": folder, "db": db, "demo": demo[0].run.id, "triage": triage, "unnamed": unnamed, "changed": f"{folder / 'triage_changed.py'}:graph"}


def runs_of(db: str) -> list:
    store = open_store(db)
    try:
        return store.list_runs()
    finally:
        store.close()


async def open_first_step(app, pilot) -> RunScreen:
    await settle(pilot)
    await pilot.press("g")
    await settle(pilot)
    screen = app.screen
    assert isinstance(screen, RunScreen) and screen.steps[screen.index].step == screen.steps[0].step
    return screen


def panel_text(screen, selector: str) -> str:
    return str(screen.query_one(selector, TextPanel).query_one(".panel-body", Static).render())


async def test_replay_of_an_unchanged_demo_run_matches(project):
    app = build_app(project["db"], project["demo"])
    async with app.run_test(size=(120, 32)) as pilot:
        await open_first_step(app, pilot)
        await pilot.press("r")
        await settle(pilot)
        prompt = app.screen
        assert isinstance(prompt, ReplayPrompt)
        assert prompt.query_one("#graph-input", Input).value.endswith("reason_act.py:graph_happy")  # the recorded reference
        before = len(runs_of(project["db"]))
        await pilot.press("enter")  # strict is the default; the recorded reference is not loaded yet
        await settle(pilot)
        assert app.screen is prompt and len(runs_of(project["db"])) == before
        consent = str(prompt.query_one("#graph-consent", Static).render())
        assert "read from the recording" in consent and str(AGENTS / "reason_act.py") in consent.replace("\n", "")
        await pilot.press("enter")  # seen and agreed: now it loads
        await settle(pilot, lambda: isinstance(app.screen, CompareScreen))
        compare = app.screen
        assert isinstance(compare, CompareScreen)
        assert compare.result.mode == "strict" and compare.result.divergences == []
        assert "matches the recording" in str(compare.query_one("#compare-header", Static).render())
        assert compare.result.served  # the tool and model calls were answered from the recording
        new = next(r for r in runs_of(project["db"]) if r.id == compare.result.run_id)
        assert new.parent_run_id == project["demo"]
        original = compare.query_one("#compare-original", Timeline)
        assert len(original.steps) == len(compare.query_one("#compare-new", Timeline).steps)
        await pilot.press("o")  # the replay's own run opens on top (the app opens it: screens never import each other)
        await settle(pilot, lambda: isinstance(app.screen, RunScreen))
        assert isinstance(app.screen, RunScreen) and app.screen.run_id == compare.result.run_id
        await pilot.press("escape")
        await settle(pilot, lambda: app.screen is compare)
        assert app.screen is compare
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, RunScreen) and "matches the recording" in str(app.screen.query_one("#run-status", Static).render())


async def test_replay_with_a_changed_graph_opens_the_first_divergence(project):
    app = build_app(project["db"], project["triage"])
    async with app.run_test(size=(120, 32)) as pilot:
        await open_first_step(app, pilot)
        await pilot.press("r")
        await settle(pilot)
        app.screen.query_one("#graph-input", Input).value = project["changed"]
        app.screen.query_one("#graph-input", Input).focus()
        await pilot.press("enter")
        await settle(pilot, lambda: isinstance(app.screen, CompareScreen))
        compare = app.screen
        assert isinstance(compare, CompareScreen)
        first = compare.divergences[0]
        assert first.first and first.kind == "route" and first.node == "triage" and first.step == 1
        assert compare.selected == 0 and compare.query_one("#divergence-list").highlighted == 0
        text = panel_text(compare, "#divergence-text")
        assert "FIRST step 1 node 'triage': route divergence" in text and "reply instead of escalate" in text
        original, new = compare.query_one("#compare-original", Timeline), compare.query_one("#compare-new", Timeline)
        assert original.steps[original.cursor].step == 1 and new.steps[new.cursor].step == 1
        assert compare.diff_title.startswith("recorded step 1 → replay step 1")

        await pilot.press("n")
        await settle(pilot, lambda: compare.pair == (2, 2))
        second = compare.divergences[compare.selected]
        assert compare.selected == 1 and second.step == 2 and not second.first
        assert original.steps[original.cursor].nodes == ["escalate"] and new.steps[new.cursor].nodes == ["reply"]
        changed = {e.path: (e.old, e.new) for e in compare.diff_entries}
        assert changed["trail[1]"] == ("paged on-call", "sent a canned reply")
        await pilot.press("p")
        await settle(pilot, lambda: compare.pair == (1, 1))
        assert compare.selected == 0

        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, RunScreen)


async def test_a_graph_that_cannot_load_is_one_line_on_screen(project):
    app = build_app(project["db"], project["triage"])
    async with app.run_test(size=(120, 32)) as pilot:
        await open_first_step(app, pilot)
        before = len(runs_of(project["db"]))
        await pilot.press("r")
        await settle(pilot)
        app.screen.query_one("#graph-input", Input).value = str(project["folder"] / "gone.py") + ":graph"
        app.screen.query_one("#graph-input", Input).focus()
        await pilot.press("enter")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunScreen) and not screen.rerunning
        status = str(screen.query_one("#run-status", Static).render())
        assert status.startswith("Cannot re-run: cannot load") and "no such file" in status and "\n" not in status
        assert "Traceback" not in status
        assert len(runs_of(project["db"])) == before  # nothing ran, nothing recorded


async def test_a_run_without_a_graph_reference_asks_for_one(project):
    app = build_app(project["db"], project["unnamed"])
    async with app.run_test(size=(120, 32)) as pilot:
        await open_first_step(app, pilot)
        await pilot.press("r")
        await settle(pilot)
        prompt = app.screen
        assert isinstance(prompt, ReplayPrompt)
        box = prompt.query_one("#graph-input", Input)
        assert box.value == "" and box.has_focus
        await pilot.press("enter")
        assert app.screen is prompt  # nothing to run yet
        assert "Name the graph to run" in str(prompt.query_one("#replay-error", Static).render())
        await pilot.press(*f"{project['folder'] / 'triage.py'}:graph")
        await pilot.press("enter")
        await settle(pilot, lambda: isinstance(app.screen, CompareScreen))
        assert isinstance(app.screen, CompareScreen) and app.screen.result.divergences == []


async def test_fork_checks_the_json_before_running_then_opens_the_fork(project):
    app = build_app(project["db"], project["triage"])
    async with app.run_test(size=(120, 32)) as pilot:
        screen = await open_first_step(app, pilot)
        await pilot.press("right")  # step 0: the input is in, triage has not run
        await settle(pilot)
        assert screen.steps[screen.index].step == 0
        before = len(runs_of(project["db"]))
        await pilot.press("f")
        await settle(pilot)
        prompt = app.screen
        assert isinstance(prompt, ForkPrompt)
        await pilot.press(*"ticket=hi there")
        await pilot.press("enter")
        await settle(pilot)
        assert app.screen is prompt
        error = str(prompt.query_one("#fork-error", Static).render())
        assert "the value of ticket is not JSON" in error and 'quote strings: key="text"' in error
        assert len(runs_of(project["db"])) == before  # nothing ran

        prompt.query_one("#fork-edits", Input).value = 'ticket="hi"'
        await pilot.press("enter")
        await settle(pilot)
        assert app.screen is prompt and "read from the recording" in str(prompt.query_one("#graph-consent", Static).render())
        await pilot.press("enter")  # the recorded graph, agreed to
        await settle(pilot, lambda: isinstance(app.screen, CompareScreen))
        compare = app.screen
        assert isinstance(compare, CompareScreen)
        result = compare.result
        assert result.kind == "fork" and result.mode == "strict" and result.from_step == 0
        assert "fork of run" in str(compare.query_one("#compare-header", Static).render())
        fork_run = next(r for r in runs_of(project["db"]) if r.id == result.run_id)
        assert fork_run.parent_run_id == project["triage"] and fork_run.fork_step == 0
        # "hi" scores 2, under the limit: the fork replies where the original escalated.
        assert compare.divergences and compare.divergences[0].first
        assert [s.nodes for s in compare.query_one("#compare-new", Timeline).steps][-1] == ["reply"]
        store = open_store(project["db"])
        try:
            assert store.run_detail(result.run_id).output["ticket"] == "hi"
        finally:
            store.close()


async def test_export_writes_a_fixture_file(project, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    app = build_app(project["db"], project["triage"])
    async with app.run_test(size=(120, 32)) as pilot:
        await settle(pilot)
        await pilot.press("x")
        await settle(pilot)
        assert app.screen.query_one("#export-path", Input).value == "fixtures/runs/triage.json"
        await pilot.press("enter")
        await settle(pilot, lambda: (tmp_path / "fixtures/runs/triage.json").exists())
        written = tmp_path / "fixtures" / "runs" / "triage.json"
        assert written.is_file()
        fixture = read_fixture(written)
        assert [s["step"] for s in fixture["steps"]][-1] == 2
        status = str(app.screen.query_one("#run-status", Static).render())
        assert status.startswith("wrote fixtures/runs/triage.json (") and "steps 0..2" in status

        await pilot.press("x")
        await settle(pilot)
        app.screen.query_one("#export-path", Input).value = str(written / "inside-a-file.json")
        await pilot.press("enter")
        await settle(pilot)
        status = str(app.screen.query_one("#run-status", Static).render())
        assert status.startswith("Cannot export: cannot write") and "\n" not in status


async def test_faults_and_redactions_show_and_the_fault_log_opens(project, tmp_path):
    db = str(tmp_path / "faults.db")
    with Recorder(db) as rec:
        ref = f"{project['folder'] / 'triage.py'}:graph"
        rec.attach(load_graph(ref), name="flaky", graph_ref=ref).invoke({"ticket": "disk full"})
        rec.flush()
        run_id = rec.last_run_id
    engine = sa.create_engine(f"sqlite:///{db}")
    with engine.begin() as conn:  # what a recorder that lost writes leaves behind
        conn.execute(
            sa.text("UPDATE runs SET faults=2, redactions=3, fault_log=:log WHERE id=:id"),
            {"log": json.dumps(["step 1: checkpoint write failed: disk I/O error", "step 2: call log dropped"]), "id": run_id},
        )
    engine.dispose()
    app = build_app(db, run_id)
    async with app.run_test(size=(140, 32)) as pilot:
        await settle(pilot)
        header = str(app.screen.query_one("#run-header", Static).render())
        assert "3 redacted" in header and "2 recorder faults (i: fault log)" in header
        await pilot.press("i")
        await settle(pilot)
        info = app.screen
        assert isinstance(info, RunInfoScreen) and info.fault_log == ["step 1: checkpoint write failed: disk I/O error", "step 2: call log dropped"]
        await pilot.press("escape")
        await pilot.press("escape")
        await settle(pilot)
        runs = app.screen
        assert isinstance(runs, RunsScreen)
        table = runs.query_one("#runs-table")
        assert str(table.get_row(run_id)[-1]) == "2" and str(table.get_row(run_id)[-2]) == "3"


async def test_replay_fork_export_are_in_help_and_the_palette(project):
    app = build_app(project["db"], project["triage"])
    async with app.run_test(size=(120, 32)) as pilot:
        await settle(pilot)
        commands = {c.title for c in app.get_system_commands(app.screen)}
        assert {"Replay (r)", "Fork (f)", "Export (x)", "Info (i)"} <= commands
        await pilot.press("question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        described = {key: text.split(":")[0] for key, text in app.screen.rows}
        assert {"r": "Replay", "f": "Fork", "x": "Export", "i": "Info"}.items() <= described.items()



async def test_a_named_run_opens_without_the_runs_list_which_escape_builds(project):
    app = build_app(project["db"], project["triage"])
    async with app.run_test(size=(120, 32)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, RunScreen)
        assert not any(isinstance(s, RunsScreen) for s in app.screen_stack)  # not built, not queried
        await pilot.press("escape")
        await settle(pilot, lambda: isinstance(app.screen, RunsScreen) and bool(app.screen.runs))
        assert isinstance(app.screen, RunsScreen) and project["triage"] in {r.id for r in app.screen.runs}
        await pilot.press("enter")  # and a run opens from it as before, on top of it
        await settle(pilot)
        assert isinstance(app.screen, RunScreen) and isinstance(app.screen_stack[-2], RunsScreen)


# A graph that fails at its second step: the run screen opens on the failed step.
BOOM = """
from typing import TypedDict

from langgraph.graph import END, START, StateGraph


class S(TypedDict, total=False):
    x: int
    y: int


def explode(state):
    return {"y": {"a": 1}[state.get("missing", "b")]}  # KeyError: 'b'


b = StateGraph(S)
b.add_node("ok", lambda s: {"x": s["x"] + 1})
b.add_node("explode", explode)
b.add_edge(START, "ok")
b.add_edge("ok", "explode")
b.add_edge("explode", END)
graph = b.compile()
"""


async def test_r_on_the_failed_step_replays_from_the_last_completed_step_before_it(tmp_path):
    (tmp_path / "boom.py").write_text(BOOM)
    ref = f"{tmp_path / 'boom.py'}:graph"
    db = str(tmp_path / "boom.db")
    with Recorder(db) as rec:
        with pytest.raises(KeyError):
            rec.attach(load_graph(ref), name="boom", graph_ref=ref).invoke({"x": 1})
        rec.flush()
        failed_run = rec.last_run_id
    app = build_app(db, failed_run)
    async with app.run_test(size=(120, 32)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunScreen)
        failed = screen.steps[screen.index]
        assert failed.has_error and not failed.checkpoint_id  # it opened on the failed step
        completed = [s for s in screen.steps[: screen.index] if s.checkpoint_id and not s.pending][-1]
        await pilot.press("r")
        await settle(pilot)
        prompt = app.screen
        assert isinstance(prompt, ReplayPrompt) and prompt.step == completed.step
        note = str(prompt.query_one("#replay-from-note", Static).render())
        assert f"Step {failed.step} did not complete" in note and f"after step {completed.step}" in note
        await pilot.press("enter")  # the recorded reference: seen, then agreed
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot, lambda: isinstance(app.screen, CompareScreen))
        compare = app.screen
        assert isinstance(compare, CompareScreen)
        assert compare.result.from_step == completed.step and compare.result.status == "error"  # the failure, reproduced
        assert compare.result.divergences == []


async def test_a_graph_module_not_importable_from_here_names_the_folder_beside_the_store(tmp_path, monkeypatch):
    import sys

    project = tmp_path / "project"
    (project / "gt_tui_hint_app").mkdir(parents=True)
    (project / "gt_tui_hint_app" / "__init__.py").write_text("")
    (project / "gt_tui_hint_app" / "agent.py").write_text(
        "from typing import TypedDict\nfrom langgraph.graph import END, START, StateGraph\n\n\nclass S(TypedDict):\n    n: int\n\n\n"
        "b = StateGraph(S)\nb.add_node('bump', lambda s: {'n': s['n'] + 1})\nb.add_edge(START, 'bump')\nb.add_edge('bump', END)\ngraph = b.compile()\n"
    )
    (tmp_path / "elsewhere").mkdir()
    db = str(project / "graphtape.db")
    with Recorder(db) as rec:
        rec.attach(load_graph(str(project / "gt_tui_hint_app" / "agent.py") + ":graph"), graph_ref="gt_tui_hint_app.agent:graph").invoke({"n": 1})
        run_id = rec.last_run_id
    monkeypatch.chdir(tmp_path / "elsewhere")
    monkeypatch.setattr(sys, "path", list(sys.path))
    app = build_app(db, run_id)
    async with app.run_test(size=(160, 32)) as pilot:
        await open_first_step(app, pilot)
        await pilot.press("r")
        await settle(pilot)
        app.screen.query_one("#graph-input", Input).focus()
        await pilot.press("enter")  # the recorded reference: seen, then agreed
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        status = str(app.screen.query_one("#run-status", Static).render())
        assert f"gt_tui_hint_app/agent.py is in {project}" in status and f"run from {project}" in status, status
