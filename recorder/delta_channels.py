"""What LangGraph's ``DeltaChannel`` holds at each superstep, rebuilt the way LangGraph rebuilds it.

A ``DeltaChannel`` (LangGraph 1.2, beta) keeps its value out of checkpoints: the saver is
handed the writes, and now and then a full snapshot, and loading a checkpoint replays the
writes since the last snapshot through the channel's reducer. Recorded from the checkpoints
alone, such a channel would be missing from every state. So the recorder does what loading
does, one superstep at a time: the writes that made the step go through a copy of the
channel, in the order LangGraph applies them. A value the checkpoint does carry (a snapshot,
or a replay's restored seed) is taken as it is. A run that goes on with a thread starts from
the value the graph's own saver rebuilds (``get_delta_channel_history``).

The channel's reducer runs here a second time. LangGraph asks it to be deterministic and
batching-invariant, which is what makes this rebuild its value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

try:
    from langgraph._internal._typing import MISSING
except ImportError:  # another layout: a sentinel of our own, which no saver returns
    MISSING = object()

Writes = Sequence[tuple[str, Any]]


class DeltaValues:
    """Per namespace, a private copy of each delta channel, advanced one superstep at a time."""

    def __init__(self) -> None:
        self._held: dict[str, dict[str, Any]] = {}  # ns -> channel name -> our copy of the channel
        self._lost: set[tuple[str, str]] = set()  # (ns, channel) whose reducer failed here: unknown until a snapshot

    @staticmethod
    def wanted(specs: Mapping[str, Any], checkpoint: Mapping[str, Any]) -> list[str]:
        """The channels of a namespace's first checkpoint in a run whose value there only the
        saver knows: written on the thread and not stored in ``checkpoint``."""
        versions = checkpoint.get("channel_versions") or {}
        values = checkpoint.get("channel_values") or {}
        return [k for k in specs if k in versions and values.get(k, MISSING) is MISSING]

    def lose(self, ns: str, names: Iterable[str]) -> None:
        """The saver could not rebuild these: they go unrecorded until a snapshot, never wrong."""
        self._lost.update((ns, name) for name in names)

    def seed(self, ns: str, specs: Mapping[str, Any], histories: Mapping[str, Any]) -> None:
        """Start ``ns`` from what the saver rebuilt (``DeltaChannelHistory`` per channel)."""
        held = self._held.setdefault(ns, {})
        for name, history in histories.items():
            spec = specs.get(name)
            if spec is None or not isinstance(history, Mapping):
                continue
            channel = spec.from_checkpoint(history.get("seed", MISSING))
            channel.replay_writes(list(history.get("writes") or ()))
            held[name] = channel.copy()  # the saver's objects stay the saver's

    def advance(self, ns: str, specs: Mapping[str, Any], stored: Mapping[str, Any], versions: Mapping[str, Any], batches: Iterable[Writes]) -> tuple[dict[str, Any], list[str]]:
        """The delta channels' values at a checkpoint, and why any could not be rebuilt.

        ``stored``: the checkpoint's channel values (a snapshot there is taken as it is);
        ``batches``: the writes that made this step, each batch applied as LangGraph applies
        one (a resume's ``Command`` update first, then the tasks' writes in task-path order).
        Only channels written on the thread (with a version) have a value, as in LangGraph.
        """
        held = self._held.setdefault(ns, {})
        per_channel: dict[str, list[list[Any]]] = {}
        for writes in batches:
            grouped: dict[str, list[Any]] = {}
            for ch, value in writes:
                if ch in specs:
                    grouped.setdefault(ch, []).append(value)
            for ch, values in grouped.items():
                per_channel.setdefault(ch, []).append(values)
        out: dict[str, Any] = {}
        errors: list[str] = []
        for name, spec in specs.items():
            try:
                value = stored.get(name, MISSING)
                if value is not MISSING:
                    # a copy: LangGraph's own channel starts from this same object
                    held[name] = spec.from_checkpoint(value).copy()
                    self._lost.discard((ns, name))
                elif (ns, name) in self._lost:
                    continue
                else:
                    channel = held.get(name)
                    if channel is None:
                        channel = held[name] = spec.from_checkpoint(MISSING)
                    for values in per_channel.get(name, ()):
                        channel.update(values)
            except Exception as exc:  # noqa: BLE001 - the user's reducer: the channel goes unrecorded
                held.pop(name, None)
                self._lost.add((ns, name))
                errors.append(f"delta channel {name!r}: {type(exc).__name__}: {exc}")
                continue
            channel = held[name]
            if name in versions and channel.is_available():
                out[name] = channel.get()
        return out, errors
