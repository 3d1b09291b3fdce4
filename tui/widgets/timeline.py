"""The superstep timeline: one row per step, what ran and where it went.

A Line-API widget: it keeps the steps as data and draws only the rows in view,
so a run of 10,000 steps opens as fast as one of ten (a ``DataTable`` builds
and measures every cell up front).
"""

from __future__ import annotations

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

from recorder.records import FLAG_RESUME, StepInfo
from tui.render import fmt_ms

# (header, width, justify); the route column takes what is left.
COLUMNS = (("step", 4, "right"), ("", 2, "left"), ("nodes", 12, "left"), ("calls", 8, "left"), ("time", 7, "right"))
ROUTE_HEADER = "route (why the run went there)"
ROUTE_MIN = 12
GAP = 1


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
    """``T2 M1 1✗``: tool and model calls of a step, and how many failed."""
    text = Text(" ".join(part for part in (f"T{counts['tool']}" if counts.get("tool") else "", f"M{counts['model']}" if counts.get("model") else "") if part))
    if counts.get("failed"):
        text.append(f" {counts['failed']}✗", style="bold red")
    return text


def step_cells(step: StepInfo, counts: dict[str, int]) -> list[Text]:
    """The cells of one row, in ``COLUMNS`` order followed by the route."""
    label = Text(str(step.step), style="dim" if step.step < 0 else "")
    nodes = Text(", ".join(step.nodes) or ("input" if step.step < 0 else "—"), style="bold red" if step.has_error else "")
    duration = Text(fmt_ms(step.duration_ms).replace(" ms", "ms"), style="dim")
    summary = Text(step.summary or ("(interrupted here)" if step.pending and step.has_interrupt else ""))
    return [label, step_markers(step), nodes, calls_text({} if step.pending else counts), duration, summary]


class Timeline(ScrollView, can_focus=True):
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

    COMPONENT_CLASSES = {"timeline--header", "timeline--cursor", "timeline--even-row"}

    DEFAULT_CSS = """
    Timeline {
        background: $surface;
        color: $foreground;
        & > .timeline--header {
            text-style: bold;
            background: $panel;
            color: $foreground;
        }
        & > .timeline--even-row {
            background: $surface-lighten-1 50%;
        }
        & > .timeline--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
        &:focus {
            background-tint: $foreground 5%;
            & > .timeline--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
        }
        &:dark > .timeline--even-row {
            background: $surface-darken-1 40%;
        }
    }
    """

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

    cursor: reactive[int] = reactive(-1, init=False, always_update=True)
    """Index of the selected step; -1 until the screen picks one. Setting it scrolls it into view."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.steps: list[StepInfo] = []
        self.calls: dict[int, dict[str, int]] = {}
        self._step_width = COLUMNS[0][1]
        # Rows already drawn, keyed by everything that changes how they look.
        self._lines: LRUCache[tuple, Strip] = LRUCache(256)
        self._paint: tuple[Style, int, int] = (Style(), ROUTE_MIN, 0)

    def show_steps(self, steps: list[StepInfo], calls: dict[int, dict[str, int]]) -> None:
        """Replace the rows (the screen hands over steps and per-step call counts)."""
        self.steps = steps
        self.calls = calls
        self._step_width = max([COLUMNS[0][1], *(len(str(s.step)) for s in steps[:1] + steps[-1:])])
        self.set_reactive(Timeline.cursor, -1)
        self._lines.clear()
        self._set_virtual_size()
        self.refresh()

    # -- geometry ---------------------------------------------------------------
    def _fixed_width(self) -> int:
        return self._step_width + sum(w for _, w, _ in COLUMNS[1:]) + GAP * len(COLUMNS)

    def _route_width(self) -> int:
        return max(ROUTE_MIN, self.scrollable_content_region.width - self._fixed_width())

    def _set_virtual_size(self) -> None:
        # One line for the header above the rows; the route column fills the width.
        self.virtual_size = Size(self._fixed_width() + ROUTE_MIN, len(self.steps) + 1)

    def on_resize(self) -> None:
        self._set_virtual_size()
        self._lines.clear()
        # Keep the selected step in view when the layout changes size.
        self.call_after_refresh(self.reveal_cursor)

    def reveal_cursor(self) -> None:
        """Scroll so the selected step is in view (after a layout change)."""
        if 0 <= self.cursor < len(self.steps):
            row = Region(0, self.cursor + 1, 1, 1)
            self.scroll_to_region(row, spacing=Spacing(top=1), animate=False, force=True, immediate=True)

    # -- the cursor -------------------------------------------------------------
    def validate_cursor(self, value: int) -> int:
        return max(0, min(value, len(self.steps) - 1)) if self.steps else -1

    def watch_cursor(self, old: int, new: int) -> None:
        for row in (old, new):
            if row >= 0:
                self.refresh_line(row + 1)  # only the two rows that change look (scrolling repaints the rest)
        self.reveal_cursor()  # even when it stays put: the layout may have moved since
        if new != old and new >= 0:
            self.post_message(self.StepChosen(new, self))

    def action_cursor(self, delta: int) -> None:
        self.cursor += delta

    def action_page(self, direction: int) -> None:
        self.cursor += direction * max(1, self.scrollable_content_region.height - 2)

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or offset.y < 1:
            return  # the header
        index = int(self.scroll_offset.y) + offset.y - 1
        if 0 <= index < len(self.steps):
            event.stop()
            self.cursor = index

    def on_focus(self) -> None:
        self.refresh()  # the cursor's colour depends on focus

    def on_blur(self) -> None:
        self.refresh()

    # -- drawing ----------------------------------------------------------------
    def render_lines(self, crop: Region) -> list[Strip]:
        # Work out once per paint what every line needs (rich_style walks the DOM).
        self._paint = (self.rich_style, self._route_width(), self.scrollable_content_region.width)
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        base, route, width = self._paint
        if y == 0:
            index = None
            style_name = "timeline--header"
        else:
            index = int(scroll_y) + y - 1
            if index >= len(self.steps):
                return Strip.blank(width, base)
            style_name = "timeline--cursor" if index == self.cursor else "timeline--even-row" if index % 2 else ""
        key = (index, route, style_name, base, self.has_focus)
        strip = self._lines.get(key)
        if strip is None:
            row_style = base + (self.get_component_rich_style(style_name) if style_name else Style())
            strip = self._draw_row(index, route, row_style)
            self._lines[key] = strip
        return strip.crop(int(scroll_x), int(scroll_x) + width)

    def _draw_row(self, index: int | None, route: int, row_style: Style) -> Strip:
        if index is None:
            cells = [Text(title) for title, _, _ in COLUMNS] + [Text(ROUTE_HEADER)]
        else:
            step = self.steps[index]
            cells = step_cells(step, self.calls.get(step.step, {}))
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
