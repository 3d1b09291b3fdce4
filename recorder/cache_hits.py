"""What a task LangGraph served from its cache was, which no callback says.

A cached node's task is named by its path, but a functional-API ``@task`` call's path holds
only indexes, and a hit runs no code, so no callback says which task it was. The recorded
graph's cache is wrapped: each hit's writes are handed to LangGraph as new tuples, and the
writes of a task served from the cache are looked up here by the identity of those tuples.
A hit tells its name (the cache key's: a node's name; for a ``@task``, its function's) and
its key (the digest of its arguments, so a replay serves each call its own hit, not the k-th
hit of that task). A task that ran is named by the key LangGraph then caches its writes
under, and the run keeps the keys it put in the cache: a later hit on one of them is the
run's own doing (a replay makes it again, by running that call), not a warm cache's.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from langgraph.cache.base import BaseCache, FullKey

_KEPT = 10_000  # hits whose writes never reached a recorder (a run stopped between): dropped oldest first

_lock = threading.Lock()
_hits: dict[int, tuple[tuple, Hit]] = {}  # id(write tuple) -> (the tuple, kept alive so its id stays its own; the hit)
_ran: dict[int, tuple[tuple, Any, Any]] = {}  # id(write tuple) -> (the tuple, its run's session, its task) of a task that ran


class Hit(NamedTuple):
    """A task served from the cache: its name and its cache key."""

    name: str | None
    key: str | None


class HitNamingCache(BaseCache[Any]):
    """The graph's own cache, whose hits leave what they served."""

    def __init__(self, inner: BaseCache) -> None:
        super().__init__(serde=getattr(inner, "serde", None))
        self.inner = inner

    def get(self, keys: Sequence[FullKey]) -> dict[FullKey, Any]:
        return _named(self.inner.get(keys))

    async def aget(self, keys: Sequence[FullKey]) -> dict[FullKey, Any]:
        return _named(await self.inner.aget(keys))

    def set(self, pairs: Mapping[FullKey, tuple[Any, int | None]]) -> None:
        _note_set(pairs)
        return self.inner.set(pairs)

    async def aset(self, pairs: Mapping[FullKey, tuple[Any, int | None]]) -> None:
        _note_set(pairs)
        return await self.inner.aset(pairs)

    def clear(self, namespaces: Sequence[tuple[str, ...]] | None = None) -> None:
        return self.inner.clear(namespaces)

    async def aclear(self, namespaces: Sequence[tuple[str, ...]] | None = None) -> None:
        return await self.inner.aclear(namespaces)


def hit_of(writes: Sequence[Any]) -> Hit | None:
    """What cache hit gave ``writes``, if they are a hit's."""
    found = None
    with _lock:
        for w in writes:
            kept = _hits.pop(id(w), None)
            if kept is not None and kept[0] is w:
                found = kept[1]
    return found


def _named(hits: Mapping[FullKey, Any]) -> dict[FullKey, Any]:
    out: dict[FullKey, Any] = {}
    for key, writes in hits.items():
        try:
            fresh = [(w[0], w[1]) for w in writes]
        except Exception:  # noqa: BLE001 - writes of a shape LangGraph did not store: handed on as they are
            out[key] = writes
            continue
        hit = Hit(key_name(key), key_digest(key))
        with _lock:
            for w in fresh:
                _hits[id(w)] = (w, hit)
            while len(_hits) > _KEPT:
                del _hits[next(iter(_hits))]
        out[key] = fresh
    return out


def note_ran(session: Any, task: Any, writes: Sequence[Any]) -> None:
    """A task of a graph with a cache ran and wrote ``writes``: LangGraph then puts those very
    tuples in the cache under the task's key, which names the task (see ``_note_set``)."""
    with _lock:
        for w in writes:
            _ran[id(w)] = (w, session, task)
            session.cache_ran.append(id(w))
        while len(_ran) > _KEPT:
            del _ran[next(iter(_ran))]


def forget_ran(session: Any) -> None:
    """Drop what a run that ended left here (its tasks that ran but were never put in the cache)."""
    with _lock:
        for i in session.cache_ran:
            kept = _ran.get(i)
            if kept is not None and kept[1] is session:
                del _ran[i]
        session.cache_ran.clear()


def _note_set(pairs: Mapping[FullKey, Any]) -> None:
    """LangGraph puts tasks' writes in the cache: each key names the task that wrote them (a miss,
    recorded with it), and a later hit on it in the same run is the run's own doing."""
    try:
        for key, value in pairs.items():
            digest = key_digest(key)
            if digest is None:
                continue
            found = None
            with _lock:
                for w in value[0]:
                    kept = _ran.pop(id(w), None)
                    if kept is not None and kept[0] is w:
                        found = kept
                        break
            if found is None:
                continue
            _w, session, task = found
            task.cache_key = digest
            if len(session.cache_keys_set) < _KEPT:
                session.cache_keys_set.add(digest)
    except Exception:  # noqa: BLE001 - not knowing leaves the task without its key, replayed by order
        pass


def key_digest(key: FullKey) -> str | None:
    """A cache key as a recording keeps it: its task's name and the digest of the arguments.

    Not the module LangGraph's key also holds: a graph recorded from a script
    (``__main__``) is replayed from a test that imports it under its module's name.
    """
    try:
        digest, name = key[1], key_name(key)
        return f"{name}|{digest}" if name is not None and isinstance(digest, str) else None
    except Exception:  # noqa: BLE001 - a key of another shape: none
        return None


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
