"""Calls one run made inside a call that the run it is compared with answered without making them.

A tool that runs a subagent (deepagents' ``task``), or calls a model itself, makes tool and
model calls inside its own call; the recorder keeps which one (``parent_call_id``). A replay
answers such a tool call from the recording, so the calls inside it are never made: comparing
a run with its replay, they are no difference.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from graphtape.recorder.records import SENT, CallInfo

from graphtape.replay.calls import normalize_arguments
from graphtape.replay.normalize import ns_path

__all__ = ["unmade_inside"]

_CALLS = ("tool", "model")


def unmade_inside(calls: list[CallInfo], other: Iterable[CallInfo], normalize: Callable[[Any], Any]) -> set[str]:
    """Ids of the calls in ``calls`` made inside a tool or model call whose counterpart in
    ``other`` (same kind, name, place and arguments) made no tool or model call inside it.

    What the outer call wrote to the state itself (``sent``) is made again by an answered
    call, so it stays.
    """
    kids: dict[str, list[CallInfo]] = {}
    for c in calls:
        if c.parent_call_id:
            kids.setdefault(c.parent_call_id, []).append(c)
    outers = [c for c in calls if c.kind in _CALLS and any(k.kind in _CALLS for k in kids.get(c.call_id, ()))]
    if not outers:
        return set()
    other = list(other)
    busy = {c.parent_call_id for c in other if c.kind in _CALLS and c.parent_call_id}
    bare = Counter(_key(c, normalize) for c in other if c.kind in _CALLS and c.call_id not in busy)
    out: set[str] = set()
    for outer in outers:
        key = _key(outer, normalize)
        if not bare[key]:
            continue
        bare[key] -= 1
        todo = [k for k in kids.get(outer.call_id, ()) if k.kind != SENT]
        while todo:
            c = todo.pop()
            if c.call_id in out:
                continue
            out.add(c.call_id)
            todo.extend(kids.get(c.call_id, ()))
    return out


def _key(call: CallInfo, normalize: Callable[[Any], Any]) -> tuple:
    return (call.kind, call.name, ns_path(call.ns), call.node, repr(normalize_arguments(call.kind, call.inputs, normalize)))
