"""Errors graphtape raises, each meant to be shown to a person in one line."""

from __future__ import annotations


class GraphtapeError(Exception):
    """Base class: every graphtape error carries a message fit for one console line."""


class StoreError(GraphtapeError):
    """The store cannot be opened or read (bad path, corrupt file, unreachable server)."""


class ReadOnlyStore(StoreError):
    """The store can be read but not written (a read-only file, folder, mount or database role)."""


class ReadTooLarge(StoreError):
    """One read would inflate and build more than its budget (``store.read_guard``): a damaged
    or crafted store, or an honest run too large to be read whole (read a part of it)."""


class SchemaVersionError(StoreError):
    """The database was written by a schema this graphtape does not understand."""


class RunNotFound(GraphtapeError):
    """No run matches the given id, prefix or alias."""


class AmbiguousRun(GraphtapeError):
    """An id prefix matches more than one run."""


class StepNotFound(GraphtapeError):
    """The run has no such superstep (in that namespace)."""


class RecorderFault(GraphtapeError):
    """Recording failed; raised only in strict mode, otherwise counted on the run."""
