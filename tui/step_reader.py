"""Everything the run screen shows for one step, read from the store in one call.

The run screen calls this from a worker and hands the result to the UI thread
whole; the TUI benchmark calls the same code without Textual, so the store's
share of a step is measured on exactly what the screen reads.

States are read with deferred long lists (``recorder.deferred``): the reader
decodes the transcript's last messages and whatever the diff shows, and the UI
thread only reads items decoded here.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from graphtape.recorder.records import CallInfo, StepDetail, StepInfo
from graphtape.recorder.store import RunStore
from graphtape.tui.render import clean
from graphtape.tui.data import DiffEntry, changed_keys, diff_states, first_of, message_lists

START_CHANNEL = "__start__"  # where LangGraph holds the input until the first step reads it
TRANSCRIPT_TAIL = 200  # the transcript shows this many of the latest messages
STATES_KEPT = 6  # stepping back and forth reads a step and its neighbour: most are cached


@dataclass
class StepPayload:
    """One step's data, read in a worker, handed to the UI thread whole."""

    index: int
    step: StepInfo
    detail: StepDetail
    state: dict[str, Any]
    changed: set[str]
    calls: list[CallInfo]
    diff_title: str
    diff: list[DiffEntry]
    subgraphs: list[tuple[str, str]]
    transcript_key: str | None = None  # the state key holding the chat transcript, if any
    transcript: list[dict] = field(default_factory=list)  # its last TRANSCRIPT_TAIL messages, decoded
    transcript_total: int = 0
    graph_input: Any = None  # step -1 of a run: the input the graph was invoked with (its state is still empty)


class StepReader:
    """Reads steps of one namespace of one run, keeping the last few states (thread-safe)."""

    def __init__(self, store: RunStore, run_id: str, ns: str = "") -> None:
        self.store = store
        self.run_id = run_id
        self.ns = ns
        self._states: dict[int, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def state(self, step: int) -> dict[str, Any]:
        """The state after ``step``, long lists deferred (cached: neighbours are read twice)."""
        with self._lock:
            cached = self._states.get(step)
        if cached is None:
            cached = self.store.state_at(self.run_id, step, self.ns, deferred=True)
            with self._lock:
                self._states[step] = cached
                while len(self._states) > STATES_KEPT:
                    self._states.pop(next(iter(self._states)))
        return cached

    def read(self, steps: list[StepInfo], index: int) -> StepPayload:
        """Step ``steps[index]``: detail, state, calls, subgraphs, and its diff against the step before."""
        store = self.store
        step = steps[index]
        detail = store.step_detail(self.run_id, step.step, self.ns)
        state = self.state(step.step)
        prev_index = first_of(steps, index, -1, lambda s: not s.pending and s.step < step.step)
        if prev_index is not None:
            prev = steps[prev_index]
            old = self.state(prev.step)
            title = f"step {prev.step} → step {step.step}"
        else:
            old, title = {}, f"(empty) → step {step.step}"
        calls = store.calls(self.run_id, step=step.step, ns=self.ns, with_subgraphs=True) if step.step >= 0 else []
        subgraphs = []
        for t in detail.tasks:
            for ns in t.subgraph_ns:
                n = len(store.list_steps(self.run_id, ns))
                subgraphs.append((ns, f"{t.node} → subgraph {ns}  ({n} steps)"))
        # What shows as text is made printable here (the state shows through repr and JSON, which escape).
        payload = StepPayload(index, clean(step), clean(detail), state, changed_keys(detail), clean(calls), title, diff_states(old, state), clean(subgraphs))
        if step.step < 0 and not state:
            payload.graph_input = store.state_at(self.run_id, step.step, self.ns, internal=True).get(START_CHANNEL)
        lists = message_lists(state)
        key = next(iter(lists), None)
        if key is not None:
            payload.transcript_key = key
            payload.transcript = list(lists[key][-TRANSCRIPT_TAIL:])
            payload.transcript_total = len(lists[key])
        return payload

    def diff(self, a: StepInfo, b: StepInfo) -> list[DiffEntry]:
        """The state after step ``a`` against the state after step ``b``."""
        return diff_states(self.state(a.step), self.state(b.step))
