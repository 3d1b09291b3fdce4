"""The graph structure recorded with a run, read back: nodes, edges, routers and subgraphs.

The recorder stores each run's graph as JSON (``recorder.graph_info``). Two
readers need it as data: a diff of two runs says what changed between their
graphs (code versions), and the TUI's graph view draws it. A run recorded
without a structure (one imported from LangGraph checkpoints) reads as an
empty shape; recorded text is kept as text, never imported or evaluated.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

START = "__start__"
END = "__end__"
MAX_DEPTH = 8  # as deep as the recorder describes subgraphs


@dataclass(frozen=True, slots=True)
class Edge:
    """An edge of the graph: a static edge, or one destination of a router's path map."""

    source: str
    target: str
    router: str | None = None  # the router that can take this edge (None: a static edge)


@dataclass(frozen=True)
class GraphShape:
    """One graph (or subgraph) as recorded: its nodes, edges and subgraphs by node name."""

    name: str = ""
    nodes: tuple[str, ...] = ()
    edges: tuple[Edge, ...] = ()
    # source node -> routers whose destinations are not listed (they return node names)
    open_routers: dict[str, tuple[str, ...]] = field(default_factory=dict)
    subgraphs: dict[str, GraphShape] = field(default_factory=dict)

    @property
    def known(self) -> bool:
        """Whether a structure was recorded at all."""
        return bool(self.nodes or self.edges)

    @classmethod
    def from_json(cls, data: Any, depth: int = 0) -> GraphShape:
        """The shape from a run's recorded ``graph`` JSON; anything malformed is left out."""
        if not isinstance(data, dict):
            return cls()
        nodes = tuple(str(n) for n in _list(data.get("nodes")) if isinstance(n, str))
        edges: dict[tuple[str, str, str | None], Edge] = {}
        for e in _list(data.get("edges")):
            if isinstance(e, dict) and isinstance(e.get("source"), str) and isinstance(e.get("target"), str):
                edges.setdefault((e["source"], e["target"], None), Edge(e["source"], e["target"]))
        open_routers: dict[str, list[str]] = {}
        for c in _list(data.get("conditional_edges")):
            if not isinstance(c, dict) or not isinstance(c.get("source"), str):
                continue
            source, router = c["source"], str(c.get("router") or "")
            path_map = c.get("path_map")
            if isinstance(path_map, dict) and path_map:
                for target in dict.fromkeys(str(t) for t in path_map.values()):
                    edges.setdefault((source, target, router), Edge(source, target, router))
            else:
                open_routers.setdefault(source, []).append(router)
        subgraphs = {}
        if depth < MAX_DEPTH and isinstance(data.get("subgraphs"), dict):
            subgraphs = {str(k): cls.from_json(v, depth + 1) for k, v in data["subgraphs"].items()}
        return cls(str(data.get("name") or ""), nodes, tuple(edges.values()), {k: tuple(v) for k, v in open_routers.items()}, subgraphs)

    def at_path(self, path: str) -> GraphShape:
        """The subgraph at a namespace path (``"child"`` or ``"child|inner"``); empty if not recorded."""
        shape = self
        for part in path.split("|") if path else ():
            shape = shape.subgraphs.get(part.partition(":")[0], GraphShape())
        return shape

    def edge_pairs(self) -> set[tuple[str, str]]:
        """Every ``(source, target)`` the structure allows, whatever the router."""
        return {(e.source, e.target) for e in self.edges}

    def routers(self) -> dict[str, dict[str, tuple[str, ...] | None]]:
        """source -> router -> its destinations (None: it returns node names, not listed)."""
        out: dict[str, dict[str, list[str] | None]] = {}
        for e in self.edges:
            if e.router is not None:
                dests = out.setdefault(e.source, {}).setdefault(e.router, [])
                if dests is not None:
                    dests.append(e.target)
        for source, names in self.open_routers.items():
            for name in names:
                out.setdefault(source, {})[name] = None
        return {s: {r: (tuple(sorted(d)) if d is not None else None) for r, d in rs.items()} for s, rs in out.items()}


def graph_changes(a: GraphShape, b: GraphShape, labels: tuple[str, str] = ("A", "B"), where: str = "") -> list[str]:
    """What differs between two recorded structures, one line each (nodes, edges, routers, subgraphs)."""
    if not a.known or not b.known:
        missing = [label for shape, label in ((a, labels[0]), (b, labels[1])) if not shape.known]
        if len(missing) == 2 or where:
            return []
        return [f"{missing[0]} recorded no graph structure: the graphs cannot be compared"]
    prefix = f"in subgraph {where}: " if where else ""
    out: list[str] = []
    for label, only in ((labels[1], [n for n in b.nodes if n not in a.nodes]), (labels[0], [n for n in a.nodes if n not in b.nodes])):
        if only:
            out.append(f"{prefix}node{'s' if len(only) > 1 else ''} {', '.join(map(repr, only))} only in {label}'s graph")
    static_a = {(e.source, e.target) for e in a.edges if e.router is None}
    static_b = {(e.source, e.target) for e in b.edges if e.router is None}
    for label, only in ((labels[1], sorted(static_b - static_a)), (labels[0], sorted(static_a - static_b))):
        if only:
            out.append(f"{prefix}edge{'s' if len(only) > 1 else ''} {', '.join(f'{s} → {t}' for s, t in only)} only in {label}'s graph")
    routers_a, routers_b = a.routers(), b.routers()
    for source in sorted(routers_a.keys() | routers_b.keys()):
        ra, rb = routers_a.get(source, {}), routers_b.get(source, {})
        for router in sorted(ra.keys() | rb.keys()):
            if router not in ra:
                out.append(f"{prefix}router {router!r} after {source!r} only in {labels[1]}'s graph{_to(rb[router])}")
            elif router not in rb:
                out.append(f"{prefix}router {router!r} after {source!r} only in {labels[0]}'s graph{_to(ra[router])}")
            elif ra[router] != rb[router]:
                out.append(f"{prefix}router {router!r} after {source!r} goes to {_names(rb[router])} in {labels[1]}'s graph, {_names(ra[router])} in {labels[0]}'s")
    for name in sorted(a.subgraphs.keys() & b.subgraphs.keys()):
        out.extend(graph_changes(a.subgraphs[name], b.subgraphs[name], labels, f"{where}|{name}" if where else name))
    for label, only in ((labels[1], sorted(b.subgraphs.keys() - a.subgraphs.keys())), (labels[0], sorted(a.subgraphs.keys() - b.subgraphs.keys()))):
        for name in only:
            out.append(f"{prefix}node {name!r} is a subgraph only in {label}'s graph")
    return out


def _to(dests: tuple[str, ...] | None) -> str:
    return f" (to {_names(dests)})" if dests else ""


def _names(dests: tuple[str, ...] | None) -> str:
    return "any node it names" if dests is None else ", ".join(dests) or "nowhere"


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []
