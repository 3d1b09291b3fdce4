"""Long lists in a recorded state, decoded item by item when first read.

A 10,000-step run's last state can hold 11,000 messages, each a blob. Showing
that state needs its length and the few messages on screen; comparing it with
the step before needs only the message that was added. ``DeferredList`` keeps
the encoded items (mostly blob references) and decodes a slice the first time
it is read, so opening and stepping cost what is shown, not what is stored.

Equal encoded items decode to equal values (blobs are content-addressed), so
equality and shared prefixes are worked out on the encoded items without
decoding anything.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, overload

from graphtape.recorder.errors import StoreError

DEFER_AT = 256  # lists this long or longer are deferred; shorter ones decode at once


class DeferredList(Sequence):
    """A read-only list whose items are decoded from ``encoded`` when first read.

    ``decode`` turns a list of encoded items into their values (the store's
    decoder, which may read blobs: call it off the UI thread). Decoded items are
    kept, so each is decoded once per list. Not a ``list`` subclass on purpose:
    code that needs every item says so with :meth:`materialize`.
    """

    __slots__ = ("encoded", "_decode", "_items")

    def __init__(self, encoded: list, decode: Callable[[list], list]) -> None:
        self.encoded = encoded
        self._decode = decode
        self._items: dict[int, Any] = {}  # index -> decoded item, for those read so far

    def __len__(self) -> int:
        return len(self.encoded)

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> list: ...
    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            start, stop, stride = index.indices(len(self))
            if stride != 1:
                return [self[i] for i in range(start, stop, stride)]
            return self.load(start, stop)
        n = len(self)
        i = index + n if index < 0 else index
        if not 0 <= i < n:
            raise IndexError("DeferredList index out of range")
        return self.load(i, i + 1)[0]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.load(0, len(self)))

    def load(self, start: int, stop: int) -> list:
        """Items ``start:stop`` decoded (one decoder call for those not read before)."""
        items = self._items
        todo = [i for i in range(start, stop) if i not in items]
        if todo:
            lo, hi = todo[0], todo[-1] + 1
            values = self._decode(self.encoded[lo:hi])
            if len(values) != hi - lo:
                raise StoreError(f"cannot decode a recorded list: items {lo}:{hi} gave {len(values)} values")
            for i, value in zip(range(lo, hi), values):
                items.setdefault(i, value)
        return [items[i] for i in range(start, stop)]

    def loaded(self, start: int, stop: int) -> bool:
        """Whether items ``start:stop`` are decoded already (reading them needs no store)."""
        return all(i in self._items for i in range(start, stop))

    def materialize(self) -> list:
        """Every item, as a plain list."""
        return self.load(0, len(self))

    def shared_prefix(self, other: DeferredList) -> int:
        """How many leading items the two lists share, compared encoded (nothing decoded)."""
        a, b = self.encoded, other.encoded
        n = min(len(a), len(b))
        i = 0
        while i < n and (a[i] is b[i] or a[i] == b[i]):
            i += 1
        return i

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DeferredList):
            if len(other) != len(self):
                return False
            k = self.shared_prefix(other)
            return k == len(self) or self.load(k, len(self)) == other.load(k, len(other))
        if isinstance(other, list):
            return len(other) == len(self) and self.materialize() == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<DeferredList of {len(self)} items, {len(self._items)} decoded>"


def materialized(value: Any) -> Any:
    """``value`` with every ``DeferredList`` in it (at the top or one level down) made a plain list."""
    if isinstance(value, DeferredList):
        return value.materialize()
    if isinstance(value, dict) and any(isinstance(v, DeferredList) for v in value.values()):
        return {k: v.materialize() if isinstance(v, DeferredList) else v for k, v in value.items()}
    return value


def json_default(value: Any) -> Any:
    """orjson's ``default`` for recorded values: deferred lists as lists, anything else as text."""
    if isinstance(value, DeferredList):
        return value.materialize()
    return str(value)


def is_list(value: Any) -> bool:
    """A list, deferred or not."""
    return isinstance(value, (list, DeferredList))
