"""A one-file script that builds, attaches and runs its graph at its top level: loading it again
for its graph (replay, fixture tests, the TUI) must not run the agent again."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
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
        deadline = time.monotonic() + 30
        while not store.list_runs() and time.monotonic() < deadline:
            time.sleep(0.05)  # written in the background by the module's recorder
        assert len(store.list_runs()) == 1  # only the run made after the load
    finally:
        store.close()


RATE_LIMITED = textwrap.dedent(
    """
    import sys
    from typing import TypedDict
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import RetryPolicy

    class RateLimitError(Exception):
        '''The provider's 429, defined in the script itself.'''

    class Flaky(FakeListChatModel):
        def _call(self, *args, **kwargs):
            if not getattr(Flaky, "failed", False):
                Flaky.failed = True
                raise RateLimitError("429 slow down")
            return super()._call(*args, **kwargs)

    model = Flaky(responses=["hello"])

    class S(TypedDict, total=False):
        a: str

    b = StateGraph(S)
    b.add_node("ask", lambda s: {"a": model.invoke("hi").content}, retry_policy=RetryPolicy(retry_on=RateLimitError, initial_interval=0.01))
    b.add_edge(START, "ask")
    b.add_edge("ask", END)
    graph = b.compile()

    if __name__ == "__main__":
        from graphtape import Recorder
        with Recorder("runs.db") as rec:
            print(rec.attach(graph).invoke({}))
    """
)


def test_an_error_class_of_a_script_is_found_again_when_the_script_is_loaded_by_path(tmp_path):
    """Recorded as ``__main__.RateLimitError``; replayed with the file loaded under another module
    name: the retry policy must still see its own class, or the replay fails where the run retried."""
    (tmp_path / "flaky.py").write_text(RATE_LIMITED)
    first = subprocess.run([sys.executable, "flaky.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120, env=_env(tmp_path))
    assert first.returncode == 0 and "hello" in first.stdout, first.stderr
    replayed = subprocess.run(
        [str(GRAPHTAPE), "--db", "runs.db", "replay", "last", "--graph", "flaky.py:graph"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, env=_env(tmp_path),
    )
    assert replayed.returncode == 0 and "matches the recording" in replayed.stdout, replayed.stdout + replayed.stderr
