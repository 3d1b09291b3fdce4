"""Opening a server store without holding the program's start for a server that does not answer.

A PostgreSQL server that neither answers nor refuses (a hung host, a dropped route) holds a
connect for the whole connect timeout. ``Recorder(...)`` waits for the first open at most
``START_WAIT_S``; past that the open goes on in the background and the recorder starts with no
store, keeping rows for it as it does for a store that is down. The writer asks ``attempt``
again on each retry: it hands over that open once it succeeds, never blocks on it while it is
still waiting, and starts a fresh one once it has failed.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from graphtape.recorder.errors import StoreError

START_WAIT_S = 2.0

T = TypeVar("T")


class StillOpening(StoreError):
    """The store's open has not finished yet (its server has not answered)."""


class BackgroundOpen(Generic[T]):
    """One open at a time on a daemon thread; ``attempt`` never waits longer than it is told."""

    def __init__(self, opener: Callable[[], T], describe: str) -> None:
        self._opener = opener
        self._describe = describe
        self._lock = threading.Lock()
        self._failed: BaseException | None = None  # the last open's error, said again while the next one waits
        self._pending: _Pending[T] = self._start()

    def attempt(self, wait: float = 0.0) -> T:
        """The open store, waiting at most ``wait`` seconds; ``StillOpening`` while the server
        has not answered, the open's own error once it failed (the next call tries again)."""
        with self._lock:
            pending = self._pending
            if pending.taken or (pending.pid != os.getpid() and not pending.done.is_set()):
                # Handed over already, or begun before a fork (its thread is not in this process).
                pending = self._pending = self._start()
        if not pending.done.wait(wait):
            # Still waiting: the same fault as the try before it (one warning per problem), if any.
            if self._failed is not None:
                raise self._failed.with_traceback(None)  # raised again and again: no traceback piling up
            raise StillOpening(f"{self._describe}: no answer from the server yet")
        with self._lock:
            pending.taken = True  # a store is the caller's now; a failed open is tried afresh next time
            self._failed = pending.error
        if pending.error is not None:
            raise pending.error
        return pending.result  # type: ignore[return-value]

    def _start(self) -> _Pending[T]:
        pending: _Pending[T] = _Pending()

        def run() -> None:
            try:
                pending.result = self._opener()
            except BaseException as exc:  # noqa: BLE001 - handed to whoever asks next
                pending.error = exc
            pending.done.set()

        threading.Thread(target=run, name="graphtape-open", daemon=True).start()
        return pending


class _Pending(Generic[T]):
    """One open: its outcome once ``done`` is set."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.pid = os.getpid()
        self.result: T | None = None
        self.error: BaseException | None = None
        self.taken = False
