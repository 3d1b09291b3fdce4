"""State frames: each superstep's checkpoint stored as a keyframe or a delta.

A keyframe holds every channel's encoded value and the checkpoint's version
maps. A delta holds only what changed since the previous step of the same
namespace; a list that grew is stored as "keep the first k items, append
these". A new keyframe is written once the deltas since the last one add up
to twice its size (or the chain gets long), so storage stays linear in run length
while reading any step costs one keyframe plus a bounded number of deltas.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from graphtape.recorder.codec import ENCODE_BUDGET
from graphtape.recorder.redaction import may_be_argv

MAX_CHAIN = 256
# A keyframe is written once the deltas since the last one add up to this many
# times its size: each byte of keyframe buys KEY_RATIO bytes of deltas.
KEY_RATIO = 2


class FrameBuilder:
    """Builds the frames of one namespace of one run, in step order."""

    def __init__(self, encode: Callable[[Any], Any]) -> None:
        self.encode = encode
        self._objs: dict[str, Any] = {}
        self._encs: dict[str, Any] = {}
        self._items: dict[str, list] = {}
        self._cv: dict[str, Any] = {}
        self._seen: dict[str, dict] = {}
        self._chain = 0
        self._since_key = 0
        self._key_size = 0

    def force_key(self) -> None:
        """Make the next frame a keyframe, re-encoded from scratch (earlier frames were lost)."""
        self._objs.clear()
        self._encs.clear()
        self._items.clear()
        self._cv.clear()
        self._seen.clear()
        self._chain = 0

    def build(
        self,
        values: Mapping[str, Any],
        versions: Mapping[str, Any],
        seen: Mapping[str, Mapping[str, Any]],
        updated: Iterable[str],
        size_of: Callable[[dict], int],
    ) -> tuple[dict, bool]:
        """Return ``(frame, is_key)`` for the next checkpoint of this namespace."""
        updated = set(updated)
        delta_vals: dict[str, Any] = {}
        delta_lists: dict[str, dict] = {}
        for ch, v in values.items():
            prev = self._objs.get(ch, _MISSING)
            if prev is v and ch not in updated:
                continue
            # (longer: one value, marked whole by the encoder's budget; a command line is encoded
            # whole too, its arguments read together: the password after "-p" is known by the "-p")
            if type(v) is list and len(v) <= ENCODE_BUDGET and not may_be_argv(v):
                items = self._items.get(ch)
                if items is not None:
                    k = common_prefix(items, v)
                    added = [self.encode(x) for x in v[k:]]
                    encs = self._encs[ch][:k] + added
                    delta_lists[ch] = {"k": k, "a": added}
                else:
                    encs = [self.encode(x) for x in v]
                    delta_vals[ch] = encs
                self._items[ch] = list(v)
                self._encs[ch] = encs
            else:
                enc = self.encode(v)
                self._items.pop(ch, None)
                self._encs[ch] = enc
                delta_vals[ch] = enc
            self._objs[ch] = v
        removed = [ch for ch in self._objs if ch not in values]
        for ch in removed:
            del self._objs[ch]
            del self._encs[ch]
            self._items.pop(ch, None)
        cv_delta = {c: ver for c, ver in versions.items() if self._cv.get(c, _MISSING) != ver}
        cv_gone = [c for c in self._cv if c not in versions]
        seen_delta = {n: s for n, s in seen.items() if self._seen.get(n) != s}
        seen_gone = [n for n in self._seen if n not in seen]
        # LangGraph hands each put a fresh copy of these maps: keep them, don't copy.
        self._cv = versions
        self._seen = seen

        delta = {"v": delta_vals, "l": delta_lists, "x": removed, "cv": cv_delta, "vs": seen_delta}
        # Written only when needed, so frames from before these keys read the same.
        if cv_gone:
            delta["cx"] = cv_gone
        if seen_gone:
            delta["vsx"] = seen_gone
        if self._chain > 0 and self._chain < MAX_CHAIN:
            size = size_of(delta)
            if self._since_key + size < KEY_RATIO * self._key_size:
                self._chain += 1
                self._since_key += size
                return delta, False
        key = {"v": dict(self._encs), "cv": self._cv, "vs": self._seen}
        self._key_size = size_of(key)
        self._chain = 1
        self._since_key = 0
        return key, True


_MISSING = object()


def common_prefix(old: list, new: list) -> int:
    """How many leading items ``new`` shares (by identity) with ``old``."""
    n = min(len(old), len(new))
    if all(map(operator.is_, old, new)):  # the usual case, a list that grew: checked at C speed
        return n
    i = 0
    while i < n and old[i] is new[i]:
        i += 1
    return i


class FrameState:
    """The encoded checkpoint rebuilt by applying a keyframe and its deltas.

    Frames are never changed: a list that grows is copied. With
    ``in_place=True`` a list this state copied once is grown in place after
    that, so rebuilding one step from a keyframe and 200 deltas copies a long
    history once instead of 200 times. Only for a state read to its end:
    ``frames()`` hands out the values at every step, which must not change.
    """

    __slots__ = ("values", "versions", "seen", "_owned")

    def __init__(self, *, in_place: bool = False) -> None:
        self.values: dict[str, Any] = {}
        self.versions: dict[str, Any] = {}
        self.seen: dict[str, dict] = {}
        self._owned: set[str] | None = set() if in_place else None  # channels whose list this state made

    def apply(self, frame: Mapping[str, Any], is_key: bool) -> None:
        """Advance by one stored frame."""
        owned = self._owned
        if is_key:
            self.values = dict(frame.get("v", {}))
            self.versions = dict(frame.get("cv", {}))
            self.seen = {n: dict(s) for n, s in frame.get("vs", {}).items()}
            if owned is not None:
                owned.clear()
            return
        for ch in frame.get("x", ()):
            self.values.pop(ch, None)
        replaced = frame.get("v", {})
        self.values.update(replaced)
        if owned is not None:
            owned.difference_update(frame.get("x", ()), replaced)
        for ch, d in frame.get("l", {}).items():
            base = self.values.get(ch)
            if owned is not None and ch in owned:
                del base[d["k"] :]
                base.extend(d["a"])
                continue
            base = base if isinstance(base, list) else []
            self.values[ch] = base[: d["k"]] + list(d["a"])
            if owned is not None:
                owned.add(ch)
        for c in frame.get("cx", ()):
            self.versions.pop(c, None)
        self.versions.update(frame.get("cv", {}))
        for n in frame.get("vsx", ()):
            self.seen.pop(n, None)
        self.seen.update({n: dict(s) for n, s in frame.get("vs", {}).items()})
