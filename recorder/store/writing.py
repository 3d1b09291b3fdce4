"""Where runs, supersteps, calls and blobs are written: a ``Batch`` of rows, applied in one transaction.

The recorder (``attach``, ``session``) and the imports (LangGraph
checkpoints, fixtures) build rows and hand them over as a ``Batch``. A blob
is inserted once per hash (a second insert is a no-op); one this store wrote
already is not sent again until a run starts (``forget_written_blobs``).
Writes are serialized by the recorder's writer thread, so one connection
serves them all.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError, IntegrityError, InterfaceError, OperationalError, PendingRollbackError, ResourceClosedError

from graphtape.recorder.errors import StoreError
from graphtape.recorder.store.psycopg_noise import own_writes
from graphtape.recorder.store.read_only import is_read_only_error

from graphtape.recorder import schema as S


@dataclass(slots=True)
class Batch:
    """Rows to write in one transaction."""

    runs_new: list[dict] = field(default_factory=list)
    runs_update: list[tuple[str, dict]] = field(default_factory=list)
    steps: list[dict] = field(default_factory=list)
    calls: list[dict] = field(default_factory=list)
    # (call_id, fields): a call that returned after its row was written as unfinished
    calls_update: list[tuple[str, dict]] = field(default_factory=list)
    blobs: dict[str, tuple[bool, bytes]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.runs_new or self.runs_update or self.steps or self.calls or self.calls_update or self.blobs)

    def merge(self, other: Batch) -> None:
        self.runs_new.extend(other.runs_new)
        self.runs_update.extend(other.runs_update)
        self.steps.extend(other.steps)
        self.calls.extend(other.calls)
        self.calls_update.extend(other.calls_update)
        self.blobs.update(other.blobs)

    def run_ids(self) -> set[str]:
        """The runs whose rows or updates this batch holds."""
        ids = {r["id"] for r in self.runs_new}
        ids.update(r["run_id"] for r in self.steps)
        ids.update(r["run_id"] for r in self.calls)
        ids.update(rid for rid, _ in self.runs_update)
        return ids


class Writing:
    """Applies batches through the store's one writing connection."""

    def _init_writing(self) -> None:
        self._known_blobs: set[str] = set()
        self._wlock = threading.Lock()
        self._wconn: Any = None
        # How long a write waits for a lock another writer holds (seconds); None: the engine's own
        # (SQLite's busy timeout). The recorder's writer sets it to its bound.
        self.write_wait: float | None = None
        self._wconn_wait: float | None = None  # the wait the writing connection was last given
        self._blob_insert = _blob_insert(self.is_sqlite)

    def write(self, batch: Batch, *, again: bool = False) -> None:
        """Apply a batch in one transaction (blobs deduplicated by hash).

        ``again``: the batch is being sent again after a write whose outcome is
        unknown (a connection lost at commit may have committed it): rows already
        stored (a run by id, a step by run, namespace and seq, a call by id) are
        left out, so a retry never stores a row twice.
        """
        if not batch:
            return
        new_blobs = [h for h in batch.blobs if h not in self._known_blobs]
        with own_writes():  # a fault here is graphtape's to report: not psycopg's too
            conn = self._writer_conn()
            try:
                self._write_in(conn, batch, new_blobs, again=again)
            except BaseException:
                # A failed connection (disk full, file gone) is not reused.
                self._wconn = None
                _discard(conn)
                raise
        self._known_blobs.update(new_blobs)
        if len(self._known_blobs) > 500_000:
            self._known_blobs.clear()

    def add_run(self, batch: Batch) -> bool:
        """Write a whole new run (its row, steps, calls and blobs) in one transaction; False if its id is stored already.

        Imports use it: importing the same fixture twice, or from two
        processes at once, leaves one run and no error.
        """
        ids = {row["id"] for row in batch.runs_new}
        if len(ids) != 1 or batch.runs_update or batch.calls_update:
            raise ValueError("add_run takes the rows of exactly one new run")
        (run_id,) = ids
        if self.has_run(run_id):
            return False
        try:
            self.write(batch)
        except IntegrityError:
            if self.has_run(run_id):
                return False  # another import wrote it meanwhile
            raise
        return True

    def forget_written_blobs(self) -> None:
        """Stop trusting that blobs written earlier are still there (``gc`` may have swept them).

        Called when a run starts: its first reference to each blob inserts it
        again (a no-op when present), in the same transaction as the row that
        references it, so a sweep can never leave that row dangling.
        """
        self._known_blobs.clear()

    def _writer_conn(self) -> Any:
        # Writes are serialized by the recorder's writer, so one connection serves
        # them all: no pool checkout per superstep.
        # ``write_wait`` may change between writes (the recorder's writer waits less for a store
        # that keeps failing): the connection is told when it does.
        with self._wlock:
            if self._wconn is None or self._wconn.closed:
                self._wconn, self._wconn_wait = self.engine.connect(), None
            if self.write_wait is not None and self.write_wait != self._wconn_wait:
                ms = max(1, int(self.write_wait * 1000))
                try:
                    self._wconn.exec_driver_sql(f"PRAGMA busy_timeout = {ms}" if self.is_sqlite else f"SET lock_timeout = {ms}")
                    self._wconn.commit()
                except BaseException:
                    conn, self._wconn = self._wconn, None  # a broken connection is not reused
                    _discard(conn)
                    raise
                self._wconn_wait = self.write_wait
            return self._wconn

    def _write_in(self, conn: Any, batch: Batch, new_blobs: list[str], *, again: bool = False) -> None:
        with conn.begin():
            if again:
                batch = _not_stored_yet(conn, batch)
            if new_blobs:
                rows = [{"hash": h, "zipped": batch.blobs[h][0], "data": batch.blobs[h][1]} for h in new_blobs]
                _insert_same_keys(conn, S.blobs, rows, self._blob_insert)
            if batch.runs_new:
                _insert_rows(conn, S.runs, batch.runs_new)
            if batch.steps:
                _insert_rows(conn, S.steps, batch.steps)
            if batch.calls:
                _insert_rows(conn, S.calls, batch.calls)
            if batch.calls_update:
                _update_rows(conn, S.calls, "call_id", batch.calls_update)
            if batch.runs_update:
                _update_rows(conn, S.runs, "id", batch.runs_update)

    def forget_connections_after_fork(self) -> None:
        """In a forked child: let go of the parent's connections without closing them (see
        ``_FROM_THE_PARENT``; using one would interleave two processes on one socket or file
        handle); the child opens its own on demand."""
        _FROM_THE_PARENT.append((self._wconn, self.engine.pool))
        self._wlock = threading.Lock()
        self._wconn = None
        self.engine.dispose(close=False)

    def _close_writer(self) -> None:
        with self._wlock:
            if self._wconn is not None:
                try:
                    self._wconn.close()
                except Exception:  # noqa: BLE001 - closing a broken connection
                    pass
                self._wconn = None


# A forked child's references to its parent's connections, kept for the life of the child and
# never used or closed: a SQLite connection closed in the child drops the locks the child's own
# connections hold on the file (POSIX locks are per process), and a PostgreSQL one closed there
# ends the parent's session with the server.
_FROM_THE_PARENT: list[Any] = []

_BLOB_INSERTS: dict[bool, Any] = {}


def _blob_insert(is_sqlite: bool) -> Any:
    """The blobs' insert that skips a hash stored already: one per dialect for the process, so
    the driver's SQL compiled from it is kept (``_insert_same_keys`` keys it by identity)."""
    stmt = _BLOB_INSERTS.get(is_sqlite)
    if stmt is None:
        if is_sqlite:
            from sqlalchemy.dialects.sqlite import insert as dialect_insert
        else:
            from sqlalchemy.dialects.postgresql import insert as dialect_insert
        stmt = _BLOB_INSERTS[is_sqlite] = dialect_insert(S.blobs).on_conflict_do_nothing(index_elements=["hash"])
    return stmt


def _not_stored_yet(conn: Any, batch: Batch) -> Batch:
    """``batch`` without the runs, steps and calls a lost-answer commit may already have stored."""
    run_ids = sorted({r["id"] for r in batch.runs_new} | {r["run_id"] for r in batch.steps} | {r["run_id"] for r in batch.calls})
    if not run_ids:
        return batch
    runs, steps, calls = S.runs.c, S.steps.c, S.calls.c
    have_runs = {r[0] for r in conn.execute(sa.select(runs.id).where(runs.id.in_(run_ids)))}
    have_steps: set[tuple] = set()
    have_calls: set[str] = set()
    if batch.steps:
        first = min(r["seq"] for r in batch.steps)  # a long run's earlier steps are not read again
        q = sa.select(steps.run_id, steps.ns, steps.seq).where(steps.run_id.in_(run_ids), steps.seq >= first)
        have_steps = {tuple(r) for r in conn.execute(q)}
    if batch.calls:
        have_calls = {r[0] for r in conn.execute(sa.select(calls.call_id).where(calls.run_id.in_(run_ids)))}
    if not (have_runs or have_steps or have_calls):
        return batch
    out = Batch(runs_update=batch.runs_update, calls_update=batch.calls_update, blobs=batch.blobs)
    out.runs_new = [r for r in batch.runs_new if r["id"] not in have_runs]
    out.steps = [r for r in batch.steps if (r["run_id"], r.get("ns", ""), r["seq"]) not in have_steps]
    out.calls = [r for r in batch.calls if r["call_id"] not in have_calls]
    return out


def _insert_rows(conn: Any, table: sa.Table, rows: list[dict]) -> None:
    """Insert rows in order, one executemany per run of rows with the same keys.

    An executemany takes its columns from the first row, so a later row with
    more keys would silently lose them; grouping keeps every value.
    """
    start = 0
    while start < len(rows):
        keys = rows[start].keys()
        end = start + 1
        while end < len(rows) and rows[end].keys() == keys:
            end += 1
        _insert_same_keys(conn, table, rows[start:end])
        start = end


# (dialect, table, keys, statement) -> (driver SQL, parameter order for a positional style or None
# for a named one, the keys of ``AnyText`` columns, the plain defaults of the columns left out), or
# None where the statement needs SQLAlchemy's own parameter processing.
_DRIVER_INSERTS: dict[tuple, tuple[str, tuple[str, ...] | None, tuple[str, ...], dict[str, Any]] | None] = {}


def _insert_same_keys(conn: Any, table: sa.Table, rows: list[dict], statement: Any = None) -> None:
    """One executemany: the statement compiled once per key set and handed to the driver as it is.

    SQLAlchemy builds each row's parameters in Python (most of a superstep's write); the
    rows here are plain values of the columns' own types, so the driver takes them directly.
    A column left out gets its plain default value, as SQLAlchemy would give it; anything
    else (a default computed per row, an unknown parameter style) goes through SQLAlchemy.
    ``statement``: an insert of ``table`` other than the plain one (``_blob_insert``), built
    once for the process: its compiled SQL is kept by the statement's identity.
    """
    dialect = conn.dialect
    key = (dialect.name, dialect.paramstyle, table.name, tuple(rows[0]), id(statement))
    plan = _DRIVER_INSERTS.get(key, _MISSING)
    if plan is _MISSING:
        plan = _DRIVER_INSERTS[key] = _driver_insert(dialect, table, key[3], statement)
    if plan is None:
        conn.execute(sa.insert(table) if statement is None else statement, rows)
        return
    sql, order, texts, fills = plan
    _execute(conn, (sql, order, texts), [{**fills, **r} for r in rows] if fills else rows)


# (dialect, table, keys) -> (driver SQL, parameter order for a positional style or None for a named
# one, the keys of ``AnyText`` columns), or None where SQLAlchemy must build the parameters.
_DRIVER_UPDATES: dict[tuple, tuple[str, tuple[str, ...] | None, tuple[str, ...]] | None] = {}
_ID = "graphtape_id"  # the row's key, bound apart from the SET clause's own parameters


def _update_rows(conn: Any, table: sa.Table, id_key: str, items: list[tuple[str, dict]]) -> None:
    """Apply ``(id, fields)`` updates in order, one executemany per run of updates that set the same
    columns, compiled once per column set and handed to the driver as they are (see ``_insert_same_keys``)."""
    dialect = conn.dialect
    start = 0
    while start < len(items):
        keys = tuple(items[start][1])
        end = start + 1
        while end < len(items) and tuple(items[end][1]) == keys:
            end += 1
        group = items[start:end]
        start = end
        key = (dialect.name, dialect.paramstyle, table.name, id_key, keys)
        plan = _DRIVER_UPDATES.get(key, _MISSING)
        if plan is _MISSING:
            plan = _DRIVER_UPDATES[key] = _driver_update(dialect, table, id_key, keys)
        if plan is None or not keys:
            for row_id, fields in group:
                conn.execute(sa.update(table).where(table.c[id_key] == row_id).values(**fields))
            continue
        _execute(conn, plan, [{**fields, _ID: row_id} for row_id, fields in group])


def _execute(conn: Any, plan: tuple[str, tuple[str, ...] | None, tuple[str, ...]], rows: list[dict]) -> None:
    """One executemany of a driver plan (``_driver_plan``): text made safe, parameters in its order."""
    sql, order, texts = plan
    if texts:
        rows = [_text_safe(r, texts) for r in rows]
    conn.exec_driver_sql(sql, [tuple(r[k] for k in order) for r in rows] if order is not None else rows)


def _text_safe(row: dict, texts: tuple[str, ...]) -> dict:
    """``row`` with its text values as ``AnyText`` stores them (the same dict when none needs it)."""
    bad = [k for k in texts if isinstance(v := row[k], str) and S.needs_escape(v)]
    if not bad:
        return row
    row = dict(row)
    for k in bad:
        row[k] = S.to_column(row[k])
    return row


def _driver_insert(dialect: Any, table: sa.Table, keys: tuple[str, ...], statement: Any = None) -> tuple[str, tuple[str, ...] | None, tuple[str, ...], dict[str, Any]] | None:
    stmt = sa.insert(table) if statement is None else statement
    compiled = stmt.inline().compile(dialect=dialect, column_keys=list(keys))
    # A column left out that has a plain default value: SQLAlchemy binds that value; so do we.
    fills = {}
    for name in set(compiled.binds) - set(keys):
        default = table.c[name].default if name in table.c else None
        if default is None or not default.is_scalar:
            return None
        fills[name] = default.arg
    plan = _driver_plan(dialect, table, compiled, tuple(keys) + tuple(fills))
    return None if plan is None else (*plan, fills)


def _driver_update(dialect: Any, table: sa.Table, id_key: str, keys: tuple[str, ...]) -> tuple[str, tuple[str, ...] | None, tuple[str, ...]] | None:
    if _ID in keys or not keys:
        return None
    stmt = sa.update(table).where(table.c[id_key] == sa.bindparam(_ID)).values({k: sa.bindparam(k) for k in keys})
    compiled = stmt.compile(dialect=dialect)
    return _driver_plan(dialect, table, compiled, (*keys, _ID), id_key=id_key)


def _driver_plan(dialect: Any, table: sa.Table, compiled: Any, keys: tuple[str, ...], id_key: str | None = None) -> tuple[str, tuple[str, ...] | None, tuple[str, ...]] | None:
    """The driver's SQL for a compiled statement whose parameters are exactly ``keys`` (column names,
    and ``_ID`` standing for ``id_key``), or None where a column's values need SQLAlchemy's processing."""
    columns = [table.c[id_key if k == _ID else k] for k in keys]
    if set(compiled.binds) != set(keys) or any(_needs_processing(c.type) for c in columns):
        return None
    texts = tuple(k for k, c in zip(keys, columns) if isinstance(c.type, S.AnyText))
    if dialect.paramstyle in ("qmark", "numeric", "format") and compiled.positiontup is not None:
        order = tuple(compiled.positiontup)
        if len(order) != len(keys) or set(order) != set(keys):
            return None
        return str(compiled), order, texts
    if dialect.paramstyle in ("pyformat", "named"):
        return str(compiled), None, texts
    return None


def _needs_processing(col_type: Any) -> bool:
    # Strings, numbers, booleans and bytes reach SQLite and psycopg as they are (``AnyText`` after
    # ``_text_safe``); a type that converts its values (JSON, an Enum, another TypeDecorator) goes
    # through SQLAlchemy.
    if isinstance(col_type, S.AnyText):
        return False
    if isinstance(col_type, (sa.String, sa.Integer, sa.Float, sa.Boolean, sa.LargeBinary)) and not isinstance(col_type, (sa.Enum, sa.JSON)):
        return False
    return True


_MISSING = object()


def is_lock_conflict(exc: BaseException) -> bool:
    """Whether a write failed on a lock another writer held (SQLite's "database is locked"): worth another try."""
    return isinstance(exc, OperationalError) and "locked" in str(exc).lower()


# SQLSTATE: undefined_table, undefined_column, invalid_schema_name
_STORE_GONE_CODES = ("42P01", "42703", "3F000")


def is_passing(exc: BaseException) -> bool:
    """Whether a write failed on something that passes (a lock, a full disk, a read-only file,
    a lost connection, a store not reachable yet): the rows are kept and tried again.
    Anything else (a row the database refuses for what it holds) would fail the same way again."""
    if isinstance(exc, (OperationalError, InterfaceError, PendingRollbackError, ResourceClosedError, StoreError, OSError, TimeoutError)):
        return True
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    if is_read_only_error(exc):
        return True  # a role without INSERT, a standby: until someone grants it
    if getattr(getattr(exc, "orig", None), "sqlstate", None) in _STORE_GONE_CODES:
        # graphtape's tables or schema are not there (dropped, a database reset): every row would
        # be refused, one by one, and dropped for good; kept, they are rescued at close (SQLite
        # says "no such table" as an OperationalError, kept already).
        return True
    text = str(exc).lower()
    return any(w in text for w in ("terminating connection", "server closed the connection", "connection is closed", "locked", "readonly"))


def is_duplicate(exc: BaseException) -> bool:
    """Whether a write failed because a row with its key is stored already."""
    return isinstance(exc, IntegrityError)


def _discard(conn: Any) -> None:
    """Close a connection that failed, never to be handed out again."""
    try:
        conn.invalidate()
        conn.close()
    except Exception:  # noqa: BLE001 - it is being thrown away
        pass
