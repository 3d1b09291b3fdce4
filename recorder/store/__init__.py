"""The one store API: everything reads and writes runs through ``RunStore``.

``SqlStore`` implements it with SQLAlchemy Core over SQLite (the zero-setup
default, WAL mode) or PostgreSQL (a SQLAlchemy URL). Blobs are content
addressed, so a message that sits in every step's state is stored once.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import inspect
import os
import socket
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import orjson
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from graphtape.recorder import schema as S
from graphtape.recorder.deferred import DEFER_AT, DeferredList
from graphtape.recorder.codec import BLOB_REF, MAX_DEPTH, MAX_VALUES, DecodedBlobs, DecodeError, Decoder, collect_refs, count_values
from graphtape.recorder.errors import AmbiguousRun, RunNotFound, SchemaVersionError, StepNotFound, StoreError
from graphtape.recorder.frames import FrameState
from graphtape.recorder.tracebacks import valid_frames
from graphtape.recorder.records import (
    FLAG_PENDING,
    CallInfo,
    Checkpoint,
    EventInfo,
    RouteInfo,
    RunDetail,
    RunInfo,
    StepDetail,
    StepInfo,
    TaskInfo,
)

from graphtape.recorder.store.connection import DEFAULT_DB, ENV_DB, resolve_url, shown_url, _sqlite_path, _on_sqlite_connect, _one_line, Connection  # noqa: F401
from graphtape.recorder.store.schema_version import SchemaGate  # noqa: F401
from graphtape.recorder.store.read_guard import MAX_READ_BYTES, ReadBudget, _READ_BUDGET, read_budget, _DAMAGE, _damage_is_a_store_error  # noqa: F401
from graphtape.recorder.store.payloads import squeeze, pack, MAX_INFLATE, unpack, _uj, expand_payload  # noqa: F401
from graphtape.recorder.store.writing import Batch, Writing, _insert_rows, is_lock_conflict  # noqa: F401
from graphtape.recorder.store.read_runs import MAX_INT, RunReads  # noqa: F401
from graphtape.recorder.store.listing import RunListing, ABANDONED_WORDS, _calls_matching, _escape_like  # noqa: F401
from graphtape.recorder.store.read_steps import StepReads  # noqa: F401
from graphtape.recorder.store.read_state import KEYFRAMES_KEPT, SHARED_REFS, StateReads, _internal_channel  # noqa: F401
from graphtape.recorder.store.read_calls import CallReads  # noqa: F401
from graphtape.recorder.store.blobs import BlobReads  # noqa: F401

STALE_HEARTBEAT_S = 600.0


# ---------------------------------------------------------------------------
# Payload bytes
# ---------------------------------------------------------------------------


# ---------------------------------------------------------------------------
# Write operations (produced by the recorder, applied in batches)
# ---------------------------------------------------------------------------


# ---------------------------------------------------------------------------
# The contract
# ---------------------------------------------------------------------------


@runtime_checkable
class RunStore(Protocol):
    """Reads and writes recorded runs. Every backend passes the same contract tests."""

    url: str

    def write(self, batch: Batch) -> None: ...
    def list_runs(
        self,
        *,
        status: str | None = None,
        text: str | None = None,
        limit: int | None = None,
        offset: int = 0,
        name: str | None = None,
        tag: str | None = None,
        tool: str | None = None,
        node: str | None = None,
        error: str | None = None,
    ) -> list[RunInfo]: ...
    def count_runs(self, **filters: Any) -> int: ...
    def resolve_run(self, ref: str) -> str: ...
    def get_run(self, ref: str) -> RunInfo: ...
    def run_detail(self, ref: str, *, typed: bool = False) -> RunDetail: ...
    def namespaces(self, run_id: str) -> list[str]: ...
    def list_steps(self, run_id: str, ns: str = "") -> list[StepInfo]: ...
    def step_detail(self, run_id: str, step: int, ns: str = "") -> StepDetail: ...
    def state_at(self, run_id: str, step: int, ns: str = "", *, typed: bool = False, internal: bool = False, deferred: bool = False) -> dict[str, Any]: ...
    def checkpoint_at(self, run_id: str, step: int, ns: str = "", *, typed: bool = True) -> Checkpoint: ...
    def calls(self, run_id: str, *, step: int | None = None, ns: str | None = None) -> list[CallInfo]: ...
    def blobs(self, hashes: Iterable[str]) -> dict[str, Any]: ...
    def latest_run_for_thread(self, thread_id: str, graph_name: str) -> RunInfo | None: ...
    def steps_writing(self, run_id: str, key: str, ns: str = "") -> list[int]: ...
    def step_details(self, run_id: str, ns: str = "", *, after: int | None = None, typed: bool = False, writes: bool = True) -> list[StepDetail]: ...
    def frames(self, run_id: str, ns: str = "") -> Iterator[tuple[int, dict[str, Any]]]: ...
    def close(self) -> None: ...


# ---------------------------------------------------------------------------
# URL handling
# ---------------------------------------------------------------------------


# ---------------------------------------------------------------------------
# SQLAlchemy implementation
# ---------------------------------------------------------------------------


class SqlStore(Connection, SchemaGate, Writing, RunReads, RunListing, StepReads, StateReads, CallReads, BlobReads):
    """``RunStore`` over SQLAlchemy (SQLite or PostgreSQL)."""

    def __init__(self, db: str | os.PathLike | None = None, *, create: bool = True) -> None:
        self.url = resolve_url(db)
        self._blob_cache: OrderedDict[str, Any] = OrderedDict()
        self._blob_weights: dict[str, int] = {}  # values a cached blob with nested blobs expands to
        self._blob_lock = threading.Lock()
        self._decoded_blobs = DecodedBlobs()
        self._keyframes: OrderedDict[tuple[str, str, int], dict] = OrderedDict()  # parsed, by (run, ns, seq)
        self._shared_refs: dict[str, dict] = {}  # one reference object per blob, for deferred lists
        self._known_blobs: set[str] = set()
        self.engine = self._connect(create)
        self._wlock = threading.Lock()
        self._wconn: Any = None
        self.is_sqlite = self.engine.dialect.name == "sqlite"
        if self.is_sqlite:
            from sqlalchemy.dialects.sqlite import insert as dialect_insert
        else:
            from sqlalchemy.dialects.postgresql import insert as dialect_insert
        self._blob_insert = dialect_insert(S.blobs).on_conflict_do_nothing(index_elements=["hash"])
        self._check_schema(create)

    # -- opening -------------------------------------------------------------


    # -- writing -------------------------------------------------------------


    # -- runs ----------------------------------------------------------------


    def mark_dead_runs(self) -> int:
        """Mark runs whose recording process is gone as interrupted (killed).

        On this host a run is dead when its owner pid is gone. A run recorded
        on another host is dead when neither its heartbeat nor its latest
        step is newer than ``STALE_HEARTBEAT_S``. A dead run ends at its last
        sign of life.
        """
        host = socket.gethostname()
        rows = self._read(sa.select(S.runs.c.id, S.runs.c.owner_host, S.runs.c.owner_pid, S.runs.c.heartbeat_at).where(S.runs.c.status == "running"))
        now = time.time()
        dead, foreign = [], []
        for r in rows:
            if r.owner_host == host and r.owner_pid is not None:
                if r.owner_pid != os.getpid() and not _pid_alive(r.owner_pid):
                    dead.append(r)
            elif r.heartbeat_at is not None and now - r.heartbeat_at > STALE_HEARTBEAT_S:
                foreign.append(r)
        if not dead and not foreign:
            return 0
        last_step = {
            run_id: t
            for run_id, t in self._read(
                sa.select(S.steps.c.run_id, sa.func.max(S.steps.c.created_at))
                .where(S.steps.c.run_id.in_([r.id for r in dead + foreign]))
                .group_by(S.steps.c.run_id)
            )
        }
        ended: dict[str, float | None] = {}
        for r in dead + foreign:
            signs = [t for t in (r.heartbeat_at, last_step.get(r.id)) if t is not None]
            seen = max(signs) if signs else None
            if r in foreign and seen is not None and now - seen <= STALE_HEARTBEAT_S:
                continue  # its steps are still arriving: alive
            ended[r.id] = seen
        if not ended:
            return 0
        try:
            with self.engine.begin() as conn:
                for run_id, seen in ended.items():
                    conn.execute(
                        sa.update(S.runs)
                        .where(S.runs.c.id == run_id, S.runs.c.status == "running")
                        .values(status="interrupted", status_reason="killed", ended_at=seen)
                    )
        except SQLAlchemyError:
            return 0  # read-only database: still readable, just not marked
        return len(ended)


    # -- steps ---------------------------------------------------------------


    # -- calls ---------------------------------------------------------------


    # -- blobs and decoding --------------------------------------------------


    # -- maintenance ----------------------------------------------------------
    def delete_run(self, run_id: str) -> None:
        """Remove a run and its steps and calls (blobs are shared and kept)."""
        with self.engine.begin() as conn:
            conn.execute(sa.delete(S.steps).where(S.steps.c.run_id == run_id))
            conn.execute(sa.delete(S.calls).where(S.calls.c.run_id == run_id))
            conn.execute(sa.delete(S.runs).where(S.runs.c.id == run_id))

    def size_report(self) -> dict[str, int]:
        """Row counts per table (and file size for SQLite)."""
        out = {}
        for t in (S.runs, S.steps, S.calls, S.blobs):
            out[t.name] = int(self._read(sa.select(sa.func.count()).select_from(t))[0][0])
        path = _sqlite_path(self.url)
        if path is not None:
            out["bytes"] = sum(p.stat().st_size for p in (path, Path(str(path) + "-wal")) if p.exists())
        return out


    # -- housekeeping: gc and stats -------------------------------------------
    def gc(
        self,
        older_than_s: float,
        *,
        keep_failed: bool = False,
        dry_run: bool = False,
        now: float | None = None,
        progress: Progress | None = None,
    ) -> GcReport:
        """Delete runs that ended more than ``older_than_s`` seconds ago, then unreferenced blobs.

        A run still recording (status running with a live owner) is never
        touched, nor is the parent of a fork that stays. Blobs are shared
        between runs, so a blob goes only when no remaining run's inputs,
        output, config, steps or calls reach it (directly or through another
        blob). ``dry_run`` reports the same figures and deletes nothing.
        """
        progress = progress or _no_progress
        now = time.time() if now is None else now
        self.mark_dead_runs()
        r = S.runs.c
        last_seen = sa.func.coalesce(r.ended_at, r.heartbeat_at, r.started_at)
        q = sa.select(r.id).where(r.status != "running", last_seen < now - older_than_s)
        if keep_failed:
            q = q.where(r.status != "error")
        doomed = {row.id for row in self._read(q)}
        running = int(self._read(sa.select(sa.func.count()).select_from(S.runs).where(r.status == "running"))[0][0])
        # A fork reads its parent's recording: parents of remaining runs stay (transitively).
        forks = self._read(sa.select(r.id, r.parent_run_id).where(r.parent_run_id.is_not(None)))
        kept_parents: set[str] = set()
        changed = True
        while changed:
            changed = False
            for fork in forks:
                if fork.id not in doomed and fork.parent_run_id in doomed:
                    doomed.discard(fork.parent_run_id)
                    kept_parents.add(fork.parent_run_id)
                    changed = True
        ids = sorted(doomed)
        steps = calls = 0
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            steps += int(self._read(sa.select(sa.func.count()).select_from(S.steps).where(S.steps.c.run_id.in_(chunk)))[0][0])
            calls += int(self._read(sa.select(sa.func.count()).select_from(S.calls).where(S.calls.c.run_id.in_(chunk)))[0][0])
        if not dry_run:
            for i in range(0, len(ids), 500):
                chunk = ids[i : i + 500]
                try:
                    with self.engine.begin() as conn:
                        conn.execute(sa.delete(S.steps).where(S.steps.c.run_id.in_(chunk)))
                        conn.execute(sa.delete(S.calls).where(S.calls.c.run_id.in_(chunk)))
                        conn.execute(sa.delete(S.runs).where(S.runs.c.id.in_(chunk)))
                except SQLAlchemyError as exc:
                    raise StoreError(f"cannot delete runs from {self._safe_url()}: {_one_line(exc)}") from None
                progress("deleting runs", min(i + 500, len(ids)), len(ids))
        unused, unused_bytes = self._unreferenced_blobs(set() if not dry_run else doomed, progress)
        if not dry_run and unused:
            unused, unused_bytes = self._delete_blobs(unused, now, progress)
        return GcReport(
            runs=len(ids),
            steps=steps,
            calls=calls,
            blobs=len(unused),
            blob_bytes=unused_bytes,
            kept_running=running,
            kept_fork_parents=len(kept_parents),
            dry_run=dry_run,
            run_ids=ids,
        )

    def _refs_of_runs(self, conn: Any, where_runs: Any | None, skip: set[str], progress: Progress, label: str) -> set[str]:
        """Blob hashes referenced by runs (all, or those matching ``where_runs``), skipping run ids in ``skip``."""
        refs: set[str] = set()
        r, st, ca = S.runs.c, S.steps.c, S.calls.c
        run_q = sa.select(r.id, r.inputs, r.output, r.config, r.fork_edit)
        if where_runs is not None:
            run_q = run_q.where(where_runs)
        run_ids = []
        for row in conn.execute(run_q):
            if row.id in skip:
                continue
            run_ids.append(row.id)
            for text in (row.inputs, row.output, row.config, row.fork_edit):
                if text and '"$b"' in text:
                    collect_refs(_uj(text), refs)
        scoped = where_runs is not None
        total = int(conn.execute(sa.select(sa.func.count()).select_from(S.steps)).scalar_one()) if not scoped else None
        done = 0
        chunks = [run_ids[i : i + 500] for i in range(0, len(run_ids), 500)] if scoped else [None]
        for chunk in chunks:
            sq = sa.select(st.run_id, st.payload)
            cq = sa.select(ca.run_id, ca.inputs, ca.output)
            if chunk is not None:
                sq, cq = sq.where(st.run_id.in_(chunk)), cq.where(ca.run_id.in_(chunk))
            for row in conn.execute(sq.execution_options(yield_per=2000)):
                done += 1
                if row.run_id not in skip:
                    collect_refs(unpack(row.payload), refs)
                if total and done % 5000 == 0:
                    progress(label, done, total)
            for row in conn.execute(cq.execution_options(yield_per=2000)):
                if row.run_id in skip:
                    continue
                for text in (row.inputs, row.output):
                    if text and '"$b"' in text:
                        collect_refs(_uj(text), refs)
        if total:
            progress(label, total, total)
        return refs

    def _blob_closure(self, conn: Any, refs: set[str]) -> set[str]:
        """``refs`` and every blob reachable from them (a message blob holds its long strings as blobs)."""
        seen = set(refs)
        frontier = list(refs)
        while frontier:
            nxt: list[str] = []
            for i in range(0, len(frontier), 500):
                chunk = frontier[i : i + 500]
                for row in conn.execute(sa.select(S.blobs.c.zipped, S.blobs.c.data).where(S.blobs.c.hash.in_(chunk))):
                    data = bytes(row.data)
                    if b'"$b"' not in data and not row.zipped:
                        continue
                    for h in collect_refs(unpack(b"z" + data if row.zipped else b"j" + data)):
                        if h not in seen:
                            seen.add(h)
                            nxt.append(h)
            frontier = nxt
        return seen

    def _unreferenced_blobs(self, skip: set[str], progress: Progress) -> tuple[set[str], int]:
        """Blobs no run outside ``skip`` reaches, and their stored size."""
        try:
            with self.engine.connect() as conn:
                live = self._blob_closure(conn, self._refs_of_runs(conn, None, skip, progress, "scanning references"))
                unused: set[str] = set()
                size = 0
                for row in conn.execute(sa.select(S.blobs.c.hash, sa.func.length(S.blobs.c.data)).execution_options(yield_per=5000)):
                    if row[0] not in live:
                        unused.add(row[0])
                        size += int(row[1] or 0)
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot read {self._safe_url()}: {_one_line(exc)}") from None
        return unused, size

    def _delete_blobs(self, unused: set[str], started: float, progress: Progress) -> tuple[set[str], int]:
        """Delete ``unused`` blobs, sparing any a run written meanwhile has come to reference.

        Writers are held off while this runs (SQLite's write lock; a lock on
        the blobs table in PostgreSQL), and the runs that were recording or
        have ended since the scan began are scanned again under that lock.
        """
        r = S.runs.c
        recent = sa.or_(r.status == "running", r.started_at >= started - 60, sa.func.coalesce(r.ended_at, r.heartbeat_at, r.started_at) >= started - 60)
        try:
            with self.engine.begin() as conn:
                if self.is_sqlite:
                    conn.execute(sa.delete(S.blobs).where(sa.false()))  # takes the write lock now
                else:
                    conn.exec_driver_sql("LOCK TABLE blobs IN SHARE ROW EXCLUSIVE MODE")
                unused = unused - self._blob_closure(conn, self._refs_of_runs(conn, recent, set(), _no_progress, ""))
                size = 0
                doomed = sorted(unused)
                for i in range(0, len(doomed), 500):
                    chunk = doomed[i : i + 500]
                    size += int(conn.execute(sa.select(sa.func.coalesce(sa.func.sum(sa.func.length(S.blobs.c.data)), 0)).where(S.blobs.c.hash.in_(chunk))).scalar_one())
                    conn.execute(sa.delete(S.blobs).where(S.blobs.c.hash.in_(chunk)))
                    progress("deleting blobs", min(i + 500, len(doomed)), len(doomed))
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot delete blobs from {self._safe_url()}: {_one_line(exc)}") from None
        with self._blob_lock:
            for h in unused:
                self._blob_cache.pop(h, None)
        self._known_blobs.difference_update(unused)
        return unused, size

    def stats(self) -> dict[str, Any]:
        """Rows and bytes per table, runs by status, and the database's size on disk.

        Bytes per table include its indexes: SQLite's ``dbstat`` where the
        build has it, PostgreSQL's ``pg_total_relation_size``; None when the
        backend cannot tell.
        """
        tables = [S.runs, S.steps, S.calls, S.blobs, S.run_facets]
        out: dict[str, Any] = {"backend": self.engine.dialect.name, "url": self._safe_url(), "schema_version": S.SCHEMA_VERSION}
        sizes: dict[str, int | None] = {t.name: None for t in tables}
        try:
            with self.engine.connect() as conn:
                if self.is_sqlite:
                    try:
                        rows = conn.exec_driver_sql(
                            "SELECT m.tbl_name, SUM(d.pgsize) FROM dbstat d JOIN sqlite_master m ON m.name = d.name GROUP BY m.tbl_name"
                        ).all()
                        for name, size in rows:
                            if name in sizes:
                                sizes[name] = int(size)
                    except SQLAlchemyError:
                        pass  # SQLite built without dbstat: sizes stay unknown
                else:
                    for t in tables:
                        sizes[t.name] = int(conn.execute(sa.text("SELECT pg_total_relation_size(to_regclass(:t))"), {"t": t.name}).scalar_one() or 0)
                    out["database_bytes"] = int(conn.execute(sa.text("SELECT pg_database_size(current_database())")).scalar_one())
                counts = {t.name: int(conn.execute(sa.select(sa.func.count()).select_from(t)).scalar_one()) for t in tables}
                by_status = {st: int(n) for st, n in conn.execute(sa.select(S.runs.c.status, sa.func.count()).group_by(S.runs.c.status))}
                span = conn.execute(sa.select(sa.func.min(S.runs.c.started_at), sa.func.max(S.runs.c.started_at))).one()
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot read {self._safe_url()}: {_one_line(exc)}") from None
        out["tables"] = {name: {"rows": counts[name], "bytes": sizes[name]} for name in counts}
        out["runs_by_status"] = dict(sorted(by_status.items()))
        out["oldest_run_at"], out["newest_run_at"] = span[0], span[1]
        path = _sqlite_path(self.url)
        if path is not None:
            out["database_bytes"] = sum(p.stat().st_size for p in (path, Path(str(path) + "-wal")) if p.exists())
        known = [v for v in sizes.values() if v is not None]
        out["bytes"] = sum(known) if known else None
        return out


class Progress(Protocol):
    """Told how far a long operation has come: ``(phase, done, total or None)``."""

    def __call__(self, phase: str, done: int, total: int | None) -> None: ...


def _no_progress(_phase: str, _done: int, _total: int | None) -> None:
    pass


@dataclass(frozen=True, slots=True)
class GcReport:
    """What ``SqlStore.gc`` deleted (or, with ``dry_run``, would delete)."""

    runs: int
    steps: int
    calls: int
    blobs: int
    blob_bytes: int
    kept_running: int
    kept_fork_parents: int
    dry_run: bool
    run_ids: list[str] = field(default_factory=list)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def open_store(db: str | os.PathLike | None = None, *, create: bool = False) -> SqlStore:
    """Open an existing store for reading (``create=True`` makes it if missing)."""
    return SqlStore(db, create=create)


__all__ = ["RunStore", "SqlStore", "open_store", "resolve_url", "Batch", "GcReport", "pack", "unpack"]

