"""Fault injection: the store fails mid-run, the user's graph does not notice.

Each fault is injected from inside a node of a real graph, partway through a
recording: a full disk (SQLite's ``max_page_count``), the database file
deleted, the database made read-only, values that cannot be encoded, and
another process holding the write lock. The graph must return what it returns
without graphtape, and where the store is writable again by the end of the run
the faults are counted on the run (``faults``, ``fault_log``). Steps recorded
after a fault must still read back correctly.
"""

from __future__ import annotations

import logging
import operator
import random
import stat
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
import sqlalchemy as sa

from graphtape.recorder import Recorder, StoreError, open_store

NODES = 12


class S(TypedDict):
    n: int
    notes: Annotated[list, operator.add]
    extra: Any


def looping(hooks: Mapping[int, Callable[[], Any]] | None = None, *, bulk: int = 300):
    """A graph that runs ``NODES`` steps of one node; ``hooks[n]`` runs inside the step that sees ``n``."""
    from langgraph.graph import END, START, StateGraph

    hooks = hooks or {}

    def work(state: S) -> dict:
        n = state["n"]
        # Text that does not compress, so a full disk is met as soon as it is full.
        update: dict[str, Any] = {"n": n + 1, "notes": [f"note {n} " + random.Random(n).randbytes(bulk // 2).hex()]}
        if n in hooks:
            got = hooks[n]()
            if got is not None:
                update["extra"] = got
        return update

    b = StateGraph(S)
    b.add_node("work", work)
    b.add_edge(START, "work")
    b.add_conditional_edges("work", lambda s: "work" if s["n"] < NODES else END)
    return b.compile()


START_STATE = {"n": 0, "notes": [], "extra": None}


def plain_result(**kw: Any) -> dict:
    return looping(**kw).invoke(START_STATE)


def check_steps(store, run_id: str) -> list[int]:
    """Every stored completed step reads back the state the graph had; returns their numbers."""
    numbers = []
    for s in store.list_steps(run_id):
        if s.pending or s.step < 0:
            continue
        state = store.state_at(run_id, s.step)
        assert state["n"] == s.step, s
        assert [x.split(" ")[1] for x in state["notes"]] == [str(k) for k in range(s.step)], s
        store.step_detail(run_id, s.step)
        numbers.append(s.step)
    return numbers


def with_pragma(rec: Recorder, pragma: str) -> Callable[[], None]:
    """From now on every new store connection runs ``pragma``; returns the undo."""

    def on_connect(dbapi_conn, _record):
        cur = dbapi_conn.cursor()
        cur.execute(pragma)
        cur.close()

    rec.flush()
    with rec.writer._io:  # no write under way (a retry of kept rows may come any time): connections can be replaced
        sa.event.listen(rec.store.engine, "connect", on_connect)
        rec.store.reset_connections()

    def undo() -> None:
        rec.flush()
        with rec.writer._io:
            sa.event.remove(rec.store.engine, "connect", on_connect)
            rec.store.reset_connections()

    return undo


def before(durability: str, fault_seen_at: int) -> set[int]:
    """Steps surely stored before a fault injected in the node that sees ``n == fault_seen_at``.

    In sync mode, all earlier steps. In the background mode none for sure: LangGraph
    itself saves the latest checkpoint while the next step runs, so it may reach
    the recorder after the fault.
    """
    return set(range(fault_seen_at)) if durability == "sync" else set()


@pytest.fixture(params=["sync", "async"])
def durability(request) -> str:
    return request.param


# ---------------------------------------------------------------------------
# Full disk
# ---------------------------------------------------------------------------


def test_full_disk_mid_run_is_counted_on_the_run(tmp_path: Path, durability: str) -> None:
    db = tmp_path / "full.db"
    rec = Recorder(db, durability=durability)
    undo: list[Callable[[], None]] = []

    def fill() -> None:
        with rec.store.engine.connect() as conn:
            pages = conn.exec_driver_sql("PRAGMA page_count").scalar()
        undo.append(with_pragma(rec, f"PRAGMA max_page_count = {pages}"))

    hooks = {4: fill, 9: lambda: undo.pop()()}
    out = rec.attach(looping(hooks, bulk=6000)).invoke(START_STATE)
    assert out == plain_result(bulk=6000)
    rec.close()
    assert rec.fault_count > 0
    store = open_store(db)
    run = store.get_run("last")
    assert run.status == "ok" and run.faults == rec.fault_count
    log = store.run_detail(run.id).fault_log
    assert log and all("full" in line for line in log), log
    stored = check_steps(store, run.id)
    # What was written before the disk filled and after it had room again is all there.
    assert before(durability, 4) | set(range(10, NODES + 1)) <= set(stored), stored
    store.close()


@pytest.mark.parametrize("fault", ["disk full", "read-only"])
def test_a_store_failing_until_close_leaves_the_partly_stored_run_marked_and_its_rest_rescued(tmp_path: Path, durability: str, fault: str, monkeypatch, caplog, capsys) -> None:
    """The store stops taking rows mid-run and never takes them again. The run's first steps
    are in the store, its last ones and its end are not: at close it must not be left reading
    as killed with no fault, the closing line names the run and the steps the store did not take,
    and those rows are saved to a rescue file, not lost. A full disk still takes the run's end
    alone (a row the store holds already): the run reads as it ended, its fault log saying which
    steps are missing and where they are. A read-only store takes nothing (the run reads as
    running). A run the store never took any of is rescued whole, in the same file. Once the
    store takes writes again, ``graphtape import-rescue`` puts every rescued row in: the run
    reads whole, every step as the graph had it; importing again adds nothing twice."""
    from graphtape.tui.cli import main

    monkeypatch.setenv("GRAPHTAPE_RESCUE_DIR", str(tmp_path))
    db = tmp_path / "failing.db"
    rec = Recorder(db, durability=durability)
    undo: list[Callable[[], None]] = []

    def fail() -> None:
        if fault == "read-only":
            undo.append(make_read_only(rec, db))
            return
        with rec.store.engine.connect() as conn:
            pages = conn.exec_driver_sql("PRAGMA page_count").scalar()
        with_pragma(rec, f"PRAGMA max_page_count = {pages}")  # the recorder's connections: full until the end

    out = rec.attach(looping({4: fail}, bulk=6000), name="partly").invoke(START_STATE)
    partly = rec.last_run_id
    assert out == plain_result(bulk=6000)
    assert rec.attach(looping(bulk=6000), name="never").invoke(START_STATE) == out
    with caplog.at_level(logging.WARNING, logger="graphtape"):
        rec.close()
    (rescued,) = tmp_path.glob("graphtape-rescued-*.db")
    said = [r.getMessage() for r in caplog.records if "could not be written before the recorder closed" in r.getMessage()]
    assert len(said) == 1 and f"(run {partly}: steps " in said[0] and f"saved to {rescued}" in said[0] and "import-rescue" in said[0], said
    store = open_store(db)
    try:
        run = store.get_run(partly)
        assert set(range(4)) <= set(check_steps(store, run.id)) and run.step_count < NODES + 1
        assert [r.name for r in store.list_runs()] == ["partly"]
        if fault == "disk full":
            assert "full" in said[0]
            assert run.status == "incomplete" and run.faults >= 2  # the disk filling, then the rows it kept out
            log = store.run_detail(run.id).fault_log
            assert any(f"(run {partly}: steps " in line and str(rescued) in line for line in log), log
        else:
            assert "readonly" in said[0]
            assert run.status == "running"  # as the store last heard (this process is alive: not marked killed)
    finally:
        store.close()
    store = open_store(rescued)  # the rescue file opens as a store: its whole run, alone
    try:
        (run,) = store.list_runs()
        assert (run.name, run.status, check_steps(store, run.id)) == ("never", "ok", list(range(NODES + 1)))
        whole_count, whole_steps = run.step_count, len(store.list_steps(run.id))
    finally:
        store.close()
    if fault == "read-only":
        undo.pop()()  # writable again (the disk-full limit was the recorder's connections' own)
    capsys.readouterr()
    assert main(["--db", str(db), "import-rescue", str(rescued)]) == 0
    assert "the rest of 1 run" in capsys.readouterr().out
    for again in (False, True):
        if again:
            assert main(["--db", str(db), "import-rescue", str(rescued)]) == 0
        store = open_store(db)
        try:
            run = store.get_run(partly)
            assert (run.status, run.step_count) == ("ok", whole_count)
            assert check_steps(store, partly) == list(range(NODES + 1))
            assert len(store.list_steps(partly)) == whole_steps  # as many as the run recorded whole: each once
            assert sorted(r.name for r in store.list_runs()) == ["never", "partly"]
        finally:
            store.close()


def test_a_rescue_file_for_another_store_is_refused_in_one_line(tmp_path: Path, monkeypatch, capsys) -> None:
    """The rest of a partly stored run belongs to the store that holds its start: importing it
    anywhere else is refused, naming that store, and adds nothing."""
    from graphtape.tui.cli import main

    monkeypatch.setenv("GRAPHTAPE_RESCUE_DIR", str(tmp_path))
    db = tmp_path / "failing.db"
    rec = Recorder(db, durability="sync")
    rec.attach(looping({4: lambda: make_read_only(rec, db)}), name="partly").invoke(START_STATE)
    rec.close()
    (rescued,) = tmp_path.glob("graphtape-rescued-*.db")
    other = tmp_path / "other.db"
    Recorder(other).close()
    capsys.readouterr()
    assert main(["--db", str(other), "import-rescue", str(rescued)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "which this store does not hold" in err and str(db) in err and "Traceback" not in err, err
    store = open_store(other)
    try:
        assert store.list_runs() == []
    finally:
        store.close()


# ---------------------------------------------------------------------------
# Database file deleted
# ---------------------------------------------------------------------------


def remove_db(db: Path) -> None:
    for p in db.parent.glob(db.name + "*"):
        p.unlink()


def test_database_deleted_mid_run(tmp_path: Path, durability: str, caplog, monkeypatch, capsys) -> None:
    """The file is deleted mid-run: nothing more is written into the deleted inode, the graph
    never notices, and what the recorder was given after it (the rest of that run, whole later
    runs) is saved to a rescue file at close, not dropped: its whole runs import into a new store
    (the rest of the first run has no store to go to, and the import says so)."""
    from graphtape.tui.cli import main

    monkeypatch.setenv("GRAPHTAPE_RESCUE_DIR", str(tmp_path))
    db = tmp_path / "gone.db"
    rec = Recorder(db, durability=durability)
    # The steps before are written first (in the background a fast run's first steps may still
    # be queued when the file goes, and the store then never took that run at all).
    def flush_then_delete() -> None:
        rec.flush()
        remove_db(db)

    graph = rec.attach(looping({5: flush_then_delete}))
    with caplog.at_level(logging.WARNING, logger="graphtape"):
        assert graph.invoke(START_STATE) == plain_result()
        first = rec.last_run_id
        rec.flush()
        # The recorder noticed its file is gone instead of writing into a deleted inode.
        assert rec.fault_count > 0
        assert any("deleted" in r.getMessage() for r in caplog.records)
        # Still no error for the graph on the next run.
        assert graph.invoke(START_STATE) == plain_result()
        later = rec.last_run_id
        rec.close()
    assert not db.exists()
    (rescued,) = tmp_path.glob("graphtape-rescued-*.db")
    assert any("never took 1 run" in r.getMessage() and str(rescued) in r.getMessage() for r in caplog.records), caplog.text
    # A new recorder at the same path starts a fresh store.
    with Recorder(db, durability=durability) as again:
        again.attach(looping()).invoke(START_STATE)
    capsys.readouterr()
    assert main(["--db", str(db), "import-rescue", str(rescued)]) == 0
    err = capsys.readouterr().err
    assert f"the rest of run {first}" in err and "which this store does not hold" in err, err
    store = open_store(db)
    assert [r.status for r in store.list_runs()] == ["ok", "ok"]
    assert check_steps(store, store.resolve_run("last")) == list(range(NODES + 1))
    assert check_steps(store, later) == list(range(NODES + 1)) and not store.has_run(first)
    store.close()


def test_database_replaced_mid_run_is_not_written_to(tmp_path: Path, durability: str) -> None:
    """Someone moves the file away and another recorder creates a new one at the path."""
    db = tmp_path / "moved.db"
    rec = Recorder(db, durability=durability)

    def replace() -> None:
        rec.flush()
        for p in tmp_path.glob("moved.db*"):
            p.rename(tmp_path / ("old-" + p.name))
        with Recorder(db) as other:
            # A run of its own (its own thread), not a subgraph of the node it is started from.
            other.attach(looping()).invoke(START_STATE, {"configurable": {"thread_id": "other"}})

    assert rec.attach(looping({6: replace})).invoke(START_STATE) == plain_result()
    rec.close()
    assert rec.fault_count > 0
    store = open_store(db)
    runs = store.list_runs()
    assert len(runs) == 1 and runs[0].status == "ok"  # only the other recorder's run
    assert check_steps(store, runs[0].id) == list(range(NODES + 1))
    store.close()


# ---------------------------------------------------------------------------
# Read-only database
# ---------------------------------------------------------------------------


def make_read_only(rec: Recorder, db: Path) -> Callable[[], None]:
    # File modes do not bind root; SQLite's query_only gives the same "readonly database" error.
    mode = db.stat().st_mode
    db.chmod(0o444)
    undo_pragma = with_pragma(rec, "PRAGMA query_only = 1")

    def undo() -> None:
        db.chmod(stat.S_IMODE(mode))
        undo_pragma()

    return undo


def test_read_only_mid_run_then_writable_again(tmp_path: Path, durability: str) -> None:
    db = tmp_path / "ro.db"
    rec = Recorder(db, durability=durability)
    undo: list[Callable[[], None]] = []
    hooks = {3: lambda: undo.append(make_read_only(rec, db)), 8: lambda: undo.pop()()}
    assert rec.attach(looping(hooks)).invoke(START_STATE) == plain_result()
    rec.close()
    store = open_store(db)
    run = store.get_run("last")
    assert run.status == "ok" and run.faults == rec.fault_count > 0
    assert all("readonly" in line for line in store.run_detail(run.id).fault_log)
    stored = check_steps(store, run.id)
    assert before(durability, 3) | set(range(9, NODES + 1)) <= set(stored), stored
    store.close()


def test_read_only_until_the_end(tmp_path: Path, durability: str) -> None:
    db = tmp_path / "ro-end.db"
    rec = Recorder(db, durability=durability)
    undo: list[Callable[[], None]] = []
    graph = rec.attach(looping({3: lambda: undo.append(make_read_only(rec, db))}))
    assert graph.invoke(START_STATE) == plain_result()
    rec.flush()
    assert rec.fault_count > 0
    store = open_store(db)  # still readable: the steps before the fault are there
    run = store.get_run("last")
    assert run.status == "running"  # its end could not be written
    assert before(durability, 3) <= set(check_steps(store, run.id))
    store.close()
    undo.pop()()
    rec.close()


# ---------------------------------------------------------------------------
# Values that cannot be encoded
# ---------------------------------------------------------------------------


class Opaque:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<Opaque>"


class BrokenRepr:
    def __repr__(self) -> str:
        raise RuntimeError("repr exploded")


class FlakyMapping(Mapping):
    """A mapping that fails when read (a lazy proxy whose backend went away)."""

    def __getitem__(self, key: str) -> Any:
        raise ConnectionError("backend gone")

    def __iter__(self) -> Iterator[str]:
        raise ConnectionError("backend gone")

    def __len__(self) -> int:
        return 1


def test_unencodable_values_are_counted_and_later_steps_read_true(tmp_path: Path, durability: str) -> None:
    db = tmp_path / "odd.db"
    rec = Recorder(db, durability=durability)
    hooks = {2: Opaque, 4: BrokenRepr, 6: FlakyMapping, 7: lambda: "fine again"}
    out = rec.attach(looping(hooks)).invoke(START_STATE)
    expected = plain_result()
    assert {k: v for k, v in out.items() if k != "extra"} == {k: v for k, v in expected.items() if k != "extra"}
    assert out["extra"] == "fine again"
    rec.close()
    store = open_store(db)
    run = store.get_run("last")
    # Each odd value is marked where it stands and counted on the run; no step fails to encode,
    # so nothing counts as a write fault and no step is lost, in either durability mode.
    assert run.status == "ok" and run.faults >= 3 and rec.fault_count == 0
    log = store.run_detail(run.id).fault_log
    assert any("Opaque" in line for line in log) and any("BrokenRepr" in line for line in log)
    assert any("FlakyMapping" in line and "ConnectionError: backend gone" in line for line in log), log
    stored = check_steps(store, run.id)
    assert stored == list(range(NODES + 1)), stored
    assert store.state_at(run.id, 3)["extra"]["unserializable"] is True
    assert "failing repr" in store.state_at(run.id, 5)["extra"]["repr"]
    flaky = store.state_at(run.id, 7)["extra"]
    assert flaky["unserializable"] is True and flaky["__type__"].endswith("FlakyMapping")
    assert "ConnectionError: backend gone" in flaky["repr"]
    for step in range(8, NODES + 1):
        assert store.state_at(run.id, step)["extra"] == "fine again"
    store.close()


# ---------------------------------------------------------------------------
# Database locked by another process
# ---------------------------------------------------------------------------

LOCKER = textwrap.dedent(
    """
    import sqlite3, sys, time
    conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("CREATE TABLE IF NOT EXISTS other_program (x)")
    print("locked", flush=True)
    time.sleep(float(sys.argv[2]))  # hold the write lock a while
    conn.execute("COMMIT")
    print("released", flush=True)
    """
)


class Locker:
    """Another process holding a write transaction on the database."""

    def __init__(self, db: Path, hold: float) -> None:
        # It lets go by itself: in sync mode the graph's own thread is the one waiting.
        self.proc = subprocess.Popen([sys.executable, "-c", LOCKER, str(db), str(hold)], stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "locked"

    def wait(self) -> None:
        assert self.proc.stdout.readline().strip() == "released"
        self.proc.wait(30)


def test_lock_held_briefly_by_another_process_loses_nothing(tmp_path: Path, durability: str) -> None:
    db = tmp_path / "locked.db"
    rec = Recorder(db, durability=durability)
    held: list[Locker] = []

    def lock() -> None:
        rec.flush()
        held.append(Locker(db, hold=1.0))  # well within SQLite's 10 s busy timeout

    assert rec.attach(looping({3: lock, 5: lambda: held[0].wait()})).invoke(START_STATE) == plain_result()
    rec.close()
    assert rec.fault_count == 0
    store = open_store(db)
    run = store.get_run("last")
    assert (run.status, run.faults) == ("ok", 0)
    assert check_steps(store, run.id) == list(range(NODES + 1))
    store.close()


def test_lock_held_past_the_timeout_is_counted_not_raised(tmp_path: Path, durability: str) -> None:
    db = tmp_path / "stuck.db"
    rec = Recorder(db, durability=durability, lock_wait=0.2)  # give up sooner than the default 2 s
    held: list[Locker] = []

    def lock() -> None:
        rec.flush()
        held.append(Locker(db, hold=2.0))

    def release() -> None:
        rec.flush()  # the writes in between gave up, and were kept
        held.pop().wait()

    assert rec.attach(looping({3: lock, 6: release})).invoke(START_STATE) == plain_result()
    rec.close()
    store = open_store(db)
    run = store.get_run("last")
    assert run.status == "ok" and run.faults == rec.fault_count > 0
    assert all("locked" in line for line in store.run_detail(run.id).fault_log)
    # Nothing is lost: the rows that met the lock were kept and written once it was released.
    assert check_steps(store, run.id) == list(range(NODES + 1))
    store.close()


def test_lock_held_until_after_close_loses_no_row_once_the_rescue_is_imported(tmp_path: Path, durability: str, monkeypatch, capsys) -> None:
    """Another process holds the write lock from mid-run until after the recorder has closed:
    what the store did not take is saved to a rescue file; imported once the lock is gone, the
    run reads whole."""
    from graphtape.tui.cli import main

    monkeypatch.setenv("GRAPHTAPE_RESCUE_DIR", str(tmp_path))
    db = tmp_path / "held.db"
    rec = Recorder(db, durability=durability, lock_wait=0.2)
    held: list[Locker] = []

    def lock() -> None:
        rec.flush()
        held.append(Locker(db, hold=600.0))

    try:
        assert rec.attach(looping({3: lock})).invoke(START_STATE) == plain_result()
        run_id = rec.last_run_id
        rec.close(timeout=1.0)
    finally:
        for locker in held:
            locker.proc.kill()
            locker.proc.wait(30)
    (rescued,) = tmp_path.glob("graphtape-rescued-*.db")
    assert main(["--db", str(db), "import-rescue", str(rescued)]) == 0, capsys.readouterr().err
    store = open_store(db)
    try:
        run = store.get_run(run_id)
        assert run.status == "ok" and check_steps(store, run_id) == list(range(NODES + 1))
    finally:
        store.close()


def test_sync_waits_for_a_lock_only_up_to_its_bound(tmp_path: Path) -> None:
    """Past ``lock_wait`` the graph goes on: its rows wait for the lock in the background, not on the graph's thread."""
    db = tmp_path / "patient.db"
    rec = Recorder(db, durability="sync", lock_wait=0.5)
    step_times: list[float] = []
    held: list[Locker] = []

    def lock() -> None:
        rec.flush()
        held.append(Locker(db, hold=3.0))

    hooks = {3: lock}
    for n in range(4, NODES):
        hooks[n] = lambda: step_times.append(time.monotonic()) and None
    started = time.monotonic()
    assert rec.attach(looping(hooks)).invoke(START_STATE) == plain_result()
    took = time.monotonic() - started
    assert took < 3.0, f"the sync run waited {took:.1f} s for a 3 s lock with a 0.5 s bound"
    held.pop().wait()
    rec.close()
    assert rec.fault_count >= 1
    store = open_store(db)
    run = store.get_run("last")
    assert run.status == "ok" and run.faults == rec.fault_count
    assert check_steps(store, run.id) == list(range(NODES + 1))
    store.close()


def test_a_replay_into_a_locked_store_says_why_in_one_line(tmp_path: Path) -> None:
    """The replay's recorder meets the lock; the replay reports it, in its own one line (the
    recorder's warnings are its reason, not lines of their own), exit 2."""
    from graphtape.tui.demo import record_demo

    db = tmp_path / "locked.db"
    record_demo(str(db), "happy")
    graph = f"{Path(__file__).resolve().parents[1] / 'fixtures' / 'agents' / 'reason_act.py'}:graph_happy"
    locker = Locker(db, hold=120.0)
    try:
        proc = subprocess.run([sys.executable, "-m", "graphtape", "--db", str(db), "replay", "last", "--graph", graph], capture_output=True, text=True, timeout=120)
    finally:
        locker.proc.kill()
        locker.proc.wait(30)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("graphtape: error: could not record the replay: ") and "database is locked" in proc.stderr, proc.stderr


# ---------------------------------------------------------------------------
# PostgreSQL: the server drops the recorder's connection
# ---------------------------------------------------------------------------


def test_postgres_connection_killed_mid_run(pg_url: str, durability: str) -> None:
    rec = Recorder(pg_url + "&application_name=graphtape-fault-test", durability=durability)

    def kill_backends() -> None:
        rec.flush()
        admin = sa.create_engine(pg_url)
        with admin.begin() as conn:
            killed = conn.execute(
                sa.text("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name = 'graphtape-fault-test'")
            ).scalar()
        admin.dispose()
        assert killed >= 1

    assert rec.attach(looping({4: kill_backends, 7: lambda: rec.flush() and None})).invoke(START_STATE) == plain_result()
    rec.close()
    store = open_store(pg_url)
    run = store.get_run("last")
    assert run.status == "ok"
    # The write that met the dead connection is tried again on a fresh one: nothing is lost.
    assert run.faults == rec.fault_count <= 1
    assert check_steps(store, run.id) == list(range(NODES + 1))
    store.close()


def test_postgres_refusing_writes_until_close_after_a_killed_connection_loses_no_row(pg_url: str, durability: str, tmp_path: Path, monkeypatch, caplog, capsys) -> None:
    """Mid-run the recorder's connection is killed (pg_terminate_backend from another connection)
    and the server refuses every write after it, until the recorder has closed (a trigger raising
    PostgreSQL's read-only error: what a standby or a revoked grant says). The run's first steps
    are in the server, the rest is saved to a rescue file, and ``graphtape import-rescue`` puts
    it in once the server takes writes again: the run reads whole."""
    from graphtape.tui.cli import main

    monkeypatch.setenv("GRAPHTAPE_RESCUE_DIR", str(tmp_path))
    app = f"graphtape-refused-{durability}"
    rec = Recorder(pg_url + f"&application_name={app}", durability=durability)
    admin = sa.create_engine(pg_url)

    def refuse() -> None:
        rec.flush()
        with admin.begin() as conn:
            conn.execute(sa.text("CREATE FUNCTION gt_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'cannot execute % in a read-only transaction', TG_OP USING ERRCODE = '25006'; END $$"))
            for table in ("runs", "steps", "calls"):
                conn.execute(sa.text(f"CREATE TRIGGER gt_refuse BEFORE INSERT OR UPDATE ON {table} FOR EACH ROW EXECUTE FUNCTION gt_refuse()"))
        assert _terminate(pg_url, app) >= 1

    try:
        assert rec.attach(looping({4: refuse}), name="refused").invoke(START_STATE) == plain_result()
        run_id = rec.last_run_id
        with caplog.at_level(logging.WARNING, logger="graphtape"):
            rec.close(timeout=2.0)
        (rescued,) = tmp_path.glob("graphtape-rescued-*.db")
        assert any(f"(run {run_id}: steps " in r.getMessage() and str(rescued) in r.getMessage() for r in caplog.records), caplog.text
        store = open_store(pg_url)
        try:
            assert store.get_run(run_id).status == "running" and set(range(4)) <= set(check_steps(store, run_id)) and len(check_steps(store, run_id)) < NODES + 1
        finally:
            store.close()
        with admin.begin() as conn:
            conn.execute(sa.text("DROP FUNCTION gt_refuse() CASCADE"))
        assert main(["--db", pg_url, "import-rescue", str(rescued)]) == 0, capsys.readouterr().err
        store = open_store(pg_url)
        try:
            assert store.get_run(run_id).status == "ok" and check_steps(store, run_id) == list(range(NODES + 1))
        finally:
            store.close()
    finally:
        admin.dispose()


def test_postgres_table_gone_mid_run_keeps_the_rows_for_a_rescue_file(pg_url: str, durability: str, tmp_path: Path, monkeypatch, caplog, capsys) -> None:
    """Mid-run the steps table goes (renamed away: a migration, a reset). Every row the server
    then refuses is refused for where it goes, not for what it holds: the rows are kept and saved
    to a rescue file at close, not dropped one by one, and the import puts them back once the table is there again."""
    from graphtape.tui.cli import main

    monkeypatch.setenv("GRAPHTAPE_RESCUE_DIR", str(tmp_path))
    rec = Recorder(pg_url, durability=durability)
    admin = sa.create_engine(pg_url)

    def take_away() -> None:
        rec.flush()
        with admin.begin() as conn:
            conn.execute(sa.text("ALTER TABLE steps RENAME TO steps_away"))

    try:
        assert rec.attach(looping({4: take_away}), name="gone").invoke(START_STATE) == plain_result()
        run_id = rec.last_run_id
        with caplog.at_level(logging.WARNING, logger="graphtape"):
            rec.close(timeout=1.0)
        (rescued,) = tmp_path.glob("graphtape-rescued-*.db")
        assert any(f"(run {run_id}: steps " in r.getMessage() and str(rescued) in r.getMessage() for r in caplog.records), caplog.text
        with admin.begin() as conn:
            conn.execute(sa.text("ALTER TABLE steps_away RENAME TO steps"))
        assert main(["--db", pg_url, "import-rescue", str(rescued)]) == 0, capsys.readouterr().err
        store = open_store(pg_url)
        try:
            assert store.get_run(run_id).status == "ok" and check_steps(store, run_id) == list(range(NODES + 1))
        finally:
            store.close()
    finally:
        admin.dispose()


def _terminate(pg_url: str, application_name: str) -> int:
    """Terminate the backends of ``application_name`` and wait until they are gone; how many there were."""
    admin = sa.create_engine(pg_url)
    where = "datname = current_database() AND pid <> pg_backend_pid() AND application_name = :name"
    with admin.connect() as conn:
        killed = conn.execute(sa.text(f"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE {where}"), {"name": application_name}).scalar()
        for _ in range(100):
            if not conn.execute(sa.text(f"SELECT count(*) FROM pg_stat_activity WHERE {where}"), {"name": application_name}).scalar():
                break
            time.sleep(0.02)
            conn.rollback()  # a fresh snapshot of pg_stat_activity
    admin.dispose()
    return killed


def test_postgres_connections_killed_mid_write_leave_psycopg_quiet_about_graphtapes_own(pg_url: str, caplog) -> None:
    """psycopg logs "error ignored terminating <psycopg.Pipeline [BAD]>" when a connection dies in a
    multi-row insert: graphtape handles that error, so the line is not printed for its connections;
    the program's own connection, killed the same way, still gets psycopg's warning."""
    import psycopg

    rec = Recorder(pg_url + "&application_name=graphtape-quiet-test", durability="async")
    kills: list[int] = []

    def kill() -> None:
        rec.flush()  # the writer's connection is idle: its next write, a multi-row insert, meets the dead one
        kills.append(_terminate(pg_url, "graphtape-quiet-test"))

    with caplog.at_level(logging.WARNING, logger="psycopg"):
        hooks = {n: kill for n in range(2, NODES - 1, 2)}
        assert rec.attach(looping(hooks)).invoke(START_STATE) == plain_result()
        rec.close()
        assert sum(kills) >= len(hooks)
        assert [r.getMessage() for r in caplog.records if r.name.startswith("psycopg")] == []

        url = sa.engine.make_url(pg_url)
        with psycopg.connect(host=url.host, port=url.port, user=url.username, dbname=url.database, application_name="users-own-connection", autocommit=True) as own:
            assert _terminate(pg_url, "users-own-connection") == 1
            with pytest.raises(psycopg.OperationalError):
                own.cursor().executemany("SELECT %s", [(1,), (2,)])
    assert any(r.name == "psycopg" and "error ignored terminating" in r.getMessage() for r in caplog.records), caplog.records
    store = open_store(pg_url)
    try:
        run = store.get_run("last")
        assert run.status == "ok" and check_steps(store, run.id) == list(range(NODES + 1))  # nothing lost
    finally:
        store.close()


def test_recorder_on_a_folder_it_cannot_use_runs_the_graph_and_counts_the_fault(tmp_path: Path, caplog) -> None:
    """A store that cannot be opened yet does not stop the program: a warning, a counted fault, the graph runs."""
    (tmp_path / "nowhere").write_text("a file where the folder should be")
    with caplog.at_level(logging.WARNING, logger="graphtape"):
        rec = Recorder(tmp_path / "nowhere" / "x.db")
    assert rec.fault_count == 1
    assert [r.getMessage() for r in caplog.records if "is not a folder" in r.getMessage()]
    assert rec.attach(looping()).invoke(START_STATE) == plain_result()
    with pytest.raises(StoreError, match="is not a folder"):
        rec.store
    rec.close(timeout=0.2)


# -- values that hurt the encoder: cycles, and reads that raise past Exception --------------------


class _RaisesCancelled:
    """A model-like value whose field raises ``CancelledError`` (a ``BaseException``) when read."""

    model_fields = {"x": None}

    def model_dump(self) -> dict:
        return {}

    @property
    def x(self) -> Any:
        import asyncio

        raise asyncio.CancelledError()


def _tree(levels: int) -> Any:
    """A tree with parent pointers: without cycle detection, ~2**levels paths (a hang)."""
    import dataclasses

    @dataclasses.dataclass(eq=False)
    class Node:
        name: str
        parent: Any = None
        children: list = dataclasses.field(default_factory=list)

    root = Node("root")
    level = [root]
    for _ in range(levels):
        nxt = []
        for node in level[:2]:
            for i in range(2):
                child = Node(f"{node.name}.{i}", parent=node)
                node.children.append(child)
                nxt.append(child)
        level = nxt
    return root


@pytest.mark.parametrize("durability", ["sync", "async"])
@pytest.mark.parametrize("value", ["cycle", "cancelled", "huge int"])
def test_a_value_that_hurts_the_encoder_is_marked_counted_and_later_runs_still_record(tmp_path, durability, value):
    """A dataclass tree with parent pointers, a value whose read raises a BaseException
    (CancelledError), an int too long for Python to write in decimal, in either durability:
    the run returns, the value is marked and counted as a fault, every step is kept, and the
    writer goes on recording the next run (it used to die silently in async mode, losing every
    later run; the int lost the rest of its run)."""
    from langgraph.graph import END, START, StateGraph

    hostile = {"cycle": lambda: _tree(100), "cancelled": _RaisesCancelled, "huge int": lambda: 10**5000}[value]()
    told = {"cycle": "cycle", "cancelled": "CancelledError", "huge int": "too long to write"}[value]

    def build(bad: bool) -> Any:
        b = StateGraph(S)
        b.add_node("a", lambda s: {"n": s["n"] + 1, "extra": hostile if bad else 1})
        b.add_node("b", lambda s: {"n": s["n"] + 1})
        b.add_edge(START, "a")
        b.add_edge("a", "b")
        b.add_edge("b", END)
        return b.compile()

    db = tmp_path / "faults.db"
    started = time.perf_counter()
    with Recorder(db, durability=durability) as rec:
        assert rec.attach(build(True)).invoke({"n": 0, "notes": []})["n"] == 2
        hurt = rec.last_run_id
        assert rec.attach(build(False)).invoke({"n": 0, "notes": []})["n"] == 2
        later = rec.last_run_id
        assert rec.flush()
    assert time.perf_counter() - started < 60  # not 2**100 paths
    store = open_store(db)
    try:
        run = store.get_run(hurt)
        assert run.status == "ok" and run.faults >= 1
        assert any(told in line for line in store.run_detail(hurt).fault_log)
        assert [s.step for s in store.list_steps(hurt)] == [-1, 0, 1, 2]
        assert store.state_at(hurt, 2)["n"] == 2
        extra = store.state_at(hurt, 1)["extra"]
        assert extra.get("unserializable") or any(isinstance(c, dict) and c.get("unserializable") for c in _walk(extra))
        assert store.get_run(later).status == "ok" and store.get_run(later).faults == 0
        assert [s.step for s in store.list_steps(later)] == [-1, 0, 1, 2]
    finally:
        store.close()


def _walk(value: Any) -> Iterator[Any]:
    stack = [value]
    while stack:
        x = stack.pop()
        yield x
        if isinstance(x, dict):
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)


@pytest.mark.parametrize("shape", ["list", "dict"])
def test_a_value_over_the_encoders_budget_is_stored_as_one_mark_a_reader_accepts(tmp_path, shape):
    """More values than one encode builds (a list channel's items are encoded one by one, so its
    length counts too): one mark and a fault, never rows at the value's own size, which a reader
    would refuse as a crafted store."""
    from langgraph.graph import END, START, StateGraph

    from graphtape.recorder.codec import ENCODE_BUDGET
    from graphtape.replay.fixture import export_fixture

    size = ENCODE_BUDGET + 1
    wide = list(range(size)) if shape == "list" else {f"k{i}": i for i in range(size)}
    b = StateGraph(S)
    b.add_node("a", lambda s: {"extra": wide})
    b.add_node("b", lambda s: {"n": s["n"] + 1})
    b.add_edge(START, "a")
    b.add_edge("a", "b")
    b.add_edge("b", END)
    db = tmp_path / "wide.db"
    with Recorder(db) as rec:
        rec.attach(b.compile()).invoke({"n": 0, "notes": []})
        run_id = rec.last_run_id
    store = open_store(db)
    try:
        assert store.get_run(run_id).faults >= 1
        assert [s.step for s in store.list_steps(run_id)] == [-1, 0, 1, 2]
        extra = store.state_at(run_id, 2)["extra"]
        assert extra["unserializable"] is True and "more than" in extra["repr"]
        assert export_fixture(store, run_id)["steps"]
    finally:
        store.close()
