"""The one store API: everything reads and writes runs through ``RunStore``.

``SqlStore`` implements it with SQLAlchemy Core over SQLite (the zero-setup
default, WAL mode) or PostgreSQL (a SQLAlchemy URL). Blobs are content
addressed, so a message that sits in every step's state is stored once.

One module per concern; ``sql_store`` puts them together:

- ``contract``: ``RunStore``, the protocol the contract tests hold every backend to.
- ``connection``: URLs, opening the engine, reads. ``schema_version``: a new
  store's schema, or the version check of an existing one.
- ``writing``: where runs, supersteps, calls and blobs are written (``Batch``).
- ``read_runs``: one run and its details. ``listing``: runs listed, filtered, counted.
- ``read_steps``: supersteps (tasks, routes, events). ``read_state``: the state
  and the checkpoint at a step. ``read_calls``: tool and model calls.
- ``blobs``: content-addressed values, read, cached and decoded.
- ``payloads``: the bytes of payloads and blobs. ``read_guard``: what one read
  may inflate, and damage as one ``StoreError``.
- ``upkeep``: dead runs, deleting a run, stats, migrating. ``gc``: old runs and
  the blobs nothing reaches any more.

The names below are what other modules import from ``graphtape.recorder.store``.
"""

# Re-exported: the recorder, replay, the TUI, tests and benchmarks import these from here.
from graphtape.recorder.store.connection import DEFAULT_DB, ENV_DB, _one_line, _sqlite_path, resolve_url  # noqa: F401
from graphtape.recorder.store.urls import shown_url  # noqa: F401
from graphtape.recorder.store.contract import RunStore
from graphtape.recorder.store.gc import GcReport, Progress, _no_progress  # noqa: F401
from graphtape.recorder.store.listing import ABANDONED_WORDS  # noqa: F401
from graphtape.recorder.store.payloads import MAX_INFLATE, expand_payload, pack, squeeze, unpack  # noqa: F401
from graphtape.recorder.store.read_guard import MAX_READ_BYTES, ReadBudget, read_budget  # noqa: F401
from graphtape.recorder.store.read_runs import MAX_INT  # noqa: F401
from graphtape.recorder.store.read_state import KEYFRAMES_KEPT, SHARED_REFS  # noqa: F401
from graphtape.recorder.store.sql_store import SqlStore, open_store
from graphtape.recorder.store.upkeep import STALE_HEARTBEAT_S, migrate_store  # noqa: F401
from graphtape.recorder.store.writing import Batch, is_duplicate, is_lock_conflict, is_passing  # noqa: F401

__all__ = ["RunStore", "SqlStore", "open_store", "resolve_url", "Batch", "GcReport", "pack", "unpack"]
