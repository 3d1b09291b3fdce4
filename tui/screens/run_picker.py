"""Pick the run to diff another one against: runs of the same graph first, filtered as you type."""

from __future__ import annotations


from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from graphtape.recorder.records import RunInfo
from graphtape.tui.render import local_time, printable

SHOWN = 300  # the picker lists this many matches (typing narrows them)


def run_choice(run: RunInfo) -> Text:
    """One row of the picker: name, id, status, steps, when it started."""
    text = Text(printable(run.name), style="bold")
    text.append(f"  {run.id[:8]}", style="dim")
    text.append(f"  {run.status}", style={"ok": "green", "error": "red", "interrupted": "yellow", "incomplete": "yellow"}.get(run.status, ""))
    text.append(f"  {run.step_count} steps  {local_time(run.started_at, '%m-%d %H:%M:%S')}", style="dim")
    if run.graph_name:
        text.append(f"  {printable(run.graph_name)}", style="italic")
    return text


class RunPicker(ModalScreen[str | None]):
    """Lists the other runs (of the same graph first, newest first); Enter picks one as run A of the diff."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, run: RunInfo, runs: list[RunInfo]) -> None:
        super().__init__()
        self.run = run
        others = [r for r in runs if r.id != run.id]
        same = [r for r in others if r.graph_name == run.graph_name]
        self.runs = same + [r for r in others if r.graph_name != run.graph_name]

    def compose(self) -> ComposeResult:
        with Vertical(classes="prompt tall"):
            title = Text(f"Diff {printable(self.run.name)} ({self.run.id[:8]}) against which run?", style="bold")
            title.append("  It is run B; the one you pick is run A (say, the one that worked).", style="dim")
            yield Static(title)
            yield Input(placeholder="type to filter by name, graph or id", id="picker-filter")
            yield OptionList(id="picker-runs")

    def on_mount(self) -> None:
        self._fill("")
        self.query_one("#picker-runs", OptionList).focus()

    def _fill(self, text: str) -> None:
        needle = text.strip().lower()
        found = [r for r in self.runs if not needle or needle in r.name.lower() or needle in r.graph_name.lower() or r.id.startswith(needle)]
        listing = self.query_one("#picker-runs", OptionList)
        listing.clear_options()
        if found:
            listing.add_options([Option(run_choice(r), id=r.id) for r in found[:SHOWN]])
            listing.highlighted = 0
        else:
            listing.add_option(Option(Text("no other run matches" if self.runs else "the store has no other run", style="yellow"), disabled=True))

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self._fill(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter in the filter picks the highlighted (first matching) run, as Enter on the list does."""
        event.stop()
        listing = self.query_one("#picker-runs", OptionList)
        index = listing.highlighted
        if index is not None and not listing.get_option_at_index(index).disabled:
            self.dismiss(listing.get_option_at_index(index).id)
            return
        listing.focus()  # nothing matches: the list says so, and the keys move there

    def on_key(self, event) -> None:
        # Typing on the list goes to the filter, so a name can be typed at once.
        if event.character and event.character.isprintable() and not isinstance(self.focused, Input) and event.key not in ("up", "down", "enter"):
            box = self.query_one("#picker-filter", Input)
            box.focus()
            box.insert_text_at_cursor(event.character)
            event.stop()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(event.option_id)

    def action_cancel(self) -> None:
        self.dismiss(None)
