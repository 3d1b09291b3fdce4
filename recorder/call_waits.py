"""Which calls a graph is likely to wait on: the moments the background writer is woken.

A model, tool or store call that took a while last time (a network round trip, a
subprocess) will likely take a while again, and an HTTP request always may: while
the graph waits on it the writer has the interpreter to itself. A call seen for the
first time counts as slow. A scripted or cached model answers in microseconds, so
a graph made of such calls is busy on the CPU and is left alone until it ends.
"""

from __future__ import annotations

from graphtape.recorder.http_exchange import HTTP

SLOW_MS = 5.0
_MAX_NAMES = 1024


class CallWaits:
    """The last duration of each (kind, name) of call, shared by a recorder's runs."""

    def __init__(self) -> None:
        self._last_ms: dict[tuple[str, str], float] = {}

    def may_wait(self, kind: str, name: str) -> bool:
        if kind == HTTP:
            return True
        last = self._last_ms.get((kind, name))
        return last is None or last >= SLOW_MS

    def took(self, kind: str, name: str, ms: float | None) -> None:
        if ms is None:
            return
        if len(self._last_ms) >= _MAX_NAMES:
            self._last_ms.clear()  # many distinct names (generated ones): start over, never grow
        self._last_ms[(kind, name)] = ms
