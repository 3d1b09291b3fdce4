"""The superstep timeline: one row per step, what ran and where it went."""

from __future__ import annotations

from rich.text import Text
from textual.message import Message
from textual.widgets import DataTable

from recorder.records import StepInfo


def step_markers(step: StepInfo) -> Text:
    text = Text()
    if step.has_error:
        text.append("✗", style="bold red")
    if step.has_interrupt:
        text.append("⏸", style="bold yellow")
    if step.flags & 4:
        text.append("▶", style="bold green")
    return text


class Timeline(DataTable):
    """Steps of one namespace; highlighting a row asks the screen to show that step."""

    class StepChosen(Message):
        """The user moved to another step (index into the timeline's steps)."""

        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.steps: list[StepInfo] = []

    def on_mount(self) -> None:
        self.add_column("step", key="step", width=4)
        self.add_column("", key="mark", width=2)
        self.add_column("nodes", key="nodes", width=12)
        self.add_column("calls", key="calls", width=8)
        self.add_column("route (why the run went there)", key="route", width=90)

    def show_steps(self, steps: list[StepInfo], calls: dict[int, dict[str, int]]) -> None:
        """Replace the rows (the screen hands over steps and per-step call counts)."""
        self.steps = steps
        self.clear()
        rows = []
        for i, s in enumerate(steps):
            c = calls.get(s.step, {}) if not s.pending else {}
            call_text = Text(" ".join(part for part in (f"T{c['tool']}" if c.get("tool") else "", f"M{c['model']}" if c.get("model") else "") if part))
            if c.get("failed"):
                call_text.append(f" {c['failed']}✗", style="bold red")
            label = Text(str(s.step), style="dim" if s.step < 0 else "")
            nodes = Text(", ".join(s.nodes) or ("input" if s.step < 0 else "—"), style="bold red" if s.has_error else "")
            summary = Text(s.summary or ("(interrupted here)" if s.pending and s.has_interrupt else ""), overflow="ellipsis", no_wrap=True)
            rows.append((label, step_markers(s), nodes, call_text, summary))
        self.add_rows(rows)  # one refresh for the lot, not one per step

    def on_resize(self) -> None:
        # Keep the selected step in view when the layout changes size.
        self.call_after_refresh(self.reveal_cursor)

    def reveal_cursor(self) -> None:
        """Scroll so the selected step is in view (after a layout change)."""
        self._scroll_cursor_into_view(animate=False)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        if 0 <= event.cursor_row < len(self.steps):
            self.post_message(self.StepChosen(event.cursor_row))
