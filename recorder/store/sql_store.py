"""``SqlStore``: the ``RunStore`` over SQLAlchemy, one base class per concern.

Each base owns one job and the state it keeps (``blobs`` its cache,
``read_state`` its kept keyframes, ``writing`` its connection); they reach
each other only through ``self``: ``_read`` (``connection``) for every
query, ``decode`` (``blobs``) for every value, ``mark_dead_runs``
(``upkeep``) before a run's status is shown.
"""

from __future__ import annotations

import os

import sqlalchemy as sa

from graphtape.recorder.errors import ReadOnlyStore, StoreError
from graphtape.recorder.store.blobs import BlobReads
from graphtape.recorder.store.connection import Connection, resolve_url
from graphtape.recorder.store.gc import GarbageCollection
from graphtape.recorder.store.listing import RunListing
from graphtape.recorder.store.read_calls import CallReads
from graphtape.recorder.store.read_only import ReadOnlyAccess, read_only_message
from graphtape.recorder.store.read_runs import RunReads
from graphtape.recorder.store.read_state import StateReads
from graphtape.recorder.store.read_steps import StepReads
from graphtape.recorder.store.schema_version import SchemaGate
from graphtape.recorder.store.upkeep import Upkeep
from graphtape.recorder.store.urls import shown_url
from graphtape.recorder.store.writing import Writing


class SqlStore(Writing, RunReads, RunListing, StepReads, StateReads, CallReads, BlobReads, Upkeep, GarbageCollection, SchemaGate, ReadOnlyAccess, Connection):
    """``RunStore`` over SQLAlchemy (SQLite or PostgreSQL)."""

    def __init__(self, db: str | os.PathLike | None = None, *, create: bool = True, read_only: bool = False) -> None:
        self.url = resolve_url(db)
        self._begin(self._connect(create, read_only))
        self._check_schema(create)

    def _begin(self, engine: sa.engine.Engine) -> None:
        """What every store object keeps of its own around ``engine``: caches and a writing connection."""
        self.engine = engine
        self.is_sqlite = engine.dialect.name == "sqlite"
        self._init_blob_cache()
        self._init_state_cache()
        self._init_writing()

    @classmethod
    def beside(cls, other: SqlStore) -> SqlStore:
        """Another store on ``other``'s open database: its own writing connection and caches, ``other``'s engine.

        Opening a store makes an engine, connects and checks the schema: about 3 ms that a
        replay paid for the recorder of its replay, on the store it had just opened. This
        skips all three. Closing it closes its own connection; the engine stays ``other``'s.
        """
        store = cls.__new__(cls)
        store.url, store._read_only, store._owns_engine = other.url, other._read_only, False
        store._begin(other.engine)
        return store


def open_store(db: str | os.PathLike | None = None, *, create: bool = False, read_only: bool = False) -> SqlStore:
    """Open an existing store for reading (``create=True`` makes it if missing).

    A store that cannot be written opens read-only by itself (``store.read_only``);
    ``read_only=True`` asks for that even when it could be written.
    """
    return SqlStore(db, create=create, read_only=read_only)


def open_for_writing(db: str | os.PathLike | None = None) -> SqlStore:
    """Open (or create) a store to record into; ``ReadOnlyStore`` if it can only be read (a passing fault
    for the recorder, which keeps trying: a store opened read-only would stay so)."""
    return for_writing(SqlStore(db, create=True))


def for_writing(store: SqlStore) -> SqlStore:
    """``store``, to record into; ``ReadOnlyStore`` (and ``store`` closed) if it can only be read."""
    if store.is_sqlite and store.read_only:
        where = store._safe_url()
        store.close()
        raise ReadOnlyStore(read_only_message(where, "recording writes runs"))
    return store


def is_not_a_store(exc: StoreError) -> bool:
    """Whether opening failed on what the store is (a damaged file, another program's data), not on a passing fault."""
    text = str(exc).lower()
    return "not a database" in text or "malformed" in text or "not a graphtape database" in text or "not a store as graphtape makes it" in text
