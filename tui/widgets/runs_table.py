"""The runs list: one row per run, a header that sorts, a cursor that opens a run.

Drawn only where rows are in view (``tui.widgets.rows_view``), so 20,000 runs
load and re-sort in the time of a Python sort.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.strip import Strip

from graphtape.recorder.records import RunInfo
from graphtape.tui.widgets.rows_view import CURSOR, RowsView

PAD = 1  # blank cells either side of every column


@dataclass(frozen=True)
class TableColumn:
    """A column as drawn: its key, its header (with any sort marker), its width without padding, its cell."""

    key: str
    header: str
    width: int
    cell: Callable[[RunInfo], Text]


class RunsTable(RowsView):
    """Runs in the order the screen hands them over; Enter (or a click on the selected row) opens one.

    The screen sets rows and columns with :meth:`show_runs`; the widget posts
    :class:`RunSelected` and :class:`HeaderClicked` and leaves opening and
    sorting to the screen.
    """

    BINDINGS = [
        Binding("enter", "select", "Open", show=False),
        Binding("up", "cursor(-1)", "Up", show=False),
        Binding("down", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home,ctrl+home", "first", "First", show=False),
        Binding("end,ctrl+end", "last", "Last", show=False),
    ]

    STRIPED = 0

    class RunSelected(Message):
        """The user asked to open the selected run (Enter, or a click on the selected row)."""

        def __init__(self, run: RunInfo) -> None:
            super().__init__()
            self.run = run

    class HeaderClicked(Message):
        """The user clicked a column's header (the screen sorts by it)."""

        def __init__(self, key: str) -> None:
            super().__init__()
            self.key = key

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.runs: Sequence[RunInfo] = []
        self.columns: Sequence[TableColumn] = []
        self._row_width = 0

    @property
    def cursor_row(self) -> int:
        """Index of the selected run in :attr:`runs`; -1 when there are none (the name ``DataTable`` uses)."""
        return self.cursor

    @cursor_row.setter
    def cursor_row(self, index: int) -> None:
        self.cursor = index

    def show_runs(self, runs: Sequence[RunInfo], columns: Sequence[TableColumn], *, keep_selection: bool = False) -> None:
        """Replace the rows and columns; the cursor goes to the first run, or stays on the selected one."""
        selected = self.selected_run() if keep_selection else None
        self.runs = runs
        self.columns = columns
        self._row_width = sum(c.width + 2 * PAD for c in columns)
        self._lines.clear()
        self.virtual_size = Size(self._row_width, len(runs) + 1)  # one line for the header
        index = 0
        if selected is not None:
            index = next((i for i, run in enumerate(runs) if run.id == selected.id), 0)
        self.cursor = index
        self.refresh()

    def row_count(self) -> int:
        return len(self.runs)

    def selected_run(self) -> RunInfo | None:
        """The run under the cursor, if any."""
        return self.runs[self.cursor] if 0 <= self.cursor < len(self.runs) else None

    def get_row(self, run_id: str) -> list[Text]:
        """A run's cells as drawn, in column order (the name ``DataTable`` uses)."""
        for run in self.runs:
            if run.id == run_id:
                return [column.cell(run) for column in self.columns]
        raise KeyError(f"no run {run_id!r} in the table")

    def get_cell(self, run_id: str, key: str) -> Text:
        """One cell of a run's row, by column key."""
        keys = [column.key for column in self.columns]
        return self.get_row(run_id)[keys.index(key)]

    def action_select(self) -> None:
        run = self.selected_run()
        if run is not None:
            self.post_message(self.RunSelected(run))

    def row_clicked(self, index: int) -> None:
        if index == self.cursor:
            self.action_select()  # a click on the selected run opens it, as in a DataTable
        else:
            self.cursor = index

    def header_clicked(self, x: int) -> None:
        right = 0
        for column in self.columns:
            right += column.width + 2 * PAD
            if x < right:
                self.post_message(self.HeaderClicked(column.key))
                return

    # -- drawing ----------------------------------------------------------------
    def _length(self) -> int:
        # Rows fill the view's width when the columns are narrower, so stripes and cursor span it.
        return max(self._row_width, int(self.scroll_offset.x) + self._paint[1])

    def paint_key(self) -> int:
        return self._length()

    def draw_row(self, index: int | None, style_name: str, base: Style) -> Strip:
        look = self.get_component_rich_style(style_name) if style_name else Style()
        row_style = base + look
        # The cursor's colours go over the cells' own (a green status stays readable on it).
        over = look if style_name == CURSOR else Style()
        if index is None:
            cells = [Text(column.header) for column in self.columns]
        else:
            run = self.runs[index]
            cells = [column.cell(run) for column in self.columns]
        console = self.app.console
        pad = Segment(" " * PAD, row_style)
        segments: list[Segment] = []
        for cell, column in zip(cells, self.columns):
            cell.truncate(column.width, overflow="ellipsis", pad=True)
            # ``Text.render`` yields the spans' styles only: the cell's own style is added here.
            cell_style = row_style + console.get_style(cell.style) if cell.style else row_style
            segments.append(pad)
            segments.extend(Segment(seg.text, (cell_style + seg.style if seg.style else cell_style) + over) for seg in cell.render(console, end=""))
            segments.append(pad)
        return Strip(segments).adjust_cell_length(self._length(), row_style).simplify()
