"""The shape of a compiled graph as JSON: nodes, static edges, routers.

Route decisions are explained against this: a branch write that matches a
static edge is a static route, a router's return value is mapped through its
path map to destinations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

END = "__end__"
START = "__start__"

# A graph's state where it has no named channels: a functional-API entrypoint's return value and
# the value it saves for its next run (``entrypoint.final``), a StateGraph's single root value.
VALUE_CHANNELS = frozenset({END, "__previous__", "__root__"})


def is_internal_channel(name: str) -> bool:
    """A channel LangGraph keeps for itself (branches, joins, inputs): not part of the state people read."""
    if name in VALUE_CHANNELS:
        return False
    return name.startswith(("branch:", "__")) or ":" in name and name.split(":", 1)[0] in ("join", "start")


@dataclass
class GraphInfo:
    """What capture needs to know about the graph, plus its JSON form."""

    name: str
    nodes: list[str] = field(default_factory=list)
    subgraph_nodes: list[str] = field(default_factory=list)
    edges: set[tuple[str, str]] = field(default_factory=set)
    # source node -> router name -> path map (None when the router returns node names)
    routers: dict[str, dict[str, dict[str, str] | None]] = field(default_factory=dict)
    # source node -> name of the router's callback run -> router name shown to people
    run_names: dict[str, dict[str, str]] = field(default_factory=dict)
    # subgraph node -> its own shape (routers inside a subgraph belong to the subgraph)
    subgraphs: dict[str, GraphInfo] = field(default_factory=dict)
    # node -> where its Command(goto=...) may send the run (a node's declared destinations)
    node_ends: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # state channels LangGraph never checkpoints nor hands the saver (UntrackedValue): what
    # nodes write to them is taken from the nodes' own output instead
    untracked: frozenset[str] = frozenset()
    # state channels LangGraph keeps out of checkpoints and rebuilds from their writes
    # (``DeltaChannel``): channel name -> the graph's channel, whose reducer rebuilds them here too
    deltas: dict[str, Any] = field(default_factory=dict)
    # the state keys a run returns, where the graph's output schema names fewer than its state has
    output: list[str] | None = None
    # per-node facts asked once per superstep, worked out once (the shape never changes once described)
    _ends_here: dict[str, bool] = field(default_factory=dict, repr=False, compare=False)

    def ends_here(self, node: str) -> bool:
        """Whether a run may end after ``node`` with nothing written for it: an edge to END,
        END among its declared destinations, or no edge and no router out of it (its declared
        ``Command`` destinations, a swarm agent's handoffs, are taken only by a ``goto``)."""
        hit = self._ends_here.get(node)
        if hit is None:
            hit = self._ends_here[node] = (node, END) in self.edges or END in self.node_ends.get(node, ()) or (node in self.nodes and not self.leads_on(node))
        return hit

    def for_ns(self, ns: str) -> GraphInfo:
        """The graph a task in namespace ``ns`` (``"alice:<id>|agent:<id>"``) belongs to; this one if unknown."""
        info = self
        for part in ns.split("|") if ns else ():
            sub = info.subgraphs.get(part.partition(":")[0])
            if sub is None:
                return _UNKNOWN  # a graph run inside a node's code: its routes stay unnamed, never misnamed
            info = sub
        return info

    def leads_on(self, node: str) -> bool:
        """Whether an edge or a router takes the run on from ``node`` when it writes no ``goto``."""
        return any(src == node for src, _ in self.edges) or bool(self.routers.get(node))

    def router_names(self, source: str) -> dict[str, dict[str, str] | None]:
        return self.routers.get(source, {})

    def router_to(self, source: str, dest: str) -> str | None:
        """The router of ``source`` that can send the run to ``dest`` (for routers whose callback
        never fires, as langchain's agent middleware edges): the only one, or the one whose path
        map names ``dest``."""
        routers = self.routers.get(source, {})
        if len(routers) == 1:
            return next(iter(routers))
        named = [name for name, ends in routers.items() if ends and dest in ends.values()]
        return named[0] if len(named) == 1 else None

    def router_for_run(self, source: str, run_name: str | None) -> str | None:
        """The router a callback run named ``run_name`` under ``source`` stands for."""
        if run_name is None:
            return None
        return self.run_names.get(source, {}).get(run_name)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "nodes": self.nodes,
            "subgraph_nodes": self.subgraph_nodes,
            "edges": [{"source": s, "target": t} for s, t in sorted(self.edges)],
            "conditional_edges": [
                {"source": src, "router": name, "path_map": ends}
                for src, routers in sorted(self.routers.items())
                for name, ends in routers.items()
            ],
        }
        if self.output is not None:
            out["output"] = self.output
        if self.subgraphs:
            out["subgraphs"] = {name: sub.to_json() for name, sub in sorted(self.subgraphs.items())}
        return out


def describe(graph: Any, depth: int = 0) -> GraphInfo:
    """Read nodes, edges and routers from a compiled graph's builder, its subgraphs' too."""
    info = _describe_one(graph)
    if depth < MAX_SUBGRAPH_DEPTH:
        try:
            subgraphs = list(graph.get_subgraphs()) if hasattr(graph, "get_subgraphs") else []
        except Exception:  # noqa: BLE001 - an odd graph: its subgraphs' routes are recorded unnamed
            subgraphs = []
        for name, sub in subgraphs:
            info.subgraphs[str(name).split("|")[-1]] = describe(sub, depth + 1)
    return info


MAX_SUBGRAPH_DEPTH = 8


def _output_keys(graph: Any, builder: Any) -> list[str] | None:
    """The keys the graph returns, when its output schema names fewer than its state has."""
    returned = getattr(graph, "output_channels", None)
    state = getattr(builder, "channels", None)
    if not isinstance(returned, (list, tuple)) or not isinstance(state, dict):
        return None
    keys = [str(k) for k in returned]
    return keys if set(keys) < set(state) else None
_UNKNOWN = GraphInfo(name="?")


def _describe_one(graph: Any) -> GraphInfo:
    info = GraphInfo(name=getattr(graph, "name", None) or type(graph).__name__)
    info.untracked = _untracked_channels(graph)
    info.deltas = _delta_channels(graph)
    builder = getattr(graph, "builder", None)
    if builder is None or not hasattr(builder, "nodes"):
        info.nodes = [n for n in getattr(graph, "nodes", {}) if n != START]
        return info
    info.nodes = list(builder.nodes)
    info.output = _output_keys(graph, builder)
    for name, spec in builder.nodes.items():
        ends = getattr(spec, "ends", None)
        if ends:
            info.node_ends[name] = tuple(str(e) for e in (ends.values() if isinstance(ends, dict) else ends))
        runnable = getattr(spec, "runnable", None)
        if runnable is not None and hasattr(runnable, "get_subgraphs") and hasattr(runnable, "checkpointer"):
            info.subgraph_nodes.append(name)
    for src, dst in getattr(builder, "edges", set()):
        info.edges.add((src, dst))
    for srcs, dst in getattr(builder, "waiting_edges", set()):
        for s in srcs:
            info.edges.add((s, dst))
    for src, branches in getattr(builder, "branches", {}).items():
        for name, spec in branches.items():
            ends = getattr(spec, "ends", None)
            path = getattr(spec, "path", None)
            run_name = path.get_name() if hasattr(path, "get_name") else name
            func = getattr(path, "func", None) or getattr(path, "afunc", None)
            shown = _decider(src, func, name)
            info.routers.setdefault(src, {})[shown] = {str(k): str(v) for k, v in ends.items()} if ends else None
            info.run_names.setdefault(src, {})[run_name] = shown
    return info


def _decider(source: str, func: Any, branch_name: str) -> str:
    """The name a route decided by this branch is shown with: its function's.

    langchain's agent middleware is the exception: the edge after a hook that may jump
    (``@before_model(can_jump_to=[...])``) only reads the ``jump_to`` the hook wrote, so the
    decision is the hook's, and the route names the hook (``Limit.before_model``).
    """
    qualname = getattr(func, "__qualname__", "") or ""
    if "_add_middleware_edge.<locals>" in qualname:
        return source
    return getattr(func, "__name__", None) or branch_name


def _untracked_channels(graph: Any) -> frozenset[str]:
    try:
        from langgraph.channels.untracked_value import UntrackedValue
    except ImportError:  # another LangGraph layout: nothing is known to be untracked
        return frozenset()
    channels = getattr(graph, "channels", None) or {}
    return frozenset(k for k, ch in channels.items() if isinstance(ch, UntrackedValue))


def _delta_channels(graph: Any) -> dict[str, Any]:
    try:
        from langgraph.channels.delta import DeltaChannel
    except ImportError:  # a LangGraph before 1.2: every channel's value is in its checkpoints
        return {}
    channels = getattr(graph, "channels", None) or {}
    return {k: ch for k, ch in channels.items() if isinstance(ch, DeltaChannel)}
