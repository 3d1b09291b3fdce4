"""psycopg's warnings about graphtape's own connections, kept off the user's terminal.

When the server drops a connection in the middle of a write (a restart,
``pg_terminate_backend``), psycopg raises the error, which graphtape handles
(the rows are kept and written again on a new connection), and also logs
``error ignored terminating <psycopg.Pipeline [BAD]>`` on its ``psycopg``
logger, unprefixed, on stderr. That line is about graphtape's connection and
tells the user nothing the recorder does not. So while graphtape writes, on
the thread that writes, psycopg's warnings are dropped; the program's own
connections, on any other thread or at any other moment, log as they always did.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["own_writes"]

_state = threading.local()
_install_lock = threading.Lock()
_installed = False


class _DropDuringOwnWrites(logging.Filter):
    """Drops psycopg's warnings raised on a thread while graphtape writes there."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno < logging.WARNING or not getattr(_state, "writing", False)


def _install() -> None:
    global _installed
    with _install_lock:
        if not _installed:
            logging.getLogger("psycopg").addFilter(_DropDuringOwnWrites())
            _installed = True


@contextmanager
def own_writes() -> Iterator[None]:
    """Mark the code inside as graphtape writing on its own connection (on this thread)."""
    _install()
    outer = getattr(_state, "writing", False)
    _state.writing = True
    try:
        yield
    finally:
        _state.writing = outer
