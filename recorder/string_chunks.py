"""Very long strings stored as fixed-size chunks, so a string that grew or changed in one place stores only what changed.

A state key holding a long text (a transcript, a draft, a log appended to each
superstep) was stored whole, as one blob, every time it changed: 5 MB grown by
one line per superstep stored 0.7 MB and spent 0.2 s compressing, each step.
Here a string longer than ``CHUNKED_AT`` is cut into ``CHUNK``-character pieces,
each a content-addressed blob; the value is a blob holding
``{"$t": "scat", "v": [ref, ...]}``. A string that grew at its end shares every
full chunk with the one before; one changed in place shares all but the
chunk that changed. The whole string is scrubbed before it is cut, so a secret
across a cut is found as before, and reading gives back exactly that string.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

SCAT = "scat"  # the envelope kind: a string stored as the concatenation of its chunks
CHUNK = 64 * 1024  # characters per chunk
CHUNKED_AT = 2 * CHUNK  # shorter strings are one blob, as before
MEMO_CHARS = 64 * 1024 * 1024  # characters of chunks remembered per run before starting afresh
# A decoded string is at most this long: chunk references repeated by a damaged or hostile
# store would otherwise join into gigabytes from a few kilobytes of references.
MAX_JOINED = 256 * 1024 * 1024

_ENVELOPE = "$t"  # as codec.ENVELOPE and codec.BLOB_REF (codec imports this module)
_BLOB_REF = "$b"


class StringChunks:
    """Cuts long strings into chunks for one run, remembering the chunks it has stored."""

    __slots__ = ("_put", "_known", "_chars")

    def __init__(self, put: Callable[[bytes], str]) -> None:
        self._put = put
        self._known: dict[str, str] = {}  # a chunk's text -> its blob hash
        self._chars = 0

    def clear(self) -> None:
        """Forget the chunks stored (end of run)."""
        self._known.clear()
        self._chars = 0

    def encode(self, text: str) -> dict:
        """The reference to ``text`` (longer than ``CHUNKED_AT``, already scrubbed) stored as chunks."""
        if self._chars > MEMO_CHARS:
            self.clear()  # only a saving: a chunk met again is stored again, under the same hash
        parts = [{_BLOB_REF: self._chunk(text[i : i + CHUNK])} for i in range(0, len(text), CHUNK)]
        return {_BLOB_REF: self._put(orjson.dumps({_ENVELOPE: SCAT, "v": parts}))}

    def _chunk(self, piece: str) -> str:
        known = self._known.get(piece)
        if known is None:
            known = self._known[piece] = self._put(orjson.dumps(piece))
            self._chars += len(piece)
        return known


def is_scat(tree: Any) -> bool:
    """Whether an encoded tree is a string stored as chunks."""
    return type(tree) is dict and tree.get(_ENVELOPE) == SCAT


def joined(pieces: list[Any]) -> tuple[str, int]:
    """``(the string, characters repeated)`` of a chunked string's decoded pieces.

    Raises ``ValueError`` for a piece that is not a string or a string longer than ``MAX_JOINED``.
    The repeated characters are those of pieces met again (the same object, as a store's
    blob cache hands one blob out): what a reader should charge beyond the blobs it read.
    """
    seen: set[int] = set()
    total = repeated = 0
    for piece in pieces:
        if type(piece) is not str:
            raise ValueError(f"a chunk is {type(piece).__name__}, not a string")
        total += len(piece)
        if id(piece) in seen:
            repeated += len(piece)
        seen.add(id(piece))
        if total > MAX_JOINED:
            raise ValueError(f"it joins into more than {MAX_JOINED:,} characters")
    return "".join(pieces), repeated
