"""Ctrl-C while graphtape writes its last rows at exit: one line says what it costs, no traceback.

The exit hook waits for the store (here another process holds its write lock) up to its bound;
a person who presses Ctrl-C meanwhile wants out, and gets out with a line, not a traceback
from graphtape's atexit hook.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

from graphtape import Recorder

SCRIPT = textwrap.dedent(
    """
    import sys
    from typing import TypedDict
    from langgraph.graph import END, START, StateGraph
    from graphtape import Recorder

    class S(TypedDict):
        n: int

    b = StateGraph(S)
    b.add_node("one", lambda s: {"n": s["n"] + 1})
    b.add_edge(START, "one")
    b.add_edge("one", END)
    rec = Recorder(sys.argv[1])
    print(rec.attach(b.compile()).invoke({"n": 1}), flush=True)
    """
)


def test_ctrl_c_during_the_exit_flush_says_so_in_one_line(tmp_path):
    db = tmp_path / "gt.db"
    Recorder(db).close()  # the store exists before another process locks it
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    lock = sqlite3.connect(db, isolation_level=None)
    lock.execute("BEGIN IMMEDIATE")  # the write lock, held: the exit hook waits for it
    try:
        proc = subprocess.Popen([sys.executable, str(script), str(db)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "{'n': 2}"  # the run is done; the interpreter exits now
        time.sleep(1.0)
        assert proc.poll() is None  # still waiting for the store
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=30)
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    assert "graphtape: stopped writing at exit (Ctrl-C)" in err, err
    assert "Traceback" not in err, err


def test_sys_exit_inside_a_run_marks_it_interrupted_and_keeps_its_steps(tmp_path):
    """A node that calls sys.exit() stops the program, not because the run failed: the run reads
    ``interrupted (exited)`` with the steps it made, and the program exits with its own code."""
    script = textwrap.dedent(
        """
        import sys
        from typing import TypedDict
        from langgraph.graph import START, StateGraph
        from graphtape import Recorder

        class S(TypedDict):
            n: int

        def work(s):
            if s["n"] == 3:
                sys.exit(4)
            return {"n": s["n"] + 1}

        b = StateGraph(S)
        b.add_node("work", work)
        b.add_edge(START, "work")
        b.add_conditional_edges("work", lambda s: "work")
        Recorder(sys.argv[1]).attach(b.compile()).invoke({"n": 0})
        """
    )
    db = tmp_path / "exit.db"
    done = subprocess.run([sys.executable, "-c", script, str(db)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 4, done.stderr
    with Recorder(db) as rec:
        store = rec.store
        run = store.get_run("last")
        assert (run.status, run.status_reason, run.error_type) == ("interrupted", "exited", None)
        assert [s.step for s in store.list_steps(run.id) if not s.pending and s.step >= 0] == [0, 1, 2, 3]
