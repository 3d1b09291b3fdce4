"""A Recorder made before os.fork() records in the children too (gunicorn --preload, celery
prefork, multiprocessing's fork): each child gets a writer thread and connections of its own.

Before, a child's runs under the default durability were queued for a writer thread the child
did not have (lost, with no fault), and under ``sync`` on PostgreSQL the children wrote on the
parent's connection and hung inside the agent's invoke.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from graphtape import open_store

SCRIPT = textwrap.dedent(
    """
    import os, sys
    from typing import TypedDict
    from langgraph.graph import END, START, StateGraph
    from graphtape import Recorder

    class S(TypedDict):
        n: int

    b = StateGraph(S)
    b.add_node("step", lambda s: {"n": s["n"] + 1})
    b.add_edge(START, "step")
    b.add_conditional_edges("step", lambda s: "step" if s["n"] < 3 else END, ["step", END])
    def say(*words):  # one write: the processes' lines do not interleave
        os.write(1, (" ".join(map(str, words)) + "\\n").encode())

    rec = Recorder(sys.argv[1], durability=sys.argv[2])
    graph = rec.attach(b.compile(), name=sys.argv[3])
    say("parent", graph.invoke({"n": 0})["n"])  # the parent records before it forks
    children = []
    for i in range(2):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                for _ in range(2):
                    say("child", graph.invoke({"n": 0})["n"])
                rec.close()
                code = 0
            finally:
                os._exit(code)
        children.append(pid)
    say("parent", graph.invoke({"n": 0})["n"])
    say("children", [os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) for p in children])
    rec.close()
    """
)


@pytest.mark.skipif(not hasattr(sys.modules["os"], "fork"), reason="os.fork is POSIX-only")
@pytest.mark.parametrize("durability", ["async", "exit", "sync"])
def test_runs_recorded_in_forked_children_are_stored(store_url, tmp_path, durability):
    script = tmp_path / "forking.py"
    script.write_text(SCRIPT)
    out = subprocess.run([sys.executable, str(script), store_url, durability, "forked"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert sorted(lines) == sorted(["parent 3"] * 2 + ["child 3"] * 4 + ["children [0, 0]"]), out.stdout
    store = open_store(store_url)
    try:
        runs = [r for r in store.list_runs(limit=100) if r.name == "forked"]
        assert len(runs) == 6, [(r.status, r.step_count) for r in runs]
        assert {(r.status, r.step_count) for r in runs} == {("ok", 5)}
    finally:
        store.close()


WORKERS = textwrap.dedent(
    """
    import multiprocessing, sys
    from typing import TypedDict
    from langgraph.graph import END, START, StateGraph
    from graphtape import Recorder

    class S(TypedDict):
        n: int

    def graph():
        b = StateGraph(S)
        b.add_node("step", lambda s: {"n": s["n"] + 1})
        b.add_edge(START, "step")
        b.add_conditional_edges("step", lambda s: "step" if s["n"] < 3 else END, ["step", END])
        return b.compile()

    def one(i):  # a Recorder of the worker's own, as a task function makes one
        return Recorder(sys.argv[1]).attach(graph(), name="worker").invoke({"n": 0})["n"]

    if __name__ == "__main__":
        ctx = multiprocessing.get_context("fork")
        children = [ctx.Process(target=one, args=(i,)) for i in range(2)]
        [p.start() for p in children]
        [p.join() for p in children]
        with ctx.Pool(2) as pool:  # leaving the block terminates the workers
            print(pool.map(one, range(4)), [p.exitcode for p in children])
    """
)


@pytest.mark.skipif(not hasattr(sys.modules["os"], "fork"), reason="os.fork is POSIX-only")
def test_runs_of_multiprocessing_workers_are_stored_though_they_end_with_os_exit(store_url, tmp_path):
    """A multiprocessing child ends with os._exit, and a pool's workers are terminated: no exit hook
    runs there, so each run finished in a forked process is written before invoke returns."""
    script = tmp_path / "workers.py"
    script.write_text(WORKERS)
    out = subprocess.run([sys.executable, str(script), store_url], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "[3, 3, 3, 3] [0, 0]", out.stdout + out.stderr[-2000:]
    store = open_store(store_url)
    try:
        runs = [r for r in store.list_runs(limit=100) if r.name == "worker"]
        assert sorted((r.status, r.step_count) for r in runs) == [("ok", 5)] * 6
    finally:
        store.close()
