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
from graphtape.recorder.store.upkeep import STALE_HEARTBEAT_S, Upkeep, _pid_alive, migrate_store  # noqa: F401
from graphtape.recorder.store.gc import GarbageCollection, Progress, _no_progress, GcReport  # noqa: F401


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


class SqlStore(Connection, SchemaGate, Writing, RunReads, RunListing, StepReads, StateReads, CallReads, BlobReads, Upkeep, GarbageCollection):
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


    # -- steps ---------------------------------------------------------------


    # -- calls ---------------------------------------------------------------


    # -- blobs and decoding --------------------------------------------------


    # -- maintenance ----------------------------------------------------------


    # -- housekeeping: gc and stats -------------------------------------------


def open_store(db: str | os.PathLike | None = None, *, create: bool = False) -> SqlStore:
    """Open an existing store for reading (``create=True`` makes it if missing)."""
    return SqlStore(db, create=create)


__all__ = ["RunStore", "SqlStore", "open_store", "resolve_url", "Batch", "GcReport", "pack", "unpack"]

