"""What a store's write error means for the user's run, said beside the driver's own words.

``database is locked`` or ``disk I/O error`` alone leaves the reader asking whether the run
failed and whether the recording is gone: neither is (the rows are kept and retried, and
rescued at close if the store never takes them). The driver's text stays first: it is what
a search for the problem finds.
"""

from __future__ import annotations

from graphtape.recorder.errors import GraphtapeError

_KEPT = "the run goes on, and its rows are kept and written once the store takes them (or saved to a rescue file at close)"

# (what the error says, lower-cased; what it means)
_MEANINGS = (
    (("database is locked", "database table is locked"), "another connection holds the SQLite file's write lock"),
    (("database or disk is full", "no space left on device", "disk full"), "the disk is full"),
    (("disk quota exceeded",), "the disk quota is used up"),
    (("file too large",), "the file reached the largest size this process may write"),
    (("attempt to write a readonly database", "read-only file system", "cannot execute insert in a read-only transaction"), "the store is read-only"),
    (("disk i/o error",), "the disk refused a write (full, removed or failing)"),
    (("server closed the connection", "terminating connection", "connection already closed", "the connection is closed", "consuming input failed"), "the connection to the database server was lost"),
    (("connection refused", "could not connect to server", "connection failed", "timeout expired", "could not translate host name"), "the database server cannot be reached"),
)


def fault_hint(exc: BaseException) -> str:
    """``: what happened; what becomes of the run`` for a driver's write error graphtape knows,
    else ``""`` (graphtape's own errors say it themselves)."""
    if isinstance(exc, GraphtapeError):
        return ""
    text = str(exc).lower()
    for signs, meaning in _MEANINGS:
        if any(sign in text for sign in signs):
            return f": {meaning}; {_KEPT}"
    return ""
