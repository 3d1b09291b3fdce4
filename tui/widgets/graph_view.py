"""The run screen's graph view: the run's graph, its subgraphs below, the current step lit up.

The screen hands it the run and namespace when it is made and each step's
detail as the user steps (attributes down). It reads and lays the graph out
once, in a worker, the first time it is shown; stepping only restyles the
rows in view (``tui.graph_layout``) and scrolls the step's nodes into view.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import work
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from graphtape.recorder.errors import GraphtapeError
from graphtape.recorder.records import StepDetail
from graphtape.tui.graph_layout import STYLE_CURRENT, STYLE_TAKEN
from graphtape.tui.graph_reader import GraphDrawing, read_graph, step_marks
from graphtape.tui.render import printable

LEGEND = (
    Text.assemble(("┏┓ ran in this step", STYLE_CURRENT), ("  ", ""), ("━▼ the route it took", STYLE_TAKEN)),
    Text.assemble(("3× how often the run took an edge", "cyan"), ("  ", ""), ("dim: never used", "dim")),
)


class GraphView(ScrollView, can_focus=True):
    """The graph recorded with the run, drawn in box characters; the current step's nodes and route stand out."""

    BINDINGS = [
        Binding("up,k", "scroll_up", "Up", show=False),
        Binding("down,j", "scroll_down", "Down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("shift+left", "scroll_left", "Left", show=False),
        Binding("shift+right", "scroll_right", "Right", show=False),
    ]

    class Loaded(Message):
        def __init__(self, drawings: list[GraphDrawing] | None, error: str | None = None) -> None:
            super().__init__()
            self.drawings = drawings
            self.error = error

    def __init__(self, run_id: str, ns: str = "", **kwargs) -> None:
        super().__init__(**kwargs)
        self.run_id, self.ns = run_id, ns
        self.drawings: list[GraphDrawing] | None = None
        self.rows: list[tuple[int, int] | Text] = [Text("the graph loads when this tab opens", style="dim")]
        self.marks: tuple[set[str], set[tuple[str, str]], set[str]] = (set(), set(), set())
        self.step_label = ""
        self._loading = False
        self._strips: dict[tuple[int, int], Strip] = {}  # drawing rows with nothing lit, drawn once
        self._strips_style: Style | None = None
        self._reveal = False  # scroll to the step's nodes once the graph is laid out and shown

    # -- data in -------------------------------------------------------------------------
    def show_step(self, step: int, detail: StepDetail) -> None:
        """Light up this step's nodes and route (the screen calls this on every step).

        Only the rows that were lit or are lit now are drawn again, and the
        view scrolls only when the step's nodes are out of it.
        """
        before = self.marks
        self.marks = step_marks(detail)
        self.step_label = f"step {step}"
        self._reveal = True
        if not self.drawings or not isinstance(self.rows[0], Text):
            self._rebuild_rows()
            self.refresh()
            return
        self.rows[0] = self._legend()
        layout = self.drawings[0].layout
        if layout is None:
            self.refresh_line(0)
            return
        top = self.rows.index((0, 0))
        changed = {0} | {top + y for y in layout.rows_lit(before[0], before[1]) | layout.rows_lit(self.marks[0], self.marks[1])}
        first, height = int(self.scroll_offset.y), self.scrollable_content_region.height
        for index in changed:
            if first <= index < first + height:
                self.refresh_line(index)  # in the drawing's coordinates: the view takes its scroll off
        if self.size.height:
            self.call_after_refresh(self.reveal_step)

    def on_show(self) -> None:
        if self.drawings is None and not self._loading:
            self._loading = True
            self.rows = [Text("laying the graph out…", style="dim")]
            self.refresh()
            self.load()
        elif self._reveal:
            self.call_after_refresh(self.reveal_step)

    @work(thread=True, exclusive=True, group="graph")
    def load(self) -> None:
        try:
            drawings = read_graph(self.app.store, self.run_id, self.ns)
        except GraphtapeError as exc:
            self.post_message(self.Loaded(None, str(exc)))
            return
        self.post_message(self.Loaded(drawings))

    def on_graph_view_loaded(self, message: Loaded) -> None:
        message.stop()
        self._loading = False
        if message.drawings is None:
            self.rows = [Text(printable(f"Cannot draw the graph: {message.error}"), style="bold red")]
            self.drawings = []
        else:
            self.drawings = message.drawings
            self._rebuild_rows()
        self.refresh()
        self.call_after_refresh(self.reveal_step)

    # -- rows --------------------------------------------------------------------------------
    def _rebuild_rows(self) -> None:
        """The lines to draw: a legend, then each drawing's title, note and grid rows."""
        if self.drawings is None:
            return
        rows: list[tuple[int, int] | Text] = [self._legend(), LEGEND[1]]
        for k, drawing in enumerate(self.drawings):
            rows.append(Text(""))
            rows.append(Text(drawing.title, style="bold" if k == 0 else "bold cyan"))
            if drawing.note:
                rows.append(Text(drawing.note, style="italic yellow"))
            if drawing.layout is not None:
                rows.extend((k, y) for y in range(drawing.layout.height))
        self.rows = rows
        width = max([d.layout.width for d in self.drawings if d.layout is not None] + [r.cell_len for r in rows if isinstance(r, Text)] + [1])
        self.virtual_size = Size(width, len(rows))

    def _legend(self) -> Text:
        return Text.assemble((f"{self.step_label}: " if self.step_label else "", "bold"), LEGEND[0])

    def reveal_step(self) -> None:
        """Scroll so the step's nodes (in the run's own graph) are in view."""
        if not self.drawings or self.drawings[0].layout is None or not self._reveal:
            return
        layout = self.drawings[0].layout
        boxes = [layout.boxes[n] for n in self.marks[0] if n in layout.boxes]
        if not boxes:
            return
        top = next(i for i, r in enumerate(self.rows) if r == (0, 0))
        x0, x1 = min(b.x for b in boxes), max(b.x + b.w for b in boxes)
        y0, y1 = min(b.y for b in boxes), max(b.y for b in boxes) + 3
        region = Region(x0, top + y0, max(1, x1 - x0), max(1, y1 - y0))
        visible = Region(int(self.scroll_offset.x), int(self.scroll_offset.y), self.scrollable_content_region.width, self.scrollable_content_region.height)
        if not visible.contains_region(region):
            self.scroll_to_region(region, animate=False, center=True, force=True, immediate=True)

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        base = self.rich_style
        index = int(scroll_y) + y
        if index >= len(self.rows):
            return Strip.blank(width, base)
        row = self.rows[index]
        if base != self._strips_style:
            self._strips.clear()
            self._strips_style = base
        if isinstance(row, Text):
            strip = self._strip(row, base)
        else:
            k, line = row
            layout = self.drawings[k].layout
            nodes, taken, failed = self.marks if k == 0 else (set(), set(), set())
            if layout.lit(line, nodes, taken, failed):
                strip = self._strip(layout.line(line, nodes, taken, failed), base)
            else:
                strip = self._strips.get(row)
                if strip is None:
                    strip = self._strips[row] = self._strip(layout.line(line), base)
        return strip.extend_cell_length(int(scroll_x) + width, base).crop(int(scroll_x), int(scroll_x) + width)

    def _strip(self, text: Text, base: Style) -> Strip:
        return Strip([Segment(s.text, base + s.style if s.style else base) for s in text.render(self.app.console, end="")])

    def on_resize(self) -> None:
        if self._reveal:
            self.call_after_refresh(self.reveal_step)

    # -- keys ----------------------------------------------------------------------------------
    def action_scroll_up(self) -> None:
        self.scroll_relative(y=-1, animate=False)

    def action_scroll_down(self) -> None:
        self.scroll_relative(y=1, animate=False)

    def action_page_up(self) -> None:
        self.scroll_relative(y=-max(1, self.size.height - 2), animate=False)

    def action_page_down(self) -> None:
        self.scroll_relative(y=max(1, self.size.height - 2), animate=False)

    def action_scroll_left(self) -> None:
        self.scroll_relative(x=-8, animate=False)

    def action_scroll_right(self) -> None:
        self.scroll_relative(x=8, animate=False)

