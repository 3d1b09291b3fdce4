"""A replayed message gets the id its recorded twin got.

LangGraph's ``add_messages`` gives every message that enters the state without an
id a fresh ``uuid4`` (the run's input, a tool's answer, a node's own message), so a
replay's states differ from the recording's in those ids alone. Comparison ignores
ids, but every such history then has to be decoded to be compared, none of the
replay's messages share the recording's stored copies, and a recorded answer that
names a message by id finds nothing. So the replayed graph's reducers are wrapped:
a message that came in without an id and left with a fresh one is given the id the
recording gave the same message (same type, content, name and tool call), each
recorded id once, never one the state already holds.
"""

from __future__ import annotations

import copy
import re
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

import orjson

from graphtape.recorder.codec import BLOB_REF, collect_refs
from graphtape.replay.normalize import is_message

# What add_messages mints: str(uuid.uuid4()). Ids of another shape (a provider's, LangChain's
# "lc_run--...") were given by whoever made the message and come back with it.
_MINTED = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\Z")
# A run imported from a fixture holds the fixture's stand-ins instead ("msg-3": every message id
# numbered). There an id the replay brings back comes with a recorded answer (``taken``), so the
# rest stand for what add_messages minted, and a replay of a fixture stores its messages as it does.
_STAND_IN = re.compile(r"msg-[1-9][0-9]*\Z")


class RecordedIds:
    """The ids add_messages minted in the recording, by what their message says."""

    def __init__(self, messages: Iterable[Any], *, taken: Iterable[str] = (), stand_ins: bool = False) -> None:
        """``messages``: the recording's messages (plain, as decoded) in the order they appeared;
        ``taken``: ids the replay must not hand out (recorded answers bring them);
        ``stand_ins``: the recording is a fixture's, whose ids are its stand-ins."""
        skip = set(taken)
        self._by_key: dict[tuple, deque[str]] = {}
        for m in messages:
            mid = m.get("id") if isinstance(m, dict) else None
            if type(mid) is not str or mid in skip or not (_MINTED.match(mid) or (stand_ins and _STAND_IN.match(mid))):
                continue
            key = _key(m.get("type"), m.get("content"), m.get("name"), m.get("tool_call_id"))
            if key is not None:
                skip.add(mid)
                self._by_key.setdefault(key, deque()).append(mid)

    def adopt(self, left: Any, out: list[Any], fresh: int) -> None:
        """Give the last ``fresh`` messages of ``out`` (what a reducer made of ``left``) their
        recorded ids, where each is new (its id not in ``left``) and the recording has its twin."""
        before: set[Any] | None = None
        held: set[Any] | None = None
        for m in out[len(out) - fresh :]:
            mid = getattr(m, "id", None)
            queue = self._by_key.get(_key(getattr(m, "type", None), getattr(m, "content", None), getattr(m, "name", None), getattr(m, "tool_call_id", None))) if type(mid) is str else None
            if not queue:
                continue
            if before is None:
                if type(left) is not list or left is out:
                    return  # a reducer that changed the state in place: which messages are new is unknown
                before = {getattr(x, "id", None) for x in left}
                held = {getattr(x, "id", None) for x in out}
            if mid in before:
                continue  # not one the reducer just minted (one that reorders, or keeps old ones)
            while queue:
                recorded = queue.popleft()
                if recorded not in held:
                    try:
                        m.id = recorded
                    except Exception:  # noqa: BLE001 - a frozen message type: it keeps its fresh id
                        break
                    held.add(recorded)
                    break


def recorded_ids(store: Any, run_id: str, after: int, calls: Iterable[Any], *, stand_ins: bool = False) -> RecordedIds:
    """The ids add_messages minted in ``run_id``'s root state after step ``after``.

    Messages are stored once each, as blobs: the references of every state after
    ``after`` are taken in the order they first appear and decoded in one read. A
    message the starting state holds, or one a recorded answer (of ``calls``) brings
    with its own id, is not a candidate. ``stand_ins``: the run was imported from a fixture.
    """
    base: dict[str, Any] = {}
    later: dict[str, None] = {}
    prev: dict[str, Any] = {}
    for step, values in store.frames(run_id, ""):
        if step <= after:
            base = values
        else:
            for key, value in values.items():
                _refs_in_order(_grown(prev.get(key), value), later)
        prev = values
    before = collect_refs(base)
    fresh = [h for h in later if h not in before]
    decoded = store.decode([{BLOB_REF: h} for h in fresh]) if fresh else []
    return RecordedIds(_messages(decoded), taken=_ids(_brought_back(c) for c in calls), stand_ins=stand_ins)


def _brought_back(call: Any) -> Any:
    """What of a recorded call's output a replay hands back as it is.

    A tool's ToolMessage is answered by its content (the stand-in tool builds the
    message anew, as the live one did), so its id never comes back: it may have been
    recorded with the id add_messages gave it later, in place (the recorder encodes
    after the node returned) or, in a fixture, folded into that twin.
    """
    out = call.output
    if call.kind == "tool" and is_message(out) and out.get("type") == "tool":
        return None
    return out


class _Lazy:
    """RecordedIds read when a reducer first mints an id: a graph that never does pays nothing."""

    def __init__(self, load: Callable[[], RecordedIds]) -> None:
        self._load: Callable[[], RecordedIds] | None = load
        self._ids: RecordedIds | None = None

    def adopt(self, left: Any, out: list[Any], fresh: int) -> None:
        if self._load is not None:
            load, self._load = self._load, None
            try:
                self._ids = load()
            except Exception:  # noqa: BLE001 - ids are a nicety: a recording that cannot give them leaves them fresh
                self._ids = None
        if self._ids is not None:
            self._ids.adopt(left, out, fresh)


def with_recorded_ids(graph: Any, load: Callable[[], RecordedIds]) -> Any:
    """``graph`` whose reducer channels give new messages their recorded ids (itself if it has
    none). ``load`` reads them from the recording, once, when first needed."""
    ids = _Lazy(load)
    wrapped = {}
    for name, channel in getattr(graph, "channels", {}).items():
        op = getattr(channel, "operator", None)  # a reducer channel (BinaryOperatorAggregate)
        if callable(op):
            twin = copy.copy(channel)
            try:
                twin.operator = _adopting(op, ids)
            except (AttributeError, TypeError):
                continue
            wrapped[name] = twin
    return graph.copy(update={"channels": {**graph.channels, **wrapped}}) if wrapped else graph


def _adopting(op: Callable[[Any, Any], Any], ids: _Lazy) -> Callable[[Any, Any], Any]:
    def reduce(left: Any, right: Any) -> Any:
        fresh = _idless(right)
        if not fresh:
            return op(left, right)
        out = op(left, right)
        if type(out) is list and len(out) >= fresh:
            ids.adopt(left, out, fresh)
        return out

    return reduce


def _idless(update: Any) -> int:
    """How many messages in an update arrive without an id (add_messages mints one for each)."""
    items = update if isinstance(update, list) else [update]
    n = 0
    for m in items:
        if isinstance(m, dict):
            n += m.get("id") is None and "content" in m
        elif isinstance(m, (str, tuple)):
            n += 1
        elif hasattr(m, "content") and hasattr(m, "id"):
            n += m.id is None
    return n


def _refs_in_order(value: Any, out: dict[str, None]) -> None:
    """Blob references in ``value``, item by item (a history's order), added to ``out`` (an ordered set)."""
    for item in value if type(value) is list else (value,):
        out.update(dict.fromkeys(collect_refs(item)))


def _grown(old: Any, new: Any) -> Any:
    """What ``new`` adds to ``old``: a history that grew is walked from where it was."""
    if new is old:
        return None
    if type(old) is list and type(new) is list and len(new) >= len(old) and new[: len(old)] == old:
        return new[len(old) :]
    return new


def _messages(values: Iterable[Any]) -> Iterable[dict]:
    """Plain messages in decoded values, in order (a history's block is a list of them)."""
    for v in values:
        if is_message(v):
            yield v
        elif type(v) is list:
            yield from (m for m in v if is_message(m))


def _ids(values: Iterable[Any]) -> set[str]:
    """Every message id inside decoded values (recorded answers)."""
    out: set[str] = set()
    stack = list(values)
    while stack:
        x = stack.pop()
        if type(x) is dict:
            if is_message(x) and type(x.get("id")) is str:
                out.add(x["id"])
            stack.extend(x.values())
        elif type(x) is list:
            stack.extend(x)
    return out


def _key(kind: Any, content: Any, name: Any, tool_call_id: Any) -> tuple | None:
    if type(kind) is not str:
        return None
    if type(content) is not str:
        try:
            content = orjson.dumps(content, option=orjson.OPT_SORT_KEYS)
        except TypeError:
            return None
    return (kind, content, name if type(name) is str else None, tool_call_id if type(tool_call_id) is str else None)
