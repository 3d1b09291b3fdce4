"""The runs screen: every run in the store, filterable and sortable."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.cells import cell_len
from rich.text import Text
from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Input, Static

from graphtape.recorder.errors import GraphtapeError
from graphtape.recorder.records import RunInfo
from graphtape.tui.render import clean, is_replay_of, local_time, origin, printable
from graphtape.tui.widgets.runs_table import PAD, RunsTable, TableColumn

FORKED = "forked"  # not stored statuses: forks, or replays (runs with a parent), filtered here
REPLAYED = "replayed"
_LINEAGE_FILTERS = (FORKED, REPLAYED)
STATUSES = (None, "ok", "error", "interrupted", "incomplete", "running")
_STATUS_STYLE = {"ok": "green", "error": "bold red", "interrupted": "yellow", "running": "cyan", "incomplete": "bold #d78700"}
ID_CHARS = 8  # how much of a run id the list shows, in the id column and in "fork of …"
_PAD = 2 * PAD  # the table's blank cells beside every column
_FULL_TIME, _SHORT_TIME = "%Y-%m-%d %H:%M:%S", "%m-%d %H:%M"
_TIME_WIDTH = {False: len("2026-01-31 23:59:59"), True: len("01-31 23:59")}
_STATUS_MAX = len("interrupted")  # a longer reason is cut with an ellipsis
_STATUS_FAULTS = "status+faults"  # not a column: the widest status cell with its fault mark
_NAME_MIN, _GRAPH_MIN = 12, 8  # the narrowest the two free-text columns get before the table scrolls


LINEAGE_STYLE = "italic #8fb9d8"  # "fork of ..." / "replay of ...": where a run comes from, never the error red


def status_text(run: RunInfo, *, with_lineage: bool = True) -> Text:
    """The status with its reason, then where the run comes from (``fork of 1a2b3c4d at step 3``), for headers."""
    label = run.status if not run.status_reason else f"{run.status} ({run.status_reason})"
    text = Text(label, style=_STATUS_STYLE.get(run.status, ""))
    origin = lineage(run) if with_lineage else ""
    if origin:
        at = f" at step {run.fork_step}" if origin.startswith("fork") and run.fork_step is not None else ""
        text.append(f"  {origin}{at}", style=LINEAGE_STYLE)
    return text


def when(ts: float) -> str:
    return local_time(ts, _FULL_TIME)


def status_word(run: RunInfo) -> str:
    """One word for the list: the status, or the reason where it says more ("cancelled", "killed").

    An interrupted run's usual reason, ``interrupt``, only repeats the status: the graph
    stopped at ``interrupt()`` and waits to be resumed. An incomplete run says so, not how
    many of its rows are missing (the header and ``show`` say that).
    """
    if run.status_reason and run.status_reason != "interrupt" and run.status != "incomplete":
        return run.status_reason
    return run.status


def lineage(run: RunInfo) -> str:
    """``fork of 1a2b3c4d`` or ``replay of 1a2b3c4d`` for a run with a parent, else nothing."""
    return origin(run.parent_run_id, run.tags, ID_CHARS)


def is_replay(run: RunInfo) -> bool:
    """A run with a parent is a replay when tagged so, else a fork."""
    return is_replay_of(run.parent_run_id, run.tags)


def is_fork(run: RunInfo) -> bool:
    return bool(run.parent_run_id) and not is_replay(run)


def duration(run: RunInfo) -> str:
    return "" if run.duration_s is None else f"{run.duration_s:.2f}s"


def _unstyled(run: RunInfo) -> str:
    return ""


FAULT_MARK = "⚠"


def fault_mark(run: RunInfo) -> str:
    """`` ⚠5`` for a run whose recorder hit 5 faults, else nothing: folded into the status cell
    when the faults column is scrolled out of view."""
    return f" {FAULT_MARK}{run.faults}" if run.faults else ""


def status_with_faults(run: RunInfo) -> Text:
    text = Text(status_word(run), style=_STATUS_STYLE.get(run.status, ""))
    text.append(fault_mark(run), style="bold red")
    return text


@dataclass(frozen=True)
class Column:
    """A column of the runs table: its label, what its cell says (and in which colour), and how it
    sorts (A to Z, or biggest and newest first)."""

    key: str
    label: str
    text: Callable[[RunInfo], str]
    order: Callable[[RunInfo], Any]
    descending: bool = False
    style: Callable[[RunInfo], str] = _unstyled

    def cell(self, run: RunInfo) -> Text:
        return Text(self.text(run), style=self.style(run))


# What tells runs apart comes first, so a narrow terminal shows name, id (what commands
# take), status, steps, start and duration; the origin (fork of, replay of), the graph
# and the redacted and fault counts (always last) are then a scroll away, the fault
# count also shown beside the status (``error ⚠2``) so a faulty recording never hides.
COLUMNS = (
    Column("name", "name", lambda r: r.name, lambda r: r.name.lower()),
    Column("id", "id", lambda r: r.id[:ID_CHARS], lambda r: r.id),
    Column("status", "status", status_word, lambda r: (r.status, status_word(r)), style=lambda r: _STATUS_STYLE.get(r.status, "")),
    Column("steps", "steps", lambda r: str(r.step_count), lambda r: r.step_count, descending=True),
    Column("started", "started", lambda r: when(r.started_at), lambda r: r.started_at, descending=True),
    Column("duration", "duration", duration, lambda r: -1.0 if r.duration_s is None else r.duration_s, descending=True),
    # A fixed colour, not an ANSI name a terminal's (or the browser's) palette may turn red.
    Column("from", "from", lineage, lambda r: (r.parent_run_id is None, lineage(r)), style=lambda r: LINEAGE_STYLE),  # forks and replays first
    Column("graph", "graph", lambda r: r.graph_name, lambda r: r.graph_name.lower()),
    Column("red", "redacted", lambda r: str(r.redactions or ""), lambda r: r.redactions, descending=True),
    Column("faults", "faults", lambda r: str(r.faults) if r.faults else "", lambda r: r.faults, descending=True, style=lambda r: "bold red"),
)
_BY_KEY = {c.key: c for c in COLUMNS}
_FREE = ("name", "graph")  # the columns that shrink (with an ellipsis) to fit
_LEAD = [c.key for c in COLUMNS[: COLUMNS.index(_BY_KEY["duration"]) + 1]]  # kept on screen first


def short_when(run: RunInfo) -> Text:
    """``started`` without the year and seconds, for a narrow screen."""
    return Text(local_time(run.started_at, _SHORT_TIME))


def cell_widths(runs: list[RunInfo]) -> dict[str, int]:
    """Each column's widest cell over ``runs``, ``started`` left out (its width is fixed by its format).

    A pass over every cell, so it runs once per read, in the worker, not on every sort.
    """
    widths = {c.key: max(map(cell_len, {c.text(run) for run in runs}), default=0) for c in COLUMNS if c.key != "started"}
    widths[_STATUS_FAULTS] = max((cell_len(status_word(r)) + cell_len(fault_mark(r)) for r in runs if r.faults), default=0)
    return widths


@dataclass(frozen=True)
class ColumnFit:
    """Column widths (without padding), whether ``started`` drops the year and seconds, and
    whether the status cell carries the fault count (the faults column is scrolled away)."""

    widths: dict[str, int]
    short_time: bool
    faults_in_status: bool = False


def fit_columns(natural: dict[str, int], available: int) -> ColumnFit:
    """Widths that fit ``available`` cells: started shortens first, then graph, then name shrink.

    ``natural`` is each column's widest cell or label (for ``started``, its label), and may
    hold the widest status cell with its fault mark. When even the narrowest widths are
    too wide, the name keeps what is left beside the other lead columns (up to duration);
    the rest is reached by scrolling right, so the status cell then shows the fault count.
    """
    natural = dict(natural)
    with_faults = natural.pop(_STATUS_FAULTS, 0)
    widths = dict(natural)
    for short in (False, True):
        widths["started"] = max(natural["started"], _TIME_WIDTH[short])
        fixed = sum(w + _PAD for k, w in widths.items() if k not in _FREE)
        room = available - fixed - _PAD * len(_FREE)
        if room >= natural["name"] + natural["graph"]:
            return ColumnFit(widths, short)
    name_min, graph_min = min(natural["name"], _NAME_MIN), min(natural["graph"], _GRAPH_MIN)
    if room >= name_min + graph_min:
        widths["graph"] = max(graph_min, room - natural["name"])
        widths["name"] = room - widths["graph"]
    else:
        folded = with_faults > 0
        widths["status"] = max(widths["status"], min(with_faults, _STATUS_MAX + 4))
        lead = sum(widths[k] + _PAD for k in _LEAD if k != "name")
        widths["name"] = max(name_min, min(natural["name"], available - lead - _PAD))
        return ColumnFit(widths, True, folded)
    return ColumnFit(widths, True)


class RunsScreen(Screen):
    """Lists runs newest first; Enter opens one.

    ``s`` steps the status filter through ok, error, interrupted, incomplete, running and, when the
    store holds any, forked (forks only) and replayed (replays), then back to all; Esc
    clears every filter (status and text). ``o`` sorts by the next
    column, ``O`` reverses the order, and clicking a header sorts by it (again: reversed);
    the selected run stays selected when the order or the screen's size changes.
    """

    # Textual's default would focus the first focusable widget, the hidden filter box,
    # which then swallows q, ? and s (and hides them from the footer) until a run shows.
    AUTO_FOCUS = "#runs-table"

    BINDINGS = [
        Binding("enter", "open_run", "Open", tooltip="the selected run's steps"),
        Binding("slash", "filter", "Filter", tooltip="by name, graph, error, tag or id"),
        Binding("s", "cycle_status", "Status", tooltip="show only ok, error, interrupted, running, forked or replayed runs, or all"),
        Binding("o", "cycle_sort", "Sort", tooltip="by the next column (or click a column's header)"),
        Binding("O", "reverse_sort", "Reverse", tooltip="the sort order"),
        Binding("r", "reload", "Reload", tooltip="read the store again"),
        Binding("m", "mark_run", "Mark", tooltip="mark the selected run as run A of a diff"),
        Binding("d", "diff_run", "Diff", tooltip="diff the selected run against the marked one (or pick which)"),
        Binding("escape", "clear_filter", "Clear", show=False, tooltip="every filter: status and text"),
        Binding("question_mark", "app.help", "Keys"),
        Binding("q", "app.quit", "Quit"),
    ]

    class Loaded(Message):
        """Runs read for a status and text filter, in the store's order (newest first), with their cells' widths."""

        def __init__(
            self,
            runs: list[RunInfo] | None,
            error: str | None = None,
            *,
            status: str | None = None,
            text: str = "",
            widths: dict[str, int] | None = None,
        ) -> None:
            super().__init__()
            self.runs = runs
            self.error = error
            self.status = status
            self.text = text
            self.widths = widths or {}

    def __init__(self) -> None:
        super().__init__()
        self.runs: list[RunInfo] = []  # as shown: filtered and sorted
        self.loaded: list[RunInfo] = []  # as read, newest first
        self.status_filter: str | None = None
        self.text_filter = ""
        self.sort_key = "started"
        self.descending = True
        self.has_forks = False  # as of the last read without a status filter (or with a lineage one)
        self.has_replays = False
        self.column_fit: ColumnFit | None = None  # the column widths the table was last drawn with
        self.cell_widths: dict[str, int] = {}  # each column's widest cell, measured once per read
        self.natural: dict[str, int] = {}  # the same with the headers as now labelled
        self.marked: RunInfo | None = None  # run A of the next diff (m)

    def compose(self) -> ComposeResult:
        yield Static(id="runs-title")
        box = Input(placeholder="filter by name, graph, error, tag or id — Enter to apply, Esc to clear", id="runs-filter")
        box.display = False
        yield box
        yield RunsTable(id="runs-table")
        yield Static(id="runs-empty")
        yield Footer()

    def on_mount(self) -> None:
        self.reload()

    def reload(self) -> None:
        self._title()
        self.load_runs(self.status_filter, self.text_filter)

    @work(thread=True, exclusive=True, group="runs")
    def load_runs(self, status: str | None, text: str) -> None:
        stored = None if status in _LINEAGE_FILTERS else status
        try:
            runs = clean(self.app.store.list_runs(status=stored, text=text or None, limit=20_000))  # names print as text
        except GraphtapeError as exc:
            self.post_message(self.Loaded(None, str(exc), status=status, text=text))
            return
        if status == FORKED:  # the store has no parent filter: narrow the list here
            runs = [r for r in runs if is_fork(r)]
        elif status == REPLAYED:
            runs = [r for r in runs if is_replay(r)]
        self.post_message(self.Loaded(runs, status=status, text=text, widths=cell_widths(runs)))

    def on_runs_screen_loaded(self, message: Loaded) -> None:
        if (message.status, message.text) != (self.status_filter, self.text_filter):
            return  # answers a filter the user has since changed
        if message.error:
            empty = self.query_one("#runs-empty", Static)
            empty.display = True
            empty.update(Text(printable(f"Cannot read the store: {message.error}"), style="bold red"))
            return
        self.loaded = message.runs or []
        self.cell_widths = message.widths
        if message.status is None and not message.text:  # every run read: which lineage filters apply
            self.has_forks = any(is_fork(r) for r in self.loaded)
            self.has_replays = any(is_replay(r) for r in self.loaded)
        self._show()

    def _show(self, keep_selection: bool = False) -> None:
        """Sort what was loaded and hand it to the table, or say why there is nothing to show."""
        table = self.query_one(RunsTable)
        empty = self.query_one("#runs-empty", Static)
        had_runs = bool(self.runs)
        self.runs = self._sorted(self.loaded)
        self._draw(keep_selection)
        typing = isinstance(self.focused, Input)
        if self.runs:
            empty.update("")
            empty.display = False
            table.display = True
            if not typing:
                table.focus()
        else:
            table.display = False
            empty.display = True
            if self.status_filter or self.text_filter:
                empty.update(Text("No run matches the filter (Esc clears it).", style="yellow"))
            else:
                empty.update(Text("This store has no runs yet. Record one with `graphtape demo`, or run the graph a Recorder's attach returns (`graph = rec.attach(graph)`: the graph passed in is not recorded).", style="yellow"))
            if not typing:
                self.set_focus(None)  # the screen's own keys (q, ?, s, /) then reach it
        self._title()
        if bool(self.runs) != had_runs:
            self.refresh_bindings()  # Open dims or lights up (the footer redraws: not on every sort)

    def _draw(self, keep_selection: bool) -> None:
        """Fit the columns to the screen and give the table the runs as now sorted."""
        self.natural = self._natural()
        self.column_fit = fit_columns(self.natural, self._table_width())
        self.query_one(RunsTable).show_runs(self.runs, self._table_columns(self.column_fit), keep_selection=keep_selection)

    def _table_columns(self, fit: ColumnFit) -> list[TableColumn]:
        columns = []
        for column in COLUMNS:
            cell = short_when if column.key == "started" and fit.short_time else column.cell
            if column.key == "status" and fit.faults_in_status:
                cell = status_with_faults
            columns.append(TableColumn(column.key, self._label(column), fit.widths[column.key], cell))
        return columns

    def _natural(self) -> dict[str, int]:
        """Each column's widest label or cell; ``started`` is measured by its label (its cells are fixed)."""
        natural = {c.key: max(cell_len(self._label(c)), self.cell_widths.get(c.key, 0)) for c in COLUMNS}
        natural["status"] = min(natural["status"], max(_STATUS_MAX, len(self._label(_BY_KEY["status"]))))
        natural[_STATUS_FAULTS] = self.cell_widths.get(_STATUS_FAULTS, 0)
        return natural

    def _table_width(self) -> int:
        """Cells the table shows without scrolling sideways: the screen, less a scrollbar if rows overflow."""
        chrome = 3 + (3 if self.query_one("#runs-filter", Input).display else 0)  # title, header, footer, filter box
        table = self.query_one(RunsTable)
        bar = table.styles.scrollbar_size_vertical if len(self.runs) > self.size.height - chrome else 0
        return self.size.width - bar

    def on_resize(self, event: events.Resize) -> None:
        if self.runs and self.column_fit is not None and fit_columns(self.natural, self._table_width()) != self.column_fit:
            self._draw(keep_selection=True)

    def _sorted(self, runs: list[RunInfo]) -> list[RunInfo]:
        # ``runs`` come newest first and Python's sort is stable (also reversed), so ties stay newest first.
        column = _BY_KEY[self.sort_key]
        return sorted(runs, key=column.order, reverse=self.descending)

    def _label(self, column: Column) -> str:
        if column.key != self.sort_key:
            return column.label
        return f"{column.label} {'▼' if self.descending else '▲'}"

    def _selected(self) -> str | None:
        run = self.query_one(RunsTable).selected_run()
        return run.id if run is not None else None

    def _title(self) -> None:
        column = _BY_KEY[self.sort_key]
        direction = "▼" if self.descending else "▲"
        read_only = " (read-only)" if getattr(self.app.store, "read_only", False) else ""  # known once the store opened
        parts = [f"Runs in {self.app.store_label}{read_only}", f"{len(self.runs)} shown", f"sorted by {column.label} {direction}"]
        if self.status_filter:
            parts.append(f"status={self.status_filter}")
        if self.text_filter:
            parts.append(f"filter={self.text_filter!r}")
        if self.marked is not None:
            parts.append(f"A: {self.marked.name} {self.marked.id[:ID_CHARS]} (d on another run diffs it)")
        self.query_one("#runs-title", Static).update(Text("  ·  ".join(parts), style="bold"))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("open_run", "mark_run", "diff_run") and not self.runs:
            return None  # shown dimmed: there is nothing to open or diff
        return True

    # -- diffing two runs ---------------------------------------------------------
    def action_mark_run(self) -> None:
        run = self.query_one(RunsTable).selected_run()
        if run is None:
            return
        self.marked = None if self.marked is not None and self.marked.id == run.id else run
        self._title()
        if self.marked is not None:
            self.notify(f"Marked {run.name} ({run.id[:ID_CHARS]}) as run A: press d on another run to diff it against this one.")

    def action_diff_run(self) -> None:
        run = self.query_one(RunsTable).selected_run()
        if run is None:
            return
        if self.marked is not None and self.marked.id != run.id:
            self.app.compare_runs(self.marked.id, run.id)
            return
        from graphtape.tui.screens.run_picker import RunPicker

        def picked(other: str | None) -> None:
            if other:
                self.app.compare_runs(other, run.id)

        self.app.push_screen(RunPicker(run, self.loaded), picked)

    def action_open_run(self) -> None:
        run_id = self._selected()
        if run_id is not None:
            self.app.open_run(run_id)

    def on_runs_table_run_selected(self, event: RunsTable.RunSelected) -> None:
        event.stop()
        self.app.open_run(event.run.id)

    def on_runs_table_header_clicked(self, event: RunsTable.HeaderClicked) -> None:
        event.stop()
        key = event.key
        if key == self.sort_key:
            self.action_reverse_sort()
        elif key in _BY_KEY:
            self._sort_by(key)

    def action_filter(self) -> None:
        box = self.query_one("#runs-filter", Input)
        box.display = True
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.text_filter = event.value.strip()
        self.set_focus(None)  # the table takes it once the runs are in
        self.reload()

    def action_clear_filter(self) -> None:
        """Every filter goes: the status one and the text one (as the empty list promises)."""
        box = self.query_one("#runs-filter", Input)
        if box.has_focus:
            self.set_focus(None)
        box.value = ""
        box.display = False
        self.text_filter = ""
        self.status_filter = None
        self.reload()

    def action_reload(self) -> None:
        self.reload()

    def action_cycle_status(self) -> None:
        lineages = tuple(
            kind for kind, present in ((FORKED, self.has_forks), (REPLAYED, self.has_replays)) if present or self.status_filter == kind
        )
        cycle = STATUSES + lineages
        self.status_filter = cycle[(cycle.index(self.status_filter) + 1) % len(cycle)]
        self.reload()

    def action_cycle_sort(self) -> None:
        keys = [c.key for c in COLUMNS]
        self._sort_by(keys[(keys.index(self.sort_key) + 1) % len(keys)])

    def action_reverse_sort(self) -> None:
        self.descending = not self.descending
        self._show(keep_selection=True)

    def _sort_by(self, key: str) -> None:
        self.sort_key = key
        self.descending = _BY_KEY[key].descending
        self._show(keep_selection=True)
