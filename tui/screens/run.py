"""The run screen: step through supersteps and see state, diff, routes and calls."""

from __future__ import annotations

import dataclasses
import gc
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Static, TabbedContent, TabPane, Tabs

from graphtape.recorder.errors import GraphtapeError
from graphtape.recorder.records import RunInfo, StepInfo
from graphtape.tui.data import DiffEntry, diff_text, first_of, to_json
from graphtape.recorder.private_files import write_private
from graphtape.tui.render import ABANDONED, clean, node_waits, printable
from graphtape.tui.screens.compare import CompareScreen, raised
from graphtape.tui.screens.prompts import ExportPrompt, ExportRequest, ForkPrompt, PathPrompt, ForkRequest, copy_and_say, JumpPrompt, ReplayPrompt, ReplayRequest, RunInfoScreen, ValueScreen, WatchPicker
from graphtape.tui.screens.runs import status_text, when
from graphtape.tui.step_reader import StepPayload, StepReader
from graphtape.tui.widgets.diff_view import DiffView
from graphtape.tui.widgets.graph_view import GraphView
from graphtape.tui.widgets.panels import CallsPanel, SubgraphList, TextPanel, routes_renderable
from graphtape.tui.widgets.state_tree import StateTree
from graphtape.tui.widgets.timeline import Timeline
from graphtape.tui.widgets.transcript import Transcript

NARROW = 120
SLOW_LOAD_S = 0.3


class RunScreen(Screen):
    """One namespace of one run: a timeline beside the selected step's views."""

    BINDINGS = [
        Binding("left,h", "step(-1)", "Prev", priority=True, tooltip="the step before this one"),
        Binding("right,l", "step(1)", "Next", priority=True, tooltip="the step after this one"),
        Binding("home,g", "first", "First", show=False, priority=True, tooltip="the run's first step"),
        Binding("end,G", "last", "Last", show=False, priority=True, tooltip="the run's last step"),
        Binding("colon", "jump", "Jump", show=False, tooltip="go to a step by its number"),
        Binding("e", "next_problem(1)", "Next problem", tooltip="the next step with an error, a failed call or an interrupt"),
        Binding("E", "next_problem(-1)", "Prev problem", show=False, tooltip="the previous step with an error, a failed call or an interrupt"),
        Binding("m", "mark", "Mark", show=False, tooltip="mark this step to diff another against it"),
        Binding("d", "diff_marked", "Diff", show=False, tooltip="the marked step's state against this step's"),
        Binding("w", "watch", "Watch", show=False, tooltip="pick a state key; [ and ] then find the steps that changed it"),
        Binding("left_square_bracket", "watch_jump(-1)", "Last change", show=False, tooltip="the step before this one that changed the watched key"),
        Binding("right_square_bracket", "watch_jump(1)", "Next change", show=False, tooltip="the next step that changes the watched key"),
        Binding("v", "view_value", "View", show=False, tooltip="the selected state value (or the whole diff) in full"),
        Binding("c", "copy_value", "Copy", tooltip="the selected state value as JSON, to the clipboard"),
        Binding("s", "save_state", "Save", show=False, tooltip="this step's state as a JSON file (asks where)"),
        Binding("r", "replay", "Replay", tooltip="re-run from this step (a failed one: from the step before), calls answered from the recording"),
        Binding("f", "fork", "Fork", tooltip="edit the state here and continue as a new run"),
        Binding("x", "export", "Export", tooltip="save the run as a regression fixture"),
        Binding("i", "info", "Info", show=False, tooltip="the run's details and the recorder's fault log"),
        Binding("u,backspace", "up", "Up", show=False, tooltip="back to the parent graph (in a subgraph)"),
        Binding("1", "tab('state')", "State tab", show=False),
        Binding("2", "tab('messages')", "Messages tab", show=False),
        Binding("3", "tab('diff')", "Diff tab", show=False),
        Binding("4", "tab('routes')", "Routes tab", show=False),
        Binding("5", "tab('calls')", "Calls tab", show=False),
        Binding("6", "tab('subgraphs')", "Subgraphs tab", show=False),
        Binding("7", "tab('graph')", "Graph tab", show=False, tooltip="the run's graph, this step's nodes and route lit up"),
        Binding("escape", "back", "Runs", tooltip="back to the list of runs"),
        Binding("question_mark", "app.help", "Keys", tooltip="every key of this screen"),
        Binding("q", "app.quit", "Quit", show=False, tooltip="quit graphtape"),
    ]

    class StepsLoaded(Message):
        def __init__(self, run: RunInfo | None, steps: list[StepInfo], calls: dict, error: str | None = None) -> None:
            super().__init__()
            self.run = run
            self.steps = steps
            self.calls = calls
            self.error = error

    class StepLoaded(Message):
        def __init__(self, index: int, payload: StepPayload | None, error: str | None = None) -> None:
            super().__init__()
            self.index = index
            self.payload = payload
            self.error = error

    class DiffLoaded(Message):
        def __init__(self, title: str, entries: list[DiffEntry]) -> None:
            super().__init__()
            self.title = title
            self.entries = entries

    class WatchFound(Message):
        def __init__(self, key: str, index: int | None, direction: int) -> None:
            super().__init__()
            self.key = key
            self.index = index
            self.direction = direction

    class Rerun(Message):
        """A replay or fork finished (``result``), failed to start (``error``), or reports progress."""

        def __init__(self, result: Any = None, error: str | None = None, progress: str | None = None) -> None:
            super().__init__()
            self.result = result
            self.error = error
            self.progress = progress

    class Exported(Message):
        def __init__(self, path: Path | None, size: int = 0, summary: str = "", error: str | None = None, warning: str | None = None) -> None:
            super().__init__()
            self.path = path
            self.size = size
            self.summary = summary
            self.error = error
            self.warning = warning

    class JsonWritten(Message):
        """A value copied (``text``) or saved (``path``) as JSON, or why not (``error``)."""

        def __init__(self, label: str, text: str = "", path: Path | None = None, error: str | None = None) -> None:
            super().__init__()
            self.label = label
            self.text = text
            self.path = path
            self.error = error

    class ValueReady(Message):
        """A value rendered in full for the viewer (``v``)."""

        def __init__(self, title: str, text: str) -> None:
            super().__init__()
            self.title = title
            self.text = text

    class InfoLoaded(Message):
        def __init__(self, fault_log: list[str] | None, error: str | None = None, edit: Any = None) -> None:
            super().__init__()
            self.fault_log = fault_log
            self.error = error
            self.edit = edit

    def __init__(self, run_id: str, ns: str = "", start_step: int | None = None, *, back_pops: bool = False, welcome: str | None = None) -> None:
        super().__init__()
        self.run_id = run_id
        self.welcome = welcome  # what to look for (graphtape demo): a line in the header, never over the views
        self.ns = ns
        self.back_pops = back_pops  # opened from another screen (a comparison): escape returns there
        self.graph_ref: str | None = None  # the graph last typed into a replay or fork prompt
        self.rerunning = False
        self._fork_asked: tuple[int, ForkRequest] | None = None  # the fork running now: its step and request
        self.start_step = start_step
        self.run: RunInfo | None = None
        self.steps: list[StepInfo] = []
        self.index: int = -1
        self.marked: int | None = None
        self.watch_key: str | None = None
        self.payload: StepPayload | None = None
        self.loaded_index = -1  # the step whose load last finished, read or not
        self.diff_title = ""
        self.diff_entries: list[DiffEntry] = []
        self.reader: StepReader | None = None  # made on mount, when the app's store is open

    # -- layout ----------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static(id="run-header")
        with Horizontal(id="run-body"):
            with Vertical(id="timeline-pane"):
                yield Timeline(id="timeline")
            with TabbedContent(id="views", initial="state"):
                with TabPane("State", id="state"):
                    yield StateTree(id="state-tree")
                with TabPane("Messages", id="messages"):
                    yield Transcript(id="transcript")
                with TabPane("Diff", id="diff"):
                    yield DiffView(id="diff-panel")
                with TabPane("Routes", id="routes"):
                    yield TextPanel(id="routes-panel")
                with TabPane("Calls", id="calls"):
                    yield CallsPanel(id="calls-panel")
                with TabPane("Subgraphs", id="subgraphs"):
                    yield SubgraphList(id="subgraph-list")
                with TabPane("Graph", id="graph"):
                    yield GraphView(self.run_id, self.ns, id="graph-view")
            yield Static(id="step-error")
        yield Static(id="run-status")
        yield Footer()

    def on_mount(self) -> None:
        # Tab moves between the timeline and the open tab's view; the tab strip itself is
        # switched with 1-6 (or a click), so focus never lands where Down does nothing.
        for tabs in self.query(Tabs):
            tabs.can_focus = False
        self.reader = StepReader(self.app.store, self.run_id, self.ns)
        self._layout(self.app.size.width)
        self.query_one("#run-header", Static).update(Text(f"loading run {self.run_id}…", style="dim"))
        self.load_steps()

    def on_unmount(self) -> None:
        gc.unfreeze()  # what was frozen on loading can be collected again once the screen is gone

    def on_resize(self, event: events.Resize) -> None:
        self._layout(event.size.width)

    def _layout(self, width: int) -> None:
        self.set_class(width < NARROW, "narrow")

    # -- loading ---------------------------------------------------------------
    @work(thread=True, exclusive=True, group="steps")
    def load_steps(self) -> None:
        store = self.app.store
        try:
            run = clean(store.get_run(self.run_id))  # recorded text shows as text, never as escape sequences
            steps = clean(store.list_steps(run.id, self.ns))
            calls = store.call_counts(run.id, self.ns, with_subgraphs=True)  # a supervisor's agents' calls are its steps'
        except GraphtapeError as exc:
            self.post_message(self.StepsLoaded(None, [], {}, str(exc)))
            return
        self.post_message(self.StepsLoaded(run, steps, calls))

    def on_run_screen_steps_loaded(self, message: StepsLoaded) -> None:
        if message.error or message.run is None:
            self.query_one("#run-header", Static).update(Text(printable(f"Cannot open run: {message.error}"), style="bold red"))
            return
        self.run = message.run
        self.steps = message.steps
        self.call_counts = message.calls
        # What is loaded so far (the app, the run's 10,000 steps) lives as long as the screen:
        # keep it out of Python's full collections, which otherwise walk it all every few steps
        # (~75 ms on a 10,000-step run). Unfrozen when the screen goes (on_unmount).
        gc.freeze()
        self._header()
        timeline = self.query_one(Timeline)
        timeline.show_steps(self.steps, message.calls, self.run.fork_step if self.run.parent_run_id and not self.ns else None)
        if not self.steps:
            self._status(Text("This run recorded no steps.", style="yellow"))
            return
        target = self._opening_index(message.calls)
        if self.start_step is not None:
            found = [i for i, s in enumerate(self.steps) if s.step == self.start_step]
            target = found[-1] if found else target
        timeline.focus()
        timeline.cursor = target  # posts StepChosen, which selects it
        # Rows arrive before the layout settles: scroll again once it has.
        self.call_after_refresh(timeline.reveal_cursor)

    def _opening_index(self, calls: dict) -> int:
        """Where a run opens: its first problem (error, failed call, interrupt), else where the story starts."""
        problem = first_of(self.steps, -1, 1, lambda s: s.has_error or s.has_interrupt or bool(calls.get(s.step, {}).get("failed")))
        if problem is not None:
            return problem
        return next((i for i, s in enumerate(self.steps) if s.step >= 0), 0)

    def on_tree_node_selected(self, message: StateTree.NodeSelected) -> None:
        if not message.node.allow_expand and message.node.data is not None:
            self.action_view_value()  # Enter on a leaf: its value in full

    def on_timeline_step_chosen(self, message: Timeline.StepChosen) -> None:
        self.select(message.index)

    def select(self, index: int) -> None:
        """Show step ``index`` of the timeline (loads in a worker)."""
        if not (0 <= index < len(self.steps)):
            return
        self.index = index
        self.load_step(index)
        # Say so only if loading is slow: a placeholder on every key press flickers and
        # changes the status line's height, which moves the whole layout twice per step.
        self.set_timer(SLOW_LOAD_S, self._still_loading)

    def _still_loading(self) -> None:
        if 0 <= self.index < len(self.steps) and self.loaded_index != self.index:
            self._status(Text(f"step {self.steps[self.index].step}…", style="dim"))

    @work(thread=True, exclusive=True, group="step")
    def load_step(self, index: int) -> None:
        try:
            payload = self.reader.read(self.steps, index)
        except GraphtapeError as exc:
            self.post_message(self.StepLoaded(index, None, str(exc)))
            return
        self.post_message(self.StepLoaded(index, payload))

    def on_run_screen_step_loaded(self, message: StepLoaded) -> None:
        if message.index != self.index:
            return  # the user moved on while this was loading
        self.loaded_index = message.index
        failed = message.error is not None or message.payload is None
        self.set_class(failed, "step-failed")
        if failed:
            # Never leave the previous step's views up as if they were this one's.
            self.payload = None
            step = self.steps[message.index].step
            error = Text(printable(f"Cannot read step {step}: {message.error}"), style="bold red")
            error.append("\n\nThe other steps may still read: move with ← →, or see the recorder's fault log with i.", style="dim")
            self.query_one("#step-error", Static).update(error)
            self._status(Text(f"step {step}: cannot read it", style="bold red"))
            return
        p = message.payload
        self.payload = p
        self.query_one(StateTree).show_state(p.state, p.changed, p.graph_input)
        self.query_one(Transcript).show_messages(p.transcript_key, p.transcript, p.transcript_total)
        self.diff_title = p.diff_title
        self.query_one(DiffView).show(p.diff_title, p.diff)
        self.query_one("#routes-panel", TextPanel).show(routes_renderable(p.detail.routes, p.detail.next, p.step.step, p.detail.tasks))
        self.query_one(CallsPanel).show_calls(p.calls, p.detail.tasks, self.ns)
        self.query_one(SubgraphList).show_namespaces(p.subgraphs)
        self.query_one(GraphView).show_step(p.step.step, p.detail)
        self._status(self._step_status(p))

    # -- text bits ---------------------------------------------------------------
    def _header(self) -> None:
        r = self.run
        if r is None:
            return
        text = Text()
        text.append(f"{r.name}", style="bold")
        text.append(f"  {r.id}  ", style="dim")
        text.append_text(status_text(r))
        if r.error_type:
            text.append(f"  {r.error_type}: {r.error_message}", style="red")
        text.append(f"  · {r.step_count} steps · started {when(r.started_at)}", style="dim")
        if r.duration_s is not None:
            text.append(f" · {r.duration_s:.2f}s", style="dim")
        if r.redactions:
            text.append(f" · {r.redactions} redacted", style="yellow")
        if r.faults:
            text.append(f" · {r.faults} recorder fault{'s' if r.faults != 1 else ''} (i: fault log)", style="bold red")
        if self.ns:
            text.append(f"\nsubgraph {self.ns}  (u: back to parent)", style="bold cyan")
        if self.welcome:
            text.append(f"\n{self.welcome}", style="italic yellow")
        self.query_one("#run-header", Static).update(text)

    def _step_status(self, p: StepPayload) -> Text:
        s = p.step
        text = Text(f"step {s.step}", style="bold")
        text.append(" (the input)" if s.step < 0 else "")
        text.append(f"  [row {p.index + 1}/{len(self.steps)}]")
        if s.nodes:
            text.append(f"  ran {', '.join(s.nodes)}")
        if s.summary:
            text.append(f"  {s.summary}", style="magenta")
        if s.duration_ms is not None:
            text.append(f"  {s.duration_ms:.0f} ms", style="dim")
        waits = node_waits(p.calls, p.detail.tasks)
        failed = [c for c in p.calls if c.error_type and c.error_type != ABANDONED]
        abandoned = [c for c in p.calls if c.error_type == ABANDONED or c.call_id in waits]
        if failed:
            text.append(f"  ✗ {len(failed)} call(s) failed: {failed[0].name} {failed[0].error_type}", style="bold red")
        if abandoned:
            text.append(f"  {len(abandoned)} call(s) timed out (their node stopped waiting): {abandoned[0].name}", style="bold yellow")
        carried = [t.node for t in p.detail.tasks if t.carried is not None]
        if carried:
            text.append(f"  {', '.join(carried)} not run: carried from an earlier run", style="yellow")
        for t in p.detail.tasks:
            if t.error_type:
                text.append(f"  ✗ {t.node}: {t.error_type}: {t.error_message}", style="bold red")
        for e in p.detail.events:
            mark = {"interrupt": "⏸ interrupt", "resume": "▶ resume", "update": "✎ update with the resume"}.get(e.kind, e.kind)
            text.append(f"  {mark} {e.value!r}"[:80], style="yellow")
        if self.marked is not None:
            text.append(f"  · marked step {self.steps[self.marked].step}", style="cyan")
        if self.watch_key:
            text.append(f"  · watching {self.watch_key}", style="magenta")
        return text

    def _status(self, text: Text) -> None:
        self.query_one("#run-status", Static).update(text)

    # -- navigation ---------------------------------------------------------------
    def _move(self, index: int | None) -> None:
        if index is None or not self.steps:
            return
        index = max(0, min(index, len(self.steps) - 1))
        self.query_one(Timeline).cursor = index

    def action_step(self, delta: int) -> None:
        # From the cursor, which moves at once: keys pressed faster than steps load all count.
        self._move(self.query_one(Timeline).cursor + delta)

    def _focused_pane(self) -> Any:
        """The focused scrollable view other than the timeline: Home/End scroll it instead of stepping."""
        focused = self.focused
        if focused is None or isinstance(focused, Timeline) or not focused.allow_vertical_scroll:
            return None
        return focused

    def action_first(self) -> None:
        pane = self._focused_pane()
        if pane is not None:
            pane.scroll_home(animate=False)
            return
        self._move(0)

    def action_last(self) -> None:
        pane = self._focused_pane()
        if pane is not None:
            pane.scroll_end(animate=False)
            return
        self._move(len(self.steps) - 1)

    def action_jump(self) -> None:
        def done(number: int | None) -> None:
            if number is None:
                return
            found = [i for i, s in enumerate(self.steps) if s.step == number]
            if found:
                self._move(found[-1])
            else:
                self.notify(f"No step {number} here (steps {self.steps[0].step}…{self.steps[-1].step}).", severity="warning")

        self.app.push_screen(JumpPrompt(), done)

    def action_next_problem(self, direction: int) -> None:
        counts = getattr(self, "call_counts", {})
        found = first_of(self.steps, self.query_one(Timeline).cursor, direction, lambda s: s.has_error or s.has_interrupt or bool(counts.get(s.step, {}).get("failed")))
        if found is None:
            self.notify("No more errors, failed calls or interrupts " + ("after" if direction > 0 else "before") + " this step.")
        self._move(found)

    def action_mark(self) -> None:
        self.marked = self.index
        self.notify(f"Marked step {self.steps[self.index].step}: press d on another step to diff.")
        if self.payload:
            self._status(self._step_status(self.payload))

    def action_diff_marked(self) -> None:
        if self.marked is None:
            self.notify("Mark a step first with m (the Diff tab shows this step against the previous one).")
            self.action_tab("diff")
            return
        a, b = self.steps[self.marked], self.steps[self.index]
        self.action_tab("diff")
        self.load_diff(a, b)

    @work(thread=True, exclusive=True, group="diff")
    def load_diff(self, a: StepInfo, b: StepInfo) -> None:
        try:
            entries = self.reader.diff(a, b)
        except GraphtapeError as exc:
            self.post_message(self.DiffLoaded(f"Cannot diff: {exc}", []))
            return
        self.post_message(self.DiffLoaded(f"marked step {a.step} → step {b.step}", entries))

    def on_run_screen_diff_loaded(self, message: DiffLoaded) -> None:
        self.diff_title = message.title
        self.diff_entries = message.entries
        self.query_one(DiffView).show(message.title, message.entries)

    def action_watch(self) -> None:
        keys = sorted(self.payload.state) if self.payload else []
        if not keys:
            self.notify("No state at this step to watch.")
            return

        def done(key: str | None) -> None:
            if key:
                self.watch_key = key
                self.notify(f"Watching {key}: [ jumps to the step that last changed it, ] to the next.")
                if self.payload:
                    self._status(self._step_status(self.payload))

        self.app.push_screen(WatchPicker(keys, self.watch_key), done)

    def action_watch_jump(self, direction: int) -> None:
        if not self.watch_key:
            self.action_watch()
            return
        self.find_watch(self.watch_key, direction, self.index)

    @work(thread=True, exclusive=True, group="watch")
    def find_watch(self, key: str, direction: int, start: int) -> None:
        store = self.app.store
        try:
            writers = set(store.steps_writing(self.run_id, key, self.ns))
        except GraphtapeError:
            writers = set()
        found = first_of(self.steps, start, direction, lambda s: s.step in writers and not s.pending)
        self.post_message(self.WatchFound(key, found, direction))

    def on_run_screen_watch_found(self, message: WatchFound) -> None:
        if message.index is None:
            where = "before" if message.direction < 0 else "after"
            self.notify(f"No step {where} this one changed {message.key}.")
            return
        self._move(message.index)

    def action_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab

    def action_copy_value(self) -> None:
        if self._no_steps("copy"):
            return
        picked = self.query_one(StateTree).selected_value() if self.query_one(TabbedContent).active == "state" else None
        if picked is None:
            value, label = (self.payload.state if self.payload else {}), "the step's state"
        else:
            path, value = picked
            label = ".".join(str(p) for p in path) or "the step's state"
        self.write_json(value, label, None)

    def action_view_value(self) -> None:
        tab = self.query_one(TabbedContent).active
        if self._no_steps("show"):
            return
        if self.payload is None:
            self.notify("Wait for the step to load.", severity="warning")
        elif tab == "state":
            picked = self.query_one(StateTree).selected_value()
            path, value = picked if picked is not None else ([], self.payload.state)
            label = ".".join(str(p) for p in path) or f"the state after step {self.payload.step.step}"
            self.render_value(label, lambda: to_json(value))
        elif tab == "diff":
            view = self.query_one(DiffView)  # what the tab shows: this step's diff, or the marked one
            title, entries = view.title, view.entries
            self.render_value(f"diff: {title}", lambda: diff_text(entries))
        elif tab == "routes":
            routes = self.payload.detail.routes
            self.render_value(f"routes of step {self.payload.step.step}", lambda: to_json([dataclasses.asdict(r) for r in routes]))
        else:
            self.notify("v shows the selected state value, the diff or the routes in full (tabs 1, 3, 4).")

    @work(thread=True, exclusive=True, group="view")
    def render_value(self, title: str, render: Any) -> None:
        """Renders off the UI thread: a long history decodes here, and its JSON can be megabytes."""
        try:
            text = render()
        except GraphtapeError as exc:
            self.post_message(self.JsonWritten(title, error=str(exc)))
            return
        self.post_message(self.ValueReady(title, text))

    def on_run_screen_value_ready(self, message: ValueReady) -> None:
        self.app.push_screen(ValueScreen(message.title, message.text))

    def action_save_state(self) -> None:
        if self._refused() or self._no_steps("save"):
            return
        if not self.payload:
            return
        from graphtape.replay.testgen import slug

        payload = self.payload
        default = f"graphtape-{slug(self.run_id[:8])}-step{payload.step.step}.json"  # a crafted store's id may hold "/.."

        def done(request: ExportRequest | None) -> None:
            if request is not None:
                self.write_json(payload.state, f"the state of step {payload.step.step}", Path(request.path).expanduser(), request.overwrite)

        self.app.push_screen(PathPrompt(default, f"Save the state of step {payload.step.step} as JSON"), done)

    @work(thread=True, group="json")
    def write_json(self, value: Any, label: str, path: Path | None, overwrite: bool = False) -> None:
        """``value`` as JSON to the clipboard, or to ``path`` (mode 0600): in a worker, as long lists decode here."""
        try:
            data = to_json(value).encode()
            if path is not None:
                write_private(path, data, overwrite=overwrite)
        except GraphtapeError as exc:
            self.post_message(self.JsonWritten(label, error=str(exc)))
            return
        except OSError as exc:
            self.post_message(self.JsonWritten(label, error=f"cannot save: {exc.strerror or exc}"))
            return
        self.post_message(self.JsonWritten(label, data.decode(), path))

    def on_run_screen_json_written(self, message: JsonWritten) -> None:
        if message.error:
            self.notify(message.error, severity="error")
        elif message.path is not None:
            self.notify(f"Saved {message.label} to {_relative(message.path.resolve())}")
        else:
            copy_and_say(self, message.text, message.label)

    def on_subgraph_list_opened(self, message: SubgraphList.Opened) -> None:
        self.app.push_screen(RunScreen(self.run_id, message.ns))

    def action_up(self) -> None:
        if self.ns:
            self.app.pop_screen()

    def action_back(self) -> None:
        if self.ns or self.back_pops:
            self.app.pop_screen()
            return
        self.app.show_runs()

    # -- replay, fork, export, info ------------------------------------------------
    def _refused(self) -> bool:
        """Replay, fork, export and save write files or run code: not in a read-only (web) session."""
        if getattr(self.app, "read_only", False):
            self.notify("This is a read-only web session: replay, fork, export and save need `graphtape tui --web --web-allow-writes`.", severity="warning")
            return True
        return False

    def _no_steps(self, what: str) -> bool:
        """A loaded run that recorded no step (it failed before its first) has nothing to act on:
        say so and why, rather than to wait for a load that is over."""
        if self.run is None or self.steps:
            return False
        from graphtape.replay.stepless import why_no_steps

        self.notify(f"This run recorded no steps{why_no_steps(self.run)}: there is nothing to {what}.", severity="warning")
        return True

    def _selected_step(self, *, or_completed_before: bool = False, what: str = "re-run") -> StepInfo | None:
        """The step to re-run from; with ``or_completed_before``, a step that did not complete (the
        failed step a failed run opens on) gives the last completed step before it."""
        if self._no_steps(what):
            return None
        if not (0 <= self.index < len(self.steps)) or self.run is None:
            self.notify("Wait for the run to load, then pick a step.", severity="warning")
            return None
        step = self.steps[self.index]
        if step.pending or not step.checkpoint_id:
            before = self._completed_before(self.index) if or_completed_before else None
            if before is None:
                self.notify(f"Step {step.step} did not complete: pick a completed step to re-run from.", severity="warning")
            return before
        return step

    def _completed_before(self, index: int) -> StepInfo | None:
        return next((s for s in reversed(self.steps[:index]) if not s.pending and s.checkpoint_id), None)

    def _can_rerun(self) -> bool:
        if self.rerunning:
            self.notify("A replay is already running: wait for it to finish.", severity="warning")
            return False
        return True

    def _store_read_only(self, what: str) -> bool:
        """Replay and fork record a new run: on a store that may only be read, say so instead."""
        if getattr(self.app.store, "read_only", False):
            self.notify(f"{self.app.store_label} is read-only: {what} records a new run, so it needs a store graphtape can write to.", title="Read-only store", severity="warning")
            return True
        return False

    def action_replay(self) -> None:
        if self._refused() or self._store_read_only("replay"):
            return
        # On a failed step (where a failed run opens), replaying means reproducing the failure:
        # resume after the last step that completed, so the failed one runs again.
        step = self._selected_step(or_completed_before=True, what="replay")
        if step is None or not self._can_rerun():
            return
        on = self.steps[self.index]
        failed = on.step if on is not step else None
        what = f"replaying from step {step.step}" + (f" to re-run step {failed}" if failed is not None else "")

        def done(request: ReplayRequest | None) -> None:
            if request is not None:
                self._start_rerun(f"{what} ({request.mode})", request.graph_ref)
                self.run_replay(step.step, request)

        self.app.push_screen(ReplayPrompt(step.step, self.graph_ref, recorded_ref=self.run.graph_ref, failed_step=failed), done)

    def action_fork(self) -> None:
        if self._refused() or self._store_read_only("fork"):
            return
        step = self._selected_step(what="fork")
        if step is None or not self._can_rerun():
            return

        self._ask_fork(step.step)

    def _ask_fork(self, step: int, again: ForkRequest | None = None, error: str | None = None) -> None:
        """The fork prompt; after a refused edit it opens again with what was typed and why."""

        def done(request: ForkRequest | None) -> None:
            if request is not None:
                self._start_rerun(f"forking after step {step} ({request.mode})", request.graph_ref)
                self._fork_asked = (step, request)
                self.run_fork(step, request)

        self.app.push_screen(ForkPrompt(step, self.graph_ref, recorded_ref=self.run.graph_ref if self.run else None, again=again, error=error), done)

    def _start_rerun(self, what: str, graph_ref: str) -> None:
        self.rerunning = True
        self.graph_ref = graph_ref
        self._rerun_what = what
        self._status(Text(f"{what}… (loading the graph)", style="bold cyan"))

    def _load_graph(self, ref: str) -> Any:
        from graphtape.replay.loading import load_graph
        from graphtape.replay.module_hint import store_folder

        return load_graph(ref, near=store_folder(getattr(self.app.store, "url", None)))

    def _progress(self, phase: str, done: int, total: int | None) -> None:
        # Called on the worker's thread by replay(); the message crosses to the UI thread.
        self.post_message(self.Rerun(progress=f"{phase} {done}/{total}" if total else phase))

    @work(thread=True, exclusive=True, group="rerun")
    def run_replay(self, step: int, request: ReplayRequest) -> None:
        from graphtape.replay import replay

        self._rerun(lambda graph: replay(self.run_id, graph, from_step=step, mode=request.mode, ns=self.ns, store=self.app.store, progress=self._progress), request.graph_ref)

    @work(thread=True, exclusive=True, group="rerun")
    def run_fork(self, step: int, request: ForkRequest) -> None:
        from graphtape.replay import fork
        from graphtape.replay.edits import parse_edits

        def go(graph: Any) -> Any:
            update = parse_edits(request.edits, lambda: self.app.store.state_at(self.run_id, step, self.ns))
            return fork(self.run_id, graph, step, update, as_node=request.as_node, mode=request.mode, ns=self.ns, store=self.app.store)

        self._rerun(go, request.graph_ref)

    def _rerun(self, go: Any, ref: str) -> None:
        try:
            graph = self._load_graph(ref)
            self.post_message(self.Rerun(progress="running the graph"))
            result = go(graph)
        except GraphtapeError as exc:
            self.post_message(self.Rerun(error=_one_line(str(exc).replace("--set ", ""))))
            return
        except Exception as exc:  # noqa: BLE001 - the user's graph or its edit: one line on screen, never a traceback
            self.post_message(self.Rerun(error=_one_line(f"{type(exc).__name__}: {exc}")))
            return
        self.post_message(self.Rerun(result=result))

    def on_run_screen_rerun(self, message: Rerun) -> None:
        what = getattr(self, "_rerun_what", "replaying")
        if message.progress is not None:
            self._status(Text(f"{what}… {message.progress}", style="bold cyan"))
            return
        self.rerunning = False
        asked, self._fork_asked = self._fork_asked, None
        if message.error is not None:
            self._status(Text(printable(f"Cannot re-run: {message.error}"), style="bold red"))
            if asked is not None:  # a fork that did not start: its prompt again, with what was typed and why
                self._ask_fork(asked[0], asked[1], message.error)
            else:
                self.notify(message.error, title="Cannot re-run", severity="error")
            return
        result = message.result
        n = len(result.divergences)
        summary = "matches the recording" if not n else f"{n} divergence{'s' if n != 1 else ''}"
        error = raised(result)
        if error:
            summary = f"the graph raised {error}" + (f" ({summary})" if n else "")
        self._status(Text(f"{what}: {summary} → run {result.run_id}", style="bold red" if error else "bold green" if not n else "bold yellow"))
        self.app.push_screen(CompareScreen(result))

    def action_export(self) -> None:
        if self._refused():
            return
        if self.run is None or self._no_steps("export"):
            return
        from graphtape.replay.testgen import slug

        def done(request: ExportRequest | None) -> None:
            if request is not None:
                self._status(Text(f"exporting run {self.run_id} to {request.path}…", style="cyan"))
                self.export_run(request.path, request.overwrite)

        self.app.push_screen(ExportPrompt(f"fixtures/runs/{slug(self.run.name)}.json"), done)

    @work(thread=True, exclusive=True, group="export")
    def export_run(self, path: str, overwrite: bool = False) -> None:
        from graphtape.replay.fixture import export_fixture, is_machine_path, write_fixture

        target = Path(path).expanduser()
        try:
            fixture = export_fixture(self.app.store, self.run_id)
            size = write_fixture(target, fixture, overwrite=overwrite)
        except GraphtapeError as exc:
            self.post_message(self.Exported(None, error=_one_line(str(exc))))
            return
        steps = fixture.get("steps") or []
        summary = f"steps {steps[0]['step']}..{steps[-1]['step']}" if steps else "no steps"
        warning = None
        if is_machine_path(fixture.get("graph")):
            warning = "the fixture names the graph by an absolute path: it replays only on this machine"
        self.post_message(self.Exported(target.resolve(), size, summary, warning=warning))

    def on_run_screen_exported(self, message: Exported) -> None:
        if message.error or message.path is None:
            self._status(Text(printable(f"Cannot export: {message.error}"), style="bold red"))
            self.notify(message.error or "", title="Cannot export", severity="error")
            return
        size = f"{message.size / 1024:.1f} KB" if message.size >= 1024 else f"{message.size} bytes"
        where = _relative(message.path)
        self._status(Text(f"wrote {where} ({size}, {message.summary})", style="bold green"))
        self.notify(f"Wrote {where} ({size}).", title="Fixture exported")
        if message.warning:
            self.notify(message.warning, severity="warning")

    def action_info(self) -> None:
        if self.run is None:
            return
        self.load_info()

    @work(thread=True, exclusive=True, group="info")
    def load_info(self) -> None:
        try:
            detail = self.app.store.run_detail(self.run_id)
        except GraphtapeError as exc:
            self.post_message(self.InfoLoaded(None, str(exc)))
            return
        self.post_message(self.InfoLoaded(clean(list(detail.fault_log or [])), edit=clean(detail.fork_edit)))

    def on_run_screen_info_loaded(self, message: InfoLoaded) -> None:
        if self.run is not None:
            self.app.push_screen(RunInfoScreen(self.run, message.fault_log, message.error, message.edit))


def _one_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0] if lines else text


def _relative(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)
