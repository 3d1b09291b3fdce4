"""The difference between two states: one line per change, drawn only where it is in view.

A Line-API widget, so a diff of 10,000 entries paints as fast as one of ten; a
Rich table of them wrapped and measured every cell first. Long runs of list
appends arrive folded to their ends (``tui.data.diff_states``).
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.cache import LRUCache
from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from graphtape.tui.render import cut_middle, printable
from graphtape.tui.data import DiffEntry, count_differences, short

MARKS = {"added": ("+", "green"), "appended": ("+", "green"), "removed": ("-", "red"), "changed": ("~", "yellow"), "skipped": ("⋮", "dim")}
PATH_SHARE = 0.35  # at most this much of the width goes to paths
HEAD_LINES = 2  # the title, then a blank line
VALUE_CHARS = 400  # values are cut to the line's width after this, which keeps more of them than short's "(+N chars)"


def entry_text(entry: DiffEntry, part: int, path_width: int, width: int) -> Text:
    """One line of a diff entry: mark, path, then its value.

    A change takes two lines (``part`` 0 the old value, 1 the new one) so each
    value gets the whole width; every other entry takes one.
    """
    mark, style = MARKS.get(entry.kind, ("?", ""))
    text = Text(f"{mark} " if part == 0 else "  ", style=style)
    # Cut in the middle: sibling paths differ at their ends ("…observation.status", "…observation.result").
    path = Text(cut_middle(printable(entry.path), path_width) if part == 0 else "", style=style)
    path.truncate(path_width, pad=True)
    text.append_text(path)
    text.append("  ")
    if entry.kind == "skipped":
        text.append(f"{entry.new:,} more appended", style="dim")
    elif entry.kind in ("added", "appended"):
        text.append(short(entry.new, VALUE_CHARS))
    elif entry.kind == "removed":
        text.append(short(entry.old, VALUE_CHARS), style="red")
    elif part == 0:
        text.append("− ", style="bold red")
        text.append(short(entry.old, VALUE_CHARS), style="red")
    else:
        text.append("+ ", style="bold green")
        text.append(short(entry.new, VALUE_CHARS), style="green")
    text.truncate(width, overflow="ellipsis")
    return text


class DiffView(ScrollView, can_focus=True):
    """A titled list of differences; the screen replaces it with :meth:`show`."""

    DEFAULT_CSS = """
    DiffView {
        background: $surface;
        overflow-x: hidden;
    }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.title = ""
        self.entries: list[DiffEntry] = []
        self._rows: list[tuple[int, int]] = []
        self.total = 0
        self._path_width = 0
        self._lines: LRUCache[tuple, Strip] = LRUCache(256)
        self._paint: tuple[Style, int] = (Style(), 0)

    def show(self, title: str, entries: list[DiffEntry]) -> None:
        """Show ``entries`` (from ``diff_states``: long runs of appends come folded) under ``title``."""
        self.title = title
        self.total = count_differences(entries)
        self.entries = entries
        self._path_width = max((len(e.path) for e in self.entries), default=0)
        # (entry, part) per line: a change shows its old and new values on two lines.
        self._rows = [(i, part) for i, e in enumerate(self.entries) for part in ((0, 1) if e.kind == "changed" else (0,))]
        self._lines.clear()
        self.virtual_size = Size(0, HEAD_LINES + max(1, len(self._rows)))
        self.scroll_to(0, 0, animate=False, immediate=True)
        self.refresh()

    def on_resize(self) -> None:
        self._lines.clear()

    def render_lines(self, crop: Region) -> list[Strip]:
        # Work out once per paint what every line needs (rich_style walks the DOM).
        self._paint = (self.rich_style, self.scrollable_content_region.width)
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        base, width = self._paint
        index = int(self.scroll_offset.y) + y
        key = (index, width, base)
        strip = self._lines.get(key)
        if strip is None:
            strip = self._draw(index, width, base)
            self._lines[key] = strip
        return strip

    def _draw(self, index: int, width: int, base: Style) -> Strip:
        if index == 0:
            text = Text(self.title, style="bold")
            if self.total:
                text.append(f"  {self.total:,} difference{'s' if self.total != 1 else ''}", style="dim")
        elif index == HEAD_LINES and not self.entries:
            text = Text("no differences", style="dim")
        elif HEAD_LINES <= index < HEAD_LINES + len(self._rows):
            entry, part = self._rows[index - HEAD_LINES]
            path_width = min(self._path_width, max(8, int(width * PATH_SHARE)))
            text = entry_text(self.entries[entry], part, path_width, width)
        else:
            return Strip.blank(width, base)
        text.truncate(width, overflow="ellipsis")
        segments = [Segment(s.text, base + s.style if s.style else base) for s in text.render(self.app.console, end="")]
        return Strip(segments).adjust_cell_length(width, base)
