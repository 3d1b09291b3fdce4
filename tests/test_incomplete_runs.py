"""A run the store did not take in full reads ``incomplete`` in every reader, never ``ok``.

The store stops taking writes part-way through a run (a full disk, SQLite's
``max_page_count`` on the recorder's connections) and never takes the rest: its
last steps go to a rescue file at close, its end still goes in. ``runs``, ``show``,
the TUI, replay and fixture export must each say the run is incomplete, and a
replay must not report the steps the store never got as divergences. The rows
put back (``import-rescue``) make it read as it ended again. Rows dropped for good
mid-run (more waited than the writer keeps) mark the run the same way.
"""

from __future__ import annotations

import json
import operator
import random
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from test_faults import NODES, START_STATE, check_steps, looping, plain_result, with_pragma

from graphtape.recorder import Recorder, open_store
from graphtape.recorder.unwritten import reason
from graphtape.replay import FixtureError, export_fixture, replay
from graphtape.tui.cli import main
from graphtape.tui.screens.runs import status_text, status_word


def fill_disk(rec: Recorder) -> Callable[[], None]:
    """From now on the recorder's connections may not grow the file (a full disk); returns the undo."""
    with rec.store.engine.connect() as conn:
        pages = conn.exec_driver_sql("PRAGMA page_count").scalar()
    return with_pragma(rec, f"PRAGMA max_page_count = {pages}")


@pytest.fixture(params=["sync", "async"])
def partly_stored(request, tmp_path: Path, monkeypatch) -> tuple[Path, str, Path]:
    """A store holding the first steps of a run whose disk filled at step 4 and never emptied:
    ``(db, run id, rescue file)``."""
    monkeypatch.setenv("GRAPHTAPE_RESCUE_DIR", str(tmp_path))
    db = tmp_path / "partly.db"
    rec = Recorder(db, durability=request.param, lock_wait=0.2)  # each try of the full disk ends soon
    undo: list[Callable[[], None]] = []
    out = rec.attach(looping({4: lambda: undo.append(fill_disk(rec))}, bulk=6000), name="partly").invoke(START_STATE)
    assert out == plain_result(bulk=6000)
    run_id = rec.last_run_id
    rec.close(timeout=1)  # the disk stays full: what it did not take is rescued
    (rescued,) = tmp_path.glob("graphtape-rescued-*.db")
    return db, run_id, rescued


def test_every_reader_says_a_partly_stored_run_is_incomplete(partly_stored, capsys) -> None:
    db, run_id, rescued = partly_stored
    store = open_store(db)
    try:
        run = store.get_run(run_id)
        stored = check_steps(store, run_id)
        missing = NODES + 1 - len([s for s in stored if s >= 0])
        assert run.status == "incomplete" and run.status_reason == f"{missing} steps not written", run
        assert status_word(run) == "incomplete"  # the TUI's runs list
        assert str(status_text(run)) == f"incomplete ({missing} steps not written)"  # the TUI's run header
        with pytest.raises(FixtureError, match=rf"run {run_id} is incomplete \({missing} steps not written\).*--steps :{max(stored)}"):
            export_fixture(store, run_id)
        assert export_fixture(store, run_id, steps=f":{max(stored)}")["steps"][-1]["step"] == max(stored)
    finally:
        store.close()

    capsys.readouterr()
    assert main(["--db", str(db), "runs", "--json"]) == 0
    (listed,) = json.loads(capsys.readouterr().out)
    assert listed["status"] == "incomplete"
    assert main(["--db", str(db), "runs", "--status", "incomplete"]) == 0
    assert run_id in capsys.readouterr().out
    assert main(["--db", str(db), "runs", "--status", "ok"]) == 0
    assert run_id not in capsys.readouterr().out
    assert main(["--db", str(db), "show", run_id]) == 0
    page = capsys.readouterr().out
    assert f"incomplete ({missing} steps not written)" in page
    assert "missing" in page and str(rescued) in page and "import-rescue" in page  # where the rest is, whole
    assert main(["--db", str(db), "export", run_id, "-o", str(db.with_suffix(".json"))]) == 2
    assert "is incomplete" in capsys.readouterr().err

    # The replay compares what the store holds and says why it stops, with no divergence made up
    # of the steps the store never got.
    result = replay(run_id, looping(bulk=6000), db=db)
    assert not result.diverged, result.report()
    assert any("incomplete" in note and f"stops at step {max(stored)}" in note for note in result.notes), result.notes


def test_a_partly_stored_run_reads_as_it_ended_once_its_rest_is_imported(partly_stored, capsys) -> None:
    db, run_id, rescued = partly_stored
    assert main(["--db", str(db), "import-rescue", str(rescued)]) == 0
    store = open_store(db)
    try:
        run = store.get_run(run_id)
        assert (run.status, run.status_reason) == ("ok", None)
        assert check_steps(store, run_id) == list(range(NODES + 1))
    finally:
        store.close()


class Blob(TypedDict):
    n: int
    blob: str
    log: Annotated[list, operator.add]


def replacing(hooks: dict[int, Callable[[], object]]):
    """``NODES`` steps, each replacing a 3 kB value that does not compress (every step, a keyframe
    too, is about as big as the next) and adding its number to a list (a delta on the step before)."""
    from langgraph.graph import END, START, StateGraph

    def work(state: Blob) -> dict:
        if state["n"] in hooks:
            hooks[state["n"]]()
        return {"n": state["n"] + 1, "blob": random.Random(state["n"]).randbytes(1500).hex(), "log": [state["n"]]}

    b = StateGraph(Blob)
    b.add_node("work", work)
    b.add_edge(START, "work")
    b.add_conditional_edges("work", lambda s: "work" if s["n"] < NODES else END)
    return b.compile()


def stored_steps_read_true(db: Path) -> tuple[Any, list[int]]:
    """The last run and the steps the store holds of it, each checked to read back the state the
    graph had there (none is a delta on a step the store does not hold)."""
    store = open_store(db)
    try:
        run = store.get_run("last")
        stored = [s.step for s in store.list_steps(run.id) if s.step >= 0]
        for step in stored:
            blob = random.Random(step - 1).randbytes(1500).hex() if step else ""
            assert store.state_at(run.id, step) == {"n": step, "blob": blob, "log": list(range(step))}, step
    finally:
        store.close()
    return run, stored


def test_rows_dropped_for_good_mid_run_mark_the_run_incomplete(tmp_path: Path) -> None:
    """More waits for a full disk than the writer keeps: the waiting steps are dropped, the disk
    has room again before the run ends, and the run's end says how many steps are not there.
    Every step the store holds reads back the state the graph had (none is a delta on a dropped one)."""
    db = tmp_path / "dropped.db"
    rec = Recorder(db, durability="sync")
    rec.writer.keep_bytes = 10_000  # three steps of this graph
    undo: list[Callable[[], None]] = []
    hooks = {3: lambda: undo.append(fill_disk(rec)), 9: lambda: undo.pop()()}
    out = rec.attach(replacing(hooks)).invoke({"n": 0, "blob": "", "log": []})
    assert out["n"] == NODES
    rec.close()
    run, stored = stored_steps_read_true(db)
    assert set(range(10, NODES + 1)) <= set(stored) and len(stored) < NODES + 1, stored
    missing = NODES + 1 - len(stored)
    assert (run.status, run.status_reason) == ("incomplete", f"{missing} steps not written"), run


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_a_run_whose_every_step_is_over_the_keep_bound_is_written_again_once_the_store_takes_writes(tmp_path: Path, durability: str) -> None:
    """Each step is bigger than what the writer keeps: the steps met by the full disk are dropped,
    and once the disk has room again the later steps go in (the writer tries the store again,
    rather than drop each one untried as if the store still failed). Every stored step reads true."""
    db = tmp_path / "over_bound.db"
    rec = Recorder(db, durability=durability)
    rec.writer.keep_bytes = 1000  # less than one step of this graph
    undo: list[Callable[[], None]] = []
    hooks = {3: lambda: undo.append(fill_disk(rec)), 6: lambda: undo.pop()()}
    assert rec.attach(replacing(hooks)).invoke({"n": 0, "blob": "", "log": []})["n"] == NODES
    rec.close()
    run, stored = stored_steps_read_true(db)
    assert set(range(8, NODES + 1)) <= set(stored), stored
    assert (run.status, run.status_reason) == ("incomplete", f"{NODES + 1 - len(stored)} steps not written"), run


def test_steps_that_come_before_a_retry_can_try_wait_for_it(tmp_path: Path) -> None:
    """Sync durability: a step the store cannot take at once (here its lock is held) is kept
    and a thread retries it while the run goes on. The next step, come before that thread could
    try (a busy machine), is not dropped untried for being over the bound: both go in once
    the store takes writes."""
    db = tmp_path / "late_retry.db"
    rec = Recorder(db, durability="sync", lock_wait=0.3)
    rec.writer.keep_bytes = 1000  # less than one step of this graph
    hooks = {6: rec.writer._io.acquire, 8: rec.writer._io.release}  # no try from step 7 to step 8
    assert rec.attach(replacing(hooks)).invoke({"n": 0, "blob": "", "log": []})["n"] == NODES
    rec.close()
    run, stored = stored_steps_read_true(db)
    assert stored == list(range(NODES + 1)) and run.status == "ok", (stored, run.status)


class _Unnamed:
    """A router's answer LangGraph routes by (hashable, in the path map) whose ``str()`` fails once
    the graph is built: graphtape's route summary of that step raises while it is encoded."""

    broken = False

    def __hash__(self) -> int:
        return 1

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Unnamed)

    def __str__(self) -> str:
        if _Unnamed.broken:
            raise RuntimeError("no name")
        return "unnamed"


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_a_step_whose_encoding_raises_marks_its_run_incomplete(tmp_path: Path, durability: str, monkeypatch) -> None:
    from langgraph.graph import END, START, StateGraph

    odd = _Unnamed()
    b = StateGraph(S_LOG)
    b.add_node("a", lambda s: {"n": s["n"] + 1, "log": [s["n"]]})
    b.add_node("b", lambda s: {"n": s["n"] + 1, "log": [s["n"]]})
    b.add_edge(START, "a")
    b.add_conditional_edges("a", lambda s: odd, {odd: "b"})
    b.add_edge("b", END)
    db = tmp_path / "encode.db"
    rec = Recorder(db, durability=durability)
    graph = rec.attach(b.compile())
    monkeypatch.setattr(_Unnamed, "broken", True)
    assert graph.invoke({"n": 0, "log": []}) == {"n": 2, "log": [0, 1]}
    rec.close()
    assert rec.fault_count >= 1
    store = open_store(db)
    try:
        run = store.get_run("last")
        assert [s.step for s in store.list_steps(run.id)] == [-1, 0, 2]
        assert store.state_at(run.id, 2) == {"n": 2, "log": [0, 1]}
        assert (run.status, run.status_reason) == ("incomplete", "1 step not written"), run
        assert any("no name" in line for line in store.run_detail(run.id).fault_log)
    finally:
        store.close()


class S_LOG(TypedDict):
    n: int
    log: Annotated[list, operator.add]


def test_a_sync_close_shorter_than_a_try_under_way_keeps_the_runs_end(tmp_path: Path, monkeypatch, capsys) -> None:
    """Another connection holds the write lock from step 10 on; ``close`` is given less time than
    the writer's try of the lock takes. The end of the run, held by that try, is saved to a rescue
    file (the store is still locked), not lost with a word about the store not answering
    "within 0 s"; put back, the run reads as it ended."""
    import sqlite3

    monkeypatch.setenv("GRAPHTAPE_RESCUE_DIR", str(tmp_path))
    db = tmp_path / "locked.db"
    rec = Recorder(db, durability="sync")  # a try of a locked store takes LOCK_WAIT_S (2 s), more than close is given
    said: list[str] = []
    rec.warnings_to = said.append
    holder: list[sqlite3.Connection] = []

    def lock() -> None:
        conn = sqlite3.connect(db, timeout=0, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        holder.append(conn)

    assert rec.attach(looping({10: lock})).invoke(START_STATE) == plain_result()
    run_id = rec.last_run_id
    rec.close(timeout=0.2)
    holder[0].execute("ROLLBACK")
    holder[0].close()
    assert not any("did not answer" in line for line in said), said
    (rescued,) = tmp_path.glob("graphtape-rescued-*.db")
    assert main(["--db", str(db), "import-rescue", str(rescued)]) == 0
    store = open_store(db)
    try:
        assert (store.get_run(run_id).status, store.get_run(run_id).status_reason) == ("ok", None)
        assert check_steps(store, run_id) == list(range(NODES + 1))
    finally:
        store.close()


def refuse_root_step(db: Path, step: int) -> Callable[[], None]:
    """From now on the store refuses, for what it holds, the root row of ``step`` (a rule of the
    database the row breaks: written again, it fails again), and only that row; returns the undo
    (graphtape reads no file holding a trigger it did not make)."""
    import sqlite3

    def run(sql: str) -> None:
        conn = sqlite3.connect(db)
        try:
            conn.execute(sql)
            conn.commit()
        finally:
            conn.close()

    run(f"CREATE TRIGGER refuse_one_step BEFORE INSERT ON steps WHEN NEW.step = {step} AND NEW.ns = '' BEGIN SELECT RAISE(ABORT, 'step {step} breaks a rule of this database'); END")
    return lambda: run("DROP TRIGGER refuse_one_step")


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_steps_after_one_the_store_refuses_for_good_read_true(tmp_path: Path, durability: str) -> None:
    """The store refuses one step's row for good (not a passing fault: written again, it fails
    again). The deltas already built on it are left out and counted, the next step stored starts
    afresh with a keyframe, and every step the store holds reads back the state the graph had."""
    db = tmp_path / "refused.db"
    rec = Recorder(db, durability=durability)
    undo = refuse_root_step(db, 4)
    assert rec.attach(looping()).invoke(START_STATE) == plain_result()
    rec.close()
    undo()
    assert rec.fault_count >= 1
    store = open_store(db)
    try:
        run = store.get_run("last")
        stored = check_steps(store, run.id)
        assert 4 not in stored and NODES in stored, stored  # the steps after the refused one come back
        missing = NODES + 1 - len(stored)
        assert (run.status, run.status_reason) == ("incomplete", reason(missing, 0)), run
    finally:
        store.close()


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_a_step_refused_in_the_same_write_as_the_runs_end_is_in_its_fault_log(tmp_path: Path, durability: str) -> None:
    """``async`` and ``exit`` write a short run's steps and its end in one batch: the end, built
    before the store refused step 4, still carries that refusal (and the deltas left out after it)
    in its fault count and log, as it does when the end is written later (``sync``)."""
    db = tmp_path / "refused_log.db"
    rec = Recorder(db, durability=durability)
    undo = refuse_root_step(db, 4)
    assert rec.attach(looping()).invoke(START_STATE) == plain_result()
    rec.close()
    undo()
    store = open_store(db)
    try:
        run = store.get_run("last")
        log = store.run_detail(run.id).fault_log
        assert any("step 4 breaks a rule" in line for line in log), log
        assert run.faults == len(log) == rec.fault_count, (run.faults, log, rec.fault_count)
    finally:
        store.close()


class _SlowClient:
    """A value graphtape cannot encode (a client object kept in the state), slow to describe."""

    def __repr__(self) -> str:
        import time

        time.sleep(0.01)
        return "<client>"


def test_a_fault_met_on_the_writer_while_the_graph_waits_for_it_ends(tmp_path: Path, monkeypatch) -> None:
    """The graph makes steps faster than the writer encodes them, so ``submit`` waits for the
    writer to catch up, inside the checkpoint callback; the writer meanwhile meets a value it
    cannot encode and counts the fault on the run. The run ends (no deadlock between the two)."""
    import threading

    from langgraph.graph import END, START, StateGraph

    from graphtape.recorder import writer

    monkeypatch.setattr(writer, "BACKLOG_MAX_S", 0.0)  # every submit waits for the writer to catch up

    def work(s: S_LOG) -> dict:
        import time

        time.sleep(0.006)  # waits between steps (the writer goes meanwhile), yet less than an encoding takes
        return {"n": s["n"] + 1, "log": [_SlowClient()]}

    b = StateGraph(S_LOG)
    b.add_node("work", work)
    b.add_edge(START, "work")
    b.add_conditional_edges("work", lambda s: "work" if s["n"] < NODES else END)
    rec = Recorder(tmp_path / "slow.db", durability="async")
    graph = rec.attach(b.compile())
    out: list[dict] = []
    runner = threading.Thread(target=lambda: out.append(graph.invoke({"n": 0, "log": []})), daemon=True)
    runner.start()
    runner.join(20)
    assert not runner.is_alive(), "the run and the writer wait on each other"
    rec.close()
    assert out[0]["n"] == NODES and rec.fault_count == 0
    store = open_store(tmp_path / "slow.db")
    try:
        run = store.get_run("last")
        assert run.status == "ok" and run.faults >= NODES, run
    finally:
        store.close()
