"""What the compare screen shows: a replay (or fork) beside its original, or two recorded runs diffed.

The screen is one; what differs is where each side's steps are and how a
step on one side finds its partner on the other. A replay keeps the
original's step numbers (a fork shifts them by its edit); two diffed runs
are shown row by row as the diff aligned them, a gap row where one run has
no step, and a step only one run has is diffed against the last step the
runs shared. Each comparison says which run and namespace each side is,
where a difference is on both sides, and which states to diff there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.text import Text

from graphtape.recorder.records import StepInfo
from graphtape.replay.normalize import Normalizer, ns_path
from graphtape.tui.render import printable

MARK_ONLY = "+"  # a step only this side's run has
MARK_DIFFERS = "≠"  # a step where the runs went different ways


@dataclass(frozen=True)
class Side:
    """One timeline of the compare screen: the run, its namespace, and what it is called."""

    run_id: str | None
    ns: str
    title: str


@dataclass(frozen=True)
class StatePair:
    """The two states to diff for a selection: each side's step (None: the side has no such step) and namespace."""

    steps: tuple[int | None, int | None]
    ns: tuple[str, str]


class ReplayComparison:
    """A replay or fork beside the run it came from: one namespace, the original's step numbers."""

    def __init__(self, result: Any) -> None:
        self.result = result
        self.left = Side(result.source_run_id, result.ns, "recorded")
        self.right = Side(result.run_id, result.ns, result.kind)
        self.divergences = list(result.divergences)
        self.first = 0 if self.divergences else -1
        self.normalize = Normalizer()
        self.offset = 0  # the new run's step number = the original's + offset (a fork adds its edit step)
        self.left_steps: list[StepInfo] = []

    @property
    def none_text(self) -> str:
        return f"no divergences: the {self.result.kind} did what the recording did"

    aligned_rows = False  # each timeline shows its own steps; the cursors meet by step number

    def loaded(self, left: list[StepInfo], right: list[StepInfo]) -> tuple[list[StepInfo | None], list[StepInfo | None]]:
        """The timelines' rows: each run's steps as they are."""
        self.left_steps = left
        if right and self.result.kind == "fork":
            self.offset = right[0].step - self.result.from_step
        return list(left), list(right)

    def at_row(self, side: int, rows: tuple[list, list], index: int) -> StatePair:
        step = rows[side][index]
        return self.at_step(side, step.step) if step is not None else StatePair((None, None), (self.left.ns, self.right.ns))

    def marks(self) -> tuple[dict[int, Text], dict[int, Text]]:
        return {}, {}

    def at(self, d: Any) -> StatePair:
        """Where a divergence is: on the timelines and for the states (the recording's last step if at the end)."""
        step = d.step if d.step is not None else (self.left_steps[-1].step if self.left_steps else None)
        return self.at_step(0, step) if step is not None else StatePair((None, None), (self.left.ns, self.right.ns))

    def at_step(self, side: int, step: int) -> StatePair:
        """The pair for a step chosen on one timeline (0: left, 1: right)."""
        original = step if side == 0 else step - self.offset
        return StatePair((original, original + self.offset), (self.left.ns, self.right.ns))

    def timeline_steps(self, d: Any) -> tuple[int | None, int | None]:
        return self.at(d).steps

    def title(self, pair: StatePair) -> str:
        a, b = pair.steps
        left = f"recorded step {a}" if a is not None else "(no such step recorded)"
        right = f"{self.result.kind} step {b}" if b is not None else f"(the {self.result.kind} has no such step)"
        return f"{left} → {right} · message ids ignored"

    def open_target(self) -> tuple[str | None, str]:
        return self.result.run_id, self.result.ns


class RunDiffComparison:
    """Two recorded runs diffed: A on the left, B on the right, their root steps paired as aligned."""

    def __init__(self, diff: Any) -> None:
        self.result = diff
        la, lb = (printable(x) for x in diff.labels)
        self.labels = (la, lb)
        self.left = Side(diff.a.id, "", f"A {la}")
        self.right = Side(diff.b.id, "", f"B {lb}")
        self.divergences = list(diff.differences)
        self.first = next((i for i, d in enumerate(self.divergences) if d.first), 0 if self.divergences else -1)
        self.normalize = Normalizer(diff.ignore)
        self.none_text = "no differences: the runs behaved the same"
        # Where each side's steps meet the other's; a step only one run has meets the last step they shared.
        self.partner: tuple[dict[int, int | None], dict[int, int | None]] = ({}, {})
        last: list[int | None] = [None, None]
        for a, b in diff.aligned if not diff.ns else ():
            if a is not None and b is not None:
                last = [a, b]
            if a is not None:
                self.partner[0][a] = b if b is not None else last[1]
            if b is not None:
                self.partner[1][b] = a if a is not None else last[0]

    aligned_rows = True  # row k of one timeline is aligned with row k of the other

    def loaded(self, left: list[StepInfo], right: list[StepInfo]) -> tuple[list[StepInfo | None], list[StepInfo | None]]:
        """Both timelines row by row as aligned, None (a gap row) where one run has no such step."""
        by_a, by_b = {s.step: s for s in left}, {s.step: s for s in right}
        pairs = self.result.aligned if not self.result.ns else []
        if not pairs:  # a diff of one subgraph: its steps are not the root timelines'
            return list(left), list(right)
        return [by_a.get(a) if a is not None else None for a, _ in pairs], [by_b.get(b) if b is not None else None for _, b in pairs]

    def at_row(self, side: int, rows: tuple[list, list], index: int) -> StatePair:
        """Row ``index`` of both timelines: the two steps there, a gap meeting the last step the runs shared."""
        a, b = (rows[0][index] if index < len(rows[0]) else None), (rows[1][index] if index < len(rows[1]) else None)
        if a is None and b is not None:
            return StatePair((self.partner[1].get(b.step), b.step), ("", ""))
        if b is None and a is not None:
            return StatePair((a.step, self.partner[0].get(a.step)), ("", ""))
        return StatePair((a.step if a else None, b.step if b else None), ("", ""))

    def marks(self) -> tuple[dict[int, Text], dict[int, Text]]:
        """Timeline marks: ``+`` on steps only that run has, ``≠`` where the runs went different ways."""
        left: dict[int, Text] = {}
        right: dict[int, Text] = {}
        for a, b in self.result.aligned if not self.result.ns else ():
            if b is None and a is not None:
                left[a] = Text(MARK_ONLY, style="bold yellow")
            if a is None and b is not None:
                right[b] = Text(MARK_ONLY, style="bold yellow")
        for d in self.divergences:
            if d.carried or d.kind in ("missing", "extra"):
                continue
            a, b = d.root
            for marks, step in ((left, a), (right, b)):
                if step is not None and step not in marks:
                    marks[step] = Text(MARK_DIFFERS, style="bold red")
        return left, right

    def at(self, d: Any) -> StatePair:
        """The states of a difference: its own steps and namespaces (a step only one run has: against the last one they shared)."""
        a, b = d.step, d.step_b
        if not d.ns_a and not d.ns_b:
            if a is None and b is not None:
                a = self.partner[1].get(b)
            elif b is None and a is not None:
                b = self.partner[0].get(a)
        return StatePair((a, b), (d.ns_a, d.ns_b))

    def timeline_steps(self, d: Any) -> tuple[int | None, int | None]:
        """Where the root timelines go for a difference: the root steps it happened in (None: the gap row beside the other)."""
        return d.root

    def at_step(self, side: int, step: int) -> StatePair:
        if side == 0:
            return StatePair((step, self.partner[0].get(step)), ("", ""))
        return StatePair((self.partner[1].get(step), step), ("", ""))

    def title(self, pair: StatePair) -> str:
        (a, b), (na, nb) = pair.steps, pair.ns
        where = f" in {printable(ns_path(na or nb))}" if na or nb else ""
        left = f"A step {a}" if a is not None else "(A has no such step)"
        right = f"B step {b}" if b is not None else "(B has no such step)"
        ignored = f" · ignoring {', '.join(self.result.ignore)}" if self.result.ignore else ""
        return f"{left} → {right}{where} · ids ignored{ignored}"

    def open_target(self) -> tuple[str | None, str]:
        return self.result.b.id, ""


def comparison_for(result: Any) -> ReplayComparison | RunDiffComparison:
    """The comparison the screen shows for a ``ReplayResult`` or a ``RunDiff``."""
    return RunDiffComparison(result) if getattr(result, "kind", None) == "diff" else ReplayComparison(result)


def diff_verdict(diff: Any) -> Text:
    """The header for two diffed runs: which they are, the first difference, how their graphs differ."""
    text = Text(printable(diff.verdict()), style="bold")
    first = diff.first_difference
    summary = printable(diff.summary())
    text.append("\n" + summary, style="bold red" if first is not None else ("yellow" if diff.differences else "bold green"))
    for line in diff.graph_changes[:3]:
        text.append(f"\ngraph: {printable(line)}", style="yellow")
    if len(diff.graph_changes) > 3:
        text.append(f"\ngraph: {len(diff.graph_changes) - 3} more changes (graphtape diff shows them all)", style="yellow")
    return text
