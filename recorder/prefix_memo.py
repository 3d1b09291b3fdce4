"""Lists met before, with each item's result, so a list that grew is worked out only for its new end.

An agent's message history reaches the encoder several times per superstep
(the state, a router's input, every ``Send`` packet's copy of the state, each
model call's prompt), one message longer each time; a replay normalizes the
same histories to compare them. Walking each list item by item made recording
and replay cost grow with the square of a run's length. Here a list is matched
against the last few worked out (the same objects, in order, checked at C
speed) and only the items after the shared head are worked out.

Live messages can change in place (``add_messages`` gives a returned message
its id after it was encoded): with ``watch_messages`` a head is reused only
while its messages keep the ids and content lengths they had.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

MIN_LENGTH = 8  # shorter lists are worked out item by item: the memo would not pay
KEEP = 4  # lists remembered: the state's history, a prompt's copy, and their previous step's

_id_of = operator.attrgetter("id")
_content_of = operator.attrgetter("content")


class PrefixMemo:
    """The last few lists worked out, newest first, with their results."""

    __slots__ = ("_entries", "_watch")

    def __init__(self, *, watch_messages: bool = False) -> None:
        self._entries: list[_Entry] = []
        self._watch = watch_messages

    def clear(self) -> None:
        """Forget every list (end of run)."""
        self._entries.clear()

    def apply(self, items: list, per_item: Callable[[Any], Any], accept: Callable[[Any], bool] | None = None) -> list | None:
        """``[per_item(x) for x in items]``, reusing a remembered head; None if an item is not ``accept``-ed."""
        head: list = []
        start = 0
        for entry in self._entries:
            if entry.is_head_of(items):
                head, start = entry.results, len(entry.items)
                break
        tail = items[start:]
        if accept is not None and not all(map(accept, tail)):
            return None
        results = head + [per_item(x) for x in tail]
        entries = self._entries
        entries.insert(0, _Entry(list(items), results[:], self._watch))
        del entries[KEEP:]
        return results


class _Entry:
    __slots__ = ("items", "results", "marks")

    def __init__(self, items: list, results: list, watch: bool) -> None:
        self.items = items
        self.results = results
        self.marks = _marks(items) if watch else ()

    def is_head_of(self, items: list) -> bool:
        """The same objects start ``items`` (and, watched, none changed in place since)."""
        if self.marks is None or len(self.items) > len(items) or not all(map(operator.is_, self.items, items)):
            return False
        return not self.marks or _marks(self.items) == self.marks


def _marks(items: list) -> tuple[list, list] | None:
    try:
        return list(map(_id_of, items)), list(map(len, map(_content_of, items)))
    except Exception:  # noqa: BLE001 - an item without these: never reused
        return None
