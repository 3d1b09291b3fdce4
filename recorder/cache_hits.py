"""Names for tasks LangGraph served from its cache, which no callback names.

A cached node's task is named by its path, but a functional-API ``@task`` call's path holds
only indexes, and a hit runs no code, so no callback says which task it was. The recorded
graph's cache is wrapped: each hit's writes are handed to LangGraph as new tuples, and the
writes of a task the recorder cannot name are looked up here by the identity of those tuples.
The name is the cache key's (a node's name; for a ``@task``, its function's name).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from langgraph.cache.base import BaseCache, FullKey

_KEPT = 10_000  # hits whose writes never reached a recorder (a run stopped between): dropped oldest first

_lock = threading.Lock()
_names: dict[int, tuple[tuple, str]] = {}  # id(write tuple) -> (the tuple, kept alive so its id stays its own; name)


class HitNamingCache(BaseCache[Any]):
    """The graph's own cache, whose hits leave the name of the task they served."""

    def __init__(self, inner: BaseCache) -> None:
        super().__init__(serde=getattr(inner, "serde", None))
        self.inner = inner

    def get(self, keys: Sequence[FullKey]) -> dict[FullKey, Any]:
        return _named(self.inner.get(keys))

    async def aget(self, keys: Sequence[FullKey]) -> dict[FullKey, Any]:
        return _named(await self.inner.aget(keys))

    def set(self, pairs: Mapping[FullKey, tuple[Any, int | None]]) -> None:
        return self.inner.set(pairs)

    async def aset(self, pairs: Mapping[FullKey, tuple[Any, int | None]]) -> None:
        return await self.inner.aset(pairs)

    def clear(self, namespaces: Sequence[tuple[str, ...]] | None = None) -> None:
        return self.inner.clear(namespaces)

    async def aclear(self, namespaces: Sequence[tuple[str, ...]] | None = None) -> None:
        return await self.inner.aclear(namespaces)


def task_name(writes: Sequence[Any]) -> str | None:
    """The name of the task whose ``writes`` a cache hit gave, if they are a hit's."""
    found = None
    with _lock:
        for w in writes:
            hit = _names.pop(id(w), None)
            if hit is not None and hit[0] is w:
                found = hit[1]
    return found


def _named(hits: Mapping[FullKey, Any]) -> dict[FullKey, Any]:
    out: dict[FullKey, Any] = {}
    for key, writes in hits.items():
        name = key_name(key)
        try:
            fresh = [(w[0], w[1]) for w in writes]
        except Exception:  # noqa: BLE001 - writes of a shape LangGraph did not store: handed on as they are
            out[key] = writes
            continue
        if name is not None:
            with _lock:
                for w in fresh:
                    _names[id(w)] = (w, name)
                while len(_names) > _KEPT:
                    del _names[next(iter(_names))]
        out[key] = fresh
    return out


def key_name(key: FullKey) -> str | None:
    """The task a cache key stands for: a node's name, or a ``@task`` function's (its key holds
    ``module.qualname``, and a ``@task`` is named after its function)."""
    try:
        ns = key[0]
        if len(ns) > 2:
            return str(ns[2])
        if len(ns) == 2 and isinstance(ns[1], str):
            return ns[1].rsplit(".", 1)[-1]
    except Exception:  # noqa: BLE001 - a key of another shape: no name
        return None
    return None
