"""Record the bundled demo agents, so a first ``graphtape demo`` has runs worth looking at.

The agents are plain files (``fixtures/agents`` in the repository, which the
build maps to ``graphtape/fixtures/agents``), loaded by path. The incident is recorded last, so
``graphtape show last`` opens it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graphtape import tui
from graphtape.recorder import Recorder, RunInfo
from graphtape.recorder.errors import GraphtapeError
from graphtape.replay.loading import load_module_from_path

__all__ = ["DemoError", "DemoRun", "agents_dir", "demo_names", "record_demo"]

INCIDENT = "incident"
REACT = "react"
ALL = "all"


class DemoError(GraphtapeError):
    """The demo agents cannot be found, or an unknown scenario was asked for."""


@dataclass(frozen=True)
class DemoRun:
    """One recorded demo run: which scenario, and the run the store holds for it."""

    scenario: str
    description: str
    run: RunInfo


def agents_dir() -> Path:
    """Where the demo agent files live: ``fixtures/agents`` beside ``tui`` (the repository and the wheel agree)."""
    folder = Path(tui.__file__).resolve().parent.parent / "fixtures" / "agents"
    if (folder / "reason_act.py").is_file() and (folder / "react_agent.py").is_file():
        return folder
    raise DemoError(f"cannot find the bundled demo agents (looked in {folder}): reinstall graphtape")


def _agents() -> tuple[Path, Any, Any]:
    folder = agents_dir()
    return folder, load_module_from_path(folder / "reason_act.py"), load_module_from_path(folder / "react_agent.py")


def demo_names() -> dict[str, str]:
    """Scenario name -> one-line description, in recording order (the incident last)."""
    _, reason_act, react = _agents()
    names = {k: v for k, v in reason_act.SCENARIOS.items() if k != INCIDENT}
    names[REACT] = (react.__doc__ or "").strip().splitlines()[0]
    names[INCIDENT] = reason_act.SCENARIOS[INCIDENT]
    return names


def _open_for_demo(db: str | None) -> Any:
    """The store to record into, opened (made if missing) before anything runs: one that cannot be
    reached or written is this one line, where a recorder would warn and then fail on it again."""
    from graphtape.recorder import open_store

    store = open_store(db, create=True)
    try:
        store.require_writable("demo records the demo agents' runs")
    except BaseException:
        store.close()
        raise
    return store


def record_demo(
    db: str | None,
    scenario: str = ALL,
    *,
    on_start: Callable[[str], None] | None = None,
    on_run: Callable[[DemoRun], None] | None = None,
) -> tuple[str, list[DemoRun]]:
    """Record ``scenario`` (or all of them) into ``db``; returns the store URL and the runs, in order.

    ``on_start(url)`` is called once the store is open, ``on_run`` after each recorded run.
    """
    folder, reason_act, react = _agents()
    names = demo_names()
    if scenario != ALL and scenario not in names:
        raise DemoError(f"unknown scenario {scenario!r}: choose one of {', '.join([*names, ALL])}")
    chosen = list(names) if scenario == ALL else [scenario]
    done: list[DemoRun] = []
    with Recorder(store=_open_for_demo(db)) as rec:
        url = rec.store.url
        if on_start is not None:
            on_start(url)
        for name in chosen:
            if name == REACT:
                graph, inputs, path = react.build_graph(), react.inputs_for(), folder / "react_agent.py"
            else:
                graph, inputs, path = reason_act.build_graph(name), reason_act.inputs_for(name), folder / "reason_act.py"
            attr = "graph" if name == REACT else f"graph_{name}"
            recorded = rec.attach(graph, name=f"demo:{name}", tags=["demo", f"scenario:{name}"], graph_ref=f"{path}:{attr}")
            before = rec.last_run_id
            try:
                recorded.invoke(inputs)
            except Exception:  # noqa: BLE001 - a failing demo is still a recorded (error) run
                pass
            run_id = rec.last_run_id
            rec.flush()
            if run_id is None or run_id == before:
                raise DemoError(f"demo:{name} was not recorded (see the warning above)")
            run = rec.store.get_run(run_id)
            done.append(DemoRun(name, names[name], run))
            if on_run is not None:
                on_run(done[-1])
        _drop_older_demo_runs(rec.store, {d.scenario for d in done}, {d.run.id for d in done})
    return url, done


def _drop_older_demo_runs(store: Any, scenarios: set[str], keep: set[str]) -> None:
    """Each ``graphtape demo`` replaces the demo's earlier runs, so the list holds one of each.

    A run something was replayed or forked from stays, so that lineage never points nowhere.
    """
    runs = store.list_runs()
    parents = {r.parent_run_id for r in runs if r.parent_run_id}
    for r in runs:
        scenario = next((t.split(":", 1)[1] for t in r.tags if t.startswith("scenario:")), None)
        if "demo" in r.tags and scenario in scenarios and r.id not in keep and r.id not in parents and r.parent_run_id is None:
            store.delete_run(r.id)
