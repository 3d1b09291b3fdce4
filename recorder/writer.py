"""Gets recorded work into the store, in the background or right away.

Work items are callables that encode live values and return a ``Batch``;
running them on the writer thread keeps encoding off the graph's thread in the
default mode. In ``sync`` mode the same item runs and commits before the
caller returns. Write failures (locked database, full disk, deleted file) are
retried briefly, then reported to ``on_fault``; they never reach the graph.
"""

from __future__ import annotations

import atexit
import queue
import threading
import time
import weakref
from collections.abc import Callable

from sqlalchemy.exc import OperationalError

from recorder.store import Batch, RunStore

Work = Callable[[], Batch | None]
FaultHandler = Callable[[Exception, Batch | None], None]

_RETRIES = 5
_MAX_GROUP = 400
_GATHER_S = 0.025


class Writer:
    """Serializes work items into store transactions."""

    def __init__(self, store: RunStore, *, background: bool, on_fault: FaultHandler) -> None:
        self.store = store
        self.background = background
        self.on_fault = on_fault
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[Work | None | threading.Event] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._closed = False
        if background:
            self._thread = threading.Thread(target=self._loop, name="graphtape-writer", daemon=True)
            self._thread.start()
            _live_writers.add(self)

    def submit(self, work: Work) -> None:
        """Queue work (background) or run and commit it now (sync)."""
        if self._closed:
            return
        if self.background:
            self._queue.put(work)
            return
        with self._lock:
            batch = self._run(work)
            if batch:
                self._commit(batch)

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Wait until everything submitted so far is committed."""
        if not self.background or self._thread is None or not self._thread.is_alive():
            return True
        done = threading.Event()
        self._queue.put(done)
        return done.wait(timeout)

    def close(self, timeout: float | None = 30.0) -> None:
        """Flush and stop the background thread."""
        if self._closed:
            return
        self.flush(timeout)
        self._closed = True
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout)
        _live_writers.discard(self)

    # -- internals -----------------------------------------------------------
    def _run(self, work: Work) -> Batch | None:
        try:
            return work()
        except Exception as exc:  # noqa: BLE001 - counted, never raised into the graph
            self.on_fault(exc, None)
            return None

    def _commit(self, batch: Batch) -> None:
        delay = 0.05
        for attempt in range(_RETRIES):
            try:
                self.store.write(batch)
                return
            except OperationalError as exc:
                if "locked" in str(exc).lower() and attempt < _RETRIES - 1:
                    time.sleep(delay)
                    delay *= 2
                    continue
                self.on_fault(exc, batch)
                return
            except Exception as exc:  # noqa: BLE001
                self.on_fault(exc, batch)
                return

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            events: list[threading.Event] = []
            stop = False
            group = Batch()
            deadline = time.monotonic() + _GATHER_S
            while True:
                if item is None:
                    stop = True
                elif isinstance(item, threading.Event):
                    events.append(item)
                else:
                    got = self._run(item)
                    if got:
                        group.merge(got)
                if stop or events or len(group.steps) + len(group.calls) >= _MAX_GROUP:
                    break
                # Gather a little before committing: one transaction per ~25 ms of
                # work, not one per superstep (a flush or close ends the wait).
                left = deadline - time.monotonic()
                try:
                    item = self._queue.get(timeout=left) if left > 0 else self._queue.get_nowait()
                except queue.Empty:
                    break
            if group:
                self._commit(group)
            for e in events:
                e.set()
            if stop:
                return


_live_writers: weakref.WeakSet[Writer] = weakref.WeakSet()


@atexit.register
def _flush_at_exit() -> None:
    for w in list(_live_writers):
        try:
            w.close(timeout=10)
        except Exception:  # noqa: BLE001 - never fail interpreter shutdown
            pass
