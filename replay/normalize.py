"""Make recorded and replayed values comparable: drop what is volatile.

LangChain and LangGraph mint ids afresh on every run (message ids, run ids,
tool-call ids) and providers stamp responses with ids and timings; none of
those may cause a divergence. Users add their own volatile paths as
``ignore`` patterns: dotted paths where ``*`` matches one segment and ``**``
any number (``messages.*.id``, ``**.timestamp``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from graphtape.recorder.codec import TYPE_KEY
from graphtape.recorder.prefix_memo import MIN_LENGTH as PREFIX_MIN
from graphtape.recorder.prefix_memo import PrefixMemo

IGNORED = "<ignored>"

# Keys of a plain message that identify or describe a call, not its meaning.
_MESSAGE_VOLATILE = frozenset({"id", "tool_call_id", "response_metadata", "usage_metadata", "lc_run_id"})
_MESSAGE_TYPES = frozenset({"ai", "human", "system", "tool", "function", "chat", "remove", "AIMessageChunk"})


def is_message(value: Any) -> bool:
    """A message in its plain decoded form (``{"type": "ai", "content": ...}``)."""
    return isinstance(value, dict) and value.get("type") in _MESSAGE_TYPES and "content" in value


class Normalizer:
    """Strips volatile fields and user-ignored paths from plain values."""

    def __init__(self, ignore: Iterable[str] = (), keys: Iterable[str] | None = None) -> None:
        self.keys = None if keys is None else frozenset(keys)  # compare only these top-level state keys
        self.patterns = [tuple(p.split(".")) for p in ignore if p]
        for p in self.patterns:
            if any(not part for part in p):
                raise ValueError(f"bad ignore pattern {'.'.join(p)!r}: empty path segment")
        # Without paths to ignore, a message normalizes the same wherever it is: keep the
        # result per message object (decoded messages are shared between calls and states).
        self._memo: dict[int, tuple[Any, Any]] | None = {} if not self.patterns and self.keys is None else None
        # And a history is normalized again and again, one message longer each time: only its new end is walked.
        self._lists = PrefixMemo() if self._memo is not None else None

    @property
    def path_free(self) -> bool:
        """Whether a value normalizes the same wherever it sits (no ignored paths, no key filter)."""
        return not self.patterns and self.keys is None

    def __call__(self, value: Any, path: Sequence[str] = ()) -> Any:
        return self._walk(value, tuple(path))

    def _walk(self, value: Any, path: tuple[str, ...]) -> Any:
        if self.keys is not None and len(path) == 1 and path[0] not in self.keys:
            return IGNORED
        if self.patterns and path and any(_matches(p, path) for p in self.patterns):
            return IGNORED
        if self._memo is not None and isinstance(value, dict) and is_message(value):
            hit = self._memo.get(id(value))
            if hit is not None and hit[0] is value:
                return hit[1]
            out = self._walk_dict(value, path)
            self._memo[id(value)] = (value, out)
            return out
        if isinstance(value, dict):
            return self._walk_dict(value, path)
        if isinstance(value, (list, tuple)):
            if self._lists is not None and type(value) is list and len(value) >= PREFIX_MIN:
                return self._lists.apply(value, lambda v: self._walk(v, path))  # path-free: where it sits is moot
            return [self._walk(v, (*path, str(i))) for i, v in enumerate(value)]
        return value

    def _walk_dict(self, value: dict, path: tuple[str, ...]) -> dict:
        message = is_message(value)
        out = {}
        for k, v in value.items():
            if message and k in _MESSAGE_VOLATILE:
                continue
            if k == TYPE_KEY and type(v) is str:
                v = class_name(v)
            if message and k == "tool_calls" and isinstance(v, list):
                v = [{kk: vv for kk, vv in c.items() if kk != "id"} if isinstance(c, dict) else c for c in v]
            if message and k == "content" and isinstance(v, list):
                # A content block's id is minted afresh each run (LangChain's ``lc_<uuid>`` from
                # ``create_text_block``, as every MCP tool's answer has; a provider's block id).
                v = [{kk: vv for kk, vv in b.items() if kk != "id"} if isinstance(b, dict) and "type" in b else b for b in v]
            out[k] = self._walk(v, (*path, str(k)))
        return out


def class_name(recorded: str) -> str:
    """A recorded class name without the module it was recorded in (``agent.Report`` -> ``Report``).

    The same class is named after whatever module ran it: ``__main__`` in a script, a made-up
    name when ``--graph path/to/agent.py:graph`` loads the file, ``__agent`` under LangGraph's
    server. Its fields are compared all the same.
    """
    return recorded.rpartition(".")[2]


def _matches(pattern: tuple[str, ...], path: tuple[str, ...]) -> bool:
    if not pattern:
        return not path
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(_matches(rest, path[i:]) for i in range(len(path) + 1))
    if not path:
        return False
    return (head == "*" or head == path[0]) and _matches(rest, path[1:])


def is_persistent(ns: str) -> bool:
    """Whether ``ns`` is a subgraph compiled with ``checkpointer=True``: named after its node, with no
    task id, so its state lasts across the thread's runs (a task's own namespace is ``node:<task id>``)."""
    return bool(ns) and ":" not in ns and "|" not in ns


def namespaces_named(known: Iterable[str], ns: str) -> list[str]:
    """The stored namespaces ``ns`` names: itself, or, given as a path without task ids (``child``,
    ``a|b``, as ``graphtape show`` prints it and ``diff --ns`` takes it), each namespace of that
    path (two when the run ran the subgraph twice)."""
    known = [n for n in known if n]
    if not ns or ns in known:
        return [ns]
    return [n for n in known if ns_path(n) == ns]


def ns_path(ns: str) -> str:
    """A namespace without its task ids (``"a:1f2|b:3c4"`` -> ``"a|b"``): stable across runs."""
    if not ns:
        return ""
    return "|".join(part.partition(":")[0] for part in ns.split("|"))
