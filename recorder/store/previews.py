"""Previews of recorded values: what a listing shows of a step's update, read without the rest.

A step's update can hold a text of megabytes (a document rewritten every
superstep) or a history of thousands of messages; the run view shows a line
of it. A preview is cut while still encoded (strings to ``PREVIEW_CHARS``,
lists and mappings to their first and last items), and only the blobs it
keeps are read: a long string stored in chunks costs its first chunk, not
its megabytes, and a read's budget pays for what the preview holds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from graphtape.recorder.codec import BLOB_REF, ENVELOPE, MAX_DEPTH, TYPE_KEY
from graphtape.recorder.errors import StoreError
from graphtape.recorder.history_blocks import CAT
from graphtape.recorder.string_chunks import SCAT

PREVIEW_CHARS = 300  # characters of a string a preview keeps (a listing shows fewer)
PREVIEW_HEAD = 8  # first items of a long list or mapping kept
PREVIEW_TAIL = 2  # last items of a long list kept (a history's last message is what the step said)
PREVIEW_DEPTH = 16  # levels of a value a preview keeps (deeper ones show as "…")
PREVIEW_VALUES = 400  # values one preview keeps at most: nested long lists cannot multiply past it
CUT = "…"  # what stands for a part cut for depth or size
MORE = "more"  # the ``__type__`` of the mark standing for the items a preview left out

Fetch = Callable[[set[str]], dict[str, Any]]  # blob hashes -> their encoded trees (those found)


def more_mark(items: int) -> dict[str, Any]:
    """The mark a preview puts where it left ``items`` items of a list out."""
    return {TYPE_KEY: MORE, "items": items}


def is_more_mark(value: Any) -> bool:
    """Whether ``value`` is the mark of items a preview left out."""
    return isinstance(value, dict) and value.get(TYPE_KEY) == MORE and len(value) == 2


def cut_text(text: str, total: int | None = None, limit: int = PREVIEW_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying how many of ``total`` (default: its length) were left out."""
    total = len(text) if total is None else total
    if total <= limit:
        return text
    return f"{text[:limit]}… [{total - limit:,} more chars]"


def clip_trees(trees: list[Any], fetch: Fetch) -> list[Any]:
    """``trees`` (encoded values) cut to previews, with the blobs they keep read through ``fetch`` and put in place.

    The blobs are read a level at a time (a blob inside a blob is one more
    round), each level in one call of ``fetch``; only blobs a preview keeps
    are asked for. References to blobs the store does not hold stay as they
    are (decoding marks them missing).
    """
    raw: dict[str, Any] = {}
    absent: set[str] = set()
    for _ in range(MAX_DEPTH + 1):
        clipper = _Clipper(raw, absent)
        out = [clipper.preview(t) for t in trees]
        if not clipper.needed:
            return out
        found = fetch(clipper.needed)
        raw.update(found)
        absent.update(clipper.needed.difference(found))
    raise StoreError(f"a recorded value holds blobs inside blobs more than {MAX_DEPTH} levels deep (a damaged or crafted store?)")


class _Clipper:
    """One pass of :func:`clip_trees`: the previews as far as the blobs read so far take them, and the blobs still needed."""

    def __init__(self, raw: dict[str, Any], absent: set[str]) -> None:
        self.raw = raw
        self.absent = absent
        self.needed: set[str] = set()
        self._done: dict[str, Any] = {}  # blob -> its preview, this pass (a message shared by many updates is cut once)
        self._left = PREVIEW_VALUES

    def preview(self, tree: Any) -> Any:
        """One value's preview: at most ``PREVIEW_VALUES`` values, ``PREVIEW_DEPTH`` levels deep."""
        self._left = PREVIEW_VALUES
        return self.clip(tree, 0)

    def clip(self, x: Any, depth: int) -> Any:
        self._left -= 1
        if depth > PREVIEW_DEPTH or self._left < 0:
            return CUT
        t = type(x)
        if t is str:
            return cut_text(x)
        if t is list:
            return self._items(x, depth)
        if t is not dict:
            return x
        ref = x.get(BLOB_REF)
        if len(x) == 1 and type(ref) is str:
            return self._blob(ref, x, depth)
        kind = x.get(ENVELOPE)
        v = x.get("v")
        if kind == SCAT and type(v) is list:
            return self._chunked_text(v, depth)
        if kind == CAT and type(v) is list:
            return self._history(v, depth)
        if kind is not None and type(v) is list:
            pairs = kind == "dict"
            kept = v if len(v) <= PREVIEW_HEAD + PREVIEW_TAIL + 1 else [*v[:PREVIEW_HEAD], *v[-PREVIEW_TAIL:]]
            items = [self.clip(i, depth + 1) for i in kept]
            if len(kept) < len(v):
                left = len(v) - len(kept)
                items.insert(PREVIEW_HEAD, ["…", more_mark(left)] if pairs else more_mark(left))
            return {**{k: val for k, val in x.items() if k != "v"}, "v": items}
        if kind is not None:
            # Envelopes keep their structural keys; what they carry is cut like any value.
            return {k: (val if k in (ENVELOPE, "cls", "type") else self.clip(val, depth + 1)) for k, val in x.items()}
        if len(x) > PREVIEW_HEAD + PREVIEW_TAIL + 1:
            keys = list(x)[:PREVIEW_HEAD]
            out = {k: self.clip(x[k], depth + 1) for k in keys}
            out["…"] = more_mark(len(x) - len(keys))
            return out
        return {k: self.clip(val, depth + 1) for k, val in x.items()}

    def _items(self, x: list, depth: int) -> list:
        if len(x) <= PREVIEW_HEAD + PREVIEW_TAIL + 1:
            return [self.clip(i, depth + 1) for i in x]
        return [
            *(self.clip(i, depth + 1) for i in x[:PREVIEW_HEAD]),
            more_mark(len(x) - PREVIEW_HEAD - PREVIEW_TAIL),
            *(self.clip(i, depth + 1) for i in x[-PREVIEW_TAIL:]),
        ]

    def _blob(self, ref: str, x: dict, depth: int) -> Any:
        if ref in self._done:
            return self._done[ref]
        if ref in self.raw:
            out = self._done[ref] = self.clip(self.raw[ref], depth + 1)
            return out
        if ref not in self.absent:
            self.needed.add(ref)
        return x

    def _resolved(self, part: Any) -> Any:
        """``part`` with a blob reference read (as stored, not cut): None while it is still to be
        read, the decoder's missing-blob mark when the store does not hold it."""
        seen = 0
        while type(part) is dict and len(part) == 1 and type(ref := part.get(BLOB_REF)) is str:
            seen += 1
            if seen > MAX_DEPTH:
                raise StoreError("a recorded value's blobs refer to each other without end (a damaged or crafted store?)")
            if ref in self.absent:
                return {TYPE_KEY: "missing-blob", "ref": ref}
            if ref not in self.raw:
                self.needed.add(ref)
                return None
            part = self.raw[ref]
        return part

    def _chunked_text(self, parts: list, depth: int) -> Any:
        """A long string stored as chunks: its first chunks, enough for the preview (the rest unread)."""
        text = ""
        for i, part in enumerate(parts):
            piece = self._resolved(part)
            if piece is None:
                return {ENVELOPE: SCAT, "v": parts}  # this pass cannot cut it yet
            if type(piece) is dict and piece.get(TYPE_KEY) == "missing-blob":
                piece = "[a part of this text is missing from the database]"
            if type(piece) is not str:
                raise StoreError(f"a recorded string is damaged (a chunk of it is {type(piece).__name__}, not text)")
            text += piece
            if len(text) > PREVIEW_CHARS:
                # Chunks are cut at one fixed size (string_chunks.CHUNK): the ones unread are about as long.
                unread = len(parts) - i - 1
                return cut_text(text, len(text) + unread * len(piece))
        return text

    def _history(self, parts: list, depth: int) -> Any:
        """A history stored as blocks: its first and last items (every block's length is read; its items are references)."""
        items: list[Any] = []
        pending = False
        stack = list(reversed(parts))
        steps = 0
        while stack:
            steps += 1
            if steps > 100_000:
                raise StoreError("a recorded history holds more blocks than it can (a damaged or crafted store?)")
            part = self._resolved(stack.pop())
            if part is None:
                pending = True
                continue
            if type(part) is dict and part.get(TYPE_KEY) == "missing-blob":
                items.append(part)  # as the decoder reads a missing block: marked, the rest still shown
            elif type(part) is dict and part.get(ENVELOPE) == CAT and type(part.get("v")) is list:
                stack.extend(reversed(part["v"]))
            elif type(part) is list:
                items.extend(part)
            else:
                raise StoreError(f"a recorded history is damaged (a block of it is {type(part).__name__}, not a list)")
        if pending:
            return {ENVELOPE: CAT, "v": parts}
        return self._items(items, depth)

