"""Values as they are at the moment they are recorded.

In the default durability, values are encoded later, on the writer thread. By
then the graph may have changed them in place: LangGraph gives the caller's
input messages ids (``add_messages``), and code outside a subgraph may grow the
list the subgraph ended with (langgraph-supervisor's ``full_history`` output
appends its handoff-back messages to it). Encoded late, identical runs would
store different things. These copies fix what a value was when it was seen,
cheaply: containers are copied, leaves shared, and a channel that did not
change since the previous checkpoint keeps the copy made then.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from graphtape.recorder.frames import common_prefix

_MAX_DEPTH = 50


def snapshot(value: Any, depth: int = 0) -> Any:
    """``value`` as it is now: containers copied, messages copied (LangGraph sets their ids in
    place later), anything else shared. Cheap: it walks only dicts, lists and tuples."""
    if depth > _MAX_DEPTH:
        return value
    if isinstance(value, dict):
        return {k: snapshot(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        copied = [snapshot(v, depth + 1) for v in value]
        return copied if isinstance(value, list) else type(value)(copied) if type(value) is tuple else value
    copy = getattr(value, "model_copy", None)
    if copy is not None and hasattr(value, "content") and hasattr(value, "type"):
        try:
            return copy()
        except Exception:  # noqa: BLE001 - an odd message: keep it as it is
            return value
    return value


def containers(value: Any, depth: int = 0) -> Any:
    """``value`` with its dicts, lists and tuples copied (what code grows or edits in place);
    every other object is shared."""
    if depth > _MAX_DEPTH:
        return value
    t = type(value)
    if t is dict:
        return {k: containers(v, depth + 1) for k, v in value.items()}
    if t is list:
        return [v if type(v) not in _CONTAINERS else containers(v, depth + 1) for v in value]
    if t is tuple:
        return tuple(v if type(v) not in _CONTAINERS else containers(v, depth + 1) for v in value)
    return value


_CONTAINERS = (dict, list, tuple)


class ChannelCopies:
    """Per namespace, each state channel's value as of the checkpoint that last changed it.

    A channel whose value is the same object as at the previous checkpoint, and not
    among the checkpoint's updated channels, keeps the copy made then, so the frame
    builder still sees "unchanged" by identity. A list that grew keeps the copies of
    the items it shares with the previous checkpoint's list, so a delta stays a delta.
    """

    def __init__(self) -> None:
        # ns -> channel -> (the live value, its copy, the live list's items when copied)
        self._seen: dict[str, dict[str, tuple[Any, Any, list | None]]] = {}

    def of(self, ns: str, values: Mapping[str, Any], updated: Iterable[str]) -> dict[str, Any]:
        """The checkpoint's channel values, copied where they changed."""
        memo = self._seen.setdefault(ns, {})
        changed = set(updated)
        out: dict[str, Any] = {}
        for ch, v in values.items():
            hit = memo.get(ch)
            if hit is not None and hit[0] is v and ch not in changed:
                out[ch] = hit[1]
                continue
            items = list(v) if type(v) is list else None
            if items is not None and hit is not None and hit[2] is not None:
                copy = _grown(hit[2], hit[1], items)
            else:
                copy = containers(v)
            memo[ch] = (v, copy, items)
            out[ch] = copy
        for ch in [c for c in memo if c not in values]:
            del memo[ch]
        return out

    def forget(self) -> None:
        self._seen.clear()


def _grown(old_items: list, old_copy: list, new: list) -> list:
    """A copy of ``new`` that reuses ``old_copy``'s items for the leading items ``new`` shares with
    the list ``old_copy`` was made from (``old_items``)."""
    i = common_prefix(old_items, new)
    return old_copy[:i] + [v if type(v) not in _CONTAINERS else containers(v, 1) for v in new[i:]]
