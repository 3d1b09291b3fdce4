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
from graphtape.recorder.json_cost import built_bytes
from graphtape.recorder.urls import shown_url  # noqa: F401 - shown_url is read from here too
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

DEFAULT_DB = "graphtape.db"
MAX_INT = 2**63 - 1  # the store's integer columns (and so step numbers, offsets, limits) stop here
ENV_DB = "GRAPHTAPE_DB"
STALE_HEARTBEAT_S = 600.0
KEYFRAMES_KEPT = 4  # parsed keyframes kept for state reads (stepping reuses one for many steps)
SHARED_REFS = 200_000  # blob references kept shared between deferred state reads (then started afresh)


# ---------------------------------------------------------------------------
# Payload bytes
# ---------------------------------------------------------------------------


def squeeze(raw: bytes) -> tuple[bool, bytes]:
    """``(zipped, data)``: zlib-compressed only when that saves space."""
    if len(raw) > 160:
        z = zlib.compress(raw, 6)
        if len(z) < len(raw) - 16:
            return True, z
    return False, raw


def pack(obj: Any) -> bytes:
    """orjson, compressed when that saves space; first byte says which."""
    zipped, data = squeeze(orjson.dumps(obj))
    return (b"z" if zipped else b"j") + data


MAX_INFLATE = 256 * 1024 * 1024
MAX_READ_BYTES = 512 * 1024 * 1024  # memory one store read may inflate and build in all (all its payloads and blobs)


class ReadBudget:
    """What one store read (one call of a public read method) may still inflate and build.

    Each payload is bounded on its own (``MAX_INFLATE``), but a read touches many:
    a crafted 4 MB store of many compressed payloads made one ``show --step`` build
    gigabytes. The budget is shared by everything a read unpacks, and charged what
    parsing will build (``json_cost.built_bytes``), not only the inflated bytes:
    40 kB of compressed ``[{},{},...]`` parse to 1.3 GB.
    """

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit if limit is not None else MAX_READ_BYTES
        self.left = self.limit

    def spend(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            raise StoreError(f"this read would inflate and build more than {self.limit // (1024 * 1024)} MB from stored data (a damaged or crafted store?); refusing it")


_READ_BUDGET: contextvars.ContextVar[ReadBudget | None] = contextvars.ContextVar("graphtape_read_budget", default=None)


@contextlib.contextmanager
def read_budget(limit: int | None = None) -> Iterator[ReadBudget]:
    """The budget of the read in progress, or a new one for a read starting now."""
    current = _READ_BUDGET.get()
    if current is not None:
        yield current
        return
    budget = ReadBudget(limit)
    token = _READ_BUDGET.set(budget)
    try:
        yield budget
    finally:
        _READ_BUDGET.reset(token)


def unpack(data: bytes, *, max_size: int = MAX_INFLATE) -> Any:
    """Inverse of :func:`pack`; refuses anything else.

    A compressed payload must be one complete zlib stream that inflates to at
    most ``max_size`` bytes, so a damaged or hostile file cannot exhaust memory.
    """
    data = bytes(data)
    if not data:
        raise StoreError("empty payload in the database (file damaged?)")
    head, body = data[:1], data[1:]
    try:
        if head == b"z":
            d = zlib.decompressobj()
            body = d.decompress(body, max_size + 1)
            if len(body) > max_size:
                raise StoreError(f"a stored payload inflates beyond {max_size} bytes; refusing to read it")
            if not d.eof:
                raise StoreError("damaged payload in the database: compressed data is truncated")
            if d.unused_data:
                raise StoreError("damaged payload in the database: data after the compressed stream")
        elif head != b"j":
            raise StoreError("unknown payload encoding in the database (file damaged or not graphtape's)")
        (_READ_BUDGET.get() or ReadBudget()).spend(built_bytes(body))  # before the parse builds it
        return orjson.loads(body)
    except (zlib.error, orjson.JSONDecodeError) as exc:
        raise StoreError(f"damaged payload in the database: {exc}") from None


def _j(value: Any) -> str | None:
    return None if value is None else orjson.dumps(value).decode()


def _uj(text: str | None, default: Any = None) -> Any:
    if text is None:
        return default
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return default


# ---------------------------------------------------------------------------
# Write operations (produced by the recorder, applied in batches)
# ---------------------------------------------------------------------------


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


def resolve_url(db: str | os.PathLike | None = None) -> str:
    """A SQLAlchemy URL from a URL, a file path, ``GRAPHTAPE_DB`` or the default."""
    if db is None:
        db = os.environ.get(ENV_DB) or DEFAULT_DB
    db = os.fspath(db)
    if "://" in db:
        if db.startswith("postgres://"):
            db = "postgresql+psycopg://" + db[len("postgres://") :]
        elif db.startswith("postgresql://"):
            db = "postgresql+psycopg://" + db[len("postgresql://") :]
        return db
    return "sqlite:///" + str(Path(db).expanduser().resolve())


def _sqlite_path(url: str) -> Path | None:
    try:
        parsed = sa.engine.make_url(url)
    except Exception:  # noqa: BLE001 - not a URL SQLAlchemy understands, so not a SQLite file either
        return None
    if parsed.get_backend_name() != "sqlite":
        return None
    p = parsed.database
    if not p or p == ":memory:" or p.startswith("file:"):
        return None
    return Path(p)


def _on_sqlite_connect(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA busy_timeout=10000")
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


# ---------------------------------------------------------------------------
# SQLAlchemy implementation
# ---------------------------------------------------------------------------


_DAMAGE = (TypeError, ValueError, AttributeError, KeyError, IndexError)


def _damage_is_a_store_error(method: Any) -> Any:
    """Reads trust nothing they load: a damaged or hand-edited store (SQLite keeps any type in
    any column; a payload can be JSON of another shape) fails as one ``StoreError`` line."""
    def explain(self: Any, exc: BaseException) -> StoreError:
        return StoreError(f"{self._safe_url()} holds damaged data ({method.__name__}: {type(exc).__name__}: {_one_line(exc)})")

    if inspect.isgeneratorfunction(method):

        @functools.wraps(method)
        def generator(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                yield from method(self, *args, **kwargs)  # each payload stays bounded by MAX_INFLATE
            except _DAMAGE as exc:
                raise explain(self, exc) from None

        return generator

    @functools.wraps(method)
    def read(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            with read_budget():
                return method(self, *args, **kwargs)
        except _DAMAGE as exc:
            raise explain(self, exc) from None

    return read


class SqlStore:
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
    def _connect(self, create: bool) -> Engine:
        path = _sqlite_path(self.url)
        if path is not None:
            if not path.parent.is_dir():
                raise StoreError(f"cannot open database {path}: directory {path.parent} does not exist")
            if path.is_dir():
                raise StoreError(f"cannot open database {path}: it is a directory")
            if not path.exists():
                if not create:
                    raise StoreError(f"no database at {path} (record a run first, or pass --db)")
                try:
                    fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
                    os.close(fd)
                except OSError as exc:
                    raise StoreError(f"cannot create database {path}: {exc.strerror}") from None
        try:
            backend = sa.engine.make_url(self.url).get_backend_name()
        except (SQLAlchemyError, ValueError):
            raise StoreError(f"cannot open {self._safe_url()}: not a database path or a SQLAlchemy URL") from None
        if backend not in ("sqlite", "postgresql"):
            raise StoreError(f"cannot open {self._safe_url()}: graphtape stores runs in SQLite (a file path) or PostgreSQL (postgresql+psycopg://...), not {backend}")
        try:
            if path is not None or self.url.startswith("sqlite"):
                engine = sa.create_engine(self.url, connect_args={"check_same_thread": False, "timeout": 10})
                event.listen(engine, "connect", _on_sqlite_connect)
            else:
                engine = sa.create_engine(self.url, pool_pre_ping=True, pool_size=5, max_overflow=10)
            with engine.connect() as conn:
                conn.execute(sa.text("SELECT 1"))
        except StoreError:
            raise
        except ModuleNotFoundError as exc:
            hint = "pip install 'graphtape[postgres]'" if exc.name == "psycopg" else "graphtape's PostgreSQL driver is psycopg: use postgresql+psycopg://... after pip install 'graphtape[postgres]'"
            raise StoreError(f"cannot open {self._safe_url()}: driver {exc.name!r} is not installed ({hint})") from None
        except (SQLAlchemyError, OSError, ValueError) as exc:
            raise StoreError(f"cannot open {self._safe_url()}: {_one_line(exc)}") from None
        return engine

    def _safe_url(self) -> str:
        return shown_url(self.url)

    def _check_schema(self, create: bool) -> None:
        try:
            insp = sa.inspect(self.engine)
            tables = set(insp.get_table_names())
        except (SQLAlchemyError, DBAPIError) as exc:
            raise StoreError(f"{self._safe_url()} is not a readable graphtape database: {_one_line(exc)}") from None
        if S.meta.name not in tables:
            if tables & {"runs", "steps", "calls", "blobs"}:
                raise SchemaVersionError(
                    f"{self._safe_url()} has tables named like graphtape's (runs, steps, ...) but no graphtape_meta schema version: "
                    "it is another program's database, or a damaged one; point graphtape at a different file"
                )
            if not create:
                raise StoreError(f"{self._safe_url()} is not a graphtape database (no graphtape_meta table): point graphtape at a different file")
            try:
                with self.engine.begin() as conn:
                    S.metadata.create_all(conn)
                    conn.execute(sa.insert(S.meta).values(key="schema_version", value=str(S.SCHEMA_VERSION)))
            except SQLAlchemyError as exc:
                if not self._version_ok_after_race():
                    raise StoreError(f"cannot create the graphtape schema in {self._safe_url()}: {_one_line(exc)}") from None
            return
        self._version_ok_after_race(strict=True)

    def _version_ok_after_race(self, strict: bool = False) -> bool:
        try:
            with self.engine.connect() as conn:
                row = conn.execute(sa.select(S.meta.c.value).where(S.meta.c.key == "schema_version")).first()
        except SQLAlchemyError:
            if strict:
                raise StoreError(f"{self._safe_url()}: cannot read the schema version (database damaged?)") from None
            return False
        if row is None:
            if strict:
                raise SchemaVersionError(f"{self._safe_url()} has no graphtape schema version: damaged or not a graphtape database")
            return False
        try:
            version = int(row[0])
        except ValueError:
            raise SchemaVersionError(f"{self._safe_url()} has an unknown schema version {row[0]!r}") from None
        if version > S.SCHEMA_VERSION:
            raise SchemaVersionError(
                f"{self._safe_url()} was written by a newer graphtape (schema v{version}; this one reads v{S.SCHEMA_VERSION}): upgrade graphtape to open it"
            )
        if version < S.SCHEMA_VERSION and version in S.MIGRATES_FROM:
            raise SchemaVersionError(
                f"{self._safe_url()} uses schema v{version}; this graphtape reads v{S.SCHEMA_VERSION}: run `graphtape migrate` to upgrade it in place"
            )
        if version < S.SCHEMA_VERSION:
            raise SchemaVersionError(f"{self._safe_url()} uses old schema v{version}; this graphtape reads v{S.SCHEMA_VERSION}: re-record, or open it with the graphtape that wrote it")
        return True

    def reset_connections(self) -> None:
        """Drop every open connection (say after os.fork); new ones open on demand."""
        self._close_writer()
        self.engine.dispose()

    def close(self) -> None:
        self.reset_connections()

    def _close_writer(self) -> None:
        with self._wlock:
            if self._wconn is not None:
                try:
                    self._wconn.close()
                except Exception:  # noqa: BLE001 - closing a broken connection
                    pass
                self._wconn = None

    # -- writing -------------------------------------------------------------
    def write(self, batch: Batch) -> None:
        """Apply a batch in one transaction (blobs deduplicated by hash)."""
        if not batch:
            return
        new_blobs = [h for h in batch.blobs if h not in self._known_blobs]
        conn = self._writer_conn()
        try:
            self._write_in(conn, batch, new_blobs)
        except BaseException:
            # A failed connection (disk full, file gone) is not reused.
            self._wconn = None
            try:
                conn.invalidate()
                conn.close()
            except Exception:  # noqa: BLE001
                pass
            raise
        self._known_blobs.update(new_blobs)
        if len(self._known_blobs) > 500_000:
            self._known_blobs.clear()

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
        with self._wlock:
            if self._wconn is None or self._wconn.closed:
                self._wconn = self.engine.connect()
            return self._wconn

    def _write_in(self, conn: Any, batch: Batch, new_blobs: list[str]) -> None:
        with conn.begin():
            if new_blobs:
                rows = [{"hash": h, "zipped": batch.blobs[h][0], "data": batch.blobs[h][1]} for h in new_blobs]
                conn.execute(self._blob_insert, rows)
            if batch.runs_new:
                _insert_rows(conn, S.runs, batch.runs_new)
            if batch.steps:
                _insert_rows(conn, S.steps, batch.steps)
            if batch.calls:
                _insert_rows(conn, S.calls, batch.calls)
            for call_id, fields in batch.calls_update:
                conn.execute(sa.update(S.calls).where(S.calls.c.call_id == call_id).values(**fields))
            for run_id, fields in batch.runs_update:
                conn.execute(sa.update(S.runs).where(S.runs.c.id == run_id).values(**fields))

    # -- runs ----------------------------------------------------------------
    def _run_info(self, r: Any) -> RunInfo:
        return RunInfo(
            id=r.id,
            name=r.name,
            graph_name=r.graph_name,
            status=r.status,
            started_at=r.started_at,
            ended_at=r.ended_at,
            step_count=r.step_count or 0,
            thread_id=r.thread_id,
            status_reason=r.status_reason,
            error_type=r.error_type,
            error_message=r.error_message,
            graph_ref=r.graph_ref,
            tags=_uj(r.tags, []),
            parent_run_id=r.parent_run_id,
            fork_step=r.fork_step,
            redactions=r.redactions or 0,
            faults=r.faults or 0,
            durability=r.durability,
        )

    # Newest first; the id breaks ties so every backend lists (and counts ``last~N``) alike.
    _NEWEST_FIRST = (S.runs.c.started_at.desc(), S.runs.c.id.desc())

    _RUN_COLS = [
        c
        for c in S.runs.c
        if c.name not in ("inputs", "output", "config", "graph", "versions", "fork_edit", "fault_log")
    ]

    def _read(self, stmt: Any) -> list[Any]:
        try:
            with self.engine.connect() as conn:
                return conn.execute(stmt).all()
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot read {self._safe_url()}: {_one_line(exc)}") from None

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

    @_damage_is_a_store_error
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
    ) -> list[RunInfo]:
        """Runs, newest first, filtered by every criterion given (see ``_run_filters``)."""
        self.mark_dead_runs()
        q = sa.select(*self._RUN_COLS).order_by(*self._NEWEST_FIRST)
        walk = self._facets_to_walk(limit, tag=tag, tool=tool, node=node)
        q = q.where(*self._run_filters(status=status, text=text, name=name, tag=tag, tool=tool, node=node, error=error, walk=walk))
        if limit is not None:
            q = q.limit(limit)
        if offset:
            q = q.offset(offset)
        return [self._run_info(r) for r in self._read(q)]

    @_damage_is_a_store_error
    def count_runs(self, **filters: Any) -> int:
        """How many runs match ``filters`` (the keyword filters of ``list_runs``; none counts all)."""
        q = sa.select(sa.func.count()).select_from(S.runs).where(*self._run_filters(**filters))
        return int(self._read(q)[0][0])

    # A facet shared by more runs than this is checked run by run, newest first (see _facets_to_walk).
    FACET_WALK = 2000

    def _facets_to_walk(self, limit: int | None, **facets: str | None) -> set[str]:
        """Facet filters to test per run while walking runs newest first, instead of collecting their runs.

        Collecting then sorting is fast for a facet few runs share; for one
        most runs share (env:prod, a node every run has), SQLite would sort
        tens of thousands of runs to show 50, while walking the newest runs
        finds 50 matches almost at once. PostgreSQL's planner makes this
        choice itself.
        """
        if not self.is_sqlite or not limit:
            return set()
        f = S.run_facets.c
        walk = set()
        for kind, value in facets.items():
            if value:
                n = self._read(sa.select(sa.func.count()).select_from(S.run_facets).where(f.kind == kind, f.value == value))[0][0]
                if n > self.FACET_WALK:
                    walk.add(kind)
        return walk

    @staticmethod
    def _run_filters(
        *,
        walk: set[str] | frozenset[str] = frozenset(),
        status: str | None = None,
        text: str | None = None,
        name: str | None = None,
        tag: str | None = None,
        tool: str | None = None,
        node: str | None = None,
        error: str | None = None,
    ) -> list[Any]:
        """WHERE clauses for the run filters, each one an index lookup:

        ``status``, ``name`` (exact, or a prefix with a trailing ``*``),
        ``tag``/``tool``/``node`` (exact, through ``run_facets``) and ``error``
        (case-insensitive text in a failed run's error type or message).
        ``text`` searches name, graph, error and tags and reads every run.
        """
        where: list[Any] = []
        r = S.runs.c
        if status:
            where.append(r.status == status)
        if name:
            if name.endswith("*"):
                prefix = name[:-1]
                # The range lets both backends walk ix_runs_name; substr keeps the match exact in any collation.
                where += [r.name >= prefix, r.name < prefix + "\U0010ffff", sa.func.substr(r.name, 1, len(prefix)) == prefix]
            else:
                where.append(r.name == name)
        f = S.run_facets.c
        for kind, value in (("tag", tag), ("tool", tool), ("node", node)):
            if value and kind in walk:
                where.append(sa.exists().where(f.kind == kind, f.value == value, f.run_id == r.id))
            elif value:
                where.append(r.id.in_(sa.select(f.run_id).where(f.kind == kind, f.value == value)))
        if error:
            like = f"%{_escape_like(error)}%"
            # Two small indexes (failed runs, failed calls) unioned: never a walk over every run.
            failed_runs = sa.select(r.id).where(r.error_message.is_not(None), sa.or_(r.error_message.ilike(like, escape="\\"), r.error_type.ilike(like, escape="\\")))
            where.append(r.id.in_(sa.union(failed_runs, _calls_matching(error, names=False))))
        if text:
            like = f"%{_escape_like(text)}%"
            where.append(
                sa.or_(
                    r.name.ilike(like, escape="\\"),
                    r.graph_name.ilike(like, escape="\\"),
                    r.error_message.ilike(like, escape="\\"),
                    r.tags.ilike(like, escape="\\"),
                    r.id.ilike(f"{_escape_like(text)}%", escape="\\"),
                    r.id.in_(_calls_matching(text, names=True)),
                )
            )
        return where

    @_damage_is_a_store_error
    def resolve_run(self, ref: str) -> str:
        """A full run id from an id, a unique prefix, ``last`` or ``last~N``.

        Prefixes match case-sensitively on every backend, and an exact id wins
        even when it is also the prefix of other ids. ``last`` counts recorded
        runs only: replays and forks (runs with a parent) are reached by id.
        """
        ref = (ref or "").strip()
        if not ref:
            raise RunNotFound("no run given")
        if ref == "last" or ref.startswith("last~"):
            back = 0
            if ref != "last":
                text = ref[5:]
                if not (text.isascii() and text.isdigit()):
                    raise RunNotFound(f"bad run alias {ref!r}: use last or last~N with N a whole number")
                back = int(text)
                if back > MAX_INT:
                    raise RunNotFound(f"{ref!r} goes back further than the {self.count_runs()} recorded run(s)")
            rows = self._read(sa.select(S.runs.c.id).where(S.runs.c.parent_run_id.is_(None)).order_by(*self._NEWEST_FIRST).offset(back).limit(1))
            if not rows and not back:  # only derived runs: the newest of those
                rows = self._read(sa.select(S.runs.c.id).order_by(*self._NEWEST_FIRST).limit(1))
            if not rows:
                if back:
                    raise RunNotFound(f"{ref!r} goes back further than the {self.count_runs()} recorded run(s)")
                raise RunNotFound("the store has no runs yet: record one first (graphtape demo)")
            return rows[0].id
        if self._read(sa.select(S.runs.c.id).where(S.runs.c.id == ref)):
            return ref
        rows = self._read(
            sa.select(S.runs.c.id)
            .where(
                S.runs.c.id.like(_escape_like(ref) + "%", escape="\\"),
                sa.func.substr(S.runs.c.id, 1, len(ref)) == ref,  # SQLite's LIKE ignores case
            )
            .order_by(S.runs.c.id)
            .limit(4)
        )
        if not rows:
            raise RunNotFound(f"no run matches {ref!r} (graphtape runs lists them)")
        if len(rows) > 1:
            shown = ", ".join(r.id for r in rows[:3]) + (", ..." if len(rows) > 3 else "")
            raise AmbiguousRun(f"{ref!r} matches several runs ({shown}): give more characters")
        return rows[0].id

    @_damage_is_a_store_error
    def get_run(self, ref: str) -> RunInfo:
        run_id = self.resolve_run(ref)
        self.mark_dead_runs()
        rows = self._read(sa.select(*self._RUN_COLS).where(S.runs.c.id == run_id))
        if not rows:
            raise RunNotFound(f"no run {run_id}")
        return self._run_info(rows[0])

    @_damage_is_a_store_error
    def run_detail(self, ref: str, *, typed: bool = False) -> RunDetail:
        """A run with its inputs, output, config, graph and fault log; ``typed`` rebuilds
        allow-listed types (messages, documents, registered classes) in the output."""
        run = self.get_run(ref)
        r = self._read(sa.select(S.runs).where(S.runs.c.id == run.id))[0]
        dec = self._plain_decoder
        output = (self._typed_decoder if typed else dec)(_uj(r.output))
        if output is None:
            # Not stored twice: a run's output is its state after its last completed step.
            done = [s for s in self.list_steps(run.id) if not s.pending]
            if done:
                output = self.state_at(run.id, done[-1].step, typed=typed)
                if not output:
                    # A functional-API entrypoint keeps no state channels: its output is what it returned.
                    final = self.state_at(run.id, done[-1].step, typed=typed, internal=True)
                    output = final.get("__end__", output)
        return RunDetail(
            run=run,
            inputs=dec(_uj(r.inputs)),
            output=output,
            config=dec(_uj(r.config)),
            graph=_uj(r.graph, {}),
            versions=_uj(r.versions, {}),
            fork_edit=dec(_uj(r.fork_edit)),
            fault_log=_uj(r.fault_log, []),
        )

    @_damage_is_a_store_error
    def latest_run_for_thread(self, thread_id: str, graph_name: str) -> RunInfo | None:
        rows = self._read(
            sa.select(*self._RUN_COLS)
            .where(S.runs.c.thread_id == thread_id, S.runs.c.graph_name == graph_name)
            .order_by(*self._NEWEST_FIRST)
            .limit(1)
        )
        return self._run_info(rows[0]) if rows else None

    # -- steps ---------------------------------------------------------------
    _STEP_COLS = [c for c in S.steps.c if c.name not in ("payload", "id", "is_key")]

    def _step_info(self, r: Any) -> StepInfo:
        return StepInfo(
            run_id=r.run_id,
            ns=r.ns,
            seq=r.seq,
            step=r.step,
            source=r.source,
            checkpoint_id=r.checkpoint_id,
            parent_checkpoint_id=r.parent_checkpoint_id,
            created_at=r.created_at,
            duration_ms=r.duration_ms,
            nodes=[n for n in r.nodes.split(",") if n],
            summary=r.summary or "",
            flags=r.flags or 0,
        )

    @_damage_is_a_store_error
    def namespaces(self, run_id: str) -> list[str]:
        """Namespaces with steps in this run: "" is the root graph."""
        rows = self._read(sa.select(S.steps.c.ns, sa.func.min(S.steps.c.id)).where(S.steps.c.run_id == run_id).group_by(S.steps.c.ns).order_by(sa.func.min(S.steps.c.id)))
        return [r[0] for r in rows]

    @_damage_is_a_store_error
    def list_steps(self, run_id: str, ns: str = "") -> list[StepInfo]:
        """Supersteps of a namespace in order, one entry per step (cheap: no payloads).

        A step can have several rows (interrupted then resumed, or writes that
        arrived late); they are shown as one step carrying all their flags, at
        the place of its completed row, as ``step_detail`` merges their contents.
        """
        c = S.steps.c
        q = sa.select(c.seq, c.step, c.source, c.checkpoint_id, c.parent_checkpoint_id, c.created_at, c.duration_ms, c.nodes, c.summary, c.flags)
        q = q.where(c.run_id == run_id, c.ns == ns).order_by(c.seq)
        merged: dict[int, StepInfo] = {}
        node_lists: dict[str, list[str]] = {}  # a run repeats a few node sets thousands of times
        for seq, step, source, cid, parent_cid, created_at, duration_ms, nodes, summary, flags in self._read(q):
            names = node_lists.get(nodes)
            if names is None:
                names = node_lists[nodes] = [n for n in nodes.split(",") if n]
            info = StepInfo(run_id, ns, seq, step, source, cid, parent_cid, created_at, duration_ms, list(names), summary or "", flags or 0)
            prev = merged.pop(step, None)
            if prev is not None:
                flags = prev.flags | info.flags
                if not (prev.pending and info.pending):
                    flags &= ~FLAG_PENDING
                keep = info if prev.pending and not info.pending else prev
                summary = keep.summary or (info.summary if keep is prev else prev.summary)
                info = dataclasses.replace(keep, flags=flags, summary=summary, nodes=keep.nodes or prev.nodes or info.nodes)
                if keep is prev:
                    merged[info.step] = info  # the completed row keeps its place
                    continue
            merged[info.step] = info
        return sorted(merged.values(), key=lambda s: s.seq)

    @_damage_is_a_store_error
    def steps_writing(self, run_id: str, key: str, ns: str = "") -> list[int]:
        """Step numbers whose tasks wrote to state key ``key`` (for the reverse watch)."""
        like = "%," + _escape_like(key) + ",%"
        rows = self._read(
            sa.select(S.steps.c.step)
            .where(S.steps.c.run_id == run_id, S.steps.c.ns == ns, S.steps.c.writes.like(like, escape="\\"))
            .order_by(S.steps.c.seq)
        )
        return [r.step for r in rows]

    def max_seq(self, run_id: str) -> int:
        """The last row number of a run (a resumed run continues after it)."""
        rows = self._read(sa.select(sa.func.max(S.steps.c.seq)).where(S.steps.c.run_id == run_id))
        return int(rows[0][0] or 0)

    @_damage_is_a_store_error
    def checkpoint_steps(self, run_id: str) -> dict[str, int]:
        """Checkpoint id -> step number for a run (to continue it on resume)."""
        rows = self._read(sa.select(S.steps.c.checkpoint_id, S.steps.c.step).where(S.steps.c.run_id == run_id, S.steps.c.checkpoint_id.is_not(None)))
        return {r.checkpoint_id: r.step for r in rows}

    def _step_row(self, run_id: str, step: int, ns: str) -> Any:
        """The row that stands for a step: its completed row if it has one, else its latest."""
        pending = S.steps.c.flags.op("&")(FLAG_PENDING)
        rows = self._read(
            sa.select(S.steps)
            .where(S.steps.c.run_id == run_id, S.steps.c.ns == ns, S.steps.c.step == step)
            .order_by(pending, S.steps.c.seq.desc())
            .limit(1)
        )
        if not rows:
            where = f" in namespace {ns!r}" if ns else ""
            raise StepNotFound(f"run {run_id} has no step {step}{where}")
        return rows[0]

    @_damage_is_a_store_error
    def step_detail(self, run_id: str, step: int, ns: str = "") -> StepDetail:
        """Tasks, routes, events and next nodes of one superstep.

        A step that was interrupted and later resumed has two rows (the pending
        one and the completed one); they are merged so the step tells its whole
        story: the interrupt, the resume value, and what the node then did.
        """
        row = self._step_row(run_id, step, ns)
        rows = self._read(
            sa.select(S.steps.c.seq, S.steps.c.payload, S.steps.c.created_at)
            .where(S.steps.c.run_id == run_id, S.steps.c.ns == ns, S.steps.c.step == step)
            .order_by(S.steps.c.seq)
        )
        following = self._read(
            sa.select(S.steps.c.step)
            .where(S.steps.c.run_id == run_id, S.steps.c.ns == ns, S.steps.c.seq > row.seq, S.steps.c.step > row.step)
            .order_by(S.steps.c.seq)
            .limit(1)
        )
        nxt: list[str] = []
        if following:
            # Every row of the next step: a task's writes can arrive after its step was stored.
            for r in self._read(
                sa.select(S.steps.c.nodes).where(S.steps.c.run_id == run_id, S.steps.c.ns == ns, S.steps.c.step == following[0].step).order_by(S.steps.c.seq)
            ):
                nxt.extend(n for n in r.nodes.split(",") if n)
        payloads = [expand_payload(unpack(r.payload), r.created_at) for r in rows]
        return self._detail(self._step_info(row), payloads, list(dict.fromkeys(nxt)))

    def _detail(self, info: StepInfo, payloads: Sequence[dict], nxt: list[str], typed: bool = False, writes: bool = True) -> StepDetail:
        """Merge the expanded payloads of one step's rows (in seq order) into its StepDetail."""
        dec = self._typed_decoder if typed else self._plain_decoder
        tasks_by_id: dict[str, TaskInfo] = {}
        routes_by_task: dict[Any, list[dict]] = {}
        events: list[EventInfo] = []
        for payload in payloads:
            for t in payload.get("t", []):
                tasks_by_id[t["id"]] = TaskInfo(
                    task_id=t["id"],
                    node=t["node"],
                    path=t.get("path", ""),
                    writes=dec(t.get("w", {})) if writes else {},
                    error_type=t.get("et"),
                    error_message=t.get("em"),
                    interrupts=dec(t.get("i", [])),
                    started_at=t.get("t0"),
                    duration_ms=t.get("ms"),
                    cached=bool(t.get("c")),
                    subgraph_ns=t.get("sub", []),
                    traceback=valid_frames(t.get("tb")),
                    attempts=[a for a in t.get("att", []) if isinstance(a, dict)] if isinstance(t.get("att"), list) else [],
                )
            by_task: dict[Any, list[dict]] = {}
            for d in payload.get("r", []):
                by_task.setdefault(d.get("task"), []).append(d)
            routes_by_task.update(by_task)  # a task's routes come from its latest row
            events.extend(EventInfo(kind=e["kind"], value=dec(e.get("v")), task_id=e.get("task"), node=e.get("node")) for e in payload.get("e", []))
        routes = [
            RouteInfo(
                source=d["src"],
                kind=d["kind"],
                destinations=d.get("dest", []),
                router=d.get("router"),
                returned=dec(d.get("ret")),
                sends=dec(d.get("sends", [])),
                task_id=d.get("task"),
            )
            for task_routes in routes_by_task.values()
            for d in task_routes
        ]
        return StepDetail(step=info, tasks=list(tasks_by_id.values()), routes=routes, events=events, next=nxt)

    @_damage_is_a_store_error
    def step_details(self, run_id: str, ns: str = "", *, after: int | None = None, typed: bool = False, writes: bool = True) -> list[StepDetail]:
        """Every step of a namespace in order, in one read (replay compares whole runs).

        ``typed=True`` rebuilds written values as live objects (messages...), for
        resuming; ``writes=False`` leaves the tasks' updates out (not decoded).
        """
        infos = [i for i in self.list_steps(run_id, ns) if after is None or i.step > after]
        q = sa.select(S.steps.c.step, S.steps.c.seq, S.steps.c.payload, S.steps.c.created_at).where(S.steps.c.run_id == run_id, S.steps.c.ns == ns)
        if after is not None:
            q = q.where(S.steps.c.step > after)
        by_step: dict[int, list[dict]] = {}
        refs: set[str] = set()
        for r in self._read(q.order_by(S.steps.c.seq)):
            payload = expand_payload(unpack(r.payload), r.created_at)
            by_step.setdefault(r.step, []).append(payload)
            collect_refs([payload.get("t"), payload.get("r"), payload.get("e")] if writes else [payload.get("r"), payload.get("e")], refs)
        self.blobs(refs)  # one read for the whole namespace; the steps below decode from the cache
        out = []
        for i, info in enumerate(infos):
            nxt = infos[i + 1].nodes if i + 1 < len(infos) else []
            out.append(self._detail(info, by_step.get(info.step, []), list(nxt), typed, writes))
        return out

    @_damage_is_a_store_error
    def frames(self, run_id: str, ns: str = "") -> Iterator[tuple[int, dict[str, Any]]]:
        """``(step, encoded state)`` after each completed step, in order, in one pass.

        The values are still encoded (blob references unresolved), so a reader
        comparing two runs decodes only what changed; ``decode`` resolves them.
        Internal channels (branches, tasks) are left out.
        """
        q = (
            sa.select(S.steps.c.step, S.steps.c.is_key, S.steps.c.payload)
            .where(S.steps.c.run_id == run_id, S.steps.c.ns == ns, S.steps.c.flags.op("&")(FLAG_PENDING) == 0)
            .order_by(S.steps.c.seq)
        )
        state = FrameState()
        last: tuple[int, dict] | None = None
        for r in self._read(q):
            frame = unpack(r.payload).get("s")
            if frame is not None:
                state.apply(frame, bool(r.is_key))
            current = (r.step, {k: v for k, v in state.values.items() if not _internal_channel(k)})
            if last is not None and last[0] != r.step:
                yield last
            last = current
        if last is not None:
            yield last

    def _frame_rows(self, run_id: str, target: Any, ns: str, *, after_key: bool = False) -> tuple[int, list[Any]]:
        """``(keyframe seq, rows)``: the stored frames ``target``'s state is rebuilt from.

        The rows are its keyframe, then the deltas after it (only the deltas
        with ``after_key``, for a reader holding that keyframe already).
        """
        key = self._read(
            sa.select(sa.func.max(S.steps.c.seq)).where(S.steps.c.run_id == run_id, S.steps.c.ns == ns, S.steps.c.seq <= target.seq, S.steps.c.is_key.is_(True))
        )
        start = key[0][0] if key and key[0][0] is not None else 0
        first = S.steps.c.seq > start if after_key else S.steps.c.seq >= start
        return start, self._read(
            sa.select(S.steps.c.seq, S.steps.c.is_key, S.steps.c.payload)
            .where(
                S.steps.c.run_id == run_id,
                S.steps.c.ns == ns,
                first,
                S.steps.c.seq <= target.seq,
                S.steps.c.flags.op("&")(FLAG_PENDING) == 0,
            )
            .order_by(S.steps.c.seq)
        )

    def _state_row(self, run_id: str, step: int, ns: str) -> tuple[Any, Any]:
        """``(row of step, row whose state it shows)``: a pending step shows the state before it."""
        target = self._step_row(run_id, step, ns)
        if not target.flags & FLAG_PENDING:
            return target, target
        prev = self._read(
            sa.select(S.steps.c.seq)
            .where(S.steps.c.run_id == run_id, S.steps.c.ns == ns, S.steps.c.step < target.step, S.steps.c.flags.op("&")(FLAG_PENDING) == 0)
            .order_by(S.steps.c.seq.desc())
            .limit(1)
        )
        return target, (prev[0] if prev else None)

    def _frame_state(self, run_id: str, step: int, ns: str) -> tuple[Any, FrameState]:
        """The step's row and its encoded state, rebuilt from a keyframe and the deltas after it.

        The last few keyframes read are kept parsed: stepping through a run
        reads the same keyframe for many steps in a row, and a long history's
        keyframe is most of the work (and, as 11,000 short-lived objects per
        read, what made Python's full garbage collections frequent).
        """
        target, source = self._state_row(run_id, step, ns)
        state = FrameState(in_place=True)
        if source is None:
            return target, state
        cached = self._cached_keyframe(run_id, ns, source)
        start, rows = self._frame_rows(run_id, source, ns, after_key=cached is not None)
        if cached is not None and cached[0] == start:
            state.apply(cached[1], True)
        elif cached is not None:
            start, rows = self._frame_rows(run_id, source, ns)  # a keyframe was written since: read it
        for r in rows:
            frame = unpack(r.payload).get("s")
            if frame is None:
                continue
            state.apply(frame, bool(r.is_key))
            if r.is_key and r.seq == start:
                self._keep_keyframe(run_id, ns, start, frame)
        return target, state

    def _cached_keyframe(self, run_id: str, ns: str, source: Any) -> tuple[int, dict] | None:
        """The latest kept keyframe of this namespace at or before ``source``: ``(seq, frame)``."""
        with self._blob_lock:
            best = None
            for (r, n, seq), frame in self._keyframes.items():
                if r == run_id and n == ns and seq <= source.seq and (best is None or seq > best[0]):
                    best = (seq, frame)
            return best

    def _keep_keyframe(self, run_id: str, ns: str, seq: int, frame: dict) -> None:
        # Its lists point at the shared blob references: a kept keyframe costs its lists, not 11,000 dicts.
        frame = {**frame, "v": {ch: self._share_refs(v) if type(v) is list else v for ch, v in frame.get("v", {}).items()}}
        with self._blob_lock:
            self._keyframes[(run_id, ns, seq)] = frame
            self._keyframes.move_to_end((run_id, ns, seq))
            while len(self._keyframes) > KEYFRAMES_KEPT:
                self._keyframes.popitem(last=False)

    @_damage_is_a_store_error
    def state_reads(self, run_id: str, step: int, ns: str = "") -> int:
        """How many stored frames ``state_at`` reads for this step: one keyframe plus its deltas.

        Bounded by ``frames.MAX_CHAIN`` however long the run is; shown by
        diagnostics and pinned by the contract tests.
        """
        _, source = self._state_row(run_id, step, ns)
        return 0 if source is None else len(self._frame_rows(run_id, source, ns)[1])

    @_damage_is_a_store_error
    def state_at(self, run_id: str, step: int, ns: str = "", *, typed: bool = False, internal: bool = False, deferred: bool = False) -> dict[str, Any]:
        """The full graph state after ``step`` (random access: one keyframe plus deltas).

        ``deferred=True`` leaves each long top-level list (``DEFER_AT`` items or
        more) as a :class:`DeferredList` that decodes items when they are first
        read: a viewer showing a few messages of a long history pays for those.
        """
        _, fs = self._frame_state(run_id, step, ns)
        values = fs.values if internal else {k: v for k, v in fs.values.items() if not _internal_channel(k)}
        if not deferred or typed:
            return self.decode(values, typed=typed)
        long = {k: self._share_refs(v) for k, v in values.items() if type(v) is list and len(v) >= DEFER_AT}
        decoded = self.decode({k: v for k, v in values.items() if k not in long})
        return {k: DeferredList(long[k], self.decode) if k in long else decoded[k] for k in values}

    def _share_refs(self, items: list) -> list:
        """``items`` with each blob reference replaced by one object shared by every state read.

        Neighbouring states hold the same 11,000 references: shared, a cached
        state costs a list of pointers instead of 11,000 small dicts, and
        comparing two states' items finds most of them identical at once.
        """
        shared = self._shared_refs
        if len(shared) > SHARED_REFS:
            shared.clear()  # only a saving: references made before still work
        return [
            shared.setdefault(ref, i) if type(i) is dict and len(i) == 1 and type(ref := i.get(BLOB_REF)) is str else i
            for i in items
        ]

    @_damage_is_a_store_error
    def checkpoint_at(self, run_id: str, step: int, ns: str = "", *, typed: bool = True) -> Checkpoint:
        """The recorded checkpoint in LangGraph's shape, so a graph can resume from it."""
        row, fs = self._frame_state(run_id, step, ns)
        if row.checkpoint_id is None:
            raise StepNotFound(
                f"step {step} of run {run_id} has no checkpoint to resume from: it never completed, "
                "or the run was imported from a fixture, which keeps only its starting checkpoint"
            )
        return Checkpoint(
            checkpoint_id=row.checkpoint_id,
            parent_checkpoint_id=row.parent_checkpoint_id,
            ns=ns,
            step=row.step,
            source=row.source,
            channel_values=self.decode(fs.values, typed=typed),
            channel_versions=dict(fs.versions),
            versions_seen={k: dict(v) for k, v in fs.seen.items()},
        )

    # -- calls ---------------------------------------------------------------
    @_damage_is_a_store_error
    def calls(self, run_id: str, *, step: int | None = None, ns: str | None = None) -> list[CallInfo]:
        """Tool and model calls of a run, optionally of one step / namespace."""
        q = sa.select(S.calls).where(S.calls.c.run_id == run_id)
        if ns is not None:
            q = q.where(S.calls.c.ns == ns)
        if step is not None:
            q = q.where(S.calls.c.step == step)
        q = q.order_by(S.calls.c.started_at, S.calls.c.id)
        rows = self._read(q)
        # One decode for all of them: one blob read, and a message in many calls' inputs decoded once.
        try:
            decoded = self.decode([[_uj(r.inputs), _uj(r.output)] for r in rows])
        except StoreError as exc:
            raise StoreError(f"cannot decode a recorded call: {str(exc).removeprefix('cannot decode a recorded value: ')}") from None
        trees = [(i, o) for i, o in decoded]

        return [
            CallInfo(
                call_id=r.call_id,
                kind=r.kind,
                name=r.name,
                ns=r.ns,
                step=r.step,
                node=r.node,
                task_id=r.task_id,
                inputs=i,
                output=o,
                error_type=r.error_type,
                error_message=r.error_message,
                traceback=valid_frames(_uj(r.traceback)) if r.traceback else None,
                started_at=r.started_at,
                latency_ms=r.latency_ms,
                input_tokens=r.input_tokens,
                output_tokens=r.output_tokens,
                total_tokens=r.total_tokens,
                parent_call_id=r.parent_call_id,
                streamed=bool(r.streamed),
            )
            for r, (i, o) in zip(rows, trees)
        ]

    @_damage_is_a_store_error
    def call_counts(self, run_id: str, ns: str = "") -> dict[int, dict[str, int]]:
        """Per step: how many tool and model calls were made, and how many failed ("failed")."""
        failed = sa.func.sum(sa.case((S.calls.c.error_type.is_not(None), 1), else_=0))
        rows = self._read(
            sa.select(S.calls.c.step, S.calls.c.kind, sa.func.count(), failed)
            .where(S.calls.c.run_id == run_id, S.calls.c.ns == ns)
            .group_by(S.calls.c.step, S.calls.c.kind)
        )
        out: dict[int, dict[str, int]] = {}
        for step, kind, n, bad in rows:
            counts = out.setdefault(step, {})
            counts[kind] = n
            if bad:
                counts["failed"] = counts.get("failed", 0) + int(bad)
        return out

    # -- blobs and decoding --------------------------------------------------
    def blobs(self, hashes: Iterable[str]) -> dict[str, Any]:
        """Encoded blob trees by hash (cached; fetched in chunks).

        A blob can reference other blobs (a message whose content is a long
        string): those references are resolved inside the trees returned, so
        decoding a blob never needs another. Hashes not in the store are left
        out, and references to them stay as they are. Damaged nesting (a loop,
        deeper than the depth bound, or expanding to more than ``MAX_VALUES``
        values) raises ``StoreError``.
        """
        wanted = list(dict.fromkeys(hashes))
        trees: dict[str, Any] = {}
        fresh: list[str] = []  # read from the database by this call
        nesting: dict[str, set[str]] = {}  # fresh blob -> the blobs it references
        todo = wanted
        rounds = 0  # one per level of blobs inside blobs
        while todo:
            rounds += 1
            if rounds > MAX_DEPTH:
                raise StoreError(f"{self._safe_url()} holds damaged data (blobs reference blobs more than {MAX_DEPTH} levels deep)")
            missing = []
            with self._blob_lock:
                for h in todo:
                    hit = self._blob_cache.get(h)
                    if hit is not None:
                        trees[h] = hit  # cached trees are already resolved
                        self._blob_cache.move_to_end(h)
                    else:
                        missing.append(h)
            for i in range(0, len(missing), 500):
                chunk = missing[i : i + 500]
                for r in self._read(sa.select(S.blobs).where(S.blobs.c.hash.in_(chunk))):
                    data = bytes(r.data)
                    tree = unpack(b"z" + data if r.zipped else b"j" + data)
                    trees[r.hash] = tree
                    fresh.append(r.hash)
                    # Few blobs hold references: look for one in C before walking the tree in Python.
                    if type(tree) is not str and b'"$b"' in orjson.dumps(tree):
                        nesting[r.hash] = collect_refs(tree)
            todo = list({ref for h in missing for ref in nesting.get(h, ()) if ref not in trees})

        # A hand-edited store could loop, chain or multiply references without end. Loops
        # are refused; depth is counted across blobs; resolved blobs are shared, so each
        # costs one walk; and the values each expands to are counted, so that a few blobs
        # that each reference the next twice are refused rather than handed on.
        resolved: dict[str, Any] = {}
        weights: dict[str, int] = {}

        def resolve(h: str, seen: tuple[str, ...], depth: int) -> int:
            if h not in resolved:
                if h in nesting:
                    resolved[h], weights[h] = inline(trees[h], (*seen, h), depth)
                    if weights[h] > MAX_VALUES:
                        raise StoreError(f"{self._safe_url()} holds damaged data (blob {h:.16} expands to more than {MAX_VALUES:,} values through the blobs it references)")
                else:
                    resolved[h] = trees[h]
                    weights[h] = self._blob_weights.get(h) or count_values(trees[h])
            return weights[h]

        def inline(x: Any, seen: tuple[str, ...], depth: int) -> tuple[Any, int]:
            if depth > 3 * MAX_DEPTH:  # an envelope nests up to three JSON levels for one of the decoder's
                raise StoreError(f"{self._safe_url()} holds damaged data (blob {seen[0]:.16} nests blobs deeper than {3 * MAX_DEPTH} levels)")
            t = type(x)
            if t is list:
                out, n = [], len(x)
                for i in x:
                    v, w = inline(i, seen, depth + 1)
                    out.append(v)
                    n += w
                return out, n
            if t is not dict:
                return x, 0
            ref = x.get(BLOB_REF)
            if type(ref) is str and len(x) == 1:
                if ref in seen:  # content addressing makes a loop impossible in honest data
                    raise StoreError(f"{self._safe_url()} holds damaged data (blob {ref:.16} refers back to itself through {len(seen) - seen.index(ref)} blobs)")
                if ref not in trees:
                    return x, 1
                w = resolve(ref, seen, depth + 1)
                return resolved[ref], 1 + w
            d, n = {}, len(x)
            for k, v in x.items():
                d[k], w = inline(v, seen, depth + 1)
                n += w
            return d, n

        for h in fresh:
            resolve(h, (), 0)
        with self._blob_lock:
            for h in fresh:
                self._blob_cache[h] = resolved[h]
                if h in nesting:
                    self._blob_weights[h] = weights[h]
            while len(self._blob_cache) > 50_000:
                old, _ = self._blob_cache.popitem(last=False)
                self._blob_weights.pop(old, None)
        return {h: resolved.get(h, trees[h]) for h in wanted if h in trees}

    def decode(self, tree: Any, *, typed: bool = False) -> Any:
        """Resolve blob references and decode an encoded tree.

        Plain decoding keeps the decoded value of each blob (blobs never
        change), so neighbouring states decode only the messages they do not
        share; the values are shared between callers and must not be changed.
        Malformed recorded data (a damaged or hand-edited store, a registered
        type that changed) raises ``StoreError`` naming what failed.
        """
        refs = collect_refs(tree)
        try:
            if typed:
                return Decoder(self.blobs(refs), typed=True).decode(tree)
            memo = self._decoded_blobs
            decoded = memo.lookup(refs)
            blobs = self.blobs(refs.difference(decoded))
            value = Decoder(blobs, decoded=decoded).decode(tree)
            memo.keep({h: decoded[h] for h in blobs if h in decoded})
            return value
        except (DecodeError, TypeError, ValueError, AttributeError, KeyError) as exc:
            raise StoreError(f"cannot decode a recorded value: {_one_line(exc)}") from None

    def _typed_decoder(self, tree: Any) -> Any:
        return None if tree is None else self.decode(tree, typed=True)

    def _plain_decoder(self, tree: Any) -> Any:
        if tree is None:
            return None
        return self.decode(tree, typed=False)

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
        conn.execute(sa.insert(table), rows[start:end])
        start = end


def expand_payload(payload: dict, created_at: float) -> dict:
    """Undo the compact forms of a step payload: task indexes and start offsets.

    Rows store a route's or event's task as its index among the step's tasks
    ("ti") and a task's start as milliseconds before the checkpoint ("dt"),
    which keeps repeated 36-character ids and full timestamps out of every row.
    """
    if not isinstance(payload, dict) or not all(isinstance(payload.get(k, []), list) for k in ("t", "r", "e")):
        raise StoreError("damaged step payload: not a step's tasks, routes and events")
    if not all(isinstance(item, dict) for k in ("t", "r", "e") for item in payload.get(k, [])):
        raise StoreError("damaged step payload: a task, route or event is not a record")
    tasks = payload.get("t", [])
    for t in tasks:
        if "dt" in t:
            dt = t.pop("dt")
            if not isinstance(dt, (int, float)) or not isinstance(created_at, (int, float)):
                raise StoreError("damaged step payload: a task's start time is not a number")
            t["t0"] = created_at - dt / 1000
    ids = [t.get("id") for t in tasks]
    for item in (*payload.get("r", []), *payload.get("e", [])):
        if "ti" in item:
            i = item.pop("ti")
            item["task"] = ids[i] if isinstance(i, int) and 0 <= i < len(ids) else None
    return payload


def _internal_channel(name: str) -> bool:
    return name.startswith("branch:") or name.startswith("__") or ":" in name and name.split(":", 1)[0] in ("join", "start")


# An abandoned call (its node stopped waiting: a timeout) is found by the words people search for it.
ABANDONED_WORDS = ("abandoned", "timeout", "timed out", "time out", "gave up", "unfinished")


def _calls_matching(text: str, *, names: bool) -> Any:
    """Runs with a call that failed or was abandoned matching ``text`` (and, with ``names``, a call named like it)."""
    c = S.calls.c
    like = f"%{_escape_like(text)}%"
    found = [sa.and_(c.error_type.is_not(None), sa.or_(c.error_type.ilike(like, escape="\\"), c.error_message.ilike(like, escape="\\")))]
    if any(text.lower() in word for word in ABANDONED_WORDS):
        found.append(c.error_type == "Unfinished")
    if names:
        found.append(c.name.ilike(like, escape="\\"))
    return sa.select(c.run_id).where(sa.or_(*found))


def _escape_like(s: str) -> str:
    return s.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


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


def _one_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def open_store(db: str | os.PathLike | None = None, *, create: bool = False) -> SqlStore:
    """Open an existing store for reading (``create=True`` makes it if missing)."""
    return SqlStore(db, create=create)


__all__ = ["RunStore", "SqlStore", "open_store", "resolve_url", "Batch", "GcReport", "pack", "unpack"]

