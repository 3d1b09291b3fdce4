"""``SqlStore``: the ``RunStore`` over SQLAlchemy, one base class per concern.

Each base owns one job and the state it keeps (``blobs`` its cache,
``read_state`` its kept keyframes, ``writing`` its connection); they reach
each other only through ``self``: ``_read`` (``connection``) for every
query, ``decode`` (``blobs``) for every value, ``mark_dead_runs``
(``upkeep``) before a run's status is shown.
"""

from __future__ import annotations

import os

from graphtape.recorder.store.blobs import BlobReads
from graphtape.recorder.store.connection import Connection, resolve_url
from graphtape.recorder.store.gc import GarbageCollection
from graphtape.recorder.store.listing import RunListing
from graphtape.recorder.store.read_calls import CallReads
from graphtape.recorder.store.read_only import ReadOnlyAccess
from graphtape.recorder.store.read_runs import RunReads
from graphtape.recorder.store.read_state import StateReads
from graphtape.recorder.store.read_steps import StepReads
from graphtape.recorder.store.schema_version import SchemaGate
from graphtape.recorder.store.upkeep import Upkeep
from graphtape.recorder.store.writing import Writing


class SqlStore(Writing, RunReads, RunListing, StepReads, StateReads, CallReads, BlobReads, Upkeep, GarbageCollection, SchemaGate, ReadOnlyAccess, Connection):
    """``RunStore`` over SQLAlchemy (SQLite or PostgreSQL)."""

    def __init__(self, db: str | os.PathLike | None = None, *, create: bool = True, read_only: bool = False) -> None:
        self.url = resolve_url(db)
        self._init_blob_cache()
        self._init_state_cache()
        self.engine = self._connect(create, read_only)
        self.is_sqlite = self.engine.dialect.name == "sqlite"
        self._init_writing()
        self._check_schema(create)


def open_store(db: str | os.PathLike | None = None, *, create: bool = False, read_only: bool = False) -> SqlStore:
    """Open an existing store for reading (``create=True`` makes it if missing).

    A store that cannot be written opens read-only by itself (``store.read_only``);
    ``read_only=True`` asks for that even when it could be written.
    """
    return SqlStore(db, create=create, read_only=read_only)
