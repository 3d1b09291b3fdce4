"""Crash safety: SIGKILL a recording process at random supersteps, many times over.

One helper process imports LangGraph and graphtape once, then forks a fresh
recording child per trial (spawning a Python per trial would cost a second
each). The child reports each superstep it sees committed through its stdout
pipe; the test kills it with SIGKILL a random moment after a random step, so
kills land inside nodes, inside commits and inside the background writer.
After each kill the file must pass ``PRAGMA integrity_check``, every stored
step must read back (``state_at`` and ``step_detail``), the run must show as
interrupted (killed), and the next trial records into the same file.

Trials: ``TRIALS_PER_MODE`` per durability mode (100 in all). Run time is
about 30-40 s on two cores; ``GRAPHTAPE_CRASH_SEED`` replays a sequence.
"""

from __future__ import annotations

import os
import random
import select
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from graphtape.recorder import Recorder, open_store

ROOT = Path(__file__).resolve().parents[1]
TRIALS_PER_MODE = 50
TRIALS_PER_FILE = 10
MAX_KILL_STEP = 40

# The helper: reads "db durability seed" lines, forks a recording child for each,
# reports the child's messages and finally its exit status. Children write with
# os.write (no buffers to duplicate across fork) and never return to the loop.
SERVER = textwrap.dedent(
    """
    import operator, os, random, sys, time
    from typing import Annotated, TypedDict
    from langgraph.graph import START, StateGraph
    from graphtape.recorder import Recorder

    class S(TypedDict):
        n: int
        notes: Annotated[list, operator.add]
        big: str

    def say(text):
        os.write(1, (text + "\\n").encode())

    def child(db, durability, seed):
        rng = random.Random(seed)
        rec = Recorder(db, durability=durability)

        def work(state):
            n = state["n"]
            if n == 0:
                say(f"run {rec.last_run_id}")
            # LangGraph runs this node in step n + 1, after step n's checkpoint
            # was put: in sync mode step n is committed by now.
            say(f"step {n}")
            time.sleep(rng.random() * 0.004)
            update = {"n": n + 1, "notes": [f"note-{n}-" + "y" * (n % 5) * 40]}
            if n % 4 == 0:
                update["big"] = f"big-{n}-" + "x" * 2000  # a long string: stored as a blob
            return update

        b = StateGraph(S)
        b.add_node("work", work)
        b.add_edge(START, "work")
        b.add_conditional_edges("work", lambda s: "work")
        graph = rec.attach(b.compile())
        say(f"pid {os.getpid()}")
        graph.invoke({"n": 0, "notes": [], "big": ""}, {"recursion_limit": 100000})
        say("finished")  # never reached: the test kills every child

    def warm_up(db):
        # Import and initialise everything once, so each forked child starts at once.
        b = StateGraph(S)
        b.add_node("work", lambda s: {"n": s["n"] + 1})
        b.add_edge(START, "work")
        for durability in ("sync", "async"):
            with Recorder(db, durability=durability) as rec:
                rec.attach(b.compile()).invoke({"n": 0, "notes": [], "big": ""})

    warm_up(sys.argv[1])
    for line in sys.stdin:
        db, durability, seed = line.split()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                child(db, durability, int(seed))
            except BaseException as exc:
                say(f"error {type(exc).__name__}: {exc}")
                code = 3
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        say(f"exit {status}")
    """
)


class Server:
    """The forking helper process and a line reader with a deadline."""

    def __init__(self, tmp_path: Path) -> None:
        script = tmp_path / "crash_server.py"
        script.write_text(SERVER)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen([sys.executable, str(script), str(tmp_path / "warm-up.db")], cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self._buf = b""

    def send(self, line: str) -> None:
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def read(self, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise AssertionError(f"crash helper silent for {timeout} s")
            chunk = os.read(fd, 65536)
            if not chunk:
                raise AssertionError(f"crash helper exited: {self.proc.stderr.read().decode()[-2000:]}")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode()

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def run_trial(server: Server, db: Path, durability: str, rng: random.Random) -> tuple[str | None, int]:
    """Record into ``db`` and SIGKILL the recorder a random moment after a random step.

    Returns the run id the child reported (None if killed before its first
    node) and the highest step it reported as done (-2 for none).
    """
    kill_after = rng.randint(-1, MAX_KILL_STEP)  # -1: kill while the run is starting
    delay = rng.choice([0.0, 0.0, rng.random() * 0.003, rng.random() * 0.02])
    server.send(f"{db} {durability} {rng.randrange(1 << 30)}")
    pid, run_id, last, killed = None, None, -2, False
    while True:
        line = server.read()
        kind, _, rest = line.partition(" ")
        if kind == "pid":
            pid = int(rest)
        elif kind == "run":
            run_id = rest
        elif kind == "step":
            last = max(last, int(rest))
        elif kind == "exit":
            status = int(rest)
            break
        else:
            raise AssertionError(f"recording child said {line!r}")
        if not killed and pid is not None and last >= kill_after:
            if delay:
                time.sleep(delay)
            os.kill(pid, signal.SIGKILL)
            killed = True
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, f"child ended with status {status}, not by SIGKILL"
    return run_id, last


def integrity(db: Path) -> list[tuple]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("PRAGMA integrity_check").fetchall()
    finally:
        conn.close()


def check_killed_run(db: Path, run_id: str | None, last: int, durability: str, known: set[str], note: str) -> str | None:
    """Everything the kill left behind reads back; returns the run id found in the store."""
    assert integrity(db) == [("ok",)], note
    store = open_store(db)
    try:
        runs = {r.id: r for r in store.list_runs()}  # list_runs marks dead runs
        new = set(runs) - known
        assert len(new) <= 1, note
        if run_id is None:
            if not new:
                return None  # killed before the run row was written
            (run_id,) = new
        if run_id not in runs:
            # Only the background writer may lose a run's start, and then all of it.
            assert durability == "async", f"{note}: sync run {run_id} reported a step but is not stored"
            return None
        run = runs[run_id]
        assert (run.status, run.status_reason) == ("interrupted", "killed"), note
        steps = store.list_steps(run_id)
        numbers = [s.step for s in steps]
        # Supersteps are committed in order: what survived is a gap-free prefix.
        assert numbers == list(range(-1, len(numbers) - 1)), f"{note}: steps {numbers}"
        assert not any(s.pending for s in steps), note
        if durability == "sync":
            # Every step the child saw committed is there.
            assert numbers and numbers[-1] >= last, f"{note}: reported step {last} done, store has {numbers}"
        for s in steps:
            detail = store.step_detail(run_id, s.step)
            state = store.state_at(run_id, s.step)
            if s.step >= 1:
                assert [t.node for t in detail.tasks] == ["work"], note
            if s.step >= 0:
                n = s.step
                assert state["n"] == n, note
                assert state["notes"] == [f"note-{k}-" + "y" * (k % 5) * 40 for k in range(n)], note
                expect_big = max((k for k in range(n) if k % 4 == 0), default=None)
                assert state["big"] == ("" if expect_big is None else f"big-{expect_big}-" + "x" * 2000), note
        return run_id
    finally:
        store.close()


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_sigkill_at_random_steps_never_damages_the_store(tmp_path: Path, durability: str) -> None:
    seed = int(os.environ.get("GRAPHTAPE_CRASH_SEED") or random.randrange(1 << 32))
    rng = random.Random(f"{seed}-{durability}")
    server = Server(tmp_path)
    trials = 0
    try:
        for f in range(TRIALS_PER_MODE // TRIALS_PER_FILE):
            db = tmp_path / f"crash-{f}.db"
            known: set[str] = set()
            for t in range(TRIALS_PER_FILE):
                note = f"GRAPHTAPE_CRASH_SEED={seed} {durability} file {f} trial {t}"
                run_id, last = run_trial(server, db, durability, rng)
                found = check_killed_run(db, run_id, last, durability, known, note)
                if found is not None:
                    known.add(found)
                trials += 1
            # Every killed run of the file still reads, and a clean recording follows.
            store = open_store(db)
            assert all(r.status_reason == "killed" for r in store.list_runs()), f"GRAPHTAPE_CRASH_SEED={seed}"
            store.close()
            with Recorder(db, durability=durability) as rec:
                from test_recorder import chain

                assert rec.attach(chain(3)).invoke({"n": 0, "notes": []})["n"] == 3
            after = open_store(db)
            assert after.get_run("last").status == "ok"
            assert after.state_at(after.resolve_run("last"), 3)["n"] == 3
            assert len(after.list_runs()) == len(known) + 1
            after.close()
    finally:
        server.close()
    assert trials == TRIALS_PER_MODE


SIGTERMED = textwrap.dedent(
    """
    import operator, os, signal, sys, time
    from typing import Annotated, TypedDict
    from langgraph.graph import END, START, StateGraph
    from graphtape.recorder import Recorder

    class S(TypedDict):
        n: int
        notes: Annotated[list, operator.add]
        slow: object

    class SlowToShow:
        # The writer shows it by its repr, slowly: it is still encoding when the signal comes.
        def __repr__(self):
            time.sleep(1.0)
            return "SlowToShow()"

    def work(state):
        n = state["n"]
        if second and n == 3:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(30)  # the signal ends the program here
        return {"n": n + 1, "notes": [f"note {n}"], "slow": SlowToShow() if n == 0 else None}

    b = StateGraph(S)
    b.add_node("work", work)
    b.add_edge(START, "work")
    b.add_conditional_edges("work", lambda s: "work" if s["n"] < 6 else END)
    second = False
    rec = Recorder(sys.argv[1], durability="async")
    graph = rec.attach(b.compile(), name="finished")
    graph.invoke({"n": 0, "notes": [], "slow": None})
    print("first run returned", flush=True)
    second = True
    rec.attach(b.compile(), name="terminated").invoke({"n": 0, "notes": [], "slow": None})
    """
)


def test_sigterm_writes_what_the_writer_holds_then_ends_the_program_as_sigterm_does(tmp_path: Path) -> None:
    """SIGTERM (docker stop, a supervisor) ends Python with no exit hook. A run that returned
    before it, but that the background writer was still encoding, is stored whole; the run under
    way keeps the steps it made; the program still ends by SIGTERM; the CLI lists both runs."""
    db = tmp_path / "term.db"
    script = tmp_path / "agent.py"
    script.write_text(SIGTERMED)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, str(script), str(db)], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == -signal.SIGTERM, proc.stderr
    assert "first run returned" in proc.stdout and "Traceback" not in proc.stderr, proc.stderr
    store = open_store(db)
    try:
        runs = {r.name: r for r in store.list_runs()}
        assert runs["finished"].status == "ok"
        assert [s.step for s in store.list_steps(runs["finished"].id)] == list(range(-1, 7))
        assert store.state_at(runs["finished"].id, 6)["notes"] == [f"note {k}" for k in range(6)]
        cut = runs["terminated"]
        assert (cut.status, cut.status_reason) == ("interrupted", "killed")
        assert [s.step for s in store.list_steps(cut.id)][:4] == [-1, 0, 1, 2]
    finally:
        store.close()
    listed = subprocess.run([sys.executable, "-m", "graphtape.tui", "--db", str(db), "runs"], capture_output=True, text=True, timeout=60, env=env)
    assert listed.returncode == 0 and "finished" in listed.stdout and "interrupted (killed)" in listed.stdout, listed.stderr
