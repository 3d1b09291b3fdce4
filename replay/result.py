"""What a replay reports: divergences, each naming where and what, and the new run."""

from __future__ import annotations

import difflib
import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from graphtape.recorder.terminal_text import joined_lines

KINDS = ("route", "call", "arguments", "state", "error", "missing", "extra")
# Within one step, causes before effects: what a call was asked and answered, then errors, state, routes.
_CAUSE_RANK = {"arguments": 0, "extra": 1, "call": 2, "missing": 3, "error": 4, "state": 5, "route": 6}
MAX_DIFF_LINES = 40


@dataclass(frozen=True, slots=True)
class Divergence:
    """One place where the replay did not do what the recording did.

    ``kind`` is one of ``route`` (other nodes ran or a router chose
    differently), ``call`` (a call returned something else), ``arguments``
    (a call was made with other arguments), ``state`` (a state key holds
    another value), ``error`` (a node or the run failed differently),
    ``missing`` (recorded but not done) and ``extra`` (done but not recorded).
    """

    kind: str
    step: int | None
    node: str | None
    what: str  # a state key, a call name, a router
    recorded: Any
    actual: Any
    ns: str = ""
    candidates: list[dict[str, Any]] = field(default_factory=list)
    first: bool = False
    order: tuple[int, ...] = field(default=(), repr=False, compare=False)  # where it happened in the run, for sorting

    @property
    def diff(self) -> str:
        """A unified diff of the recorded and actual values, as JSON."""
        return unified_diff(self.recorded, self.actual)

    def headline(self) -> str:
        """One line: where, what kind, what."""
        where = f"step {self.step}" if self.step is not None else "end of run"
        if self.ns:
            where += f" in {self.ns}"
        node = f" node {self.node!r}" if self.node else ""
        return f"{where}{node}: {self.kind} divergence: {self.what}"

    def render(self) -> str:
        """The headline, the recorded and actual values, the diff and any candidates."""
        lines = [("FIRST " if self.first else "") + self.headline()]
        lines.append(f"  recorded: {_short(self.recorded)}")
        lines.append(f"  actual:   {_short(self.actual)}")
        diff = self.diff
        if diff:
            lines.extend("  " + line for line in diff.splitlines())
        for c in self.candidates:
            lines.append(
                f"  closest recorded call: {_quoted_if_unprintable(c.get('name'))} at step {c.get('step')} in node {c.get('node')!r} "
                f"(differs in {', '.join(c.get('differs') or []) or 'nothing'}): arguments {_short(c.get('arguments'))}"
            )
        return joined_lines(lines)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("order", None)
        out["diff"] = self.diff
        return out


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """The outcome of a replay or fork; the new run is in the store under ``run_id``."""

    run_id: str | None
    source_run_id: str
    from_step: int
    ns: str
    mode: str
    divergences: list[Divergence]
    status: str
    error: str | None = None
    final_state: Any = None
    served: dict[str, int] = field(default_factory=dict)
    unused_calls: list[dict[str, Any]] = field(default_factory=list)
    kind: str = "replay"  # or "fork": then divergences are what the edit changed
    notes: list[str] = field(default_factory=list)  # how a fork's edit went in, where it needs saying

    @property
    def diverged(self) -> bool:
        return bool(self.divergences)

    @property
    def first_divergence(self) -> Divergence | None:
        return self.divergences[0] if self.divergences else None

    def report(self) -> str:
        """A readable report: the verdict, then every divergence."""
        where = f"step {self.from_step}" + (f" of {self.ns}" if self.ns else "")
        verb = "fork of" if self.kind == "fork" else "replay of"
        head = f"{verb} run {self.source_run_id} from {where} ({self.mode}) -> run {self.run_id or '(not recorded)'}: "
        served = ", ".join(f"{n} {k} call{'s' if n != 1 else ''}" for k, n in self.served.items() if n)
        # A miss stops a replay by raising ReplayMiss: the divergences below say what it was.
        raised = f"\nthe {'fork' if self.kind == 'fork' else 'replay'} raised {self.error}" if self.error and not self.error.startswith("ReplayMiss") else ""
        raised += "".join(f"\nnote: {note}" for note in self.notes)
        if not self.divergences:
            return head + "matches the recording" + (f" ({served} answered from the recording)" if served else "") + raised
        out = [head + f"{len(self.divergences)} divergence{'s' if len(self.divergences) != 1 else ''}" + raised]
        out.extend(d.render() for d in self.divergences)  # each kept to its lines by render()
        return "\n".join(out)

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "source_run_id": self.source_run_id,
            "from_step": self.from_step,
            "ns": self.ns,
            "mode": self.mode,
            "kind": self.kind,
            "status": self.status,
            "error": self.error,
            "diverged": self.diverged,
            "divergences": [d.to_dict() for d in self.divergences],
            "served": self.served,
            "unused_calls": self.unused_calls,
            "notes": self.notes,
        }


def ordered(divergences: list[Divergence]) -> list[Divergence]:
    """Divergences in run order (a subgraph's before its parent step's; end-of-run ones last), the first flagged."""
    big = 1 << 30

    def key(d: Divergence) -> tuple[int, ...]:
        where = d.order or (d.step if d.step is not None else big, 1, d.step if d.step is not None else big)
        return (*where, _CAUSE_RANK.get(d.kind, len(_CAUSE_RANK)))

    out = sorted(divergences, key=key)
    return [replace(d, first=(i == 0)) for i, d in enumerate(out)]


def _dump(value: Any) -> str:
    return json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False, default=str)


def unified_diff(recorded: Any, actual: Any, labels: tuple[str, str] = ("recorded", "actual")) -> str:
    """Unified diff of two values dumped as sorted JSON (at most ``MAX_DIFF_LINES`` lines)."""
    a, b = _dump(recorded).splitlines(), _dump(actual).splitlines()
    if a == b:
        return ""
    lines = list(difflib.unified_diff(a, b, labels[0], labels[1], lineterm="", n=2))
    if len(lines) > MAX_DIFF_LINES:
        lines = lines[:MAX_DIFF_LINES] + [f"... {len(lines) - MAX_DIFF_LINES} more diff lines"]
    return "\n".join(_cut_long_lines(lines))


def _cut_long_lines(lines: list[str]) -> list[str]:
    """``lines`` of a unified diff with each line longer than ``MAX_LINE`` cut to where it differs.

    A state holding a 3 MB text printed it whole, twice, for a difference in its first
    characters. A removed line and the added line in its place are cut around the first
    character where they differ; a context line keeps its start.
    """
    out = list(lines)
    removed: list[int] = []
    added: list[int] = []

    def pair_up() -> None:
        for i, j in zip(removed, added):
            at = _first_difference(out[i][1:], out[j][1:])
            out[i], out[j] = _window(out[i], at), _window(out[j], at)
        for k in removed[len(added) :] + added[len(removed) :]:
            out[k] = _window(out[k], 0)
        removed.clear()
        added.clear()

    for k, line in enumerate(lines):
        if line.startswith("-") and not line.startswith("---"):
            if added:
                pair_up()
            removed.append(k)
        elif line.startswith("+") and not line.startswith("+++"):
            added.append(k)
        else:
            pair_up()
            out[k] = _window(line, 0)
    pair_up()
    return out


MAX_LINE = 400  # characters of a diff line shown around where it differs


def _first_difference(x: str, y: str) -> int:
    """Where ``x`` and ``y`` first differ (their shared prefix's length), in O(log n) slice compares."""
    lo, hi = 0, min(len(x), len(y))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if x[:mid] == y[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _window(line: str, at: int) -> str:
    """``line`` (its mark, then text) cut to ``MAX_LINE`` characters of text from a little before ``at``."""
    text = line[1:]
    if len(text) <= MAX_LINE:
        return line
    start = max(0, min(at - MAX_LINE // 4, len(text) - MAX_LINE))
    end = start + MAX_LINE
    head = f"[{start:,} chars]…" if start else ""
    tail = f"…[{len(text) - end:,} more chars]" if end < len(text) else ""
    return f"{line[:1]}{head}{text[start:end]}{tail}"


def _short(value: Any, limit: int = 160) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _quoted_if_unprintable(name: Any) -> str:
    """A recorded call's name as it reads (``POST https://...``), or its ``repr`` when it holds
    a line break or a control character: a recorded name cannot forge a line of the report."""
    return name if isinstance(name, str) and name.isprintable() else repr(name)
