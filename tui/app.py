"""The graphtape Textual app: one factory for the CLI and the tests."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from textual import work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen
from rich.text import Text
from textual.widgets import Static

from graphtape.recorder.errors import GraphtapeError
from graphtape.recorder.store import RunStore, open_store, shown_url
from graphtape.tui.screens.compare import CompareScreen
from graphtape.tui.screens.prompts import HelpScreen
from graphtape.tui.screens.run import RunScreen
from graphtape.tui.render import printable
from graphtape.tui.screens.runs import RunsScreen


class LoadingScreen(Screen):
    """Shown while the store opens (in a worker); replaced by runs or an error."""

    BINDINGS = [Binding("q,escape", "app.quit", "Quit")]

    def compose(self):
        yield Static("opening the store…", id="loading")


class GraphtapeApp(App):
    """Steps through recorded LangGraph runs."""

    CSS_PATH = "app.tcss"
    TITLE = "graphtape"
    BINDINGS = [Binding("ctrl+q", "quit", "Quit", show=False)]

    class StoreOpened(Message):
        def __init__(self, store: RunStore | None, error: str | None, run_id: str | None) -> None:
            super().__init__()
            self.store = store
            self.error = error
            self.run_id = run_id

    def __init__(self, db: str | None = None, run: str | None = None, *, store: RunStore | None = None, welcome: str | None = None, read_only: bool = False) -> None:
        super().__init__()
        self.read_only = read_only  # a browser session (--web) without --web-allow-writes: look, never write or run
        self.welcome = welcome  # said once the named run opens (graphtape demo: what to look for)
        self.db = db
        self.run_ref = run
        self.store: Any = store
        self.store_label = shown_url(str(db)) if db else "the store"  # never the password
        self.load_error: str | None = None

    def on_mount(self) -> None:
        self.push_screen(LoadingScreen())
        self.open_store()

    @work(thread=True, exclusive=True, group="store")
    def open_store(self) -> None:
        try:
            store = self.store or open_store(self.db)
            _ = store.read_only  # asked here, on the worker: PostgreSQL answers with a query
            run_id = store.resolve_run(self.run_ref) if self.run_ref else None
        except GraphtapeError as exc:
            self.post_message(self.StoreOpened(None, str(exc), None))
            return
        self.post_message(self.StoreOpened(store, None, run_id))

    def on_graphtape_app_store_opened(self, message: StoreOpened) -> None:
        if message.store is None:
            self.load_error = message.error
            self.screen.query_one("#loading", Static).update(Text(printable(f"graphtape: {message.error}\n\nPress q to quit.")))
            return
        self.store = message.store
        if self.db is None:  # opened on a store object: name it by its URL (never the password)
            self.store_label = shown_url(getattr(self.store, "url", self.store_label))
        if message.run_id:
            # A run named on the command line opens straight away: the runs list (a query
            # over every run and a table) is built only if the user goes back to it.
            self.switch_screen(RunScreen(message.run_id, welcome=self.welcome))
        else:
            self.switch_screen(RunsScreen())

    def action_help_quit(self) -> None:
        """Ctrl+C: say how to quit (Textual's own hint is markup, which ``notify`` shows as text)."""
        keys = sorted({key for key, b in self.active_bindings.items() if b.binding.action in ("quit", "app.quit")}, key=len)
        self.notify(f"Press {' or '.join(keys) or 'ctrl+q'} to quit", title="Do you want to quit?")

    def notify(self, message: str, *, title: str = "", **kwargs: Any) -> None:  # type: ignore[override]
        """Every toast as plain text: toasts quote recorded names and errors, whose ``[`` would be
        read as markup (``[/]`` raises, ``[link=...]`` makes a link) and whose escapes reach the terminal."""
        kwargs["markup"] = False
        super().notify(printable(str(message)), title=printable(str(title)), **kwargs)

    def open_run(self, run_id: str) -> None:
        """Open a run's timeline on top of the runs list."""
        self.push_screen(RunScreen(run_id))

    def on_compare_screen_open_run(self, message: CompareScreen.OpenRun) -> None:
        self.push_screen(RunScreen(message.run_id, message.ns, message.step, back_pops=True))

    class RunsCompared(Message):
        """Two runs diffed (``diff``), or why not (``error``)."""

        def __init__(self, diff: Any = None, error: str | None = None) -> None:
            super().__init__()
            self.diff = diff
            self.error = error

    def compare_runs(self, run_a: str, run_b: str) -> None:
        """Diff run B against run A in a worker, then open the compare screen on the result."""
        self.notify("Comparing the two runs…", timeout=2)
        self.diff_runs(run_a, run_b)

    @work(thread=True, exclusive=True, group="diff-runs")
    def diff_runs(self, run_a: str, run_b: str) -> None:
        from graphtape.replay.run_diff import diff_runs

        try:
            diff = diff_runs(run_a, run_b, store=self.store)
        except GraphtapeError as exc:
            self.post_message(self.RunsCompared(error=str(exc)))
            return
        self.post_message(self.RunsCompared(diff))

    def on_graphtape_app_runs_compared(self, message: RunsCompared) -> None:
        if message.error is not None:
            self.notify(message.error, title="Cannot compare the runs", severity="error")
            return
        self.push_screen(CompareScreen(message.diff))

    def show_runs(self) -> None:
        """Back to the runs list (built now if the app opened on a named run)."""
        while len(self.screen_stack) > 2:
            self.pop_screen()
        if isinstance(self.screen, RunsScreen):
            self.screen.reload()
        else:
            self.switch_screen(RunsScreen())

    def action_help(self) -> None:
        rows = [(key_label(b), f"{b.description}: {b.tooltip}" if b.tooltip else b.description or b.action) for b in _bindings(self.screen)]
        rows.append(("tab", "next pane (timeline, tabs, the open tab's view)"))
        rows.append(("ctrl+p", "command palette: every action by name"))
        rows.append(("ctrl+q", "quit"))
        self.push_screen(HelpScreen(rows))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        ours = list(_bindings(screen))
        # Textual's own "Keys" and "Quit" would sit beside this screen's, which say more.
        replaced = {"Keys", "Quit"} if any(b.action in ("app.help", "app.quit") for b in ours) else set()
        yield from (c for c in super().get_system_commands(screen) if c.title not in replaced)
        for binding in ours:
            action = binding.action
            help_text = binding.tooltip or binding.description
            yield SystemCommand(f"{binding.description} ({key_label(binding)})", help_text, lambda a=action, s=screen: s.run_action(a))


_KEY_NAMES = {"left_square_bracket": "[", "right_square_bracket": "]", "question_mark": "?", "colon": ":", "slash": "/", "left": "←", "right": "→"}


def key_label(binding: Binding) -> str:
    """``'left,h'`` -> ``'←/h'``: a binding's keys as a person types them."""
    return "/".join(_KEY_NAMES.get(k.strip(), k.strip()) for k in binding.key.split(","))


def _bindings(screen: Screen) -> Iterable[Binding]:
    """The screen's own bindings that do something a person would look up."""
    return (b for b in getattr(screen, "BINDINGS", []) if isinstance(b, Binding) and b.description)


def build_app(db: str | None = None, run: str | None = None, *, store: RunStore | None = None, welcome: str | None = None, read_only: bool = False) -> GraphtapeApp:
    """The one way to make the app: used by ``graphtape tui``, ``graphtape demo``, ``--web`` and the tests."""
    return GraphtapeApp(db, run, store=store, welcome=welcome, read_only=read_only)


def run_app(db: str | None = None, run: str | None = None, welcome: str | None = None, *, read_only: bool = False) -> int:
    """Run the TUI in this terminal (or a browser session); returns an exit code."""
    app = build_app(db, run, welcome=welcome, read_only=read_only)
    app.run()
    return 2 if app.load_error else 0
