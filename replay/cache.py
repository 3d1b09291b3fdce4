"""A recorded cache hit replays as a hit: LangGraph's own cache lookup is answered from the recording.

A node with a ``CachePolicy`` that LangGraph served from its cache did not run: no
code, no router, no callbacks; the cached writes were applied as they were. A
replay in a fresh process has an empty cache (the node would run live), and one in
the recording's own process may have a warm one (a node the recording ran would
not). So the replayed graph gets this cache instead of its own: LangGraph asks it
for each cached node's writes as it would ask any cache, and it answers the k-th
lookup of a node with the k-th recorded execution of that node: its recorded
writes if that was a hit, nothing (run the node) if not. What the replay stores
into it is dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from langgraph.cache.base import BaseCache, FullKey

from graphtape.recorder.cache_hits import key_name

_BRANCH = "branch:to:"
_TASKS = "__pregel_tasks"
_END = "__end__"


class RecordedCache(BaseCache[Any]):
    """Answers LangGraph's cache lookups for one graph's cached nodes from a recording."""

    def __init__(self, executions: Mapping[str, Sequence[list[tuple[str, Any]] | None]]) -> None:
        super().__init__()
        self._queue = {node: list(runs) for node, runs in executions.items()}

    def get(self, keys: Sequence[FullKey]) -> dict[FullKey, Any]:
        out: dict[FullKey, Any] = {}
        for key in keys:
            node = key_name(key)
            queue = self._queue.get(node) if node is not None else None
            if not queue:
                continue
            writes = queue.pop(0)
            if writes is not None:
                out[key] = list(writes)
        return out

    async def aget(self, keys: Sequence[FullKey]) -> dict[FullKey, Any]:
        return self.get(keys)

    def set(self, pairs: Mapping[FullKey, tuple[Any, int | None]]) -> None:
        return None

    async def aset(self, pairs: Mapping[FullKey, tuple[Any, int | None]]) -> None:
        return None

    def clear(self, namespaces: Sequence[tuple[str, ...]] | None = None) -> None:
        return None

    async def aclear(self, namespaces: Sequence[tuple[str, ...]] | None = None) -> None:
        return None


def cached_nodes(graph: Any, recorded_tasks: Iterable[str] = ()) -> set[str]:
    """The graph's nodes that LangGraph may serve from a cache (a ``CachePolicy``, and a cache to use),
    and, as any of them may have one, the recorded tasks that are no node (functional-API ``@task``
    calls: their policy is the call's, out of sight until it is made)."""
    if getattr(graph, "cache", None) is None:
        return set()
    default = getattr(graph, "cache_policy", None)
    nodes = {name for name, node in graph.nodes.items() if getattr(node, "cache_policy", None) or default}
    return nodes | {name for name in recorded_tasks if name not in graph.nodes}


def recorded_executions(details: Sequence[Any], nodes: set[str], after_step: int, joins: Mapping[tuple[str, str], str]) -> dict[str, list[list[tuple[str, Any]] | None]]:
    """Per cached node, its executions after ``after_step`` in order: the writes LangGraph's
    cache gave it (a hit), or ``None`` (the node ran).

    A hit's writes are rebuilt from what the recording kept: the task's update, a
    ``branch:to:`` write per destination it went on to (a join edge's channel for a
    join target), and its ``Send`` packets.
    """
    from langgraph.types import Send

    out: dict[str, list[list[tuple[str, Any]] | None]] = {}
    for d in details:
        if d.step.step <= after_step:
            continue
        for t in d.tasks:
            if t.node not in nodes:
                continue
            if not t.cached:
                out.setdefault(t.node, []).append(None)
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
            out.setdefault(t.node, []).append(writes)
    return out


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
