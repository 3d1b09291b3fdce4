"""A header line over rows drawn only where they are in view, with a cursor: the timeline and the runs list.

A Line-API widget keeps its rows as data and draws the ones in view, so 10,000
steps or 20,000 runs open as fast as ten (a ``DataTable`` builds and measures
every cell up front, on the UI thread). Subclasses say how many rows there are
and how one is drawn; this class owns the cursor, scrolling, clicks and the
cache of drawn rows.
"""

from __future__ import annotations

from collections.abc import Hashable

from rich.style import Style
from textual import events
from textual.cache import LRUCache
from textual.geometry import Region, Spacing
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

HEADER = "rows--header"
CURSOR = "rows--cursor"
STRIPE = "rows--even-row"


class RowsView(ScrollView, can_focus=True):
    """Rows under a header line; ``cursor`` is the selected row (-1: none). Setting it scrolls it into view."""

    COMPONENT_CLASSES = {HEADER, CURSOR, STRIPE}

    DEFAULT_CSS = """
    RowsView {
        background: $surface;
        color: $foreground;
        & > .rows--header {
            text-style: bold;
            background: $panel;
            color: $foreground;
        }
        & > .rows--even-row {
            background: $surface-lighten-1 50%;
        }
        & > .rows--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
        &:focus {
            background-tint: $foreground 5%;
            & > .rows--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
        }
        &:dark > .rows--even-row {
            background: $surface-darken-1 40%;
        }
    }
    """

    STRIPED = 1  # rows whose index % 2 is this are striped

    cursor: reactive[int] = reactive(-1, init=False, always_update=True)

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        # Rows already drawn, keyed by everything that changes how they look.
        self._lines: LRUCache[tuple, Strip] = LRUCache(256)
        self._paint: tuple[Style, int] = (Style(), 0)  # the widget's style and width, once per paint

    # -- what subclasses say ----------------------------------------------------
    def row_count(self) -> int:
        raise NotImplementedError

    def draw_row(self, index: int | None, style_name: str, base: Style) -> Strip:
        """Row ``index`` (``None``: the header) in component style ``style_name`` ("" for a plain row)."""
        raise NotImplementedError

    def paint_key(self) -> Hashable:
        """What else changes how rows look (column widths...); part of the drawn-row cache key."""
        return None

    def cursor_moved(self, old: int, new: int) -> None:
        """Called on every cursor change, after the rows are redrawn and the cursor is in view."""

    def header_clicked(self, x: int) -> None:
        """A click on the header line at column ``x`` of the rows (scroll included)."""

    def row_clicked(self, index: int) -> None:
        self.cursor = index

    # -- the cursor -------------------------------------------------------------
    def validate_cursor(self, value: int) -> int:
        n = self.row_count()
        return max(0, min(value, n - 1)) if n else -1

    def watch_cursor(self, old: int, new: int) -> None:
        for row in (old, new):
            if row >= 0:
                self.refresh_line(row + 1)  # only the two rows that change look (scrolling repaints the rest)
        self.reveal_cursor()  # even when it stays put: the layout may have moved since
        self.cursor_moved(old, new)

    def reveal_cursor(self) -> None:
        """Scroll so the selected row is in view, below the header."""
        if 0 <= self.cursor < self.row_count():
            row = Region(int(self.scroll_offset.x), self.cursor + 1, 1, 1)
            self.scroll_to_region(row, spacing=Spacing(top=1), animate=False, force=True, immediate=True)

    def page_size(self) -> int:
        return max(1, self.scrollable_content_region.height - 2)  # a screenful of rows, less the header and one kept

    def action_cursor(self, delta: int) -> None:
        self.cursor += delta

    def action_page(self, direction: int) -> None:
        self.cursor += direction * self.page_size()

    def action_first(self) -> None:
        self.cursor = 0

    def action_last(self) -> None:
        self.cursor = self.row_count() - 1

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        if offset.y < 1:
            event.stop()
            self.header_clicked(int(self.scroll_offset.x) + offset.x)
            return
        index = int(self.scroll_offset.y) + offset.y - 1
        if 0 <= index < self.row_count():
            event.stop()
            self.row_clicked(index)

    def on_resize(self) -> None:
        self._lines.clear()
        # Keep the selected row in view when the layout changes size.
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
            index, style_name = None, HEADER
        else:
            index = int(scroll_y) + y - 1
            if index >= self.row_count():
                return Strip.blank(width, base)
            style_name = CURSOR if index == self.cursor else STRIPE if index % 2 == self.STRIPED else ""
        key = (index, style_name, base, self.has_focus, self.paint_key())
        strip = self._lines.get(key)
        if strip is None:
            strip = self.draw_row(index, style_name, base)
            self._lines[key] = strip
        return strip.crop(int(scroll_x), int(scroll_x) + width)
