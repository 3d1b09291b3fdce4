"""Which names a replay's ``overrides`` may use: those the recorded calls answer to.

An override is looked up by the name of the call it answers (a tool's name; a
model's label ``Class:model``, its class, its model's own name, or ``"model"`` for every model: see
``RecordingAnswerer``). A key no recorded call answers to replaces nothing,
and a replay that accepted it would pass without the function ever running:
a misspelt tool name is refused instead, naming the ones the run recorded.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from graphtape.recorder.records import CallInfo

__all__ = ["overridden", "unknown_overrides", "unreached_overrides"]

_SHOWN = 12


def unknown_overrides(names: Iterable[str], calls: Iterable[CallInfo]) -> str | None:
    """Why some of ``names`` override no recorded tool or model call (one line), or None if all do."""
    tools: set[str] = set()
    models: set[str] = set()
    for call in calls:
        if call.kind == "tool":
            tools.add(call.name)
        elif call.kind == "model":
            models.add(call.name)
    known = tools | models | {part for m in models for part in m.split(":", 1)} | ({"model"} if models else set())
    unknown = sorted(n for n in dict.fromkeys(names) if n not in known)
    if not unknown:
        return None
    recorded = f"the run's tools: {_listed(tools)}" if tools else "the run recorded no tool calls"
    if models:
        recorded += f"; its models: {_listed(models)} (or 'model' for all)"
    return f"cannot override {', '.join(map(repr, unknown))}: no recorded tool or model call has that name; {recorded}"


def overridden(names: Iterable[str], kind: str, name: str) -> bool:
    """Whether a recorded ``kind`` call named ``name`` is answered by one of the override ``names``."""
    names = set(names)
    if kind != "model":
        return name in names
    return bool(names & {name, "model", *name.split(":", 1)})


def _listed(names: set[str]) -> str:
    shown = sorted(names)
    return ", ".join(shown[:_SHOWN]) + (f", ... ({len(shown)} in all)" if len(shown) > _SHOWN else "")


def unreached_overrides(names: Iterable[str], book: Any) -> list[str]:
    """Notes for the overrides that never ran because every recorded call they answer was made
    inside a call that did not run live (answered from the recording or by another override, or
    never made): a replay that says it matches would otherwise hide that they were not used."""
    notes = []
    for name in dict.fromkeys(names):
        mine = [r for r in book.recorded if overridden((name,), r.call.kind, r.call.name)]
        outers = [next((o for o in book.outer(r) if not o.live), None) for r in mine]
        if not mine or any(o is None for o in outers):
            continue
        o = outers[0]
        how = "answered from the recording" if o.used else "answered by its override" if overridden(names, o.call.kind, o.call.name) else "never made"
        notes.append(f"override {name!r} was never used: its calls were made inside {o.call.kind} call {o.call.name!r} (step {o.call.step}), {how}")
    return notes
