"""Small modal prompts: jump to a step, pick a state key to watch, replay / fork / export a run, show keys and run info."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from graphtape.recorder.records import RunInfo
from graphtape.tui.data import split_edits
from graphtape.tui.files import clipboard_blocked
from graphtape.tui.render import describe_edit, printable

MODES = (
    ("strict", "strict: every tool and model call answered from the recording"),
    ("tools", "tools: tools answered from the recording, models run live"),
    ("live", "live: nothing mocked, the graph calls out for real"),
)
GRAPH_HINT = "module:attr or path/to/file.py:attr"
SHORT_SCREEN = 30  # below this many rows the replay and fork prompts drop their fields' borders to fit


class PromptBody(VerticalScroll, can_focus=False):
    """A prompt's fields, scrolling on a small terminal; Tab skips it for the fields inside."""


def copy_and_say(widget: Any, text: str, label: str) -> None:
    """Copy ``text`` through the terminal (OSC 52) and say so, or say why it may not arrive."""
    app = widget.app
    app.copy_to_clipboard(text)
    if app.is_web:  # the page hands it to the browser's clipboard
        widget.notify(f"Copied {label} ({len(text):,} chars) to the browser's clipboard; if nothing arrives, the browser did not allow it.")
        return
    blocked = clipboard_blocked()
    if blocked:
        widget.notify(f"{blocked}; s saves {label} to a file instead.", title="Copy may not arrive", severity="warning")
    else:
        widget.notify(f"Copied {label} ({len(text):,} chars) through the terminal (OSC 52); if nothing arrives, the terminal does not take it: s saves to a file.")


@dataclass(frozen=True)
class ReplayRequest:
    """What the replay prompt asked for."""

    mode: str
    graph_ref: str


@dataclass(frozen=True)
class ForkRequest:
    """What the fork prompt asked for; ``edits`` are ``KEY=JSON`` strings whose JSON already parsed."""

    edits: list[str]
    as_node: str | None
    mode: str
    graph_ref: str


class _RunPrompt(ModalScreen):
    """Shared parts of the replay and fork prompts: a mode list and the graph to run."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    DEFAULT_MODE = "strict"

    def __init__(self, step: int, graph_ref: str | None, *, recorded_ref: str | None = None) -> None:
        super().__init__()
        self.step = step
        # What the user typed before wins; else the reference recorded with the run, shown
        # but loaded only once the user has seen where it points and confirmed it.
        self.recorded_ref = printable(recorded_ref) if recorded_ref and not graph_ref else None
        self.graph_ref = graph_ref or self.recorded_ref or ""
        self._confirmed: str | None = None

    def _mode_list(self) -> OptionList:
        modes = OptionList(*(Option(label, id=mode) for mode, label in MODES), id="mode-options")
        return modes

    def _graph_widgets(self) -> ComposeResult:
        note = "  (recorded with the run: check it before loading)" if self.recorded_ref else "" if self.graph_ref else "  (this run was recorded without one: type it)"
        yield Static(f"Graph to run ({GRAPH_HINT}){note}:")
        yield Input(self.graph_ref, placeholder=GRAPH_HINT, id="graph-input", select_on_focus=False)
        yield Static(id="graph-consent", classes="prompt-warning")

    def on_mount(self) -> None:
        modes = self.query_one("#mode-options", OptionList)
        modes.highlighted = [m for m, _ in MODES].index(self.DEFAULT_MODE)
        self._fit(self.app.size.height)

    def on_resize(self, event: events.Resize) -> None:
        self._fit(event.size.height)

    def _fit(self, rows: int) -> None:
        """On a short screen (80x24) the fields go borderless, one row each, so the whole
        prompt (its title first) shows without scrolling."""
        compact = rows < SHORT_SCREEN
        for field in self.query(Input):
            field.compact = compact
        self.query_one("#mode-options", OptionList).compact = compact

    def _mode(self) -> str:
        highlighted = self.query_one("#mode-options", OptionList).highlighted
        return MODES[highlighted if highlighted is not None else 0][0]

    def _graph(self) -> str | None:
        ref = self.query_one("#graph-input", Input).value.strip()
        if not ref:
            self._error(f"Name the graph to run: {GRAPH_HINT}.")
            self.query_one("#graph-input", Input).focus()
            return None
        if ref == self.recorded_ref and self._confirmed != ref:
            from graphtape.replay.loading import package_files_of, source_of

            source = source_of(ref)
            where = f"runs the file {source}" if source else "imports a module graphtape cannot locate without importing it"
            packages = package_files_of(ref, source)
            if packages:
                where += ", after " + ", ".join(str(p) for p in packages)
            self.query_one("#graph-consent", Static).update(
                Text(f"This reference was read from the recording: loading it {where}. Press Enter again to load it, or type another.", style="bold yellow")
            )
            self._confirmed = ref
            self.query_one("#graph-input", Input).focus()
            return None
        return ref

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "graph-input" and self._confirmed is not None and event.value.strip() != self._confirmed:
            self._confirmed = None  # another reference: it is the user's own now, or asks again
            self.query_one("#graph-consent", Static).update("")

    def _error(self, text: str) -> None:
        self.query_one(".prompt-error", Static).update(Text(printable(text)))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.submit()

    def on_key(self, event: events.Key) -> None:
        # Text typed while the mode list has the focus belongs in a field, not nowhere.
        if isinstance(self.focused, OptionList) and event.is_printable and event.character:
            event.stop()
            field = self.query(Input).first()
            field.focus()
            field.insert_text_at_cursor(event.character)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.submit()

    def submit(self) -> None:
        raise NotImplementedError

    def action_cancel(self) -> None:
        self.dismiss(None)


class ReplayPrompt(_RunPrompt):
    """Asks how to replay from a step: the mode (strict by default) and the graph; dismisses with a ReplayRequest.

    ``failed_step`` is the step the user was on when it did not complete (a failed one): the
    replay starts from ``step``, the last completed one before it, and the prompt says so.
    """

    def __init__(self, step: int, graph_ref: str | None, *, recorded_ref: str | None = None, failed_step: int | None = None) -> None:
        super().__init__(step, graph_ref, recorded_ref=recorded_ref)
        self.failed_step = failed_step

    def compose(self) -> ComposeResult:
        with PromptBody(classes="prompt"):
            yield Static(Text(f"Replay from step {self.step}", style="bold"))
            if self.failed_step is not None:
                yield Static(f"Step {self.failed_step} did not complete: the replay resumes after step {self.step}, the last completed step before it, and runs step {self.failed_step} again.", id="replay-from-note")
            yield Static("Mode (↑↓ to pick, Enter runs):")
            yield self._mode_list()
            yield from self._graph_widgets()
            yield Static(id="replay-error", classes="prompt-error")
            yield Static(Text("The graph runs in the background; the result opens beside the recording. Enter runs · Tab moves between the fields · Esc cancels.", style="dim"))

    def on_mount(self) -> None:
        super().on_mount()
        (self.query_one("#mode-options") if self.graph_ref else self.query_one("#graph-input", Input)).focus()

    def submit(self) -> None:
        ref = self._graph()
        if ref is not None:
            self.dismiss(ReplayRequest(self._mode(), ref))


class ForkPrompt(_RunPrompt):
    """Asks for state edits (KEY=JSON), an optional as-node, the mode (strict by default: calls the
    edit did not change are answered from the recording, a changed one runs live) and the graph.

    The JSON of every edit is checked here, before anything runs; a bad one is
    named in the prompt, which stays open. An edit the graph refuses (a key its
    state does not have) reopens the prompt with what was typed and why
    (``again`` and ``error``).
    """

    DEFAULT_MODE = "strict"

    def __init__(self, step: int, graph_ref: str | None, *, recorded_ref: str | None = None, again: ForkRequest | None = None, error: str | None = None) -> None:
        super().__init__(step, graph_ref, recorded_ref=recorded_ref)
        self.again = again
        self.error = error

    def compose(self) -> ComposeResult:
        again = self.again
        with PromptBody(classes="prompt"):
            yield Static(Text(f"Fork after step {self.step}: edit the state, continue as a new run", style="bold"))
            yield Static('Edits: KEY=JSON or dotted.path=JSON, space-separated (answer="no" plan.retries=0)')
            yield Input(" ".join(again.edits) if again else "", placeholder='key="value" other=3', id="fork-edits", select_on_focus=False)
            yield Static(self.error or "", id="fork-error", classes="prompt-error")
            yield Static("As node (optional: the edit goes through that node's reducers):")
            yield Input((again.as_node or "") if again else "", placeholder="node name", id="fork-as-node", select_on_focus=False)
            yield Static("Mode:")
            yield self._mode_list()
            yield from self._graph_widgets()
            yield Static(Text("Enter forks · Tab moves between the fields · Esc cancels", style="dim"))

    def on_mount(self) -> None:
        super().on_mount()
        if self.again is not None:
            self.query_one("#mode-options", OptionList).highlighted = [m for m, _ in MODES].index(self.again.mode)
        self.query_one("#fork-edits", Input).focus()

    def submit(self) -> None:
        try:
            edits = split_edits(self.query_one("#fork-edits", Input).value)
        except ValueError as exc:
            self._error(str(exc))
            self.query_one("#fork-edits", Input).focus()
            return
        ref = self._graph()
        if ref is None:
            return
        as_node = self.query_one("#fork-as-node", Input).value.strip() or None
        self.dismiss(ForkRequest(edits, as_node, self._mode(), ref))


@dataclass(frozen=True)
class ExportRequest:
    """Where to write the fixture, and whether an existing file there may be replaced."""

    path: str
    overwrite: bool = False


class PathPrompt(ModalScreen[ExportRequest | None]):
    """Asks where to write a file, showing where it will land; an existing file is replaced only when confirmed.

    A relative path is taken from the working directory (named in the prompt); a
    folder, or a path ending in ``/``, keeps the suggested file name.
    """

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, default: str, title: str = "Export this run as a regression fixture") -> None:
        super().__init__()
        self.default = default
        self.title_text = title
        self._confirm: str | None = None  # the existing path the user was warned about

    def compose(self) -> ComposeResult:
        with Vertical(classes="prompt"):
            yield Static(Text(self.title_text, style="bold"))
            yield Static(Text(f"Path: relative to {printable(str(Path.cwd()))}, or absolute (~ is your home; a folder keeps the name):"))
            yield Input(self.default, id="export-path")
            yield Static(id="export-where", classes="prompt-where")
            yield Static(id="export-error", classes="prompt-error")
            yield Static(Text("Enter writes the file (readable by you only) · Esc cancels", style="dim"))

    def on_mount(self) -> None:
        self._show_where(self.default)

    def target(self, text: str) -> Path | None:
        """The file ``text`` names: a folder (or a path ending in ``/``) gets the suggested file name."""
        text = text.strip()
        if not text:
            return None
        path = Path(text).expanduser()
        if text.endswith(("/", "\\")) or path.is_dir():
            path = path / Path(self.default).name
        return path if path.is_absolute() else Path.cwd() / path

    def _show_where(self, text: str) -> None:
        path = self.target(text)
        where = self.query_one("#export-where", Static)
        if path is None:
            where.update("")
            return
        note = Text(f"→ {printable(str(path))}", style="dim")
        if path.exists():
            note.append("  (exists)", style="yellow")
        where.update(note)

    def on_input_changed(self, event: Input.Changed) -> None:
        self._confirm = None  # a new path: a new warning if it exists too
        self.query_one("#export-error", Static).update("")
        self._show_where(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        path = self.target(event.value)
        error = self.query_one("#export-error", Static)
        if path is None:
            error.update(f"Type a file path, like {self.default}.")
            return
        key = str(path)
        if path.exists() and self._confirm != key:
            self._confirm = key
            error.update(Text(f"{printable(key)} exists: press Enter again to replace it, or type another path."))
            return
        self.dismiss(ExportRequest(key, overwrite=self._confirm == key))

    def action_cancel(self) -> None:
        self.dismiss(None)


ExportPrompt = PathPrompt  # the fixture export's prompt (its default title)


class RunInfoScreen(ModalScreen[None]):
    """The run's particulars: graph reference, lineage, redactions, and the recorder's fault log."""

    BINDINGS = [Binding("escape,i,q", "close", "Close")]

    def __init__(self, run: RunInfo, fault_log: list[str] | None, error: str | None = None, edit: Any = None) -> None:
        super().__init__()
        self.run = run
        self.fault_log = fault_log or []
        self.error = error
        self.edit = edit  # a fork's edit (or a replay's mode), as recorded

    def compose(self) -> ComposeResult:
        r = self.run
        table = Table(box=None, show_header=False)
        table.add_column(style="bold cyan")
        table.add_column()
        for key, value in (
            ("run", f"{r.name}  {r.id}"),
            ("graph", r.graph_name + (f"  ({r.graph_ref})" if r.graph_ref else "  (no graph reference recorded)")),
            ("status", r.status + (f" ({r.status_reason})" if r.status_reason else "")),
            ("thread", r.thread_id or "—"),
            ("parent", f"{r.parent_run_id} at step {r.fork_step}" if r.parent_run_id else "—"),
            ("edit", describe_edit(self.edit) if self.edit else "—"),
            ("tags", ", ".join(r.tags) or "—"),
            ("redactions", f"{r.redactions} value(s) redacted while recording" if r.redactions else "none"),
            ("faults", f"{r.faults} recorder fault(s): parts of this run may be missing" if r.faults else "none"),
        ):
            table.add_row(key, Text(printable(value)))  # recorded text: never markup
        parts: list = [table]
        if self.error:
            parts.append(Text(printable(f"\nCannot read the fault log: {self.error}"), style="bold red"))
        elif self.fault_log:
            parts.append(Text("\nFault log", style="bold red"))
            parts.extend(Text(printable(f"  {line}")) for line in self.fault_log)
        with Vertical(classes="prompt help"):
            with VerticalScroll(id="run-info-body"):
                yield Static(Group(*parts))
            yield Static(Text("Esc closes", style="dim"))

    def action_close(self) -> None:
        self.dismiss(None)


class JumpPrompt(ModalScreen[int | None]):
    """Asks for a step number; dismisses with it (or None)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def compose(self) -> ComposeResult:
        with Vertical(classes="prompt"):
            yield Static("Jump to step number:")
            yield Input(placeholder="e.g. 7", id="jump-input", type="integer")
            yield Static(id="jump-error", classes="prompt-error")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        try:
            self.dismiss(int(event.value))
        except ValueError:
            self.query_one("#jump-error", Static).update("Type a whole number (a step), Esc to cancel.")

    def action_cancel(self) -> None:
        self.dismiss(None)


class WatchPicker(ModalScreen[str | None]):
    """Picks the state key to watch for changes."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, keys: list[str], current: str | None) -> None:
        super().__init__()
        self.keys = keys
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(classes="prompt"):
            yield Static(Text("Watch which state key? (then [ and ] jump to the step that changed it before / after this one)"))
            yield OptionList(*(Option(Text(printable(k) + ("  (watching)" if k == self.current else "")), id=k) for k in self.keys), id="watch-options")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option_id)

    def action_cancel(self) -> None:
        self.dismiss(None)


class HelpScreen(ModalScreen[None]):
    """Every key of the current screen, with what it does (scrolls on a small terminal)."""

    BINDINGS = [Binding("escape,question_mark,q", "close", "Close")]
    WIDE = 150  # two pairs of columns from this width on

    def __init__(self, bindings: list[tuple[str, str]]) -> None:
        super().__init__()
        self.rows = bindings

    def compose(self) -> ComposeResult:
        table = Table(title="Keys (every action is also in the command palette: ctrl+p)", box=None, expand=True)
        pairs = 2 if self.app.size.width >= self.WIDE and len(self.rows) > 12 else 1
        half = (len(self.rows) + 1) // 2 if pairs == 2 else len(self.rows)
        for _ in range(pairs):
            table.add_column("key", style="bold cyan", no_wrap=True)
            table.add_column("action")
        for i in range(half):
            cells = [*self.rows[i]]
            if pairs == 2:
                cells += [*self.rows[half + i]] if half + i < len(self.rows) else ["", ""]
            table.add_row(*cells)
        with Vertical(classes="prompt help tall"):
            with VerticalScroll(id="help-keys"):
                yield Static(table)
            yield Static(Text("↑/↓ and PgUp/PgDn scroll · Esc closes", style="dim"))

    def on_mount(self) -> None:
        self.query_one("#help-keys").focus()

    def action_close(self) -> None:
        self.dismiss(None)


class ValueScreen(ModalScreen[None]):
    """A value, a diff or a step's routes in full: what the one-line views fold, to scroll and read."""

    BINDINGS = [Binding("escape,v,q", "close", "Close"), Binding("c", "copy", "Copy")]
    SHOWN_CHARS = 400_000  # past this the viewer says how much more there is (c copies it all)

    def __init__(self, title: str, text: str) -> None:
        super().__init__()
        self.title_text = title
        self.text = text

    def compose(self) -> ComposeResult:
        body = Text(printable(self.text[: self.SHOWN_CHARS]), overflow="fold")  # c copies the text itself
        if len(self.text) > self.SHOWN_CHARS:
            body.append(f"\n… {len(self.text) - self.SHOWN_CHARS:,} more characters (c copies them all)", style="bold yellow")
        with Vertical(classes="prompt help tall"):
            yield Static(Text(printable(self.title_text), style="bold"))
            with VerticalScroll(id="value-body"):
                yield Static(body)
            yield Static(Text(f"{len(self.text):,} characters · ↑/↓ PgUp/PgDn scroll · c copies · Esc closes", style="dim"))

    def on_mount(self) -> None:
        self.query_one("#value-body").focus()

    def action_copy(self) -> None:
        copy_and_say(self, self.text, self.title_text)

    def action_close(self) -> None:
        self.dismiss(None)
