"""A store that can be read but not written: how to open it, how to tell, and what to say.

SQLite: a file, folder or mount that is not writable is opened with
SQLite's read-only flags, never the normal way (which would need to write the
``-wal`` and ``-shm`` files beside it, and fails with "unable to open database
file"). A read-only opening never creates a file: with a ``-shm`` already
there (a writer has the store open) it reads through it (``mode=ro``); with
none, no writer has it open and the file is read as it is (``immutable=1``),
so nothing is left behind in a folder that belongs to someone else.

PostgreSQL: a role without INSERT on graphtape's tables, or a read-only
server (a standby), is found with one query the first time someone asks.

Commands that must write ask ``require_writable`` first and get one
``ReadOnlyStore`` line; a write that fails anyway is recognised by
``is_read_only_error``.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError

from graphtape.recorder.errors import ReadOnlyStore

# What SQLite and PostgreSQL say when a write meets a store it may only read.
_READ_ONLY_WORDS = (
    "readonly database",  # SQLite: attempt to write a readonly database
    "read-only transaction",  # PostgreSQL: a standby, or default_transaction_read_only
    "permission denied for",  # PostgreSQL: a role without INSERT/UPDATE/DELETE
    "read-only file system",
)
# SQLSTATE: read_only_sql_transaction, insufficient_privilege
_READ_ONLY_CODES = ("25006", "42501")


def is_read_only_error(exc: BaseException) -> bool:
    """Whether a failed write failed because the store may only be read."""
    orig = getattr(exc, "orig", None) or exc
    if getattr(orig, "sqlstate", None) in _READ_ONLY_CODES:
        return True
    text = str(orig).lower()
    return any(w in text for w in _READ_ONLY_WORDS)


def read_only_message(where: str, what: str) -> str:
    """One line: the store is read-only, what needed to write to it, and what to try."""
    return f"the store {where} is read-only: {what}, so it needs a store it can write to (pass --db, db= in Python, or get write access)"


class ReadOnlyAccess:
    """``read_only`` and ``require_writable`` for a store (``_read_only`` set when it was opened)."""

    _read_only: bool | None = None  # None: not known yet (PostgreSQL asks the server when first needed)

    @property
    def read_only(self) -> bool:
        """True when this store can be read but not written."""
        if self._read_only is None:
            self._read_only = self._server_read_only()
        return self._read_only

    def require_writable(self, what: str) -> None:
        """Raise ``ReadOnlyStore`` (one line naming ``what`` needed to write) if the store is read-only."""
        if self.read_only:
            raise ReadOnlyStore(read_only_message(self._safe_url(), what))

    def _server_read_only(self) -> bool:
        if self.is_sqlite:
            return False
        tables = ("runs", "steps", "calls", "blobs")
        checks = " AND ".join(f"has_table_privilege(to_regclass('{t}'), 'INSERT')" for t in tables)
        try:
            with self.engine.connect() as conn:
                ro, writable = conn.execute(sa.text(f"SELECT current_setting('transaction_read_only'), {checks}")).one()
        except SQLAlchemyError:
            return False  # cannot tell: let the write itself say
        return ro == "on" or not writable
