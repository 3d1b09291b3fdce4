"""Where the brackets opened in one text close, remembered across the asks about that text.

Redaction asks where an object or list under a secret key closes, for every such key in a
text. Asked afresh each time, text of keys whose brackets never close (``{"password": ``
many times over) has every ask read to the end of the text: time quadratic in its length,
minutes for a megabyte. A scan here remembers where each bracket it passes closes, or that
it never does, and a later scan steps over a remembered bracket at once: reading the text
costs time linear in its length.
"""

from __future__ import annotations

SCAN = 1 << 20  # an object under a secret key longer than this is left to the other rules

_OPENING = frozenset(b"{[(")
_CLOSING = frozenset(b"}])")
_QUOTES = frozenset(b"\"'")
_BACKSLASH = 0x5C
_UNKNOWN = -1


class BracketEnds:
    """Where brackets opening in ``data`` close. Quoted text is skipped, escapes too; any
    closing bracket closes any opening one (text in the wild is not always well formed)."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._ends: dict[int, int | None] = {}  # an opening bracket's index: its closing one's, or None: never

    def end(self, at: int) -> int | None:
        """The index of the bracket closing the one at ``at``, or None when it does not close
        within ``SCAN`` bytes."""
        known = self._ends.get(at, _UNKNOWN)
        if known != _UNKNOWN:
            return known
        data, ends = self._data, self._ends
        if data[at : at + 1] not in (b"{", b"[", b"("):
            return None
        # A scan from any bracket it passes outside quotes is this scan from there on (its state
        # is the quote it is in and its depth): where that bracket closes is known for good.
        stack: list[int] = []
        never = False
        quote = 0
        i, limit = at, min(len(data), at + SCAN)
        while i < limit:
            c = data[i]
            if quote:
                if c == _BACKSLASH:
                    i += 1
                elif c == quote:
                    quote = 0
            elif c in _QUOTES:
                quote = c
            elif c in _OPENING:
                known = ends.get(i, _UNKNOWN) if i != at else _UNKNOWN
                if known is None:  # it never closes (in its window), so neither does any bracket around it
                    never = True
                    break
                if known != _UNKNOWN:
                    i = known  # its closing bracket: the depth here is the depth before it
                else:
                    stack.append(i)
            elif c in _CLOSING:
                opened = stack.pop()
                ends[opened] = i
                if not stack:
                    return i
            i += 1
        if never or i >= len(data):
            # None says "not within its window": a bracket before it, whose window ends sooner,
            # does not close within its own either.
            for opened in stack:
                ends[opened] = None
        else:
            ends[at] = None  # this one's window ended; those inside it may still close in theirs
        return None
