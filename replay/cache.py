"""A recorded cache hit replays as a hit: LangGraph's own cache lookup is answered from the recording.

A node with a ``CachePolicy`` that LangGraph served from its cache did not run: no
code, no router, no callbacks; the cached writes were applied as they were. A
replay in a fresh process has an empty cache (the node would run live), and one in
the recording's own process may have a warm one (a node the recording ran would
not). So the replayed graph gets this cache instead of its own, and LangGraph asks it
for each cached task's writes as it would ask any cache. It answers as the graph's
cache did while the run was recorded:

- a key the replay itself put in (a call that ran, then the same arguments again) is a hit;
- a key it already answered as a miss is a miss again until it is put in (LangGraph asks
  again for a task that is still running);
- otherwise the task's recorded executions are taken in order: a hit recorded under this
  very key (the digest of the arguments) and found in the cache when the run began is
  served first, whatever the order of the calls asking; else the next execution that can
  be this one: a miss (the task runs), or a hit under this key (or under no key, as older
  recordings stored them).

What the replay puts into it is kept for the replay's own later lookups, never written to
the graph's cache.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from copy import deepcopy
from typing import Any, NamedTuple

from langgraph.cache.base import BaseCache, FullKey

from graphtape.recorder.cache_hits import key_digest, key_name

_BRANCH = "branch:to:"
_TASKS = "__pregel_tasks"
_END = "__end__"


class Execution(NamedTuple):
    """A recorded execution of a cached task: a hit with the writes it gave, or a miss (the task ran).

    ``key`` is what the cache keeps it under (None where the recording could not tell, and
    in older recordings); ``warm``: a hit on a key that was there before the replayed span.
    """

    writes: list[tuple[str, Any]] | None  # None: a miss
    key: str | None = None
    warm: bool = True


class RecordedCache(BaseCache[Any]):
    """Answers LangGraph's cache lookups for one graph's cached nodes from a recording."""

    def __init__(self, executions: Mapping[str, Sequence[Execution]]) -> None:
        super().__init__()
        self._queue = {node: list(runs) for node, runs in executions.items()}
        self._put: dict[str, list[tuple[str, Any]]] = {}  # key -> writes the replay's own calls put in
        self._missed: set[str] = set()  # keys answered as a miss and not put in since
        self._lock = threading.Lock()  # tasks pushed from parallel threads look up at once

    def get(self, keys: Sequence[FullKey]) -> dict[FullKey, Any]:
        out: dict[FullKey, Any] = {}
        with self._lock:
            for key in keys:
                writes = self._answer(key)
                if writes is not None:
                    out[key] = _copied(writes)
        return out

    def _answer(self, key: FullKey) -> list[tuple[str, Any]] | None:
        digest = key_digest(key)
        if digest is not None:
            if digest in self._put:
                return self._put[digest]
            if digest in self._missed:
                return None
        node = key_name(key)
        queue = self._queue.get(node) if node is not None else None
        writes = _take(queue, digest).writes if queue else None
        if writes is None and digest is not None:
            self._missed.add(digest)
        return writes

    async def aget(self, keys: Sequence[FullKey]) -> dict[FullKey, Any]:
        return self.get(keys)

    def set(self, pairs: Mapping[FullKey, tuple[Any, int | None]]) -> None:
        with self._lock:
            for key, (writes, _ttl) in pairs.items():
                digest = key_digest(key)
                if digest is None:
                    continue
                try:
                    self._put[digest] = [(w[0], w[1]) for w in writes]
                except Exception:  # noqa: BLE001 - writes of another shape: that key stays a miss
                    continue
                self._missed.discard(digest)

    async def aset(self, pairs: Mapping[FullKey, tuple[Any, int | None]]) -> None:
        self.set(pairs)

    def clear(self, namespaces: Sequence[tuple[str, ...]] | None = None) -> None:
        return None

    async def aclear(self, namespaces: Sequence[tuple[str, ...]] | None = None) -> None:
        return None


def _take(queue: list[Execution], digest: str | None) -> Execution:
    """The recorded execution that answers a lookup of ``digest`` (removed from ``queue``)."""
    if digest is not None:
        for i, e in enumerate(queue):
            if e.writes is not None and e.warm and e.key == digest:
                return queue.pop(i)
    for i, e in enumerate(queue):
        if e.key is None or e.key == digest:
            return queue.pop(i)
    return _NOT_RECORDED


_NOT_RECORDED = Execution(None)  # no recorded execution can be this one: it runs


def _copied(writes: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """Fresh writes for each hit, as a cache that stores them serialized hands out."""
    try:
        return deepcopy(writes)
    except Exception:  # noqa: BLE001 - a value that cannot be copied is handed on as it is
        return list(writes)


def cached_nodes(graph: Any, recorded_tasks: Iterable[str] = ()) -> set[str]:
    """The graph's nodes that LangGraph may serve from a cache (a ``CachePolicy``, and a cache to use),
    and, as any of them may have one, the recorded tasks that are no node (functional-API ``@task``
    calls: their policy is the call's, out of sight until it is made)."""
    if getattr(graph, "cache", None) is None:
        return set()
    default = getattr(graph, "cache_policy", None)
    nodes = {name for name, node in graph.nodes.items() if getattr(node, "cache_policy", None) or default}
    return nodes | {name for name in recorded_tasks if name not in graph.nodes}


def recorded_executions(details: Sequence[Any], nodes: set[str], after_step: int, joins: Mapping[tuple[str, str], str]) -> dict[str, list[Execution]]:
    """Per cached task name, its executions after ``after_step`` in order: what LangGraph's
    cache gave it (a hit), or a miss (the task ran), each with its cache key where recorded.

    A hit's writes are rebuilt from what the recording kept: the task's update, a
    ``branch:to:`` write per destination it went on to (a join edge's channel for a
    join target), and its ``Send`` packets.
    """
    from langgraph.types import Send

    out: dict[str, list[Execution]] = {}
    missed: dict[str, set[str | None]] = {}  # per queue, the keys of its misses so far (None: a miss of no key)
    for d in details:
        if d.step.step <= after_step:
            continue
        for t in d.tasks:
            if t.node not in nodes:
                continue
            name = _queue_name(t)
            queue = out.setdefault(name, [])
            if not t.cached:
                queue.append(Execution(None, t.cache_key))
                missed.setdefault(name, set()).add(t.cache_key)
                continue
            writes: list[tuple[str, Any]] = list((t.writes or {}).items())
            for r in d.routes:
                if r.task_id != t.task_id:
                    continue
                for s in r.sends:
                    writes.append((_TASKS, Send(s.get("node"), s.get("arg"))))
                sent = {s.get("node") for s in r.sends}
                for dest in r.destinations:
                    if dest == _END or dest in sent:
                        continue
                    writes.append((joins.get((t.node, dest), _BRANCH + dest), t.node if (t.node, dest) in joins else None))
            # Put in the cache by the run, but by a call before the replay starts: warm for the replay.
            misses = missed.get(name, ())
            warm = t.cache_warm or (None not in misses and t.cache_key not in misses)
            queue.append(Execution(writes, t.cache_key, warm))
    return out


def _queue_name(task: Any) -> str:
    """The name a cache lookup for ``task`` carries: its key's (a ``@task``'s function, whatever
    name the task was given), else the task's own."""
    key = task.cache_key
    return key.partition("|")[0] if key else task.node


def join_channels(graph: Any) -> dict[tuple[str, str], str]:
    """``(source, target) -> channel`` for the graph's join edges (``add_edge([a, b], c)``)."""
    builder = getattr(graph, "builder", None)
    out: dict[tuple[str, str], str] = {}
    for starts, end in getattr(builder, "waiting_edges", ()) or ():
        channel = f"join:{'+'.join(starts)}:{end}"
        for s in starts:
            out[(s, end)] = channel
    return out


def with_recorded_subgraph_caches(graph: Any, recorded: Callable[[tuple[str, ...]], Sequence[Sequence[Any]]], path: tuple[str, ...] = ()) -> Any:
    """``graph`` with each subgraph node that has a cache of its own answering from the recording,
    at any depth.

    A subgraph added as a node keeps its own cache (LangGraph hands it no other), so the
    root's recorded cache does not reach it. Such a subgraph is copied with a
    ``RecordedCache`` of the executions recorded inside it: ``recorded(path)`` gives the
    step details of each time the replayed run enters the subgraph at that path of node
    names (``("sub",)``, ``("sub", "deep")``), in order. A subgraph invoked from inside a
    node's own code is the user's object, out of reach: it keeps its cache.
    """
    if len(path) >= _MAX_DEPTH:
        return graph
    nodes = dict(graph.nodes)
    changed = False
    for name, node in graph.nodes.items():
        sub = getattr(node, "bound", None)
        if not (hasattr(sub, "nodes") and hasattr(sub, "copy")):
            continue
        here = (*path, name)
        copy = with_recorded_subgraph_caches(sub, recorded, here)
        cached = cached_nodes(sub)
        if cached:
            details = [d for entered in recorded(here) for d in entered]
            copy = copy.copy(update={"cache": RecordedCache(recorded_executions(details, cached, -(1 << 30), join_channels(sub)))})
        if copy is not sub:
            nodes[name] = node.copy(update={"bound": copy, "subgraphs": [copy]})
            changed = True
    return graph.copy(update={"nodes": nodes}) if changed else graph


_MAX_DEPTH = 8  # subgraphs nested deeper keep their own caches
