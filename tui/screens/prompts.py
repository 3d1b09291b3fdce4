"""Small modal prompts: jump to a step, pick a state key to watch, show keys."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option


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
            yield Static("Watch which state key? ([ and ] then jump to the step that changed it before / next)")
            yield OptionList(*(Option(k + ("  (watching)" if k == self.current else ""), id=k) for k in self.keys), id="watch-options")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option_id)

    def action_cancel(self) -> None:
        self.dismiss(None)


class HelpScreen(ModalScreen[None]):
    """Every key of the current screen, with what it does."""

    BINDINGS = [Binding("escape,question_mark,q", "close", "Close")]

    def __init__(self, bindings: list[tuple[str, str]]) -> None:
        super().__init__()
        self.rows = bindings

    def compose(self) -> ComposeResult:
        table = Table(title="Keys (every action is also in the command palette: ctrl+p)", box=None, expand=True)
        table.add_column("key", style="bold cyan")
        table.add_column("action")
        for key, desc in self.rows:
            table.add_row(key, desc)
        with Vertical(classes="prompt help"):
            yield Static(table)
            yield Static(Text("Esc closes", style="dim"))

    def action_close(self) -> None:
        self.dismiss(None)
