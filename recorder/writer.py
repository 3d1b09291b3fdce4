"""Gets recorded work into the store, in the background or right away.

Work items are callables that encode live values and return a ``Batch``;
running them on the writer thread keeps encoding off the graph's thread in the
default mode. In ``sync`` mode the same item runs and commits before the
caller returns. Write failures (locked database, full disk, deleted file) are
retried briefly, then reported to ``on_fault``; they never reach the graph.
A SQLite file deleted or replaced while recording is noticed before each
commit: SQLite would go on writing into the deleted file without a word.
"""

from __future__ import annotations

import atexit
import os
import queue
import threading
import time
import weakref
from collections.abc import Callable

from graphtape.recorder.errors import StoreError
from graphtape.recorder.store import Batch, RunStore, _sqlite_path, is_lock_conflict

Work = Callable[[], Batch | None]
FaultHandler = Callable[[Exception, Batch | None], None]

_RETRIES = 5
# A "locked" error that came back this fast was not SQLite's busy timeout running out
# (a stale read snapshot, a lock upgrade conflict): worth another try. One that took
# longer already waited the whole timeout; trying again would only stall a sync graph.
_QUICK_FAILURE_S = 1.0
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
        self._file = _file_identity(store)
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
        except (KeyboardInterrupt, SystemExit):
            if not self.background:
                raise  # sync mode runs on the graph's thread: Ctrl+C stops the program
            self.on_fault(RuntimeError("encoding was interrupted"), None)
            return None
        except BaseException as exc:  # noqa: BLE001 - counted, never raised into the graph, never the end of the writer
            self.on_fault(exc, None)  # type: ignore[arg-type]
            return None

    def _commit(self, batch: Batch) -> None:
        gone = self._file_gone()
        if gone:
            self.on_fault(StoreError(gone), batch)
            return
        delay = 0.05
        for attempt in range(_RETRIES):
            started = time.monotonic()
            try:
                self.store.write(batch)
                return
            except Exception as exc:  # noqa: BLE001 - counted, never raised into the graph
                quick = time.monotonic() - started < _QUICK_FAILURE_S
                if is_lock_conflict(exc) and quick and attempt < _RETRIES - 1:
                    time.sleep(delay)
                    delay *= 2
                    continue
                self.on_fault(exc, batch)
                return

    def _file_gone(self) -> str | None:
        """Why the SQLite file being recorded into is no longer at its path, if it is not."""
        if self._file is None:
            return None
        path, ident = self._file
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return f"the database file {path} was deleted while recording; nothing more is written to it"
        except OSError:
            return None  # cannot tell: let SQLite say what is wrong
        if (st.st_dev, st.st_ino) != ident:
            return f"the database file {path} was replaced while recording; nothing more is written to it"
        return None

    def _loop(self) -> None:
        while True:
            try:
                if self._serve_one():
                    return
            except BaseException as exc:  # noqa: BLE001 - the thread must outlive any one batch: later runs depend on it
                try:
                    self.on_fault(exc, None)  # type: ignore[arg-type]
                except BaseException:  # noqa: BLE001
                    pass

    def _serve_one(self) -> bool:
        """Run and commit one group of queued work; ``True`` once asked to stop."""
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
        try:
            if group:
                self._commit(group)
        finally:
            for e in events:
                e.set()
        return stop


def _file_identity(store: RunStore) -> tuple[str, tuple[int, int]] | None:
    path = _sqlite_path(getattr(store, "url", ""))
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return str(path), (st.st_dev, st.st_ino)


_live_writers: weakref.WeakSet[Writer] = weakref.WeakSet()


@atexit.register
def _flush_at_exit() -> None:
    for w in list(_live_writers):
        try:
            w.close(timeout=10)
        except Exception:  # noqa: BLE001 - never fail interpreter shutdown
            pass
