"""Record what a run reads from and writes to its long-term memory store (``BaseStore``).

A node's memory reads (``get_store()``, ``runtime.store``, ``InjectedStore``) decide
what it does next, and the store changes after the run: a later run adds memories,
a fixture replays in CI with an empty store. So every operation a recorded run's
task makes is a call of kind ``store`` of that task (``get``, ``search``,
``list_namespaces``, ``put``, ``delete``), with what it asked and what the store
answered, and a strict replay answers the reads from the recording.

``RecordingStore`` wraps the graph's store at ``attach``: every operation goes to
the real store unchanged (``BaseStore``'s methods all end in ``batch`` /
``abatch``). An operation outside a recorded run's task passes through untouched;
one inside a recorded tool call is part of that call (``parent_call_id``), like
the HTTP requests a tool makes. A recorder problem is counted on the run and the
operation goes on (unless the recorder is strict).
"""

from __future__ import annotations

import itertools
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from langgraph.store.base import BaseStore, GetOp, Item, ListNamespacesOp, Op, PutOp, Result, SearchItem, SearchOp

from graphtape.recorder.call_scope import current_call
from graphtape.recorder.records import STORE
from graphtape.recorder.running_task import session_of, site_of, task_config

# Call ids: random per process, counted within it.
_ID_PREFIX = f"store-{secrets.token_hex(6)}"
_ids = itertools.count(1)


class StoreOver(BaseStore):
    """A store standing over the user's ``inner`` one, with its TTL settings (``BaseStore``'s
    methods read them before they batch: the inner store's, as they are now)."""

    def __init__(self, inner: BaseStore) -> None:
        self.inner = inner

    @property  # type: ignore[override]
    def supports_ttl(self) -> bool:
        return self.inner.supports_ttl

    @property  # type: ignore[override]
    def ttl_config(self) -> Any:
        return self.inner.ttl_config


class RecordingStore(StoreOver):
    """Delegates every operation to ``inner`` and records those a recorded run's task makes."""

    def __getattr__(self, name: str) -> Any:
        # What BaseStore does not define (setup(), index_config, conn...) is the inner store's.
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        pending = _begin(ops)
        try:
            results = self.inner.batch(ops)
        except BaseException as exc:
            _finish(pending, None, exc)
            raise
        _finish(pending, results, None)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        pending = _begin(ops)
        try:
            results = await self.inner.abatch(ops)
        except BaseException as exc:
            _finish(pending, None, exc)
            raise
        _finish(pending, results, None)
        return results


def runtime_recording_store(runtime: Any) -> Any:
    """``runtime`` with its store recorded, or None when it carries none to record.

    A run's config may carry a ``Runtime`` (LangGraph's server seeds one for a graph factory; a
    graph run inside another graph's node inherits its parent's), and LangGraph then runs with
    that runtime's store, not the graph's. An object that only looks like one (``context`` and
    ``store``) gives LangGraph nothing else, so a ``Runtime`` with the two stands in for it.
    """
    store = getattr(runtime, "store", None)
    if not isinstance(store, BaseStore) or isinstance(store, RecordingStore):
        return None
    from langgraph.runtime import Runtime

    if isinstance(runtime, Runtime):
        return runtime.override(store=RecordingStore(store))
    return Runtime(context=getattr(runtime, "context", None), store=RecordingStore(store))


def unwrapped(store: Any) -> Any:
    """The user's own store under any recording wrapper (a graph attached twice records once)."""
    while isinstance(store, RecordingStore):
        store = store.inner
    return store


# -- what is recorded ------------------------------------------------------------------


def op_call(op: Op) -> tuple[str, dict[str, Any]]:
    """``(name, inputs)``: an operation as a call, named by what it does and asked what it asks."""
    if isinstance(op, GetOp):
        return "get", {"namespace": list(op.namespace), "key": op.key}
    if isinstance(op, SearchOp):
        asked: dict[str, Any] = {"namespace_prefix": list(op.namespace_prefix), "limit": op.limit, "offset": op.offset}
        if op.query is not None:
            asked["query"] = op.query
        if op.filter:
            asked["filter"] = op.filter
        return "search", asked
    if isinstance(op, ListNamespacesOp):
        asked = {"limit": op.limit, "offset": op.offset}
        if op.match_conditions:
            asked["match_conditions"] = [{"match_type": c.match_type, "path": list(c.path)} for c in op.match_conditions]
        if op.max_depth is not None:
            asked["max_depth"] = op.max_depth
        return "list_namespaces", asked
    if isinstance(op, PutOp):
        if op.value is None:
            return "delete", {"namespace": list(op.namespace), "key": op.key}
        asked = {"namespace": list(op.namespace), "key": op.key, "value": op.value}
        if op.index is not None:
            asked["index"] = op.index
        return "put", asked
    return type(op).__name__, {}


def is_write(name: str) -> bool:
    """Whether a store call's name (as ``op_call`` names it) is a write."""
    return name in ("put", "delete")


def result_value(result: Any) -> Any:
    """What the store answered, as plain data (an item keeps its timestamps; a search hit its score)."""
    if isinstance(result, Item):
        out = {"namespace": list(result.namespace), "key": result.key, "value": result.value, "created_at": _iso(result.created_at), "updated_at": _iso(result.updated_at)}
        if isinstance(result, SearchItem) and result.score is not None:
            out["score"] = result.score
        return out
    if isinstance(result, list):
        return [list(r) if isinstance(r, tuple) else result_value(r) for r in result]
    return result


def without_times(output: Any) -> Any:
    """A recorded answer without its items' timestamps: when a memory was written is not what it holds
    (two runs that read the same memories written at other times read the same)."""
    if isinstance(output, list):
        return [without_times(x) for x in output]
    if isinstance(output, dict) and "key" in output and "value" in output:
        return {k: v for k, v in output.items() if k not in ("created_at", "updated_at")}
    return output


def _iso(ts: Any) -> Any:
    return ts.isoformat() if hasattr(ts, "isoformat") else ts


# -- recording one batch ---------------------------------------------------------------


@dataclass(slots=True)
class _Pending:
    session: Any
    call_ids: list[str]
    perf0: float


def _begin(ops: list[Op]) -> _Pending | None:
    config = task_config()
    session = session_of(config)
    if session is None:
        return None  # not a recorded run's task: untouched
    try:
        ns, node, task_id, step = site_of(config)
        parent = current_call()
        parent = parent if parent is not None and session.is_call(parent) else None
        started, perf0 = time.time(), time.perf_counter()
        ids = []
        for op in ops:
            name, inputs = op_call(op)
            call_id = f"{_ID_PREFIX}-{next(_ids):012d}"
            session.begin_call(call_id, {"kind": STORE, "name": name, "ns": ns, "node": node, "task_id": task_id, "step": step, "inputs": inputs, "started_at": started, "perf0": perf0, "parent_call_id": parent})
            ids.append(call_id)
        return _Pending(session, ids, perf0)
    except Exception as exc:  # noqa: BLE001 - a recorder problem never stops the operation
        _fault(session, exc)
        return None


def _finish(pending: _Pending | None, results: list[Result] | None, error: BaseException | None) -> None:
    if pending is None:
        return
    session = pending.session
    try:
        latency = round((time.perf_counter() - pending.perf0) * 1000, 3)
        for i, call_id in enumerate(pending.call_ids):
            if error is not None:
                session.end_call(call_id, latency_ms=latency, error_type=type(error).__name__, error_message=str(error) or type(error).__name__)
            else:
                session.end_call(call_id, latency_ms=latency, output=result_value(results[i]) if results is not None and i < len(results) else None)
    except Exception as exc:  # noqa: BLE001
        _fault(session, exc)


def _fault(session: Any, exc: Exception) -> None:
    session.fault(f"store capture: {type(exc).__name__}: {exc}")
    if session.strict:
        from graphtape.recorder.errors import RecorderFault

        raise RecorderFault(f"graphtape could not record a store operation ({type(exc).__name__}: {exc})") from exc
