"""The replay's store answerer: a task's memory reads come from the recording, not today's store.

A recording made with a store holds every read and write its tasks made (calls of
kind ``store``, see ``recorder.store_capture``). A strict replay answers each read
from the recording: a memory written since (by this very run, later on, or by other
runs) cannot change what the replayed node sees, and a fixture replays in CI with an
empty store. Reads are matched like tool calls (``CallBook``): by who made them
(step, subgraph path, node), by operation and by what they asked; identical repeated
reads consume the recording in order. A write is matched too, so a replay that
writes other memories than the recording did is reported; the write itself stays in
the replay (``store_guard``), never reaching the real store.

An operation inside a tool call is that call's: answered with it, or live with it. A
read nothing answers is a miss: the replay stops there (or, with ``on_miss="live"``,
reads the real store and reports it).
"""

from __future__ import annotations

import threading
from typing import Any

from langgraph.store.base import GetOp, Item, ListNamespacesOp, Op, PutOp, SearchItem, SearchOp

from graphtape.recorder import CallInfo, GraphtapeError
from graphtape.recorder.call_scope import current_call
from graphtape.recorder.codec import to_plain
from graphtape.recorder.running_task import site_of, task_config
from graphtape.recorder.records import STORE
from graphtape.recorder.store_capture import op_call

from graphtape.replay.answers import ReplayMiss
from graphtape.replay.calls import CallBook, LiveCall, Miss, RecordedCall, normalize_arguments, rebuild_error
from graphtape.replay.normalize import Normalizer, ns_path

NOT_ANSWERED = object()  # the operation goes to the store the replay was given (guarded)


class DamagedStoreAnswer(GraphtapeError):
    """A recorded store answer that is not the shape its operation returns."""


class RecordedStore:
    """Answers one replay's store operations from the recording's store calls (see module docstring)."""

    def __init__(self, calls: list[CallInfo], normalize: Normalizer, *, offsets: dict[str, int] | None = None, miss_goes_live: bool = False) -> None:
        own = [c for c in calls if c.kind == STORE and not c.parent_call_id]
        self.normalize = normalize
        self.book = CallBook(own, normalize, delay=lambda _c: 0.0, offsets=offsets)
        self.miss_goes_live = miss_goes_live
        self.misses: list[Miss] = []
        self.served = 0
        self._lock = threading.Lock()

    def answer(self, op: Op) -> Any:
        """The recorded result of ``op``, or ``NOT_ANSWERED``; raises ``ReplayMiss`` for a read nothing answers."""
        if current_call() is not None:
            return NOT_ANSWERED  # inside a tool call: answered with it, or live with it
        ns, node, _task, step = site_of(task_config())
        if node is None and step is None:
            return NOT_ANSWERED  # not a task of the replay
        name, inputs = op_call(op)
        live = LiveCall(STORE, name, step, ns_path(ns), node, arguments=normalize_arguments(STORE, to_plain(inputs), self.normalize), ns=ns)
        got = self.book.take(live)
        if isinstance(got, Miss):
            with self._lock:
                self.misses.append(got)
            if isinstance(op, PutOp) or self.miss_goes_live:
                return NOT_ANSWERED
            raise ReplayMiss(got)
        with self._lock:
            self.served += 1
        return _result(op, got)

    def unused(self) -> list[RecordedCall]:
        """Recorded operations no replayed one asked for."""
        return self.book.unused()


def _result(op: Op, got: RecordedCall) -> Any:
    call = got.call
    if call.error_type:
        raise rebuild_error(call.error_type, call.error_message, call.traceback, call.output)
    out = call.output
    try:
        if isinstance(op, PutOp):
            return None
        if isinstance(op, GetOp):
            return None if out is None else Item(**_item_fields(out))
        if isinstance(op, SearchOp):
            return [SearchItem(**_item_fields(x), score=x.get("score")) for x in _list(out)]
        if isinstance(op, ListNamespacesOp):
            return [tuple(str(p) for p in _list(x)) for x in _list(out)]
    except (TypeError, ValueError, AttributeError) as exc:
        raise DamagedStoreAnswer(f"the recorded answer to {call.name} at step {call.step} is damaged: {exc}") from None
    raise DamagedStoreAnswer(f"the recording answers {call.name}, which this LangGraph does not ask")


def _item_fields(x: Any) -> dict[str, Any]:
    if not isinstance(x, dict) or not isinstance(x.get("key"), str) or not isinstance(x.get("value"), dict):
        raise TypeError("expected an item (namespace, key, value, timestamps)")
    return {"namespace": tuple(str(p) for p in _list(x.get("namespace"))), "key": x["key"], "value": x["value"], "created_at": str(x.get("created_at")), "updated_at": str(x.get("updated_at"))}


def _list(x: Any) -> list[Any]:
    if not isinstance(x, list):
        raise TypeError(f"expected a list, got {type(x).__name__}")
    return x
