"""One step count everywhere: ``runs``, ``show``, the TUI's run header, runs list and compare screens.

A run's step count is the number of supersteps stored for it in the root
graph (the input step, and a step that never completed, included): what
``show`` and the timeline list. Each kind of run that used to be miscounted is
recorded with a real graph: a fresh run, a run killed mid-way (its run row
never got its last count), a fork (it starts at the step it forked after), a
replay, and a second invocation on a thread (its steps go on from the first's
numbers). Every surface must give the same number as the store's steps.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from textual.widgets import Static
from tui_helpers import settle as settle_screen

from graphtape import Recorder, fork, replay
from graphtape.recorder import open_store
from graphtape.tui.app import build_app
from graphtape.tui.cli import main
from graphtape.tui.screens.compare import CompareScreen
from graphtape.tui.screens.run import RunScreen
from graphtape.tui.screens.runs import RunsScreen
from graphtape.tui.widgets.runs_table import RunsTable

GRAPH = textwrap.dedent(
    """
    import operator, os, time
    from typing import Annotated, TypedDict
    from langgraph.graph import END, START, StateGraph

    class S(TypedDict, total=False):
        x: int
        path: Annotated[list[str], operator.add]

    def build(saver=None, hang_in=None):
        b = StateGraph(S)
        def node(name):
            def run(state):
                if name == hang_in:
                    time.sleep(60)  # killed here
                return {"x": state.get("x", 0) + 1, "path": [name]}
            return run
        for name in ("a", "b", "c"):
            b.add_node(name, node(name))
        b.add_edge(START, "a")
        b.add_edge("a", "b")
        b.add_edge("b", "c")
        b.add_edge("c", END)
        return b.compile(checkpointer=saver)

    graph = build()
    """
)

KILLED = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, sys.argv[2])
    from steps_graph import build
    from graphtape import Recorder

    rec = Recorder(sys.argv[1], durability="sync")
    rec.attach(build(hang_in="c"), name="killed").invoke({"x": 0})
    """
)


def _graph_module(folder: Path):
    (folder / "steps_graph.py").write_text(GRAPH)
    sys.path.insert(0, str(folder))
    try:
        import steps_graph

        return steps_graph
    finally:
        sys.path.remove(str(folder))


def _record_killed(db: str, folder: Path) -> str:
    """Record a run in another process and SIGKILL it while its third node runs (its first steps committed)."""
    script = folder / "killed.py"
    script.write_text(KILLED)
    child = subprocess.Popen([sys.executable, str(script), db, str(folder)])
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            time.sleep(0.2)
            try:
                store = open_store(db)
            except Exception:  # noqa: BLE001 - not created yet
                continue
            try:
                runs = [r for r in store.list_runs() if r.name == "killed"]
                if runs and any("b" in s.nodes for s in store.list_steps(runs[0].id)):
                    run_id = runs[0].id
                    break
            finally:
                store.close()
        else:
            pytest.fail("the recording child never committed step b")
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    return run_id


def record_every_kind(db: str, folder: Path) -> dict[str, str]:
    """A fresh run, a killed run, a fork, a replay and a run that continues a thread, in ``db``."""
    g = _graph_module(folder)
    ids: dict[str, str] = {}
    with Recorder(db, durability="sync") as rec:
        rec.attach(g.build(), name="fresh").invoke({"x": 0})
        ids["fresh"] = rec.last_run_id
        threaded = rec.attach(g.build(InMemorySaver()), name="thread")
        config = {"configurable": {"thread_id": "t-1"}}
        threaded.invoke({"x": 0}, config)
        threaded.invoke({"x": 10}, config)  # steps numbered on from the first invocation's
        ids["continued"] = rec.last_run_id
    ids["replay"] = replay(ids["fresh"], g.graph, db=db).run_id
    ids["fork"] = fork(ids["fresh"], g.graph, 1, {"x": 100}, db=db).run_id
    ids["killed"] = _record_killed(db, folder)
    return ids


def stored_steps(store, run_id: str) -> int:
    """The definition, written out: distinct root step numbers with a row in the store."""
    return len({s.step for s in store.list_steps(run_id)})


@pytest.fixture(scope="module")
def sqlite_runs(tmp_path_factory) -> tuple[str, dict[str, str]]:
    folder = tmp_path_factory.mktemp("step-counts")
    db = str(folder / "runs.db")
    return db, record_every_kind(db, folder)


def check_store_and_cli(db: str, ids: dict[str, str], capsys) -> dict[str, int]:
    store = open_store(db)
    try:
        expected = {kind: stored_steps(store, run_id) for kind, run_id in ids.items()}
        listed = {r.id: r.step_count for r in store.list_runs()}
        for kind, run_id in ids.items():
            assert store.get_run(run_id).step_count == expected[kind], kind
            assert listed[run_id] == expected[kind], kind
        assert store.step_counts(list(ids.values())) == {ids[k]: n for k, n in expected.items()}
        killed = store.get_run(ids["killed"])
        assert (killed.status, killed.status_reason) == ("interrupted", "killed")
    finally:
        store.close()
    # The kinds that used to be miscounted really are the cases that differ from "last step + 1".
    assert expected["fresh"] == expected["replay"] == 5  # steps -1..3
    assert expected["continued"] == 5 and expected["fork"] == 3 and expected["killed"] >= 3

    assert main(["--db", db, "runs", "--json"]) == 0
    as_json = {r["id"]: r["step_count"] for r in json.loads(capsys.readouterr().out)}
    assert main(["--db", db, "runs"]) == 0
    table = capsys.readouterr().out.splitlines()
    header = re.split(r"\s{2,}", table[0].strip())  # columns are two spaces apart; "interrupted (killed)" has one
    in_table = {}
    for line in table[1:]:
        cols = re.split(r"\s{2,}", line.strip())
        in_table[cols[0]] = int(cols[header.index("STEPS")])
    for kind, run_id in ids.items():
        (shown_id,) = [i for i in in_table if run_id.startswith(i)]  # a narrow table shortens ids
        assert as_json[run_id] == in_table[shown_id] == expected[kind], kind
        assert main(["--db", db, "show", run_id, "--json"]) == 0
        view = json.loads(capsys.readouterr().out)
        assert view["run"]["step_count"] == len(view["steps"]) == expected[kind], kind
        assert main(["--db", db, "show", run_id]) == 0
        text = capsys.readouterr().out
        shown = re.search(r"^  steps     (\d+) \((-?\d+)\.\.(-?\d+)\)$", text, re.M)
        assert shown and int(shown.group(1)) == expected[kind], (kind, text)
        rows = [line for line in text.splitlines() if re.match(r"^\s+-?\d+\s{2}", line)]
        assert len(rows) >= expected[kind], kind  # every step has its row in the table (tasks may add lines)
    return expected


def test_every_kind_of_run_counts_alike_in_the_store_and_the_cli_sqlite(sqlite_runs, capsys):
    db, ids = sqlite_runs
    check_store_and_cli(db, ids, capsys)


def test_every_kind_of_run_counts_alike_in_the_store_and_the_cli_postgresql(pg_url, tmp_path, capsys):
    check_store_and_cli(pg_url, record_every_kind(pg_url, tmp_path), capsys)


async def settle(pilot, until) -> None:
    await settle_screen(pilot, until)
    assert until(), f"the screen never settled: {type(pilot.app.screen).__name__}"


def _count_in(text: str, pattern: str) -> int:
    found = re.search(pattern, text)
    assert found, text
    return int(found.group(1))


async def test_the_tui_header_runs_list_and_compare_screens_agree(sqlite_runs):
    db, ids = sqlite_runs
    store = open_store(db)
    try:
        expected = {kind: stored_steps(store, run_id) for kind, run_id in ids.items()}
    finally:
        store.close()
    g = sys.modules.get("steps_graph")
    app = build_app(db)
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot, lambda: isinstance(app.screen, RunsScreen) and app.screen.runs)
        table = app.screen.query_one(RunsTable)
        for kind, run_id in ids.items():
            assert str(table.get_cell(run_id, "steps")) == str(expected[kind]), kind
        for kind, run_id in ids.items():
            app.open_run(run_id)
            await settle(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.run is not None and app.screen.run.id == run_id)
            header = str(app.screen.query_one("#run-header", Static).render())
            assert _count_in(header, r"· (\d+) steps ·") == expected[kind] == len(app.screen.steps), (kind, header)
            app.pop_screen()
            await pilot.pause(0.05)
        # A replay beside its recording, and two runs diffed: each label gives its run's count.
        for kind in ("replay", "fork"):
            result = (replay(ids["fresh"], g.graph, db=db) if kind == "replay" else fork(ids["fresh"], g.graph, 1, {"x": 100}, db=db))
            app.push_screen(CompareScreen(result))
            await settle(pilot, lambda: isinstance(app.screen, CompareScreen) and app.screen.source_steps)
            left = str(app.screen.query_one("#compare-original-label", Static).render())
            right = str(app.screen.query_one("#compare-new-label", Static).render())
            assert _count_in(left, r"  (\d+) steps \(") == expected["fresh"], left
            assert _count_in(right, r"  (\d+) steps \(") == expected[kind], right
            app.pop_screen()
            await pilot.pause(0.05)
        app.compare_runs(ids["fresh"], ids["continued"])
        await settle(pilot, lambda: isinstance(app.screen, CompareScreen) and app.screen.source_steps)
        left = str(app.screen.query_one("#compare-original-label", Static).render())
        right = str(app.screen.query_one("#compare-new-label", Static).render())
        assert _count_in(left, r"  (\d+) steps \(") == expected["fresh"], left
        assert _count_in(right, r"  (\d+) steps \(") == expected["continued"], right
