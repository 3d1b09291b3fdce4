"""What a tool is handed besides its arguments, checked against the recording where a call may run live.

LangChain keeps injected arguments (``InjectedState``, ``InjectedStore``, a ``ToolRuntime``,
``InjectedToolCallId``) out of what a tool call tells callbacks, so a recorded tool call holds its
arguments without them: a tool that reads only the state is recorded as called with ``{}``. A
fork's edit changes that state while the arguments stay the same; matched on its arguments
alone, the call would be answered with what the old state gave.

So where a call the recording cannot answer runs live (a fork, a re-recording), a tool call is
answered from a recording only if that recording was handed the same:

- the state: each key the tool was handed (the whole state, ``InjectedState("key")``, a
  ``ToolRuntime``'s ``state``) against the same key of the state the recorded call's task
  started from (the recorded checkpoint before its step, or the state its ``Send`` packet
  carried), normalized as states are compared, so ids LangGraph and LangChain mint afresh do
  not count. Values the graph works out itself (``remaining_steps``, call counters) are not
  compared: no edit changes them;
- the memories it read (an ``InjectedStore``, a runtime's or ``get_store()``'s store): each read
  the recorded call made, against what the replay has written to the store since it began.

Nothing more is recorded for this: the recording's states and the tool's own store reads hold it.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from graphtape.recorder import CallInfo, RunStore
from graphtape.recorder.codec import TYPE_KEY
from graphtape.recorder.graph_info import is_internal_channel
from graphtape.recorder.records import STORE
from graphtape.recorder.session import TASKS

from graphtape.replay.calls import Handed
from graphtape.replay.normalize import Normalizer

_MISSING = object()
_PUSH = "__pregel_push"  # the first element of a task's path when a Send started it
_WITH_CONTEXT = "tool_call_with_context"  # a prebuilt agent's Send to its ToolNode, the state inlined


@dataclass(slots=True)
class Given:
    """What a live tool call was handed besides its arguments, in plain form."""

    state: dict[str, Any] = field(default_factory=dict)  # state key -> value the tool was handed
    defaults: dict[str, Any] = field(default_factory=dict)  # a model state's field defaults (an unset channel reads as its default)
    push: int | None = None  # the Send packet its task was started with (its index), if one
    plain: Callable[[Any], Any] = lambda v: v  # a live value as the recording holds it


def given(tool: Any, tool_input: Mapping[str, Any], injected: Iterable[str], path: Any, plain: Callable[[Any], Any]) -> Given:
    """What ``tool`` was handed in ``tool_input`` besides its arguments; ``path`` is its task's path."""
    out = Given(push=path[1] if isinstance(path, tuple) and len(path) > 1 and path[0] == _PUSH and type(path[1]) is int else None, plain=plain)
    injected = list(injected)
    if not injected:
        return out
    spec = _state_args(tool)
    for arg in injected:
        value = tool_input.get(arg)
        if value is None:
            continue
        if arg in spec and spec[arg]:  # InjectedState("key"): that key alone
            out.state[spec[arg]] = plain(value)
            continue
        state = value if arg in spec else _runtime_state(value)
        if state is not None:
            _add_fields(out, state)
    return out


class HandedCheck:
    """Tells whether a recorded tool call was handed what a live one is (see module docstring)."""

    def __init__(
        self,
        store: RunStore,
        run_id: str,
        normalize: Normalizer,
        *,
        derived: Iterable[str] = (),
        calls: Iterable[CallInfo] = (),
        written: Callable[[], Iterable[tuple[tuple[str, ...], str, Any]]] = lambda: (),
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.normalize = normalize
        self.derived = frozenset(derived)  # state keys the graph works out itself: never compared
        self.written = written  # what the replay has written to the store so far: (namespace, key, value or None)
        self.reads: dict[str, list[CallInfo]] = {}  # a recorded call's id -> the store reads made inside it
        for c in calls:
            if c.kind == STORE and c.parent_call_id and c.name in ("get", "search", "list_namespaces") and not c.error_type:
                self.reads.setdefault(c.parent_call_id, []).append(c)
        self._steps: dict[str, list[Any]] = {}
        self._states: dict[tuple[str, int], dict[str, Any] | None] = {}
        self._lock = threading.Lock()  # parallel tool calls ask at once; each recorded state is read once

    def changed(self, call: CallInfo, live: Given) -> Handed | None:
        """How what ``live`` was handed differs from what the recorded ``call`` was handed; None
        when it does not, or the recording cannot say (then the call is answered as before)."""
        try:
            return self._state(call, live) or self._memories(call, live)
        except Exception:  # noqa: BLE001 - a recording (or a value) this cannot read: the call is matched on its arguments, as before
            return None

    # -- the state ---------------------------------------------------------------------------
    def _state(self, call: CallInfo, live: Given) -> Handed | None:
        if not live.state:
            return None
        recorded = self._recorded_input(call, live.push)
        if recorded is None:
            return None
        was: dict[str, Any] = {}
        now: dict[str, Any] = {}
        for key, value in live.state.items():
            if key in self.derived:
                continue
            after = self.normalize(value, (key,))
            before = recorded.get(key, _MISSING)
            if before is _MISSING:
                # A model state reads a channel never written as its field's default.
                if key in live.defaults and self.normalize(live.defaults[key], (key,)) == after:
                    continue
            else:
                before = self.normalize(before, (key,))
                if before == after:
                    continue
                was[key] = before
            now[key] = after
        if not now:
            return None
        return Handed(f"state ({', '.join(sorted(now))})", was, now)

    def _recorded_input(self, call: CallInfo, push: int | None) -> dict[str, Any] | None:
        """The state the recorded call's task was handed: the checkpoint it started from, or the
        state the ``Send`` packet that started it carried."""
        if call.step is None:
            return None
        with self._lock:
            start = self._start_step(call.ns, call.step)
            values = self._values(call.ns, start) if start is not None else None
        if values is None:
            return None
        if push is not None:
            packets = values.get(TASKS)
            packet = packets[push] if isinstance(packets, list) and 0 <= push < len(packets) else None
            arg = packet.get("arg") if isinstance(packet, dict) else None
            if isinstance(arg, dict) and arg.get("__type") == _WITH_CONTEXT:
                inner = arg.get("state")
                return _fields_of(inner) if isinstance(inner, dict) else None
            if isinstance(arg, dict):
                return _fields_of(arg)  # a Send's own input: what the node was handed
            if not isinstance(arg, list):
                return None
            # A list of tool calls (langchain's agents): the ToolNode reads the state from the channels.
        return {k: v for k, v in values.items() if not is_internal_channel(k)}

    def _start_step(self, ns: str, step: int) -> int | None:
        """The recorded step (of namespace ``ns``) whose checkpoint a task of ``step`` started from."""
        steps = self._steps.get(ns)
        if steps is None:
            try:
                steps = list(self.store.list_steps(self.run_id, ns))
            except Exception:  # noqa: BLE001 - a namespace the recording lacks, or damaged: no state to compare
                steps = []
            self._steps[ns] = steps
        parents = {s.parent_checkpoint_id for s in steps if s.step == step and s.parent_checkpoint_id}
        found = next((s.step for s in steps if s.checkpoint_id is not None and s.checkpoint_id in parents), None)
        if found is not None:
            return found
        return max((s.step for s in steps if s.step < step), default=None)

    def _values(self, ns: str, step: int) -> dict[str, Any] | None:
        key = (ns, step)
        if key not in self._states:
            try:
                values = self.store.state_at(self.run_id, step, ns, internal=True)
            except Exception:  # noqa: BLE001 - a step the recording keeps no state for (a fixture's window), or damaged
                values = None
            self._states[key] = values if isinstance(values, dict) else None
        return self._states[key]

    # -- the memories ------------------------------------------------------------------------
    def _memories(self, call: CallInfo, live: Given) -> Handed | None:
        reads = self.reads.get(call.call_id)
        if not reads:
            return None
        written = {(tuple(ns), key): value for ns, key, value in self.written()}
        if not written:
            return None
        was: dict[str, Any] = {}
        now: dict[str, Any] = {}
        for r in reads:
            asked = r.inputs if isinstance(r.inputs, dict) else {}
            if r.name == "get":
                where = (tuple(asked.get("namespace") or ()), asked.get("key"))
                if where in written:
                    before = r.output.get("value") if isinstance(r.output, dict) else None
                    after = live.plain(written[where])
                    if before != after:
                        was[_label(where)], now[_label(where)] = before, after
            elif r.name == "search":
                prefix = tuple(asked.get("namespace_prefix") or ())
                hits = {(tuple(h.get("namespace") or ()), h.get("key")): h.get("value") for h in r.output or () if isinstance(h, dict)} if isinstance(r.output, list) else {}
                for where, value in written.items():
                    if where[0][: len(prefix)] != prefix:
                        continue
                    before, after = hits.get(where), live.plain(value)
                    if before != after:
                        was[_label(where)], now[_label(where)] = before, after
            else:  # list_namespaces: any namespace written since may be listed now
                for where, value in written.items():
                    was.setdefault(_label(where), None)
                    now[_label(where)] = live.plain(value)
        if not now:
            return None
        return Handed(f"memories ({', '.join(sorted(now))})", was, now)


def derived_keys(graph: Any) -> set[str]:
    """State keys the graph (and its subgraphs) work out themselves rather than hold: managed
    values (``remaining_steps``) and channels never checkpointed (langchain's call counters)."""
    try:
        from langgraph.channels.untracked_value import UntrackedValue
        from langgraph.managed.base import is_managed_value
    except ImportError:  # pragma: no cover - another LangGraph: nothing is set aside
        return set()
    graphs = [graph]
    try:
        graphs += [g for _, g in graph.get_subgraphs(recurse=True)]
    except Exception:  # noqa: BLE001 - a graph that cannot list them: its own keys only
        pass
    out: set[str] = set()
    for g in graphs:
        for name, channel in (getattr(g, "channels", None) or {}).items():
            if is_managed_value(channel) or isinstance(channel, UntrackedValue):
                out.add(name)
    return out


def _state_args(tool: Any) -> dict[str, str | None]:
    """The tool's ``InjectedState`` arguments: name -> the state key it takes (None: the whole state)."""
    try:
        from langgraph.prebuilt.tool_node import _get_all_injected_args

        return dict(_get_all_injected_args(tool).state)
    except Exception:  # noqa: BLE001 - a LangGraph without it, or a tool it cannot read: a ToolRuntime is still seen
        return {}


def _runtime_state(value: Any) -> Any:
    """The state a ``ToolRuntime`` carries, or None for any other injected value (a store, an id)."""
    try:
        from langgraph.prebuilt import ToolRuntime
    except ImportError:  # pragma: no cover - a LangGraph without it
        return None
    return value.state if isinstance(value, ToolRuntime) else None


def _add_fields(out: Given, state: Any) -> None:
    """A whole state's keys into ``out``: a dict's items, a model's or dataclass's fields (with their defaults)."""
    if isinstance(state, Mapping):
        for k, v in state.items():
            if isinstance(k, str):
                out.state[k] = out.plain(v)
        return
    fields = getattr(type(state), "model_fields", None)
    if isinstance(fields, dict):
        for name, info in fields.items():
            out.state[name] = out.plain(getattr(state, name, None))
            try:
                if not info.is_required():
                    out.defaults[name] = out.plain(info.get_default(call_default_factory=True))
            except Exception:  # noqa: BLE001 - a default that cannot be made: an unset channel counts as changed
                pass
        return
    if dataclasses.is_dataclass(state) and not isinstance(state, type):
        for f in dataclasses.fields(state):
            out.state[f.name] = out.plain(getattr(state, f.name, None))
            if f.default is not dataclasses.MISSING:
                out.defaults[f.name] = out.plain(f.default)
            elif f.default_factory is not dataclasses.MISSING:
                try:
                    out.defaults[f.name] = out.plain(f.default_factory())
                except Exception:  # noqa: BLE001 - a default that cannot be made: an unset channel counts as changed
                    pass


def _fields_of(value: dict[str, Any]) -> dict[str, Any]:
    """A recorded state (a model recorded with its class's name) as its keys."""
    return {k: v for k, v in value.items() if k != TYPE_KEY}


def _label(where: tuple[tuple[str, ...], Any]) -> str:
    return "/".join([*where[0], str(where[1])])
