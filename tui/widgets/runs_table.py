"""The runs list: one row per run, a header that sorts, a cursor that opens a run.

A Line-API widget, like the timeline: it keeps the runs as data and draws only
the rows in view, so 20,000 runs load and re-sort in the time of a Python sort
(a ``DataTable`` builds and measures every cell up front, on the UI thread).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.cache import LRUCache
from textual.geometry import Region, Size, Spacing
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from recorder.records import RunInfo

PAD = 1  # blank cells either side of every column


@dataclass(frozen=True)
class TableColumn:
    """A column as drawn: its key, its header (with any sort marker), its width without padding, its cell."""

    key: str
    header: str
    width: int
    cell: Callable[[RunInfo], Text]


class RunsTable(ScrollView, can_focus=True):
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

    COMPONENT_CLASSES = {"runs-table--header", "runs-table--cursor", "runs-table--even-row"}

    DEFAULT_CSS = """
    RunsTable {
        background: $surface;
        color: $foreground;
        & > .runs-table--header {
            text-style: bold;
            background: $panel;
            color: $foreground;
        }
        & > .runs-table--even-row {
            background: $surface-lighten-1 50%;
        }
        & > .runs-table--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
        &:focus {
            background-tint: $foreground 5%;
            & > .runs-table--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
        }
        &:dark > .runs-table--even-row {
            background: $surface-darken-1 40%;
        }
    }
    """

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

    cursor_row: reactive[int] = reactive(-1, init=False, always_update=True)
    """Index of the selected run in :attr:`runs`; -1 when there are none. Setting it scrolls it into view."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.runs: Sequence[RunInfo] = []
        self.columns: Sequence[TableColumn] = []
        self._row_width = 0
        # Rows already drawn, keyed by everything that changes how they look.
        self._lines: LRUCache[tuple, Strip] = LRUCache(256)
        self._paint: tuple[Style, int] = (Style(), 0)

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
        self.cursor_row = index
        self.refresh()

    def selected_run(self) -> RunInfo | None:
        """The run under the cursor, if any."""
        return self.runs[self.cursor_row] if 0 <= self.cursor_row < len(self.runs) else None

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

    # -- the cursor -------------------------------------------------------------
    def validate_cursor_row(self, value: int) -> int:
        return max(0, min(value, len(self.runs) - 1)) if self.runs else -1

    def watch_cursor_row(self, old: int, new: int) -> None:
        for row in (old, new):
            if row >= 0:
                self.refresh_line(row + 1)  # only the two rows that change look (scrolling repaints the rest)
        self.reveal_cursor()

    def reveal_cursor(self) -> None:
        """Scroll so the selected run is in view, below the header."""
        if self.cursor_row >= 0:
            row = Region(int(self.scroll_offset.x), self.cursor_row + 1, 1, 1)
            self.scroll_to_region(row, spacing=Spacing(top=1), animate=False, force=True, immediate=True)

    def _page(self) -> int:
        return max(1, self.scrollable_content_region.height - 2)  # a screenful of rows, less the header and one kept

    def action_cursor(self, delta: int) -> None:
        self.cursor_row += delta

    def action_page(self, direction: int) -> None:
        self.cursor_row += direction * self._page()

    def action_first(self) -> None:
        self.cursor_row = 0

    def action_last(self) -> None:
        self.cursor_row = len(self.runs) - 1

    def action_select(self) -> None:
        run = self.selected_run()
        if run is not None:
            self.post_message(self.RunSelected(run))

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        event.stop()
        if offset.y < 1:
            key = self._column_at(int(self.scroll_offset.x) + offset.x)
            if key is not None:
                self.post_message(self.HeaderClicked(key))
            return
        index = int(self.scroll_offset.y) + offset.y - 1
        if index == self.cursor_row:
            self.action_select()  # a click on the selected run opens it, as in a DataTable
        elif 0 <= index < len(self.runs):
            self.cursor_row = index

    def _column_at(self, x: int) -> str | None:
        right = 0
        for column in self.columns:
            right += column.width + 2 * PAD
            if x < right:
                return column.key
        return None

    def on_resize(self) -> None:
        self._lines.clear()
        # Keep the selected run in view when the layout changes size.
        self.call_after_refresh(self.reveal_cursor)

    def on_focus(self) -> None:
        self.refresh()  # the cursor's colour depends on focus

    def on_blur(self) -> None:
        self.refresh()

    # -- drawing ----------------------------------------------------------------
    def render_lines(self, crop: Region) -> list[Strip]:
        # Work out once per paint what every line needs (rich_style walks the DOM).
        self._paint = (self.rich_style, self.scrollable_content_region.width)
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        base, width = self._paint
        if y == 0:
            index = None
            style_name = "runs-table--header"
        else:
            index = int(scroll_y) + y - 1
            if index >= len(self.runs):
                return Strip.blank(width, base)
            style_name = "runs-table--cursor" if index == self.cursor_row else "" if index % 2 else "runs-table--even-row"
        # Rows fill the view's width when the columns are narrower, so stripes and cursor span it.
        length = max(self._row_width, int(scroll_x) + width)
        key = (index, style_name, base, self.has_focus, length)
        strip = self._lines.get(key)
        if strip is None:
            look = self.get_component_rich_style(style_name) if style_name else Style()
            # The cursor's colours go over the cells' own (a green status stays readable on it).
            strip = self._draw_row(index, base + look, look if style_name == "runs-table--cursor" else Style(), length)
            self._lines[key] = strip
        return strip.crop(int(scroll_x), int(scroll_x) + width)

    def _draw_row(self, index: int | None, row_style: Style, over: Style, length: int) -> Strip:
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
        return Strip(segments).adjust_cell_length(length, row_style).simplify()
