"""A one-file script that builds, attaches and runs its graph at its top level: loading it again
for its graph (replay, fixture tests, the TUI) must not run the agent again."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from langgraph.pregel import Pregel

from graphtape.recorder import open_store
from graphtape.replay.loading import load_graph

GRAPHTAPE = Path(sys.executable).with_name("graphtape")

SCRIPT = textwrap.dedent(
    """
    import asyncio
    from typing import TypedDict
    from langgraph.graph import END, START, StateGraph
    from graphtape import Recorder

    class S(TypedDict):
        n: int

    b = StateGraph(S)
    b.add_node("bump", lambda s: {"n": s["n"] + 1})
    b.add_edge(START, "bump")
    b.add_edge("bump", END)
    rec = Recorder("runs.db")
    graph = rec.attach(b.compile(), name="script")
    try:
        print("RESULT", graph.invoke({"n": 1}))
    except Exception:
        print("SWALLOWED")
    print("ASYNC RESULT", asyncio.run(graph.ainvoke({"n": 10})))
    rec.close()
    """
)


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "GRAPHTAPE_DB"}
    return {**env, "PYTHONPATH": str(tmp_path)}


def test_replaying_a_script_run_does_not_run_the_script_agent_again(tmp_path):
    (tmp_path / "script.py").write_text(SCRIPT)
    first = subprocess.run([sys.executable, "script.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120, env=_env(tmp_path))
    assert first.returncode == 0 and "ASYNC RESULT" in first.stdout, first.stderr
    replayed = subprocess.run(
        [str(GRAPHTAPE), "--db", "runs.db", "replay", "last~1", "--trust-recorded-graph"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, env=_env(tmp_path),
    )
    assert replayed.returncode == 0 and "matches the recording" in replayed.stdout, replayed.stdout + replayed.stderr
    # The script's run was stopped where it started, and not swallowed by its `except Exception`.
    assert "RESULT" not in replayed.stdout and "SWALLOWED" not in replayed.stdout
    assert "script.py line 17 runs a graph when loaded" in replayed.stderr and replayed.stderr.count("\n") == 1, replayed.stderr
    store = open_store(tmp_path / "runs.db")
    try:
        runs = store.list_runs()
    finally:
        store.close()
    # The two runs the script made and the replay: no extra live run recorded by the load.
    assert len(runs) == 3 and sum(r.parent_run_id is not None for r in runs) == 1, [(r.id, r.parent_run_id) for r in runs]


def test_a_module_that_runs_its_graph_when_imported_is_loaded_as_far_as_it_ran(tmp_path, monkeypatch, capsys):
    (tmp_path / "agentmod.py").write_text(SCRIPT.replace("Recorder(\"runs.db\")", f"Recorder({str(tmp_path / 'm.db')!r})"))
    monkeypatch.syspath_prepend(str(tmp_path))
    own = Pregel.__dict__["stream"], Pregel.__dict__["astream"]
    graph = load_graph("agentmod:graph")
    assert graph.invoke({"n": 5}) == {"n": 6}  # runs after the load are not stopped
    assert (Pregel.__dict__["stream"], Pregel.__dict__["astream"]) == own  # LangGraph given back as it was
    err = capsys.readouterr().err
    assert "agentmod.py line 17 runs a graph when loaded" in err, err
    store = open_store(tmp_path / "m.db")
    try:
        assert len(store.list_runs()) == 1  # only the run made after the load
    finally:
        store.close()
