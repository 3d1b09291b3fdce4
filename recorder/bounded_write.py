"""A ``sync`` commit to a server store, waited for at most a bound, on a thread of its own.

``sync`` commits each superstep before the run goes on, and waits for a locked store at most
``lock_wait`` seconds. A server that stops answering in the middle of a commit (a hung host, a
dropped route: no error, no refusal) would hold the caller in the driver's read for as long as
the network lets it, which no lock timeout covers. So for a store over the network the commit
runs here, and the caller waits for it no longer than a locked store would make it wait: past
that the run goes on, and the commit finishes (or fails, and its rows are kept) when the server
answers, or is said lost when the recorder closes.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable


class BoundedWrites:
    """One daemon thread running commits handed to it, one at a time."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[Callable[[], bool], list[bool], threading.Event]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self.busy = False  # a commit is under way (and maybe held by a silent server)
        self.idle = threading.Event()  # set while no commit is under way (``close`` waits on it)
        self.idle.set()

    def run(self, commit: Callable[[], bool], wait: float) -> bool | None:
        """``commit()``'s result, or ``None`` if it has not finished after ``wait`` seconds."""
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._serve, name="graphtape-sync-commit", daemon=True)
            self._thread.start()
        done = threading.Event()
        box: list[bool] = []
        self._queue.put((commit, box, done))
        if not done.wait(wait):
            return None
        return box[0] if box else False

    def _serve(self) -> None:
        while True:
            commit, box, done = self._queue.get()
            self.busy = True
            self.idle.clear()
            try:
                box.append(commit())
            except BaseException:  # noqa: BLE001 - the commit keeps its rows itself; nothing ends this thread
                box.append(False)
            finally:
                self.busy = False
                self.idle.set()
                done.set()
