"""Fewer garbage collections while a replay runs.

A replay makes many short-lived containers (states, messages, callback
configs) that live just long enough to survive Python's youngest collections.
Each such survivor counts toward the next *full* collection, which walks every
object the process holds: with LangChain and LangGraph imported, about 90 ms.
A 101-superstep replay triggered one about every third replay, a tenth of its
time. With the youngest generation's threshold raised for the replay, young
collections run a thirtieth as often and almost nothing is promoted, while
cyclic garbage still cannot grow past the raised threshold before a collection.

The threshold is the process's, so nested and concurrent replays share one
raise: the first to enter raises it, the last to leave restores it (unless
someone else changed it meanwhile, whose setting then stands).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG_THRESHOLD = 20_000  # Python's default is 700

_lock = threading.Lock()
_depth = 0
_saved: tuple[int, ...] | None = None
_ours: tuple[int, ...] | None = None


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Raise the youngest generation's threshold for the duration (never lower it)."""
    global _depth, _saved, _ours
    with _lock:
        if _depth == 0:
            current = gc.get_threshold()
            if current[0] != 0 and current[0] < YOUNG_THRESHOLD:  # 0: collection is off; a higher one is kept
                _saved = current
                _ours = (YOUNG_THRESHOLD, *current[1:])
                gc.set_threshold(*_ours)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _saved is not None:
                if gc.get_threshold() == _ours:
                    gc.set_threshold(*_saved)
                _saved = _ours = None
