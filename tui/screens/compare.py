"""The compare screen: a replay (or fork) beside the run it came from, or two recorded runs diffed, difference by difference."""

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
from graphtape.tui.comparison import StatePair, comparison_for, diff_verdict
from graphtape.tui.data import DiffEntry, diff_states, diff_text
from graphtape.tui.render import clean, printable
from graphtape.tui.screens.prompts import ValueScreen
from graphtape.tui.screens.runs import status_text
from graphtape.tui.widgets.diff_view import DiffView
from graphtape.tui.widgets.panels import TextPanel
from graphtape.tui.widgets.timeline import Timeline

NARROW = 110
_KIND_STYLE = {"route": "magenta", "call": "cyan", "arguments": "cyan", "state": "yellow", "error": "red", "missing": "red", "extra": "red", "fork": "green", "input": "blue", "model": "blue"}


def divergence_label(d: Any) -> Text:
    """One row of the divergence list: FIRST, where, kind, what (dim: it only carries the runs' other inputs)."""
    carried = getattr(d, "carried", False)
    text = Text(style="dim" if carried else "")
    if d.first:
        text.append("FIRST ", style="bold red")
    where = d.where() if hasattr(d, "where") else ("end" if d.step is None else f"step {d.step}")
    text.append(printable(where), style="bold")
    if d.node:
        text.append(f" {printable(d.node)}")
    text.append(f"  {d.kind}", style=_KIND_STYLE.get(d.kind, ""))
    text.append(f": {printable(d.what)}")
    if carried and d.kind not in ("input", "model"):
        text.append("  (carries the inputs)", style="italic")
    return text


def verdict(result: Any) -> Text:
    """The header: what was re-run, from where, into which run, and how it went (an error first)."""
    verb = "fork" if result.kind == "fork" else "replay"
    where = f"step {result.from_step}" + (f" of {printable(result.ns)}" if result.ns else "")
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
        text.append(printable(f"\nnote: {note}"), style="yellow")
    return text


def raised(result: Any) -> str | None:
    """What the re-run's graph raised, if it did (a strict miss is a divergence, not this), printable:
    an error the recording answered a call with is recorded text."""
    error = getattr(result, "error", None)
    return printable(error) if error and not error.startswith("ReplayMiss") else None


class CompareScreen(Screen):
    """Two runs' timelines side by side, their differences, and a diff of both states.

    Built from a ``ReplayResult`` (a replay or fork beside its original) or a
    ``RunDiff`` (two recorded runs, aligned): the differences come with it,
    and ``tui.comparison`` says where each is on both sides. The timelines and
    the states are read from the store in workers. Selecting a difference
    (the first one is selected) moves both timelines to its steps and diffs
    the two states there; moving either timeline moves the other to its
    partner step and diffs those.
    """

    BINDINGS = [
        Binding("n,right_square_bracket", "divergence(1)", "Next difference"),
        Binding("p,left_square_bracket", "divergence(-1)", "Prev difference"),
        Binding("o", "open_new", "Open run", tooltip="the replay's own run (for two runs: run B)"),
        Binding("v", "view_difference", "View", tooltip="the selected difference and the two states' diff in full"),
        Binding("escape", "back", "Back"),
        Binding("question_mark", "app.help", "Keys"),
        Binding("q", "app.quit", "Quit", show=False, tooltip="quit graphtape"),
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

        def __init__(self, run_id: str, ns: str, step: int | None = None) -> None:
            super().__init__()
            self.run_id = run_id
            self.ns = ns
            self.step = step  # opens there (the step selected on that side), else where the run opens

    def __init__(self, result: Any) -> None:
        super().__init__()
        self.result = result
        self.view = comparison_for(result)
        self.divergences = self.view.divergences
        self.selected = self.view.first
        self.source_steps: list[StepInfo] = []
        self.new_steps: list[StepInfo] = []
        self.pair: tuple[int | None, int | None] | None = None
        self.pair_ns: tuple[str, str] = ("", "")
        self._placed: dict[str, int] = {}  # timeline id -> the row the screen just moved it to
        self.diff_title = ""
        self.diff_entries: list[DiffEntry] = []

    def compose(self) -> ComposeResult:
        header = diff_verdict(self.result) if self.result.kind == "diff" else verdict(self.result)
        yield Static(header, id="compare-header")
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
            listing.add_option(Option(Text(self.view.none_text, style="green"), disabled=True))
        self._show_divergence_text()
        self.load_runs()

    def on_resize(self, event: events.Resize) -> None:
        self.set_class(event.size.width < NARROW, "narrow")

    # -- loading ---------------------------------------------------------------
    @work(thread=True, exclusive=True, group="compare-runs")
    def load_runs(self) -> None:
        store = self.app.store
        sides = []
        try:
            for side in (self.view.left, self.view.right):
                if side.run_id is None:
                    sides.append((None, [], {}))
                    continue
                sides.append((clean(store.get_run(side.run_id)), clean(store.list_steps(side.run_id, side.ns)), store.call_counts(side.run_id, side.ns, with_subgraphs=True)))
        except GraphtapeError as exc:
            self.post_message(self.RunsLoaded(None, str(exc)))
            return
        self.post_message(self.RunsLoaded(sides))

    def on_compare_screen_runs_loaded(self, message: RunsLoaded) -> None:
        if message.sides is None:
            self.query_one("#compare-header", Static).update(Text(printable(f"Cannot read the runs: {message.error}"), style="bold red"))
            return
        (src_run, src_steps, src_calls), (new_run, new_steps, new_calls) = message.sides
        self.source_steps, self.new_steps = self.view.loaded(src_steps, new_steps)
        marks = self.view.marks()
        for label_id, timeline_id, title, run, steps, calls, marked in (
            ("#compare-original-label", "#compare-original", self.view.left.title, src_run, src_steps, src_calls, marks[0]),
            ("#compare-new-label", "#compare-new", self.view.right.title, new_run, new_steps, new_calls, marks[1]),
        ):
            side = self.view.left if timeline_id == "#compare-original" else self.view.right
            label = Text(title, style="bold")
            if run is not None:
                label.append(f"  {run.id}  ", style="dim")
                label.append_text(status_text(run, with_lineage=False))  # the header says where it comes from
                if steps:
                    count = run.step_count if not side.ns else len(steps)  # the root's: the count every screen shows
                    label.append(f"  {count} step{'s' if count != 1 else ''} ({steps[0].step}..{steps[-1].step})", style="dim")
            else:
                label.append("  (not recorded)", style="dim")
            self.query_one(label_id, Static).update(label)
            timeline = self.query_one(timeline_id, Timeline)
            resumed = run.fork_step if run is not None and run.parent_run_id and not side.ns else None
            timeline.show_steps(self.source_steps if side is self.view.left else self.new_steps, calls, resumed)
            timeline.marks = marked
        listing = self.query_one("#divergence-list", OptionList)
        if self.divergences:
            listing.focus()
            listing.highlighted = self.selected  # posts OptionHighlighted, which selects it
        else:
            self.query_one("#compare-original", Timeline).focus()
            if self.source_steps:
                self._go_to(self.view.at_row(0, (self.source_steps, self.new_steps), len(self.source_steps) - 1))

    # -- selection -------------------------------------------------------------
    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        if event.option.id is None:
            return
        self.selected = int(event.option.id)
        self._show_divergence_text()
        d = self.divergences[self.selected]
        self._go_to(self.view.at(d), self.view.timeline_steps(d))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()  # Enter on a divergence: it is already shown

    def _show_divergence_text(self) -> None:
        panel = self.query_one("#divergence-text", TextPanel)
        if not self.divergences:
            summary = Text(self.view.none_text[:1].upper() + self.view.none_text[1:] + ".", style="green")
            if getattr(self.result, "error", None):
                summary = Text(printable(f"The re-run failed: {self.result.error}"), style="red")  # it may quote a recorded error
            panel.show(summary)
            return
        d = self.divergences[self.selected]
        text = Text()
        for line in printable(d.render()).splitlines():
            style = "bold" if not text else "red" if line.startswith("  -") else "green" if line.startswith("  +") else ""
            text.append(line + "\n", style=style)
        text.rstrip()
        panel.show(text)

    def _go_to(self, pair: StatePair, timelines: tuple[int | None, int | None] | None = None, row: int | None = None) -> None:
        """Move both timelines (to ``row``, or to ``timelines``' steps, else the pair's own) and diff the pair's states."""
        if row is not None:
            src = new = row
        else:
            a, b = timelines if timelines is not None else pair.steps
            src = _index_of(self.source_steps, a) if a is not None else None
            new = _index_of(self.new_steps, b) if b is not None else None
            if self.view.aligned_rows:  # one row on both: a side without the step shows its gap row
                src = new = src if src is not None else new
        for timeline_id, index in (("compare-original", src), ("compare-new", new)):
            timeline = self.query_one(f"#{timeline_id}", Timeline)
            if index is not None and timeline.cursor != index:
                self._placed[timeline_id] = index  # its StepChosen is this move's echo, not the user's
                timeline.cursor = index
        # A step the timeline of its namespace does not have (a replay that stopped early) is none.
        steps = list(pair.steps)
        for k, (have, side) in enumerate(((self.source_steps, self.view.left), (self.new_steps, self.view.right))):
            if steps[k] is not None and pair.ns[k] == side.ns and _index_of(have, steps[k]) is None:
                steps[k] = None
        self._load_pair(StatePair((steps[0], steps[1]), pair.ns))

    def on_timeline_step_chosen(self, message: Timeline.StepChosen) -> None:
        message.stop()
        timeline = message.control
        if timeline is None:
            return
        if self._placed.pop(timeline.id or "", None) == message.index:
            return
        side = 0 if timeline.id == "compare-original" else 1
        pair = self.view.at_row(side, (self.source_steps, self.new_steps), message.index)
        self._go_to(pair, row=message.index if self.view.aligned_rows else None)

    def _load_pair(self, pair: StatePair) -> None:
        if (pair.steps, pair.ns) == (self.pair, self.pair_ns):
            return
        self.pair, self.pair_ns = pair.steps, pair.ns
        self.load_pair(pair)

    @work(thread=True, exclusive=True, group="compare-diff")
    def load_pair(self, pair: StatePair) -> None:
        store, view = self.app.store, self.view
        (a, b), (ns_a, ns_b) = pair.steps, pair.ns
        try:
            old = store.state_at(view.left.run_id, a, ns_a) if a is not None and view.left.run_id else {}
            new = store.state_at(view.right.run_id, b, ns_b) if b is not None and view.right.run_id else {}
        except GraphtapeError as exc:
            self.post_message(self.PairLoaded(pair.steps, f"Cannot read the states: {exc}", []))
            return
        # Compared as the comparison compares them: ids and other volatile fields (and ignored paths) left out.
        same = view.normalize
        self.post_message(self.PairLoaded(pair.steps, view.title(pair), diff_states(same(old), same(new))))

    def on_compare_screen_pair_loaded(self, message: PairLoaded) -> None:
        if message.pair != self.pair:
            return  # the user moved on
        self.diff_title = message.title
        self.diff_entries = message.entries
        self.query_one("#compare-diff", DiffView).show(message.title, message.entries)

    # -- actions -----------------------------------------------------------------
    def action_divergence(self, delta: int) -> None:
        if not self.divergences:
            self.notify(self.view.none_text[:1].upper() + self.view.none_text[1:] + ".")
            return
        listing = self.query_one("#divergence-list", OptionList)
        listing.highlighted = max(0, min(len(self.divergences) - 1, self.selected + delta))

    def action_view_difference(self) -> None:
        """The selected difference's explanation and the state diff beside it, in full, in the value viewer."""
        parts = []
        if self.divergences:
            d = self.divergences[self.selected]
            parts.append(printable(d.render()))
            title = f"difference {self.selected + 1} of {len(self.divergences)}: {divergence_label(d).plain}"
        else:
            title = self.view.none_text
        if self.diff_title:
            parts.append(f"{self.diff_title}\n{diff_text(self.diff_entries)}")
        self.app.push_screen(ValueScreen(title, "\n\n".join(parts) or "nothing loaded yet"))

    def action_open_new(self) -> None:
        run_id, ns = self.view.open_target()
        if not run_id:
            self.notify("The re-run was not recorded.", severity="warning")
            return
        self.post_message(self.OpenRun(run_id, ns, self.pair[1] if self.pair is not None and self.pair_ns[1] == ns else None))

    def action_back(self) -> None:
        self.app.pop_screen()


def _index_of(steps: list[StepInfo | None], number: int) -> int | None:
    found = [i for i, s in enumerate(steps) if s is not None and s.step == number]
    return found[-1] if found else None
