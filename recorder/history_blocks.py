"""Long message histories stored as shared blocks, so a history that grew stores only its new end.

A model's prompt and every ``Send`` packet carry the whole history. Stored as
a list of message references, each copy costs about 40 bytes per message, so
an agent's bytes per superstep grew with its history (64 KB per superstep at
1,000 messages on ``create_react_agent``). Here a history of ``BLOCK_AT`` items
or more is cut, from its start, into aligned blocks whose sizes are powers of
two (``LEAF`` items at the smallest); each block is a content-addressed blob
holding its two halves (a leaf holds its items). A history one message longer
shares every full block with the one before, so a new history costs its top:
one reference per block and the few items past the last full block.

Encoded, the top is ``{"$t": "cat", "v": [part, ...]}``: the items of its
parts in order, each part a list or a blob reference to a list or another
``cat``. It is stored as a blob of its own, so the copies of one history in a
superstep (the state sent to each tool, a prompt) share it.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import orjson

CAT = "cat"  # the envelope kind: a list stored as the concatenation of its parts
LEAF = 16  # items in the smallest block
BLOCK_AT = 2 * LEAF  # shorter lists are stored as they are
MEMO_SIZE = 100_000  # block hashes remembered per run before starting afresh

_ENVELOPE = "$t"  # as codec.ENVELOPE and codec.BLOB_REF (codec imports this module)
_BLOB_REF = "$b"
_ref_of = operator.itemgetter(_BLOB_REF)


class HistoryBlocks:
    """Cuts encoded histories into blocks for one run, remembering the blocks it has stored."""

    __slots__ = ("_put", "_known")

    def __init__(self, put: Callable[[bytes], str]) -> None:
        self._put = put
        self._known: dict[Any, str] = {}  # a block's items (their references) or its halves' hashes -> its hash

    def clear(self) -> None:
        """Forget the blocks stored (end of run)."""
        self._known.clear()

    def encode(self, items: list) -> dict:
        """The reference to ``items`` (encoded, ``BLOCK_AT`` or more) stored as blocks and a top."""
        if len(self._known) > MEMO_SIZE:
            self._known.clear()  # only a saving: a block met again is stored again, under the same hash
        n = len(items)
        parts: list[Any] = []
        start = 0
        size = LEAF << max(0, (n // LEAF).bit_length() - 1)
        while size >= LEAF:
            if n - start >= size:  # start is a multiple of size: the block is the one every longer history has
                parts.append({_BLOB_REF: self._block(items, start, size)})
                start += size
            size >>= 1
        if start < n:
            parts.append(items[start:])
        return {_BLOB_REF: self._put(orjson.dumps({_ENVELOPE: CAT, "v": parts}))}

    def _block(self, items: list, start: int, size: int) -> str:
        if size == LEAF:
            leaf = items[start : start + LEAF]
            try:
                key: Any = tuple(map(_ref_of, leaf))
            except (KeyError, TypeError):  # an item stored inline (a message that could not be encoded)
                key = orjson.dumps(leaf)
            got = self._known.get(key)
            if got is None:
                got = self._known[key] = self._put(orjson.dumps(leaf))
            return got
        half = size >> 1
        key = (self._block(items, start, half), self._block(items, start + half, half))
        got = self._known.get(key)
        if got is None:
            got = self._known[key] = self._put(orjson.dumps({_ENVELOPE: CAT, "v": [{_BLOB_REF: key[0]}, {_BLOB_REF: key[1]}]}))
        return got


def is_cat(tree: Any) -> bool:
    """Whether an encoded tree is a list stored as blocks (``{"$t": "cat", ...}``)."""
    return type(tree) is dict and tree.get(_ENVELOPE) == CAT
