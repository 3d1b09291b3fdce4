"""A script recorded from another working directory keeps its graph as a path relative to that
directory: replaying it from elsewhere says so in one line (where it looked, what to do) before any
prompt offers to load a file that is not there."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

GRAPHTAPE = Path(sys.executable).with_name("graphtape")

AGENT = textwrap.dedent(
    """
    from typing import TypedDict
    from langgraph.graph import END, START, StateGraph
    from graphtape import Recorder

    class S(TypedDict):
        n: int

    b = StateGraph(S)
    b.add_node("bump", lambda s: {"n": s["n"] + 1})
    b.add_edge(START, "bump")
    b.add_edge("bump", END)
    recorder = Recorder("runs.db")
    graph = recorder.attach(b.compile())

    if __name__ == "__main__":
        graph.invoke({"n": 1})
        recorder.close()
    """
)


def _graphtape(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "GRAPHTAPE_DB"}
    return subprocess.run([str(GRAPHTAPE), *argv], cwd=cwd, capture_output=True, text=True, timeout=120, env=env)


def test_a_run_recorded_in_another_folder_says_where_its_graph_path_is_read_from(tmp_path):
    app = tmp_path / "app"
    app.mkdir()
    (app / "agent.py").write_text(AGENT)
    env = {k: v for k, v in os.environ.items() if k != "GRAPHTAPE_DB"}
    done = subprocess.run([sys.executable, "app/agent.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    db = str(tmp_path / "runs.db")

    elsewhere = _graphtape(app, "--db", db, "replay", "last", "--trust-recorded-graph")
    assert elsewhere.returncode == 2
    assert elsewhere.stdout == "" and elsewhere.stderr.count("\n") == 1, elsewhere.stderr
    assert "names its graph by a path relative to the folder it was recorded in (app/agent.py:graph)" in elsewhere.stderr
    assert f"{app} has no such file: run this from that folder, or pass --graph" in elsewhere.stderr

    there = _graphtape(tmp_path, "--db", db, "replay", "last", "--trust-recorded-graph")
    assert there.returncode == 0 and "matches the recording" in there.stdout, there.stderr
    named = _graphtape(app, "--db", db, "replay", "last", "--graph", "agent.py:graph")
    assert named.returncode == 0 and "matches the recording" in named.stdout, named.stderr


def test_a_relative_graph_path_that_names_no_file_says_which_folder_it_was_read_from(tmp_path):
    (tmp_path / "agent.py").write_text(AGENT)
    env = {k: v for k, v in os.environ.items() if k != "GRAPHTAPE_DB"}
    assert subprocess.run([sys.executable, "agent.py"], cwd=tmp_path, capture_output=True, timeout=120, env=env).returncode == 0
    sub = tmp_path / "sub"
    sub.mkdir()
    done = _graphtape(sub, "--db", str(tmp_path / "runs.db"), "replay", "last", "--graph", "agnet.py:graph")
    assert done.returncode == 2
    assert done.stderr == f"graphtape: error: cannot load agnet.py: no such file in {sub} (a relative path is read from the working directory)\n"
