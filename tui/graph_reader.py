"""What the run screen's graph view draws: the structure recorded with the run, laid out, with how often the run took each edge.

Read in one worker call, like ``step_reader``: the structure (``run_graph``),
every step's routes for the edge counts, and for each subgraph the steps of
the namespaces it ran in. The view itself only restyles the laid-out grid as
the user steps (``graph_layout``). Edges the structure does not list (a
``Command`` goto, a router that returns node names) are drawn from the routes
the run took; a run recorded without a structure (imported checkpoints) is
drawn from those alone, and says so.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from graphtape.recorder.records import StepDetail
from graphtape.recorder.store import RunStore
from graphtape.replay.graph_shape import END, START, GraphShape
from graphtape.replay.normalize import ns_path
from graphtape.tui.graph_layout import GraphLayout
from graphtape.tui.render import printable

MAX_SUB_RUNS = 50  # a subgraph's edge counts are taken from its first this-many runs
MAX_NODES = 400  # larger graphs are listed, not drawn (a layout that size is unreadable in a terminal)
# The layout's time grows faster than its edges (0.5 s at 300, 15 s at 950, minutes at 4,000), and a
# recording's structure and routes are data from elsewhere: past this, the graph is not drawn.
MAX_EDGES = 300


@dataclass(frozen=True)
class GraphDrawing:
    """One graph to draw: the run's own (first) or one of its subgraphs, and a note on how it was drawn."""

    title: str
    layout: GraphLayout | None
    note: str = ""


def route_counts(details: Iterable[StepDetail]) -> tuple[Counter, set[str]]:
    """How often the run took each edge (source, destination), and every node that ran."""
    counts: Counter = Counter()
    ran: set[str] = set()
    for d in details:
        ran.update(t.node for t in d.tasks)
        for r in d.routes:
            for dest in dict.fromkeys(r.destinations):
                counts[(r.source, dest)] += 1
    return counts, ran


def step_marks(detail: StepDetail) -> tuple[set[str], set[tuple[str, str]], set[str]]:
    """A step's nodes, the route it just took (source -> destination edges), and the nodes that failed in it."""
    nodes = {t.node for t in detail.tasks}
    taken = {(r.source, d) for r in detail.routes for d in r.destinations}
    failed = {t.node for t in detail.tasks if t.error_type}
    return nodes, taken, failed


def read_graph(store: RunStore, run_id: str, ns: str = "") -> list[GraphDrawing]:
    """The drawings for a run's namespace: its graph first, then each subgraph in it (depth first)."""
    root = GraphShape.from_json(store.run_graph(run_id))
    path = ns_path(ns)
    shape = root.at_path(path)
    counts, ran = route_counts(store.step_details(run_id, ns, writes=False))
    named = root.name if root.name and root.name != "LangGraph" else ""  # LangGraph's default name says nothing
    title = f"subgraph {path}" if path else (f"graph {named}" if named else "the run's graph")
    drawings = [_drawing(printable(title), shape, counts, ran, known=root.known)]
    namespaces = [n for n in store.namespaces(run_id) if n]
    for sub_path, sub in _subgraphs(shape, path):
        mine = [n for n in namespaces if ns_path(n) == sub_path and (not ns or n.startswith(ns + "|"))]
        sub_counts, sub_ran = Counter(), set()
        for n in mine[:MAX_SUB_RUNS]:
            c, r = route_counts(store.step_details(run_id, n, writes=False))
            sub_counts.update(c)
            sub_ran |= r
        times = f"ran {len(mine)} time{'s' if len(mine) != 1 else ''} in this run" if mine else "did not run in this run"
        more = f" (edge counts from its first {MAX_SUB_RUNS})" if len(mine) > MAX_SUB_RUNS else ""
        drawings.append(_drawing(printable(f"subgraph {sub_path}: {times}{more}"), sub, sub_counts, sub_ran, known=True))
    return drawings


def _subgraphs(shape: GraphShape, path: str) -> list[tuple[str, GraphShape]]:
    out = []
    for name, sub in shape.subgraphs.items():
        sub_path = f"{path}|{name}" if path else name
        out.append((sub_path, sub))
        out.extend(_subgraphs(sub, sub_path))
    return out


def _drawing(title: str, shape: GraphShape, counts: Counter, ran: set[str], *, known: bool) -> GraphDrawing:
    edges = [(e.source, e.target) for e in shape.edges] + list(counts)  # in recorded order: the same drawing every time
    nodes = [n for n in shape.nodes]
    if not nodes and not edges:
        return GraphDrawing(title, None, "no graph structure was recorded with this run, and it took no route")
    if len(set(nodes) | {n for e in edges for n in e}) > MAX_NODES:
        return GraphDrawing(title, None, f"more than {MAX_NODES} nodes: too many to draw in a terminal")
    if len(set(edges)) > MAX_EDGES:
        return GraphDrawing(title, None, f"more than {MAX_EDGES} edges: too many to draw in a terminal")
    extra = sorted({e for e in counts if e not in shape.edge_pairs() and e[0] != START and e[1] != END}) if known else []
    note = "" if known else "no graph structure was recorded with this run: drawn from the routes it took"
    if extra and known and shape.known:
        note = "edges the structure does not list were drawn from the routes the run took: " + ", ".join(f"{s} → {t}" for s, t in extra[:4]) + (" …" if len(extra) > 4 else "")
    layout = GraphLayout([printable(n) for n in nodes], [(printable(s), printable(t)) for s, t in edges],
                         counts={(printable(s), printable(t)): n for (s, t), n in counts.items()},
                         subgraph_nodes=[printable(n) for n in shape.subgraphs], ran={printable(n) for n in ran})
    return GraphDrawing(title, layout, printable(note))
