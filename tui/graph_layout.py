"""Lay a recorded graph out for the terminal, once, and draw it for any step cheaply.

grandalf (the layered "Sugiyama" layout graphviz calls dot, in pure Python;
LangChain's own ``draw_ascii`` uses it) decides the layers, the order of the
nodes in each layer (crossings reduced) and their columns; cycles (an agent's
loop) are turned into upward edges. This module routes the edges between
layers on a character grid (a port per edge on each box side, a horizontal
channel per bend so lines never run on top of each other) and keeps, for
every cell, which node or edges it belongs to. Drawing a step then only
restyles cells: the nodes that ran and the route just taken in heavy lines,
edges and nodes the run never used dimmed, each edge's count beside its arrow.
Nothing here imports Textual: the benchmark times it without the app.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from rich.style import Style
from rich.text import Text

START, END = "__start__", "__end__"
BOX_H = 3
XSPACE = 3  # columns between neighbouring boxes
COMPONENT_GAP = 4  # columns between unconnected parts of a graph
MIN_GAP = 2  # rows between two layers: the line leaving a box (or its bend), then the arrow

UP, DOWN, LEFT, RIGHT = 1, 2, 4, 8
_LIGHT = {UP | DOWN: "│", LEFT | RIGHT: "─", DOWN | RIGHT: "┌", DOWN | LEFT: "┐", UP | RIGHT: "└", UP | LEFT: "┘",
          UP | DOWN | RIGHT: "├", UP | DOWN | LEFT: "┤", DOWN | LEFT | RIGHT: "┬", UP | LEFT | RIGHT: "┴", 15: "┼",
          UP: "╵", DOWN: "╷", LEFT: "╴", RIGHT: "╶"}
_HEAVY = {UP | DOWN: "┃", LEFT | RIGHT: "━", DOWN | RIGHT: "┏", DOWN | LEFT: "┓", UP | RIGHT: "┗", UP | LEFT: "┛",
          UP | DOWN | RIGHT: "┣", UP | DOWN | LEFT: "┫", DOWN | LEFT | RIGHT: "┳", UP | LEFT | RIGHT: "┻", 15: "╋",
          UP: "╹", DOWN: "╻", LEFT: "╸", RIGHT: "╺"}
_HEAVY_BOX = str.maketrans("─│┌┐└┘┬┴╭╮╰╯", "━┃┏┓┗┛┳┻┏┓┗┛")

STYLE_TAKEN = Style(color="magenta", bold=True)  # the route this step took
STYLE_CURRENT = Style(color="yellow", bold=True)  # a node that ran in this step
STYLE_FAILED = Style(color="red", bold=True)  # ... and failed
STYLE_UNUSED = Style(dim=True)  # never taken / never ran in this run
STYLE_COUNT = Style(color="cyan")
STYLE_PLAIN = Style()


@dataclass
class _Box:
    name: str
    label: str
    x: int
    y: int
    w: int
    rank: int
    subgraph: bool = False


@dataclass
class _Cell:
    """What a cell of the grid belongs to: line bits per edge, a node, or a label."""

    bits: dict[tuple[str, str], int] = field(default_factory=dict)
    char: str = " "
    node: str | None = None
    edge_label: tuple[str, str] | None = None
    arrow: tuple[str, str] | None = None


class GraphLayout:
    """A graph laid out on a character grid: ``width`` x ``height`` cells, drawn per step by :meth:`lines`."""

    def __init__(self, nodes: Iterable[str], edges: Iterable[tuple[str, str]], *, counts: dict[tuple[str, str], int] | None = None,
                 subgraph_nodes: Iterable[str] = (), ran: Iterable[str] | None = None) -> None:
        self.counts = dict(counts or {})
        edges = list(dict.fromkeys((s, t) for s, t in edges))
        names = list(dict.fromkeys([*nodes, *(n for e in edges for n in e)]))
        self.self_loops = {s for s, t in edges if s == t}
        self.edges = [(s, t) for s, t in edges if s != t]
        self.ran = set(ran) if ran is not None else None  # nodes the run ever ran (None: unknown, nothing dimmed)
        subgraphs = set(subgraph_nodes)
        self.boxes: dict[str, _Box] = {}
        self.grid: list[dict[int, _Cell]] = []  # per row, the cells something is drawn in (the rest is blank)
        self._arrows: dict[tuple[str, str], tuple[int, int]] = {}
        self._owners: list[set] = []  # per row: the nodes and edges drawn in it
        self._rows_of: dict[object, set[int]] = {}  # a node or edge -> the rows it is drawn in
        self._xs: list[list[int]] = []  # per row: the columns drawn in, in order
        self._plain: dict[int, Text] = {}  # rows drawn with nothing lit, kept
        self.width = self.height = 0
        self._route(names, subgraphs)

    # -- layout -------------------------------------------------------------------------------
    def _label(self, name: str, subgraph: bool) -> str:
        label = name
        if subgraph:
            label += " ▸"
        if name in self.self_loops:
            n = self.counts.get((name, name), 0)
            label += f" ↻{n}" if n else " ↻"
        return label

    def _route(self, names: list[str], subgraphs: set[str]) -> None:
        from grandalf.graphs import Edge, Graph, Vertex
        from grandalf.layouts import SugiyamaLayout

        vertices = {n: Vertex(n) for n in names}
        for n, v in vertices.items():
            v.view = _View(len(self._label(n, n in subgraphs)) + 4, BOX_H)
        g = Graph(list(vertices.values()), [Edge(vertices[s], vertices[t]) for s, t in self.edges])
        placed: list[tuple[object, dict]] = []  # (layout, {edge: [(rank, x)]}) per connected part
        left = 0
        layers = 0
        x_of: dict[str, float] = {}
        rank_of: dict[str, int] = {}
        paths: dict[tuple[str, str], list[tuple[int, float]]] = {}
        for part in g.C:
            sug = SugiyamaLayout(part)
            sug.xspace, sug.yspace = XSPACE, MIN_GAP
            sug.dw = 1  # a long edge's bend points: one column wide
            roots = [v for v in part.sV if v.data == START] or [v for v in part.sV if not v.e_in()] or None
            sug.init_all(roots=roots)
            sug.draw(3)
            xs = [v.view.xy[0] - v.view.w / 2 for v in part.sV] + [d.view.xy[0] for c in sug.ctrls.values() for d in c.values()]
            xe = [v.view.xy[0] + v.view.w / 2 for v in part.sV] + [d.view.xy[0] + 1 for c in sug.ctrls.values() for d in c.values()]
            shift = left - min(xs)
            for v in part.sV:
                x_of[v.data] = v.view.xy[0] + shift
                rank_of[v.data] = sug.grx[v].rank
            for e in part.sE:
                s, t = e.v[0].data, e.v[1].data
                ctrl = sug.ctrls.get(e, {})
                points = [(rank_of[s], x_of[s])] + [(r, d.view.xy[0] + shift) for r, d in sorted(ctrl.items()) if r not in (rank_of[s], rank_of[t])] + [(rank_of[t], x_of[t])]
                points.sort(key=lambda p: p[0])
                paths[(s, t)] = points
            layers = max(layers, max(sug.grx[v].rank for v in part.sV) + 1)
            left += round(max(xe) - min(xs)) + COMPONENT_GAP
            placed.append((sug, {}))
        for n in names:
            w = len(self._label(n, n in subgraphs)) + 4
            self.boxes[n] = _Box(n, self._label(n, n in subgraphs), max(0, round(x_of[n] - w / 2)), 0, w, rank_of[n], n in subgraphs)
        self._place_rows(layers, paths)

    def _place_rows(self, layers: int, paths: dict[tuple[str, str], list[tuple[int, float]]]) -> None:
        # Each edge is a list of segments between neighbouring layers; a box side gets a port per segment.
        segments: dict[int, list[list]] = {r: [] for r in range(layers)}  # gap under layer r -> [edge, x_top, x_bottom, top_node, bottom_node]
        for edge, points in paths.items():
            for (r0, x0), (r1, x1) in zip(points, points[1:]):
                top = next((n for n in edge if self.boxes[n].rank == r0), None)
                bottom = next((n for n in edge if self.boxes[n].rank == r1), None)
                segments.setdefault(r0, []).append([edge, round(x0), round(x1), top, bottom, r1 - r0])
        self._ports(segments)
        # Channels: a bend needs a row of its own in the gap, apart from every other bend that overlaps it.
        gap_rows: dict[int, int] = {}
        first: dict[int, int] = {}
        for r, segs in segments.items():
            rows: list[list[tuple[int, int]]] = []
            for seg in sorted(segs, key=lambda s: (min(s[1], s[2]), max(s[1], s[2]))):
                if seg[1] == seg[2]:
                    seg.append(None)
                    continue
                lo, hi = min(seg[1], seg[2]) - 1, max(seg[1], seg[2]) + 1
                k = next((i for i, taken in enumerate(rows) if all(hi < a or lo > b for a, b in taken)), None)
                if k is None:
                    rows.append([])
                    k = len(rows) - 1
                rows[k].append((lo, hi))
                seg.append(k)
            # An arrow into the upper box (an edge drawn upward) needs the first row to itself.
            first[r] = 1 if any(s[0][1] == s[3] and s[8] is not None for s in segs) else 0
            gap_rows[r] = max(MIN_GAP, len(rows) + 1 + first[r])
        tops, y = [], 0
        for r in range(layers):
            tops.append(y)
            y += BOX_H + gap_rows.get(r, MIN_GAP)
        for box in self.boxes.values():
            box.y = tops[box.rank]
        self.height = max(1, y - gap_rows.get(layers - 1, MIN_GAP) + (1 if layers else 0))
        # Room on the right for an edge's count beside its arrow.
        self.width = max([b.x + b.w + 3 for b in self.boxes.values()] + [s[1] + 6 for segs in segments.values() for s in segs] + [s[2] + 6 for segs in segments.values() for s in segs] + [1])
        self.grid = [{} for _ in range(self.height)]
        for r, segs in segments.items():
            for edge, x0, x1, top, bottom, span, _port_top, _port_bottom, channel in segs:
                row = None if channel is None else channel + first[r]
                self._draw_segment(edge, x0, x1, tops[r], tops[r] + BOX_H, tops[r + 1] if r + 1 < len(tops) else self.height, top, bottom, row)
        for box in self.boxes.values():
            self._draw_box(box)
        for edge in self.edges:
            self._place_count(edge)
        for y, row in enumerate(self.grid):
            owners: set = set()
            for c in row.values():
                owners.update(c.bits)
                owners.update(x for x in (c.node, c.edge_label, c.arrow) if x is not None)
            self._owners.append(owners)
            self._xs.append(sorted(row))
            for owner in owners:
                self._rows_of.setdefault(owner, set()).add(y)

    def _ports(self, segments: dict[int, list[list]]) -> None:
        """Spread the segments leaving a box's bottom (and entering its top) across its width, by where they go."""
        sides: dict[tuple[str, str], list[list]] = {}
        for segs in segments.values():
            for seg in segs:
                edge, x0, x1, top, bottom = seg[:5]
                seg.extend([None, None])
                if top is not None:
                    sides.setdefault((top, "bottom"), []).append(seg)
                if bottom is not None:
                    sides.setdefault((bottom, "top"), []).append(seg)
        for (name, side), segs in sides.items():
            box = self.boxes[name]
            other = 2 if side == "bottom" else 1
            segs.sort(key=lambda s: (s[other], s[0]))
            inner = list(range(box.x + 2, box.x + box.w - 2)) or [box.x + box.w // 2]
            for k, seg in enumerate(segs):
                x = inner[(k + 1) * len(inner) // (len(segs) + 1)] if len(segs) > 1 else box.x + box.w // 2
                if side == "bottom":
                    seg[1], seg[6] = x, x
                else:
                    seg[2], seg[7] = x, x

    def _draw_segment(self, edge: tuple[str, str], x0: int, x1: int, layer_top: int, y0: int, y1: int, top: str | None, bottom: str | None, channel: int | None) -> None:
        """A segment from (x0, under the upper layer) to (x1, over the lower one), bending in its channel row."""
        up_edge = top is not None and edge[1] == top  # drawn upward: the arrow points into the upper box
        if top is None:  # the upper end is a bend point of a long edge: the line runs down through its layer
            self._line(edge, x0, layer_top, x0, y0)
            self._cell(x0, layer_top).bits[edge] |= UP
        ys, ye = y0, y1 - 1
        if bottom is None:
            self._line(edge, x1, ye, x1, ye)
            self._cell(x1, ye).bits[edge] |= DOWN
        if channel is None:
            self._line(edge, x0, ys, x0, ye)
        else:
            yc = ys + channel
            self._line(edge, x0, ys, x0, yc)
            self._line(edge, x0, yc, x1, yc)
            self._line(edge, x1, yc, x1, ye)
        if bottom is not None and not up_edge:
            self._cell(x1, ye).arrow = edge
            self._arrows[edge] = (x1, min(max(ye, 0), self.height - 1))
        if up_edge:
            self._cell(x0, ys).arrow = edge
            self._arrows[edge] = (x0, min(max(ys, 0), self.height - 1))
        # The lines meet the box borders; where a line leaves a box, its border shows the port.
        if top is not None:
            self._cell(x0, y0).bits[edge] = self._cell(x0, y0).bits.get(edge, 0) | UP
            if not up_edge:
                self._cell(x0, y0 - 1).bits[edge] = DOWN
        if bottom is not None:
            self._cell(x1, ye).bits[edge] = self._cell(x1, ye).bits.get(edge, 0) | DOWN
            if up_edge:
                self._cell(x1, y1).bits[edge] = UP

    def _line(self, edge: tuple[str, str], xa: int, ya: int, xb: int, yb: int) -> None:
        if xa == xb:
            lo, hi = sorted((ya, yb))
            for y in range(lo, hi + 1):
                bits = (UP if y > lo else 0) | (DOWN if y < hi else 0)
                cell = self._cell(xa, y)
                cell.bits[edge] = cell.bits.get(edge, 0) | bits
        else:
            lo, hi = sorted((xa, xb))
            for x in range(lo, hi + 1):
                bits = (LEFT if x > lo else 0) | (RIGHT if x < hi else 0)
                cell = self._cell(x, ya)
                cell.bits[edge] = cell.bits.get(edge, 0) | bits

    def _cell(self, x: int, y: int) -> _Cell:
        row = self.grid[min(max(y, 0), self.height - 1)]
        x = min(max(x, 0), self.width - 1)
        cell = row.get(x)
        if cell is None:
            cell = row[x] = _Cell()
        return cell

    def _draw_box(self, box: _Box) -> None:
        x, y, w = box.x, box.y, box.w
        rounded = box.name in (START, END)
        corners = "╭╮╰╯" if rounded else "┌┐└┘"
        rows = [corners[0] + "─" * (w - 2) + corners[1], "│ " + box.label.ljust(w - 4) + " │", corners[2] + "─" * (w - 2) + corners[3]]
        for dy, row in enumerate(rows):
            for dx, ch in enumerate(row):
                cell = self._cell(x + dx, y + dy)
                ports = cell.bits
                if dy == 0 and ports and ch == "─":
                    ch = "┴"  # a line leaves through the top border (an edge drawn upward)
                elif dy == 2 and ports and ch == "─":
                    ch = "┬"
                cell.char, cell.node, cell.bits = ch, box.name, {e: 0 for e in ports} if dy in (0, 2) and ports else {}
        # Ports keep their edges, so a taken route lights its port on the border too.

    def _place_count(self, edge: tuple[str, str]) -> None:
        """``3×`` beside the edge's arrow (right, else left, else a row off), where nothing else is drawn."""
        n = self.counts.get(edge, 0)
        if not n:
            return
        label = f"{n}×"
        spot = self._arrows.get(edge)
        if spot is None:
            return
        ax, ay = spot
        away = 1 if edge[1] != self._top_of(edge) else -1  # the row off the arrow, away from the box it points into
        for x0, y0, pad in ((ax + 1, ay, 1), (ax - len(label), ay, -1), (ax + 1, ay - away, 1), (ax - len(label), ay - away, -1)):
            cells = range(x0, x0 + len(label))
            guard = x0 + len(label) if pad > 0 else x0 - 1
            if 0 <= y0 < self.height and x0 >= 0 and x0 + len(label) <= self.width and all(self._free(x, y0) for x in cells) and self._free(guard, y0):
                for i, ch in enumerate(label):
                    cell = self._cell(x0 + i, y0)
                    cell.char, cell.edge_label = ch, edge
                return

    def _top_of(self, edge: tuple[str, str]) -> str:
        return min(edge, key=lambda n: self.boxes[n].rank)

    def _free(self, x: int, y: int) -> bool:
        if not (0 <= x < self.width and 0 <= y < self.height):
            return True
        c = self.grid[y].get(x)
        if c is None:
            return True
        return not c.bits and c.node is None and c.edge_label is None and c.arrow is None

    # -- drawing a step ------------------------------------------------------------------------
    def lines(self, current: Iterable[str] = (), taken: Iterable[tuple[str, str]] = (), failed: Iterable[str] = ()) -> list[Text]:
        """The drawing for one step: ``current`` nodes ran, ``taken`` edges are its route, ``failed`` nodes raised."""
        current, taken, failed = set(current), set(taken), set(failed)
        return [self.line(y, current, taken, failed) for y in range(self.height)]

    def rows_lit(self, current: Iterable[str], taken: Iterable[tuple[str, str]]) -> set[int]:
        """The rows a step's nodes and route are drawn in: what changes when the step changes."""
        out: set[int] = set()
        for owner in [*current, *taken]:
            out |= self._rows_of.get(owner, set())
        return out

    def lit(self, y: int, current: set[str], taken: set[tuple[str, str]], failed: set[str]) -> bool:
        """Whether row ``y`` looks different for this step than with nothing lit."""
        owners = self._owners[y]
        return not (owners.isdisjoint(current) and owners.isdisjoint(taken) and owners.isdisjoint(failed))

    def line(self, y: int, current: set[str] = frozenset(), taken: set[tuple[str, str]] = frozenset(), failed: set[str] = frozenset()) -> Text:
        """One row of the drawing (the widget draws only the rows in view); rows the step does not light are kept."""
        lit = self.lit(y, current, taken, failed)
        if not lit and y in self._plain:
            return self._plain[y]
        text = Text(no_wrap=True, end="")
        run_chars: list[str] = []
        run_style = STYLE_PLAIN
        row = self.grid[y]
        at = 0
        for x in self._xs[y]:
            if x > at:  # blank cells up to the next drawn one
                if run_style is not STYLE_PLAIN and run_chars:
                    text.append("".join(run_chars), run_style)
                    run_chars = []
                run_style = STYLE_PLAIN
                run_chars.append(" " * (x - at))
            ch, style = self._look(row[x], current, taken, failed)
            if style is not run_style and run_chars:
                text.append("".join(run_chars), run_style)
                run_chars = []
            run_style = style
            run_chars.append(ch)
            at = x + 1
        if run_chars:
            text.append("".join(run_chars), run_style)
        if not lit:
            self._plain[y] = text
        return text

    def _look(self, cell: _Cell, current: set[str], taken: set[tuple[str, str]], failed: set[str]) -> tuple[str, Style]:
        if cell.node is not None:
            hot = cell.node in current
            on_taken = any(e in taken for e in cell.bits)
            ch = cell.char.translate(_HEAVY_BOX) if hot or on_taken and cell.char in "┬┴" else cell.char
            if cell.node in failed:
                return ch, STYLE_FAILED
            if hot:
                return ch, STYLE_CURRENT
            if on_taken:
                return ch, STYLE_TAKEN
            return ch, STYLE_UNUSED if self._unused_node(cell.node) else STYLE_PLAIN
        if cell.edge_label is not None:
            return cell.char, STYLE_TAKEN if cell.edge_label in taken else STYLE_COUNT
        if cell.arrow is not None:
            up = self._top_of(cell.arrow) == cell.arrow[1]
            hot = cell.arrow in taken or any(e in taken for e in cell.bits)
            return ("▲" if up else "▼"), STYLE_TAKEN if hot else (STYLE_UNUSED if self._unused(cell.arrow) else STYLE_PLAIN)
        if not cell.bits:
            return " ", STYLE_PLAIN
        bits = 0
        hot = False
        for edge, b in cell.bits.items():
            bits |= b
            hot = hot or edge in taken
        ch = (_HEAVY if hot else _LIGHT).get(bits, "·")
        if hot:
            return ch, STYLE_TAKEN
        return ch, STYLE_UNUSED if all(self._unused(e) for e in cell.bits) else STYLE_PLAIN

    def _unused(self, edge: tuple[str, str]) -> bool:
        return self.ran is not None and not self.counts.get(edge)

    def _unused_node(self, name: str) -> bool:
        return self.ran is not None and name not in self.ran and name not in (START, END)


class _View:
    """The size grandalf lays a node out by; it writes the position back (``xy``)."""

    def __init__(self, w: int, h: int) -> None:
        self.w, self.h = w, h
        self.xy = (0.0, 0.0)
