"""The one store API: everything reads and writes runs through ``RunStore``.

``SqlStore`` implements it with SQLAlchemy Core over SQLite (the zero-setup
default, WAL mode) or PostgreSQL (a SQLAlchemy URL). Blobs are content
addressed, so a message that sits in every step's state is stored once.

One module per concern; ``sql_store`` puts them together:

- ``contract``: ``RunStore``, the protocol the contract tests hold every backend to.
- ``connection``: URLs, opening the engine, reads. ``schema_version``: a new
  store's schema, or the version check of an existing one. ``compiled_cache``:
  compiled SQL, shared by every SQLite store a process opens.
- ``writing``: where runs, supersteps, calls and blobs are written (``Batch``), and which
  write failures pass (kept and retried by the recorder's writer). ``column_text``: any
  string in a text column (NUL, lone surrogates), reversibly.
- ``read_runs``: one run and its details. ``listing``: runs listed, filtered, counted.
- ``read_steps``: supersteps (tasks, routes, events); ``previews`` cuts what a listing shows
  of their values before it is read. ``read_state``: the state
  and the checkpoint at a step. ``read_calls``: tool and model calls.
- ``blobs``: content-addressed values, read, cached and decoded.
- ``payloads``: the bytes of payloads and blobs. ``quick_listing``: ``list_runs`` of a SQLite file
  through the standard library (no SQLAlchemy), for ``graphtape runs``. ``read_guard``: what one read
  may inflate, and damage as one ``StoreError``.
- ``upkeep``: dead runs, deleting a run, stats, migrating. ``gc``: old runs,
  rows whose run is missing, and the blobs nothing reaches any more.

The names below are what other modules import from ``graphtape.recorder.store``.
"""

# Re-exported: the recorder, replay, the TUI, tests and benchmarks import these from here. Each
# loads on first use, so a reader that needs no SQLAlchemy (``quick_listing``: ``graphtape runs`` on a
# SQLite file) does not pay for it by importing this package.
from graphtape.recorder.lazy import lazy_exports

_WHERE = {
    **dict.fromkeys(("DEFAULT_DB", "ENV_DB", "_one_line", "_sqlite_path", "resolve_url"), "graphtape.recorder.store.connection"),
    "shown_url": "graphtape.recorder.store.urls",
    "RunStore": "graphtape.recorder.store.contract",
    **dict.fromkeys(("GcReport", "Progress", "_no_progress"), "graphtape.recorder.store.gc"),
    "ABANDONED_WORDS": "graphtape.recorder.store.listing",
    **dict.fromkeys(("MAX_INFLATE", "expand_payload", "merge_events", "pack", "squeeze", "unpack"), "graphtape.recorder.store.payloads"),
    **dict.fromkeys(("MAX_READ_BYTES", "ReadBudget", "read_budget"), "graphtape.recorder.store.read_guard"),
    "MAX_INT": "graphtape.recorder.store.read_runs",
    **dict.fromkeys(("KEYFRAMES_KEPT", "SHARED_REFS"), "graphtape.recorder.store.read_state"),
    **dict.fromkeys(("SqlStore", "open_store"), "graphtape.recorder.store.sql_store"),
    **dict.fromkeys(("STALE_HEARTBEAT_S", "migrate_store"), "graphtape.recorder.store.upkeep"),
    **dict.fromkeys(("Batch", "is_duplicate", "is_lock_conflict", "is_passing"), "graphtape.recorder.store.writing"),
}

__all__ = ["RunStore", "SqlStore", "open_store", "resolve_url", "Batch", "GcReport", "pack", "unpack"]
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
