"""The runs screen: every run in the store, filterable and sortable."""

from __future__ import annotations

import time

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static

from recorder.errors import GraphtapeError
from recorder.records import RunInfo

STATUSES = (None, "ok", "error", "interrupted", "running")
_STATUS_STYLE = {"ok": "green", "error": "bold red", "interrupted": "yellow", "running": "cyan"}
_SORTS = ("started", "name", "status", "steps", "duration")


def status_text(run: RunInfo) -> Text:
    label = run.status if not run.status_reason else f"{run.status} ({run.status_reason})"
    if run.parent_run_id:
        label += f" ⑂{run.parent_run_id[:6]}"
    return Text(label, style=_STATUS_STYLE.get(run.status, ""))


def when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


class RunsScreen(Screen):
    """Lists runs newest first; Enter opens one."""

    BINDINGS = [
        Binding("enter", "open_run", "Open"),
        Binding("slash", "filter", "Filter"),
        Binding("s", "cycle_status", "Status"),
        Binding("o", "cycle_sort", "Sort"),
        Binding("r", "reload", "Reload"),
        Binding("escape", "clear_filter", "Clear", show=False),
        Binding("question_mark", "app.help", "Keys"),
        Binding("q", "app.quit", "Quit"),
    ]

    class Loaded(Message):
        def __init__(self, runs: list[RunInfo] | None, error: str | None = None) -> None:
            super().__init__()
            self.runs = runs
            self.error = error

    def __init__(self) -> None:
        super().__init__()
        self.runs: list[RunInfo] = []
        self.status_filter: str | None = None
        self.sort_key = "started"
        self.text_filter = ""

    def compose(self) -> ComposeResult:
        yield Static(id="runs-title")
        yield Input(placeholder="filter by name, graph, error, tag or id — Enter to apply, Esc to clear", id="runs-filter")
        yield DataTable(id="runs-table", cursor_type="row", zebra_stripes=True)
        yield Static(id="runs-empty")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for key, label in (("id", "id"), ("name", "name"), ("graph", "graph"), ("status", "status"), ("steps", "steps"), ("started", "started"), ("duration", "duration"), ("red", "redacted"), ("faults", "faults")):
            table.add_column(label, key=key)
        self.query_one("#runs-filter", Input).display = False
        self.reload()

    def reload(self) -> None:
        self._title()
        self.load_runs(self.status_filter, self.text_filter)

    @work(thread=True, exclusive=True, group="runs")
    def load_runs(self, status: str | None, text: str) -> None:
        try:
            runs = self.app.store.list_runs(status=status, text=text or None, limit=20_000)
        except GraphtapeError as exc:
            self.post_message(self.Loaded(None, str(exc)))
            return
        self.post_message(self.Loaded(runs))

    def on_runs_screen_loaded(self, message: Loaded) -> None:
        empty = self.query_one("#runs-empty", Static)
        table = self.query_one(DataTable)
        if message.error:
            empty.update(Text(f"Cannot read the store: {message.error}", style="bold red"))
            return
        self.runs = self._sorted(message.runs or [])
        table.clear()
        for run in self.runs:
            dur = "" if run.duration_s is None else f"{run.duration_s:.2f}s"
            table.add_row(
                run.id[:10],
                Text(run.name, overflow="ellipsis"),
                run.graph_name,
                status_text(run),
                str(run.step_count),
                when(run.started_at),
                dur,
                str(run.redactions or ""),
                Text(str(run.faults), style="bold red") if run.faults else "",
                key=run.id,
            )
        if self.runs:
            empty.update("")
            empty.display = False
            table.display = True
            table.focus()
        else:
            table.display = False
            empty.display = True
            if self.status_filter or self.text_filter:
                empty.update(Text("No run matches the filter (Esc clears it).", style="yellow"))
            else:
                empty.update(Text("This store has no runs yet. Record one with `graphtape demo`, or attach a Recorder to your graph.", style="yellow"))
        self._title()

    def _sorted(self, runs: list[RunInfo]) -> list[RunInfo]:
        key = {
            "started": (lambda r: r.started_at, True),
            "name": (lambda r: r.name.lower(), False),
            "status": (lambda r: r.status, False),
            "steps": (lambda r: r.step_count, True),
            "duration": (lambda r: r.duration_s or 0.0, True),
        }[self.sort_key]
        return sorted(runs, key=key[0], reverse=key[1])

    def _title(self) -> None:
        parts = [f"Runs in {self.app.store_label}", f"{len(self.runs)} shown", f"sorted by {self.sort_key}"]
        if self.status_filter:
            parts.append(f"status={self.status_filter}")
        if self.text_filter:
            parts.append(f"filter={self.text_filter!r}")
        self.query_one("#runs-title", Static).update(Text("  ·  ".join(parts), style="bold"))

    def action_open_run(self) -> None:
        table = self.query_one(DataTable)
        if not self.runs or table.cursor_row is None or table.cursor_row >= len(self.runs):
            return
        self.app.open_run(self.runs[table.cursor_row].id)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open_run()

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        key = str(event.column_key.value)
        if key in _SORTS:
            self.sort_key = key
            self.on_runs_screen_loaded(self.Loaded(self.runs))

    def action_filter(self) -> None:
        box = self.query_one("#runs-filter", Input)
        box.display = True
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.text_filter = event.value.strip()
        self.reload()

    def action_clear_filter(self) -> None:
        box = self.query_one("#runs-filter", Input)
        box.value = ""
        box.display = False
        self.text_filter = ""
        self.reload()

    def action_cycle_status(self) -> None:
        self.status_filter = STATUSES[(STATUSES.index(self.status_filter) + 1) % len(STATUSES)]
        self.reload()

    def action_cycle_sort(self) -> None:
        self.sort_key = _SORTS[(_SORTS.index(self.sort_key) + 1) % len(_SORTS)]
        self.on_runs_screen_loaded(self.Loaded(self.runs))
