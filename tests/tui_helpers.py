"""What the TUI pilot tests share: waiting until a screen has loaded, and a store of runs to compare."""

from __future__ import annotations

from conftest import load_agent
from replay_graphs import sub_graph
from textual.worker import WorkerCancelled

from graphtape.recorder import Recorder
from graphtape.tui.screens.compare import CompareScreen
from graphtape.tui.screens.run import RunScreen


async def settle(pilot, until=None) -> None:
    """Wait for workers (a replay runs the graph in one), for the open run or compare screen to
    show what it loaded, and, if given, until ``until()`` holds."""
    app = pilot.app
    for _ in range(200):
        await pilot.pause(0.05)
        try:
            await app.workers.wait_for_complete()
        except WorkerCancelled:
            continue  # an exclusive worker replaced by a newer one: wait for that one
        screen = app.screen
        busy = any(w.is_running for w in app.workers)
        loaded = not isinstance(screen, RunScreen) or (screen.payload is not None and screen.payload.index == screen.index)
        if isinstance(screen, CompareScreen):
            loaded = screen.pair is not None and bool(screen.diff_title)
        if not busy and loaded and (until is None or until()):
            break
    await pilot.pause(0.05)


def record_demo_and_subgraph_runs(db: str) -> dict[str, str]:
    """The demo's happy and incident runs and two runs of a graph with a subgraph; their ids by scenario."""
    agent = load_agent("reason_act")
    ids = {}
    with Recorder(db) as rec:
        for scenario in ("happy", "incident"):
            rec.attach(agent.build_graph(scenario), name=f"demo:{scenario}").invoke(agent.inputs_for(scenario))
            rec.flush()
            ids[scenario] = rec.last_run_id
        for add in (1, 4):
            rec.attach(sub_graph(add), name="sub").invoke({"n": 1, "log": []})
            rec.flush()
            ids[f"sub{add}"] = rec.last_run_id
    return ids
