"""The compare screen: a replay (or fork) beside the run it came from, divergence by divergence."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, OptionList, Static
from textual.widgets.option_list import Option

from graphtape.recorder.errors import GraphtapeError
from graphtape.recorder.records import StepInfo
from graphtape.tui.data import DiffEntry, diff_states
from graphtape.tui.render import clean
from graphtape.tui.screens.runs import status_text
from graphtape.tui.widgets.diff_view import DiffView
from graphtape.tui.widgets.panels import TextPanel
from graphtape.tui.widgets.timeline import Timeline

NARROW = 110
_KIND_STYLE = {"route": "magenta", "call": "cyan", "arguments": "cyan", "state": "yellow", "error": "red", "missing": "red", "extra": "red", "fork": "green"}


def divergence_label(d: Any) -> Text:
    """One row of the divergence list: FIRST, where, kind, what."""
    text = Text()
    if d.first:
        text.append("FIRST ", style="bold red")
    text.append("end" if d.step is None else f"step {d.step}", style="bold")
    if d.node:
        text.append(f" {d.node}")
    text.append(f"  {d.kind}", style=_KIND_STYLE.get(d.kind, ""))
    text.append(f": {d.what}")
    return text


def verdict(result: Any) -> Text:
    """The header: what was re-run, from where, into which run, and how it went (an error first)."""
    verb = "fork" if result.kind == "fork" else "replay"
    where = f"step {result.from_step}" + (f" of {result.ns}" if result.ns else "")
    text = Text(f"{verb} of run {result.source_run_id} from {where} ({result.mode}) → run {result.run_id or '(not recorded)'}: ", style="bold")
    n = len(result.divergences)
    error = raised(result)
    if error:
        # The graph raised: that is the news; the differences it left come after.
        text.append(f"the {verb} raised {error}", style="bold red")
        if n:
            text.append(f" ({n} difference{'s' if n != 1 else ''} from the original)", style="yellow")
    elif not n:
        text.append("matches the recording", style="bold green")
    elif result.kind == "fork":
        text.append(f"{n} difference{'s' if n != 1 else ''} from the original", style="bold yellow")
    else:
        text.append(f"{n} divergence{'s' if n != 1 else ''}", style="bold red")
    for note in getattr(result, "notes", None) or []:
        text.append(f"\nnote: {note}", style="yellow")
    return text


def raised(result: Any) -> str | None:
    """What the re-run's graph raised, if it did (a strict miss is a divergence, not this)."""
    error = getattr(result, "error", None)
    return error if error and not error.startswith("ReplayMiss") else None


class CompareScreen(Screen):
    """The original run's timeline beside the replay's, the divergences, and a two-run diff.

    Built from a ``ReplayResult``: the divergences come with it; the two
    timelines and the states are read from the store in workers. Selecting a
    divergence moves both timelines to its step and diffs the recorded state
    against the replayed one there; moving either timeline diffs that step.
    """

    BINDINGS = [
        Binding("n,right_square_bracket", "divergence(1)", "Next divergence"),
        Binding("p,left_square_bracket", "divergence(-1)", "Prev divergence"),
        Binding("o", "open_new", "Open new run"),
        Binding("escape", "back", "Back"),
        Binding("question_mark", "app.help", "Keys"),
    ]

    class RunsLoaded(Message):
        def __init__(self, sides: list[tuple[Any, list[StepInfo], dict]] | None, error: str | None = None) -> None:
            super().__init__()
            self.sides = sides
            self.error = error

    class PairLoaded(Message):
        def __init__(self, pair: tuple[int | None, int | None], title: str, entries: list[DiffEntry]) -> None:
            super().__init__()
            self.pair = pair
            self.title = title
            self.entries = entries

    class OpenRun(Message):
        """Asks the app to open the re-run's own run screen (screens never import each other)."""

        def __init__(self, run_id: str, ns: str) -> None:
            super().__init__()
            self.run_id = run_id
            self.ns = ns

    def __init__(self, result: Any) -> None:
        super().__init__()
        self.result = result
        self.divergences = list(result.divergences)
        self.selected = 0 if self.divergences else -1
        self.source_steps: list[StepInfo] = []
        self.new_steps: list[StepInfo] = []
        self.step_offset = 0  # new run's step number = the original's + offset (a fork adds its edit step)
        self.pair: tuple[int | None, int | None] | None = None
        self.diff_title = ""
        self.diff_entries: list[DiffEntry] = []

    def compose(self) -> ComposeResult:
        yield Static(verdict(self.result), id="compare-header")
        with Horizontal(id="compare-runs"):
            with Vertical(classes="compare-side"):
                yield Static(id="compare-original-label", classes="compare-label")
                yield Timeline(id="compare-original")
            with Vertical(classes="compare-side"):
                yield Static(id="compare-new-label", classes="compare-label")
                yield Timeline(id="compare-new")
        with Horizontal(id="compare-detail"):
            yield OptionList(id="divergence-list")
            with Vertical(id="compare-diff-pane"):
                yield TextPanel(id="divergence-text")
                yield DiffView(id="compare-diff")
        yield Footer()

    def on_mount(self) -> None:
        self.set_class(self.app.size.width < NARROW, "narrow")
        listing = self.query_one("#divergence-list", OptionList)
        if self.divergences:
            listing.add_options([Option(divergence_label(d), id=str(i)) for i, d in enumerate(self.divergences)])
        else:
            listing.add_option(Option(Text(f"no divergences: the {self.result.kind} did what the recording did", style="green"), disabled=True))
        self._show_divergence_text()
        self.load_runs()

    def on_resize(self, event: events.Resize) -> None:
        self.set_class(event.size.width < NARROW, "narrow")

    # -- loading ---------------------------------------------------------------
    @work(thread=True, exclusive=True, group="compare-runs")
    def load_runs(self) -> None:
        store, r = self.app.store, self.result
        sides = []
        try:
            for run_id in (r.source_run_id, r.run_id):
                if run_id is None:
                    sides.append((None, [], {}))
                    continue
                sides.append((clean(store.get_run(run_id)), clean(store.list_steps(run_id, r.ns)), store.call_counts(run_id, r.ns)))
        except GraphtapeError as exc:
            self.post_message(self.RunsLoaded(None, str(exc)))
            return
        self.post_message(self.RunsLoaded(sides))

    def on_compare_screen_runs_loaded(self, message: RunsLoaded) -> None:
        if message.sides is None:
            self.query_one("#compare-header", Static).update(Text(f"Cannot read the runs: {message.error}", style="bold red"))
            return
        (src_run, self.source_steps, src_calls), (new_run, self.new_steps, new_calls) = message.sides
        if self.new_steps:
            self.step_offset = self.new_steps[0].step - self.result.from_step if self.result.kind == "fork" else 0
        for label_id, timeline_id, title, run, steps, calls in (
            ("#compare-original-label", "#compare-original", "recorded", src_run, self.source_steps, src_calls),
            ("#compare-new-label", "#compare-new", self.result.kind, new_run, self.new_steps, new_calls),
        ):
            label = Text(title, style="bold")
            if run is not None:
                label.append(f"  {run.id}  ", style="dim")
                label.append_text(status_text(run, with_lineage=False))  # the header says where it comes from
                if steps:
                    label.append(f"  steps {steps[0].step}..{steps[-1].step}", style="dim")
            else:
                label.append("  (not recorded)", style="dim")
            self.query_one(label_id, Static).update(label)
            resumed = run.fork_step if run is not None and run.parent_run_id and not self.result.ns else None
            self.query_one(timeline_id, Timeline).show_steps(steps, calls, resumed)
        listing = self.query_one("#divergence-list", OptionList)
        if self.divergences:
            listing.focus()
            listing.highlighted = self.selected  # posts OptionHighlighted, which selects it
        else:
            self.query_one("#compare-original", Timeline).focus()
            self._go_to_step(self.source_steps[-1].step if self.source_steps else None)

    # -- selection -------------------------------------------------------------
    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        if event.option.id is None:
            return
        self.selected = int(event.option.id)
        self._show_divergence_text()
        d = self.divergences[self.selected]
        self._go_to_step(d.step if d.step is not None else (self.source_steps[-1].step if self.source_steps else None))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()  # Enter on a divergence: it is already shown

    def _show_divergence_text(self) -> None:
        panel = self.query_one("#divergence-text", TextPanel)
        if not self.divergences:
            summary = Text(f"The {self.result.kind} matches the recording: no divergence to show.", style="green")
            if self.result.error:
                summary = Text(f"The re-run failed: {self.result.error}", style="red")
            panel.show(summary)
            return
        d = self.divergences[self.selected]
        text = Text()
        for line in d.render().splitlines():
            style = "bold" if not text else "red" if line.startswith("  -") else "green" if line.startswith("  +") else ""
            text.append(line + "\n", style=style)
        text.rstrip()
        panel.show(text)

    def _go_to_step(self, step: int | None) -> None:
        """Move both timelines to the original's ``step`` (and the replay's matching one) and diff them there."""
        if step is None:
            return
        src = _index_of(self.source_steps, step)
        new = _index_of(self.new_steps, step + self.step_offset)
        if src is not None:
            self.query_one("#compare-original", Timeline).cursor = src
        if new is not None:
            self.query_one("#compare-new", Timeline).cursor = new
        self._load_pair(step if src is not None else None, step + self.step_offset if new is not None else None)

    def on_timeline_step_chosen(self, message: Timeline.StepChosen) -> None:
        message.stop()
        timeline = message.control
        if timeline is None:
            return
        if timeline.id == "compare-original":
            step = self.source_steps[message.index].step
        else:
            step = self.new_steps[message.index].step - self.step_offset
        self._go_to_step(step)

    def _load_pair(self, src_step: int | None, new_step: int | None) -> None:
        pair = (src_step, new_step)
        if pair == self.pair:
            return
        self.pair = pair
        self.load_pair(pair)

    @work(thread=True, exclusive=True, group="compare-diff")
    def load_pair(self, pair: tuple[int | None, int | None]) -> None:
        from graphtape.replay.normalize import Normalizer

        store, r = self.app.store, self.result
        src_step, new_step = pair
        try:
            old = store.state_at(r.source_run_id, src_step, r.ns) if src_step is not None else {}
            new = store.state_at(r.run_id, new_step, r.ns) if new_step is not None and r.run_id else {}
        except GraphtapeError as exc:
            self.post_message(self.PairLoaded(pair, f"Cannot read the states: {exc}", []))
            return
        left = f"recorded step {src_step}" if src_step is not None else "(no such step recorded)"
        right = f"{r.kind} step {new_step}" if new_step is not None else f"(the {r.kind} has no such step)"
        # Compared as the replay compares them: message ids and other volatile fields left out.
        same = Normalizer()
        self.post_message(self.PairLoaded(pair, f"{left} → {right} · message ids ignored", diff_states(same(old), same(new))))

    def on_compare_screen_pair_loaded(self, message: PairLoaded) -> None:
        if message.pair != self.pair:
            return  # the user moved on
        self.diff_title = message.title
        self.diff_entries = message.entries
        self.query_one("#compare-diff", DiffView).show(message.title, message.entries)

    # -- actions -----------------------------------------------------------------
    def action_divergence(self, delta: int) -> None:
        if not self.divergences:
            self.notify("No divergences: the replay matches the recording.")
            return
        listing = self.query_one("#divergence-list", OptionList)
        listing.highlighted = max(0, min(len(self.divergences) - 1, self.selected + delta))

    def action_open_new(self) -> None:
        if not self.result.run_id:
            self.notify("The re-run was not recorded.", severity="warning")
            return
        self.post_message(self.OpenRun(self.result.run_id, self.result.ns))

    def action_back(self) -> None:
        self.app.pop_screen()


def _index_of(steps: list[StepInfo], number: int) -> int | None:
    found = [i for i, s in enumerate(steps) if s.step == number]
    return found[-1] if found else None
