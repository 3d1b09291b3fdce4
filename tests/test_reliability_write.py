"""Reliability of the write side: a fault never loses a run, never stalls the graph, never stops it starting.

Each fault as a user meets it, on real SQLite and real PostgreSQL, in both
durabilities: another process holding SQLite's write lock past the recorder's
bound; PostgreSQL backends killed by ``pg_terminate_backend`` while runs
record; text a column refuses (NUL, lone surrogates); eight processes creating
the same new store at once; a store that cannot be opened when the recorder is
built. After each, every run that returned to its caller is in the store,
complete, with its right status, and no step or call row is without its run.
"""

from __future__ import annotations

import logging
import multiprocessing
import operator
import os
import random
import secrets
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
import sqlalchemy as sa

from graphtape.recorder import Recorder, StoreError, open_store
from graphtape.recorder import schema as S
from graphtape.recorder.store import Batch, SqlStore

NODES = 6


class St(TypedDict):
    n: int
    notes: Annotated[list, operator.add]


def chain(nodes: int = NODES, hook=None):
    """``nodes`` supersteps of one node; ``hook(n)`` runs inside the step that sees ``n``."""
    from langgraph.graph import END, START, StateGraph

    def work(state: St) -> dict:
        if hook is not None:
            hook(state["n"])
        return {"n": state["n"] + 1, "notes": [f"note {state['n']}"]}

    b = StateGraph(St)
    b.add_node("work", work)
    b.add_edge(START, "work")
    b.add_conditional_edges("work", lambda s: "work" if s["n"] < nodes else END)
    return b.compile()


START_STATE = {"n": 0, "notes": []}
RESULT = {"n": NODES, "notes": [f"note {i}" for i in range(NODES)]}


def orphan_rows(store: SqlStore) -> int:
    """Steps, calls and facets whose run row is missing."""
    known = sa.select(S.runs.c.id)
    with store.engine.connect() as conn:
        return sum(int(conn.execute(sa.select(sa.func.count()).select_from(t).where(t.c.run_id.not_in(known))).scalar_one()) for t in (S.steps, S.calls, S.run_facets))


def assert_complete(store: SqlStore, run_ids: list[str], nodes: int = NODES) -> None:
    """Each run is stored, ended ``ok``, with every superstep (the input, then ``nodes`` more) and the count that says so."""
    for run_id in run_ids:
        run = store.get_run(run_id)
        steps = [s.step for s in store.list_steps(run_id) if not s.pending]
        assert (run.status, steps, run.step_count) == ("ok", list(range(-1, nodes + 1)), nodes + 2), run
        assert store.state_at(run_id, nodes)["n"] == nodes
    assert orphan_rows(store) == 0


@pytest.fixture(params=["sync", "async"])
def durability(request) -> str:
    return request.param


@pytest.fixture(params=["sqlite", "postgresql"])
def any_url(request, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "rel.db")
    return request.getfixturevalue("pg_url")


# ---------------------------------------------------------------------------
# SQLite: another process holds the write lock longer than the bound
# ---------------------------------------------------------------------------

LOCKER = textwrap.dedent(
    """
    import sqlite3, sys, time
    conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
    conn.execute("BEGIN EXCLUSIVE")
    conn.execute("CREATE TABLE IF NOT EXISTS other_program (x)")
    print("locked", flush=True)
    time.sleep(float(sys.argv[2]))
    conn.execute("COMMIT")
    print("released", flush=True)
    """
)


def test_exclusive_lock_from_another_process_neither_stalls_nor_loses_runs(tmp_path: Path, durability: str) -> None:
    db = tmp_path / "locked.db"
    bound = 0.4
    rec = Recorder(db, durability=durability, lock_wait=bound)
    graph = rec.attach(chain())
    run_ids = []
    graph.invoke(START_STATE)
    run_ids.append(rec.last_run_id)
    rec.flush()
    locker = subprocess.Popen([sys.executable, "-c", LOCKER, str(db), "2.5"], stdout=subprocess.PIPE, text=True)
    assert locker.stdout.readline().strip() == "locked"
    took = []
    for _ in range(3):
        started = time.monotonic()
        assert graph.invoke(START_STATE) == RESULT
        took.append(time.monotonic() - started)
        run_ids.append(rec.last_run_id)
    locked_until = time.monotonic()
    # Past the bound the run goes on: one wait of the bound, not one per step (a correctness
    # bound, generous for a loaded machine; the lock itself lasts 2.5 s).
    assert sum(took) < bound * 3 + 1.0, took
    assert locker.stdout.readline().strip() == "released"
    locker.wait(10)
    assert time.monotonic() >= locked_until
    rec.close()
    assert rec.fault_count >= 1
    store = open_store(db)
    assert_complete(store, run_ids)
    logs = [store.run_detail(r).fault_log or [] for r in run_ids[1:]]
    assert any("locked" in line for log in logs for line in log), logs
    assert sum(store.get_run(r).faults for r in run_ids) == rec.fault_count
    store.close()


# ---------------------------------------------------------------------------
# PostgreSQL: the recorder's backends are killed again and again
# ---------------------------------------------------------------------------


def _kill_backends(url: str, app: str, stop: threading.Event, kills: list[int]) -> None:
    admin = sa.create_engine(url, poolclass=sa.pool.NullPool)
    rnd = random.Random(14)
    try:
        while not stop.wait(rnd.uniform(0.05, 0.4)):
            with admin.begin() as conn:
                kills.append(
                    int(
                        conn.execute(
                            sa.text("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = :app AND pid <> pg_backend_pid()"),
                            {"app": app},
                        ).scalar_one()
                    )
                )
    finally:
        admin.dispose()


def test_postgres_backends_killed_while_recording_lose_no_run(pg_url: str, durability: str) -> None:
    app = f"gt-kill-{secrets.token_hex(4)}"
    rec = Recorder(f"{pg_url}&application_name={app}", durability=durability)
    graph = rec.attach(chain())
    stop = threading.Event()
    kills: list[int] = []
    killer = threading.Thread(target=_kill_backends, args=(pg_url, app, stop, kills))
    killer.start()
    run_ids = []
    try:
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline or sum(kills) < 3:
            assert graph.invoke(START_STATE) == RESULT
            run_ids.append(rec.last_run_id)
            if durability == "async":
                time.sleep(0.03)  # runs spread over the kills, not hundreds of them
            if time.monotonic() > deadline + 10:
                break
    finally:
        stop.set()
        killer.join(10)
    rec.close()
    assert sum(kills) >= 3, kills
    store = open_store(pg_url)
    assert_complete(store, run_ids)
    assert store.count_runs() == len(run_ids)
    store.close()


# ---------------------------------------------------------------------------
# Text a column refuses
# ---------------------------------------------------------------------------

ODD = "nul\x00here, surrogate \ud800 there, escape \U0010ffff and its look-alike \U0010ffff0; end"


def test_every_text_column_round_trips_any_text(any_url: str) -> None:
    """Every text column a recording writes takes any Python string and gives it back as it was."""
    store = SqlStore(any_url, create=True)
    tables = {t: [c.name for c in t.columns if isinstance(c.type, S.AnyText)] for t in (S.runs, S.steps, S.calls)}
    assert all(tables.values())
    run = {c: ODD for c in tables[S.runs]} | {"id": "r0", "status": "ok", "started_at": 1.0, "step_count": 1}
    step = {c: ODD for c in tables[S.steps]} | {"run_id": "r0", "seq": 1, "step": 0, "created_at": 1.0, "is_key": True, "payload": b"\x00bytes"}
    call = {c: ODD for c in tables[S.calls]} | {"run_id": "r0", "call_id": "c0", "kind": "tool", "started_at": 1.0, "streamed": False}
    store.write(Batch(runs_new=[run], steps=[step], calls=[call]))
    store.write(Batch(runs_update=[("r0", {"error_message": ODD + "!"})], calls_update=[("c0", {"error_message": ODD + "?"})]))
    with store.engine.connect() as conn:
        for table, cols in tables.items():
            row = conn.execute(sa.select(*[table.c[c] for c in cols])).one()
            want = {c: ODD for c in cols}
            if table is S.runs:
                want["error_message"] = ODD + "!"
            if table is S.calls:
                want["error_message"] = ODD + "?"
            assert dict(zip(cols, row)) == want, table.name
    assert store.get_run("r0").name == ODD
    assert store.list_runs()[0].name == ODD
    assert store.calls("r0")[0].error_message == ODD + "?"
    store.close()


def test_ordinary_text_is_stored_as_it_is(any_url: str) -> None:
    store = SqlStore(any_url, create=True)
    plain = "plain text, accents é, emoji 🙂, CJK 漢字, tab\tand newline\n"
    store.write(Batch(runs_new=[{"id": "r1", "name": plain, "graph_name": "g", "status": "ok", "started_at": 1.0, "step_count": 0}]))
    with store.engine.connect() as conn:
        raw = conn.exec_driver_sql("SELECT name FROM runs").scalar_one()
    assert raw == plain
    store.close()


def test_nul_in_a_tool_error_and_state_is_recorded(any_url: str, durability: str) -> None:
    from langchain_core.tools import tool
    from langgraph.graph import END, START, StateGraph

    @tool
    def lookup(q: str) -> str:
        """Look something up."""
        raise ValueError(f"bad\x00byte in {q}")

    def node(state: St) -> dict:
        try:
            lookup.invoke({"q": "a\x00b"})
        except ValueError:
            pass
        return {"n": state["n"] + 1, "notes": ["x\x00y"]}

    b = StateGraph(St)
    b.add_node("node\x00name", node)
    b.add_edge(START, "node\x00name")
    b.add_edge("node\x00name", END)
    rec = Recorder(any_url, durability=durability)
    out = rec.attach(b.compile(), name="run\x00name", tags=["t\x00g"]).invoke(START_STATE, {"configurable": {"thread_id": "th\x00read"}})
    assert out == {"n": 1, "notes": ["x\x00y"]}
    run_id = rec.last_run_id
    rec.close()
    assert rec.fault_count == 0
    store = open_store(any_url)
    run = store.get_run(run_id)
    assert (run.status, run.name, run.faults) == ("ok", "run\x00name", 0)
    (call,) = store.calls(run_id)
    assert call.name == "lookup" and "bad\x00byte in a\x00b" in call.error_message
    assert store.state_at(run_id, 1)["notes"] == ["x\x00y"]
    assert [s.step for s in store.list_steps(run_id)] == [-1, 0, 1]
    store.close()


def test_a_lone_surrogate_in_state_keys_and_errors_loses_no_step(any_url: str, durability: str) -> None:
    """Half an emoji (a stream cut mid-character) in a state value, a dict key and a tool's error:
    UTF-8 cannot hold it, yet every step is stored, the value reads back exactly (typed) or
    displayable (plain), and a strict replay of the run is clean."""
    from langchain_core.tools import tool
    from langgraph.graph import END, START, StateGraph

    from graphtape.replay import replay

    @tool
    def lookup(q: str) -> str:
        """Look something up."""
        raise ValueError(f"cut \ud83d in {q}")

    def cut(state: St) -> dict:
        try:
            lookup.invoke({"q": "x"})
        except ValueError:
            pass
        return {"n": state["n"] + 1, "notes": ["x\ud800", {"k\udc00": "v"}]}

    def after(state: St) -> dict:
        return {"n": state["n"] + 1, "notes": ["after"]}

    b = StateGraph(St)
    b.add_node("cut", cut)
    b.add_node("after", after)
    b.add_edge(START, "cut")
    b.add_edge("cut", "after")
    b.add_edge("after", END)
    graph = b.compile()
    rec = Recorder(any_url, durability=durability, strict=True)
    out = rec.attach(graph, name="surrogates").invoke(START_STATE)
    run_id = rec.last_run_id
    rec.close()
    assert out["notes"] == ["x\ud800", {"k\udc00": "v"}, "after"] and rec.fault_count == 0
    store = open_store(any_url)
    try:
        run = store.get_run(run_id)
        assert (run.status, run.faults, run.step_count) == ("ok", 0, 4)
        assert [s.step for s in store.list_steps(run_id)] == [-1, 0, 1, 2]
        assert store.state_at(run_id, 2, typed=True)["notes"] == ["x\ud800", {"k\udc00": "v"}, "after"]
        assert store.state_at(run_id, 2)["notes"] == ["x\ufffd", {"k\ufffd": "v"}, "after"]
        (call,) = store.calls(run_id)
        assert call.error_message.startswith("cut \ud83d in x")
        result = replay(run_id, graph, mode="strict", store=store)
        assert not result.diverged, result.report()
    finally:
        store.close()


# ---------------------------------------------------------------------------
# Eight processes create the same new store at once
# ---------------------------------------------------------------------------


def _create_and_record(url: str, start_at: float, out: Any) -> None:
    logging.getLogger("graphtape").addHandler(logging.NullHandler())
    try:
        while time.time() < start_at:
            time.sleep(0.001)
        rec = Recorder(url, strict=True)
        result = rec.attach(chain(2)).invoke(START_STATE)
        rec.close()
        out.put(("ok", rec.fault_count, result["n"]))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        out.put(("error", f"{type(exc).__name__}: {exc}", None))


def test_eight_processes_create_the_same_new_store_at_once(any_url: str) -> None:
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    start_at = time.time() + 0.5
    procs = [ctx.Process(target=_create_and_record, args=(any_url, start_at, out)) for _ in range(8)]
    for p in procs:
        p.start()
    got = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(30)
    assert got == [("ok", 0, 2)] * 8, got
    store = open_store(any_url)
    assert store.count_runs() == 8
    assert all(r.status == "ok" for r in store.list_runs())
    store.close()


# ---------------------------------------------------------------------------
# Recorder() when the store cannot be opened
# ---------------------------------------------------------------------------


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "graphtape" and r.levelno >= logging.WARNING]


def test_a_folder_blocked_by_a_file_warns_once_and_records_once_it_is_cleared(tmp_path: Path, durability: str, caplog) -> None:
    # A missing folder is made (tests/test_rescue.py); one a file stands in the way of is waited for.
    folder = tmp_path / "later"
    folder.write_text("not a folder")
    with caplog.at_level(logging.WARNING, logger="graphtape"):
        rec = Recorder(folder / "x.db", durability=durability)
        graph = rec.attach(chain())
        assert graph.invoke(START_STATE) == RESULT
        first = rec.last_run_id
        rec.flush(1.0)
        assert rec.writer.kept_rows > 0  # kept, waiting for the store
        assert len(_warnings(caplog)) == 1 and "is not a folder" in _warnings(caplog)[0]
        folder.unlink()
        folder.mkdir(exist_ok=True)  # the recorder, retrying, may make the missing folder first
        assert graph.invoke(START_STATE) == RESULT
        second = rec.last_run_id
        deadline = time.monotonic() + 10
        while not rec.flush(2.0) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(_warnings(caplog)) == 1
    rec.close()
    assert rec.fault_count >= 2  # opening the recorder, and the run that waited for the store
    store = open_store(folder / "x.db")
    assert_complete(store, [first, second])
    assert any("is not a folder" in line for line in store.run_detail(first).fault_log)
    store.close()


def _check_unopenable(url: str, durability: str, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="graphtape"):
        rec = Recorder(url, durability=durability)
        graph = rec.attach(chain())
        started = time.monotonic()
        for _ in range(2):
            assert graph.invoke(START_STATE) == RESULT
        assert time.monotonic() - started < 10
        assert len(_warnings(caplog)) == 1, _warnings(caplog)
        rec.close(timeout=0.2)
    assert rec.fault_count >= 3  # opening the recorder, and each run
    # Closing gives up on the store: the runs it never took are saved apart, and that is said once.
    assert len(_warnings(caplog)) == 2 and "the store never took 2 runs" in _warnings(caplog)[1], _warnings(caplog)
    rescued = list(Path(os.environ["GRAPHTAPE_RESCUE_DIR"]).glob("graphtape-rescued-*.db"))
    assert len(rescued) == 1 and str(rescued[0]) in _warnings(caplog)[1]
    store = open_store(rescued[0])
    try:
        assert sorted(r.status for r in store.list_runs()) == ["ok", "ok"]
    finally:
        store.close()


def test_store_path_is_a_directory_is_refused_at_once(tmp_path: Path, durability: str) -> None:
    """Waiting cannot turn a folder into a store: Recorder says so at once, not rows lost at close."""
    (tmp_path / "a-dir.db").mkdir()
    with pytest.raises(StoreError, match="it is a directory"):
        Recorder(str(tmp_path / "a-dir.db"), durability=durability)


def test_postgres_down(durability: str, caplog) -> None:
    _check_unopenable("postgresql+psycopg://postgres@127.0.0.1:1/test?connect_timeout=2", durability, caplog)


def _record_as_nobody(db: str, durability: str, out: Any) -> None:
    """In a forked child: drop root (file modes do not bind it), then record into ``db``."""
    try:
        warnings: list[str] = []

        class Collect(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                if record.levelno >= logging.WARNING:
                    warnings.append(record.getMessage())

        logging.getLogger("graphtape").addHandler(Collect())
        if os.getuid() == 0:
            os.setgid(65534)
            os.setuid(65534)
        rec = Recorder(db, durability=durability)
        result = rec.attach(chain()).invoke(START_STATE)
        rec.flush(1.0)
        seen = list(warnings)
        rec.close(timeout=0.2)
        out.put((result == RESULT, rec.fault_count, seen))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        out.put((False, -1, [f"{type(exc).__name__}: {exc}"]))


def test_read_only_store(durability: str) -> None:
    """A store file the recording process may not write: the graph runs, one warning, the fault counted."""
    folder = Path(tempfile.mkdtemp(prefix="gt-ro-"))
    folder.chmod(0o755)
    db = folder / "x.db"
    try:
        with Recorder(db) as rec:
            rec.attach(chain()).invoke(START_STATE)
        db.chmod(0o444)
        folder.chmod(0o555)
        ctx = multiprocessing.get_context("fork")
        out = ctx.Queue()
        child = ctx.Process(target=_record_as_nobody, args=(str(db), durability, out))
        child.start()
        ran, faults, warnings = out.get(timeout=60)
        child.join(30)
    finally:
        folder.chmod(0o755)
        db.chmod(0o644)
    assert ran and faults >= 1 and len(warnings) == 1, (ran, faults, warnings)
    store = open_store(db)
    assert store.count_runs() == 1  # the earlier run, untouched
    store.close()
    shutil.rmtree(folder)


def test_bad_arguments_still_raise(tmp_path: Path) -> None:
    from graphtape.recorder import StoreError

    with pytest.raises(StoreError, match="not mysql"):
        Recorder("mysql://localhost/x")
    with pytest.raises(ValueError, match="lock_wait"):
        Recorder(tmp_path / "x.db", lock_wait=0)


def test_strict_recorder_raises_when_the_store_cannot_be_opened(tmp_path: Path) -> None:
    from graphtape.recorder import StoreError

    (tmp_path / "nowhere").write_text("a file where the folder should be")
    with pytest.raises(StoreError, match="is not a folder"):
        Recorder(tmp_path / "nowhere" / "x.db", strict=True)


# ---------------------------------------------------------------------------
# Bounded keeping, and gc of orphans
# ---------------------------------------------------------------------------


def test_kept_rows_are_bounded_run_rows_never_dropped(tmp_path: Path, caplog) -> None:
    folder = tmp_path / "later"
    folder.write_text("a file where the folder should be")
    rec = Recorder(folder / "x.db", durability="async")
    rec.writer.keep_bytes = 20_000
    graph = rec.attach(chain())
    ids = []
    for _ in range(6):
        graph.invoke({"n": 0, "notes": [os.urandom(3000).hex()]})
        ids.append(rec.last_run_id)
    rec.flush(2.0)
    folder.unlink()
    folder.mkdir()
    rec.close()
    store = open_store(folder / "x.db")
    runs = {r.id: r for r in store.list_runs()}
    assert set(ids) <= set(runs)  # every run row is there, its end too
    # A run whose steps were dropped ended, and says it is not all there; the others are whole.
    dropped = {r for r in ids if any("dropped" in line for line in (store.run_detail(r).fault_log or []))}
    assert dropped and all(runs[r].status == ("incomplete" if r in dropped else "ok") for r in ids), [(r, runs[r].status) for r in ids]
    assert orphan_rows(store) == 0
    store.close()


def test_gc_removes_orphan_rows(any_url: str) -> None:
    store = SqlStore(any_url, create=True)
    store.write(Batch(runs_new=[{"id": "kept", "name": "n", "graph_name": "g", "status": "running", "started_at": time.time(), "step_count": 0, "owner_pid": os.getpid(), "owner_host": os.uname().nodename}]))
    lost = {"run_id": "gone", "ns": "", "seq": 1, "step": 0, "created_at": 1.0, "is_key": True, "nodes": "a", "payload": b"x"}
    store.write(Batch(steps=[lost, {**lost, "seq": 2}], calls=[{"run_id": "gone", "call_id": "c", "kind": "tool", "name": "t", "started_at": 1.0, "streamed": False}]))
    assert orphan_rows(store) > 0
    report = store.gc(0)
    assert report.orphans == 3 and report.steps >= 2 and report.calls >= 1
    assert orphan_rows(store) == 0
    assert [r.id for r in store.list_runs()] == ["kept"]  # a live run is not an orphan's parent to remove
    store.close()


def test_the_quick_listing_reads_any_text_too(tmp_path: Path) -> None:
    """``graphtape runs`` on a SQLite file reads without SQLAlchemy: it undoes the same escape."""
    from graphtape.recorder.store.quick_listing import open_listing

    db = tmp_path / "quick.db"
    store = SqlStore(str(db), create=True)
    store.write(Batch(runs_new=[{"id": "r2", "name": ODD, "graph_name": "g\x00", "thread_id": ODD, "status": "error", "error_message": ODD, "started_at": 1.0, "step_count": 0, "tags": '["t"]'}]))
    store.close()
    (run,) = open_listing(str(db)).list_runs()
    assert (run.name, run.graph_name, run.thread_id, run.error_message) == (ODD, "g\x00", ODD, ODD)


def test_a_batch_sent_again_after_an_unanswered_commit_stores_each_row_once(any_url: str) -> None:
    """A connection lost at COMMIT leaves it unknown whether the batch was stored; the retry
    (``again``) must not store its run, steps or calls a second time, and must store what is new."""
    store = SqlStore(any_url, create=True)
    run = {"id": "r1", "name": "n", "graph_name": "g", "status": "running", "started_at": time.time(), "step_count": 0, "owner_pid": os.getpid(), "owner_host": os.uname().nodename}
    step = {"run_id": "r1", "ns": "", "seq": 1, "step": 0, "created_at": 1.0, "is_key": True, "nodes": "a", "payload": b"x"}
    call = {"run_id": "r1", "call_id": "c1", "kind": "tool", "name": "t", "started_at": 1.0, "streamed": False}
    first = Batch(runs_new=[run], steps=[step], calls=[call])
    store.write(first)  # committed, but (as far as the writer knows) unanswered
    with pytest.raises(sa.exc.IntegrityError):
        store.write(Batch(runs_new=[run]))  # sent again as it is, the run row is refused
    store.write(Batch(runs_new=[run], steps=[step, {**step, "seq": 2, "step": 1}], calls=[call, {**call, "call_id": "c2"}], runs_update=[("r1", {"status": "ok"})]), again=True)
    with store.engine.connect() as conn:
        steps = conn.execute(sa.select(S.steps.c.seq).where(S.steps.c.run_id == "r1").order_by(S.steps.c.seq)).scalars().all()
        calls = conn.execute(sa.select(S.calls.c.call_id).where(S.calls.c.run_id == "r1").order_by(S.calls.c.call_id)).scalars().all()
    assert steps == [1, 2] and calls == ["c1", "c2"]
    assert store.get_run("r1").status == "ok"
    store.close()


class Wide(TypedDict):
    table: dict
    n: int


def test_a_graph_faster_than_its_encoding_waits_for_the_writer_and_loses_no_step(tmp_path: Path) -> None:
    """Each superstep holds a new 60,000-key mapping: encoding it takes the writer far longer
    than the graph takes to make it. The graph waits for the writer when the queued work would
    take it more than BACKLOG_MAX_S, and groups are committed as they go, so a close that waits
    a little past that bound finds every step written (it used to find none: one group of all
    of them, still encoding)."""
    from langgraph.graph import END, START, StateGraph

    from graphtape.recorder.writer import BACKLOG_MAX_S

    steps = 60

    def step(s: Wide) -> dict:
        table = dict(s["table"])
        table[f"k{s['n']}"] = s["n"]
        return {"table": table, "n": s["n"] + 1}

    b = StateGraph(Wide)
    b.add_node("step", step)
    b.add_edge(START, "step")
    b.add_conditional_edges("step", lambda s: "step" if s["n"] < steps else END, ["step", END])
    db = tmp_path / "wide.db"
    rec = Recorder(db)
    rec.attach(b.compile()).invoke({"table": {f"id-{i}": i for i in range(60_000)}, "n": 0}, {"recursion_limit": steps + 10})
    rec.close(BACKLOG_MAX_S + 1.0)
    store = open_store(db)
    try:
        run = store.get_run("last")
        assert run.status == "ok" and run.faults == 0
        assert len(store.list_steps(run.id)) == steps + 2
    finally:
        store.close()


class _SlowToShow:
    """A value the encoder can only show by its repr, which takes a while (a big object on a busy machine)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __repr__(self) -> str:
        time.sleep(self.seconds)
        return "SlowToShow()"


def test_close_waits_for_a_writer_still_encoding_rather_than_lose_the_run(tmp_path: Path, caplog) -> None:
    """Encoding is work that ends (bounded by the encoder's budgets), unlike a store that stopped
    answering: a close whose wait runs out while the writer still encodes waits for it, and the
    run is stored whole rather than said lost to a store that did not answer."""
    from langgraph.graph import END, START, StateGraph

    class Slow(TypedDict, total=False):
        value: Any

    b = StateGraph(Slow)
    b.add_node("a", lambda s: {"value": _SlowToShow(1.0)})
    b.add_edge(START, "a")
    b.add_edge("a", END)
    db = tmp_path / "slow.db"
    rec = Recorder(db, durability="async")
    rec.attach(b.compile()).invoke({})
    with caplog.at_level(logging.WARNING, logger="graphtape"):
        rec.close(timeout=0.5)
    assert "did not answer" not in caplog.text, caplog.text
    store = open_store(db)
    try:
        run = store.get_run(rec.last_run_id)
        assert run.status == "ok" and [s.step for s in store.list_steps(run.id)] == [-1, 0, 1]
    finally:
        store.close()
