"""What a diff of two recorded runs reports: each difference with both sides, and the verdict.

A ``RunDifference`` is a ``Divergence`` (same kinds, same diff, same place in
the TUI's compare screen) that knows both runs' step numbers, since aligned
runs number their steps differently, and whether it only carries through a
difference the runs started with (other inputs) rather than a new one.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from graphtape.recorder.records import RunInfo
from graphtape.recorder.terminal_text import joined_lines, one_line

from graphtape.replay.result import Divergence, unified_diff

# Besides the replay's kinds: what the runs were given differs (their inputs, the models they asked).
SETUP_KINDS = ("input", "model")


@dataclass(frozen=True, slots=True)
class RunDifference(Divergence):
    """One place where run B did not do what run A did.

    ``recorded`` is A's side and ``actual`` B's (as in a replay, where A is the
    recording). ``step`` is A's step number and ``step_b`` B's; ``ns`` is the
    subgraph's path (task ids left out), ``ns_a`` / ``ns_b`` each run's own
    namespace, and ``root`` the root steps (A's, B's) the difference happened
    in. ``carried`` marks a difference that only carries the runs' different
    inputs through (the same text in a prompt, say): listed, but never the
    first point where the runs went different ways.
    """

    step_b: int | None = None
    ns_a: str = ""
    ns_b: str = ""
    root: tuple[int | None, int | None] = (None, None)
    carried: bool = False
    labels: tuple[str, str] = field(default=("A", "B"), compare=False)

    @property
    def diff(self) -> str:
        return unified_diff(self.recorded, self.actual, self.labels)

    def where(self) -> str:
        """``step 2``, ``step 3 ↔ 7`` (A's, B's), ``step 4 of B only``, or ``setup``/``end of run``."""
        a, b = self.step, self.step_b
        if a is None and b is None:
            out = "end of run" if self.kind not in SETUP_KINDS else "setup"
        elif a is None:
            out = f"step {b} of {self.labels[1]} only"
        elif b is None:
            out = f"step {a} of {self.labels[0]} only"
        else:
            out = f"step {a}" if a == b else f"step {a} ↔ {b}"
        if self.ns:
            out += f" in {self.ns}"
        return out

    def headline(self) -> str:
        node = f" node {self.node!r}" if self.node else ""
        carried = " (carries the different inputs)" if self.carried and self.kind not in SETUP_KINDS else ""
        return f"{self.where()}{node}: {self.kind}: {self.what}{carried}"

    def render(self) -> str:
        width = max(len(self.labels[0]), len(self.labels[1])) + 1
        lines = [("FIRST " if self.first else "") + self.headline()]
        lines.append(f"  {(self.labels[0] + ':').ljust(width)} {short(self.recorded)}")
        lines.append(f"  {(self.labels[1] + ':').ljust(width)} {short(self.actual)}")
        # Steps or calls one run has and the other lacks: both sides say it all.
        diff = self.diff if self.recorded is not None and self.actual is not None else ""
        if diff:
            lines.extend("  " + line for line in diff.splitlines())
        return joined_lines(lines)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for key in ("order", "labels", "candidates"):
            out.pop(key, None)
        out["a"], out["b"] = out.pop("recorded"), out.pop("actual")
        out["step_a"] = out.pop("step")
        out["root"] = list(self.root)
        out["diff"] = self.diff
        return out


@dataclass(frozen=True)
class RunDiff:
    """Two recorded runs compared: A (the one that worked, say) against B.

    ``differences`` are in run order with the first point where the runs went
    different ways flagged (``first``); ``graph_changes`` says how their graph
    structures differ (code versions); ``aligned`` pairs the compared
    namespace's steps (A's step number, B's), None where one run has no such step.
    """

    a: RunInfo
    b: RunInfo
    labels: tuple[str, str]
    differences: list[RunDifference]
    graph_changes: list[str] = field(default_factory=list)
    aligned: list[tuple[int | None, int | None]] = field(default_factory=list)
    ns: str = ""  # the subgraph path compared alone (--ns), "" for the whole run
    ignore: tuple[str, ...] = ()

    kind = "diff"  # what the compare screen shows it as

    @property
    def same(self) -> bool:
        """Whether the runs behaved the same (a graph change alone does not count)."""
        return not self.differences

    @property
    def first_difference(self) -> RunDifference | None:
        """The first point where the runs went different ways (not a difference in what they were given)."""
        return next((d for d in self.differences if d.first), None)

    def verdict(self) -> str:
        """One line: the runs, and whether they behaved the same."""
        head = f"{_named(self.labels[0], self.a)} vs {_named(self.labels[1], self.b)}"
        if self.ns:
            head += f", subgraph {self.ns}"
        if self.same:
            return head + ": behaved the same" + (" (their graphs differ)" if self.graph_changes else "")
        n = len(self.differences)
        return head + f": {n} difference{'s' if n != 1 else ''}"

    def summary(self) -> str:
        """The one line a postmortem starts from: the first difference, or why there is none."""
        first = self.first_difference
        if first is not None:
            return "first difference: " + first.headline()
        if self.differences:
            given = sorted({d.kind for d in self.differences if d.kind in SETUP_KINDS}) or ["inputs"]
            return f"no difference of their own: the runs differ only in what they were given ({', '.join(given)}) and what carries it through"
        return "no difference: same routes, calls, results and state"

    def report(self) -> str:
        """The verdict, the first difference, the graph changes, then every difference with both sides and a diff."""
        out = [one_line(self.verdict()), one_line(self.summary())]
        out.extend(one_line(f"graph: {line}") for line in self.graph_changes)
        if self.ignore:
            out.append(f"ignored paths: {', '.join(self.ignore)}")
        out.extend(d.render() for d in self.differences)  # each kept to its lines by render()
        return "\n".join(out)

    def to_dict(self) -> dict[str, Any]:
        first = self.first_difference
        return {
            "a": {"run_id": self.a.id, "name": self.a.name, "graph": self.a.graph_name, "status": self.a.status},
            "b": {"run_id": self.b.id, "name": self.b.name, "graph": self.b.graph_name, "status": self.b.status},
            "ns": self.ns,
            "same": self.same,
            "summary": self.summary(),
            "first_difference": first.to_dict() if first is not None else None,
            "graph_changes": self.graph_changes,
            "ignore": list(self.ignore),
            "differences": [d.to_dict() for d in self.differences],
            "aligned": [list(p) for p in self.aligned],
        }


def _named(label: str, run: RunInfo) -> str:
    return f"run {run.id}" if label.startswith("run ") else f"{label} (run {run.id})"


def short(value: Any, limit: int = 160) -> str:
    """A value as one line of JSON, cut at ``limit`` characters."""
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"
