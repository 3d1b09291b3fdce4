"""The superstep timeline: one row per step, what ran and where it went.

Drawn only where rows are in view (``tui.widgets.rows_view``), so a run of
10,000 steps opens as fast as one of ten.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.strip import Strip

from graphtape.recorder.records import FLAG_RESUME, StepInfo
from graphtape.tui.render import fmt_ms
from graphtape.tui.widgets.rows_view import RowsView

# (header, width, justify); the route column takes what is left.
COLUMNS = (("step", 4, "right"), ("", 2, "left"), ("nodes", 12, "left"), ("calls", 8, "left"), ("time", 7, "right"))
ROUTE_HEADER = "route (why the run went there)"
ROUTE_MIN = 12
GAP = 1
GAP_LABEL = "(no step)"  # a gap row of two aligned runs: the other run has a step here


def step_markers(step: StepInfo) -> Text:
    text = Text()
    if step.has_error:
        text.append("✗", style="bold red")
    if step.has_interrupt:
        text.append("⏸", style="bold yellow")
    if step.flags & FLAG_RESUME:
        text.append("▶", style="bold green")
    return text


def calls_text(counts: dict[str, int]) -> Text:
    """``T2 M1 S3 1✗``: tool and model calls and store operations of a step, and how many failed."""
    text = Text(" ".join(f"{letter}{counts[kind]}" for kind, letter in (("tool", "T"), ("model", "M"), ("store", "S")) if counts.get(kind)))
    if counts.get("failed"):
        text.append(f" {counts['failed']}✗", style="bold red")
    return text


def step_cells(step: StepInfo, counts: dict[str, int], resumed_at: int | None = None) -> list[Text]:
    """The cells of one row, in ``COLUMNS`` order followed by the route.

    ``resumed_at``: the step a replay started from (its first row, the recorded state it resumed).
    """
    label = Text(str(step.step), style="dim" if step.step < 0 else "")
    # A step no node ran in says where it came from: "(update)" is an edit (a fork's, or
    # update_state), "(resumed)" the recorded state a replay started from.
    quiet = "input" if step.step < 0 else f"({step.source})" if step.source and step.source != "loop" else "(resumed)" if step.step == resumed_at else "—"
    nodes = Text(", ".join(step.nodes) or quiet, style="bold red" if step.has_error else "")
    duration = Text(fmt_ms(step.duration_ms).replace(" ms", "ms"), style="dim")
    summary = Text(step.summary or ("(interrupted here)" if step.pending and step.has_interrupt else ""))
    # An interrupted step shows again once resumed: its calls count there. A failed step stays pending: count them here.
    return [label, step_markers(step), nodes, calls_text(counts if step.has_error or not step.pending else {}), duration, summary]


class Timeline(RowsView):
    """Steps of one namespace; moving the cursor asks the screen to show that step.

    The screen hands the steps over with :meth:`show_steps` and moves the
    cursor by setting :attr:`cursor`; keys and clicks move it too. Every move
    posts :class:`StepChosen`, so the screen has one path for all of them.
    """

    BINDINGS = [
        Binding("up,k", "cursor(-1)", "Up", show=False),
        Binding("down,j", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
    ]

    class StepChosen(Message):
        """The user moved to another step (index into the timeline's steps)."""

        def __init__(self, index: int, timeline: Timeline | None = None) -> None:
            super().__init__()
            self.index = index
            self.timeline = timeline

        @property
        def control(self) -> Timeline | None:
            """The timeline that moved (a screen may show two)."""
            return self.timeline

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.steps: list[StepInfo | None] = []  # None: a gap row (two aligned runs, the other has a step here)
        self.calls: dict[int, dict[str, int]] = {}
        self.resumed_at: int | None = None
        self._marks: dict[int, Text] = {}
        self._step_width = COLUMNS[0][1]

    @property
    def marks(self) -> dict[int, Text]:
        """A mark per step number, shown before the step's own markers (the compare screen's ``+`` and ``≠``)."""
        return self._marks

    @marks.setter
    def marks(self, marks: dict[int, Text]) -> None:
        self._marks = marks
        self._lines.clear()
        self.refresh()

    def show_steps(self, steps: list[StepInfo | None], calls: dict[int, dict[str, int]], resumed_at: int | None = None) -> None:
        """Replace the rows (the screen hands over steps, per-step call counts and, for a
        replay or fork, the step it resumed from; a ``None`` row is a gap in an aligned view)."""
        self.steps = steps
        self.calls = calls
        self.resumed_at = resumed_at
        ends = [next((s for s in steps if s is not None), None), next((s for s in reversed(steps) if s is not None), None)]
        self._step_width = max([COLUMNS[0][1], *(len(str(s.step)) for s in ends if s is not None)])
        self.set_reactive(Timeline.cursor, -1)
        self._lines.clear()
        self._set_virtual_size()
        self.refresh()

    def row_count(self) -> int:
        return len(self.steps)

    def cursor_moved(self, old: int, new: int) -> None:
        if new != old and new >= 0:
            self.post_message(self.StepChosen(new, self))

    # -- geometry ---------------------------------------------------------------
    def _fixed_width(self) -> int:
        return self._step_width + sum(w for _, w, _ in COLUMNS[1:]) + GAP * len(COLUMNS)

    def _route_width(self) -> int:
        return max(ROUTE_MIN, self._paint[1] - self._fixed_width())

    def _set_virtual_size(self) -> None:
        # One line for the header above the rows; the route column fills the width.
        self.virtual_size = Size(self._fixed_width() + ROUTE_MIN, len(self.steps) + 1)

    def on_resize(self) -> None:
        self._set_virtual_size()
        super().on_resize()

    # -- drawing ----------------------------------------------------------------
    def paint_key(self) -> int:
        return self._route_width()

    def draw_row(self, index: int | None, style_name: str, base: Style) -> Strip:
        row_style = base + (self.get_component_rich_style(style_name) if style_name else Style())
        route = self._route_width()
        if index is None:
            cells = [Text(title) for title, _, _ in COLUMNS] + [Text(ROUTE_HEADER)]
        else:
            step = self.steps[index]
            if step is None:
                # Fits the nodes column whole (it is 12 wide): an aligned view's gap, the other run has a step here.
                cells = [Text("·", style="dim"), Text(), Text(GAP_LABEL, style="dim italic"), Text(), Text(), Text()]
            else:
                cells = step_cells(step, self.calls.get(step.step, {}), self.resumed_at)
                if step.step in self._marks:
                    cells[1] = Text.assemble(self._marks[step.step], cells[1])
        widths = [self._step_width, *(w for _, w, _ in COLUMNS[1:]), route]
        justify = [j for _, _, j in COLUMNS] + ["left"]
        console = self.app.console
        segments: list[Segment] = []
        gap = Segment(" " * GAP, row_style)
        for cell, width, just in zip(cells, widths, justify):
            cell.truncate(width, overflow="ellipsis", pad=False)
            pad = width - cell.cell_len
            if just == "right":
                segments.append(Segment(" " * pad, row_style))
            segments.extend(Segment(seg.text, row_style + seg.style if seg.style else row_style) for seg in cell.render(console, end=""))
            if just != "right":
                segments.append(Segment(" " * pad, row_style))
            segments.append(gap)
        return Strip(segments).adjust_cell_length(self._fixed_width() + route, row_style).simplify()
