"""Match live tool and model calls to recorded ones, and answer them.

A call is matched by who made it (step, namespace path, node, kind, name)
and by what it was asked (normalized arguments or input messages). Parallel
calls match by content, so execution order does not matter. Identical calls
made at once (three ``Send`` packets with one payload to a sampling model, one
tool called twice alike in a batch) are told apart by their tool-call id, then
by their task's path (a ``Send``'s holds its index): both are the same in the
replay. Otherwise identical calls consume recordings in the order they were made. A call that
matches nothing is a miss, explained by the closest recorded candidates and
the fields that differed.
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from graphtape.recorder import CallInfo

from graphtape.replay.loaded_errors import builtin_bases, kept_fields, loaded_error
from graphtape.replay.normalize import Normalizer, ns_path

MATCH_FIELDS = ("name", "step", "path", "node", "arguments")


@dataclass(frozen=True, slots=True)
class LiveCall:
    """A tool or model call the replayed graph is making now."""

    kind: str  # tool | model
    name: str
    step: int | None
    path: str
    node: str | None
    arguments: Any  # normalized
    # Tie-breaks between recordings with the same arguments (never a reason to miss):
    tool_call_id: str | None = None
    task_path: str | None = None
    # Where it was made, with the replay's task ids: which entry of a subgraph run twice (only to
    # place a miss in run order, never matched).
    ns: str | None = field(default=None, compare=False)


def answered_tool_call(call: CallInfo) -> str | None:
    """The id of the tool call a recorded tool call answered, read from the ToolMessage it returned."""
    out = call.output
    found = out.get("tool_call_id") if isinstance(out, dict) and out.get("type") == "tool" else None
    return found if isinstance(found, str) else None


@dataclass(slots=True)
class RecordedCall:
    """A recorded call waiting to answer a live one."""

    index: int
    call: CallInfo
    path: str
    arguments: Any
    delay_s: float  # > 0 when the node stopped waiting for it (a timeout): replay it as slow
    used: bool = False
    live: bool = False  # taken, but the call ran live (an override of a call made inside it)
    interrupt: tuple[Any, ...] = ()  # (value,): the call stopped at interrupt(value)
    task_path: str | None = None  # its task's path, read only when two recordings tie

    @property
    def tool_call_id(self) -> str | None:
        return answered_tool_call(self.call)

    def differing(self, live: LiveCall, step_offset: int) -> list[str]:
        """The match fields on which this recording and ``live`` differ."""
        out = []
        if self.call.name != live.name:
            out.append("name")
        if live.step is not None and self.call.step is not None and self.call.step + step_offset != live.step:
            out.append("step")
        if self.path != live.path:
            out.append("path")
        if self.call.node != live.node:
            out.append("node")
        if self.arguments != live.arguments:
            out.append("arguments")
        return out


@dataclass(frozen=True, slots=True)
class Candidate:
    """A recorded call that almost matched a miss, and how it differed."""

    call_id: str
    name: str
    step: int | None
    node: str | None
    arguments: Any
    differs: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"call_id": self.call_id, "name": self.name, "step": self.step, "node": self.node, "arguments": self.arguments, "differs": self.differs}


@dataclass(frozen=True, slots=True)
class Handed:
    """What a tool call was handed besides its arguments (its injected state, the memories it
    read), where it differs from what the recording that would answer it was handed."""

    what: str  # "state (customer)", "memories (notes/last)"
    recorded: Any  # the differing keys as the recording had them
    actual: Any  # and as the live call has them


@dataclass(frozen=True, slots=True)
class Miss:
    """A live call no recording answers."""

    live: LiveCall
    candidates: list[Candidate] = field(default_factory=list)
    handed: Handed | None = None  # the recording asked the same, but was handed something else

    @property
    def kind(self) -> str:
        """``arguments`` when the same caller recorded this call with other arguments (or handed
        it another state), else ``extra``."""
        if self.handed is not None or (self.candidates and self.candidates[0].differs == ["arguments"]):
            return "arguments"
        return "extra"


class CallBook:
    """The recorded calls of a run after the replay's starting step, consumed as they answer."""

    def __init__(
        self,
        calls: Iterable[CallInfo],
        normalize: Normalizer,
        *,
        delay: Callable[[CallInfo], float],
        offsets: dict[str, int] | None = None,
        interrupts: dict[str, list[Any]] | None = None,
        task_paths: Callable[[], dict[str, str]] | None = None,
    ) -> None:
        self.offsets = offsets or {}  # namespace path -> how many steps a fork's edit shifted it
        self._lock = threading.Lock()
        self.recorded = [
            RecordedCall(i, c, ns_path(c.ns), normalize_arguments(c.kind, c.inputs, normalize), delay(c))
            for i, c in enumerate(calls)
        ]
        _match_interrupts(self.recorded, interrupts or {})
        # A call made inside another (a subagent's calls inside the tool that runs it): by id,
        # the one it was made in, and the ones made in it. Never made when the outer is answered.
        by_id = {r.call.call_id: r for r in self.recorded}
        self._outer = {r.index: by_id[r.call.parent_call_id] for r in self.recorded if r.call.parent_call_id in by_id and by_id[r.call.parent_call_id] is not r}
        self._inner: dict[int, list[RecordedCall]] = {}
        for r in self.recorded:
            if r.index in self._outer:
                self._inner.setdefault(self._outer[r.index].index, []).append(r)
        # Who made a call -> its recordings, in order: an exact match looks in one slot.
        self._slots: dict[tuple, list[RecordedCall]] = {}
        for r in self.recorded:
            step = None if r.call.step is None else r.call.step + self.offsets.get(r.path, 0)
            self._slots.setdefault((r.call.kind, r.call.name, step, r.path, r.call.node), []).append(r)
        if task_paths is not None and any(_has_twins(slot) for slot in self._slots.values()):
            paths = task_paths()  # read only for a run with identical calls from one caller
            for r in self.recorded:
                r.task_path = paths.get(r.call.task_id or "")

    def take(self, live: LiveCall, handed: Callable[[CallInfo], Handed | None] | None = None) -> RecordedCall | Miss:
        """The unused recording that matches ``live`` exactly (marked used), or a miss; of several,
        the one with its tool-call id, else its task's path, else the first. ``handed`` tells how a
        recording was handed something other than the live call (its injected state): such a
        recording does not answer it."""
        slot = (live.kind, live.name, live.step, live.path, live.node)
        refused: dict[int, Handed] = {}
        if handed is not None:
            with self._lock:
                same = [r for r in self._slots.get(slot, ()) if not r.used and r.arguments == live.arguments]
            for r in same:  # outside the lock: it may read the recording's states
                why = handed(r.call)
                if why is not None:
                    refused[r.index] = why
        with self._lock:
            same = [r for r in self._slots.get(slot, ()) if not r.used and r.arguments == live.arguments]
            if refused:
                kept = [r for r in same if r.index not in refused]
                if not kept and same:
                    r = same[0]
                    why = refused[r.index]
                    return Miss(live, [Candidate(r.call.call_id, r.call.name, r.call.step, r.call.node, r.arguments, [why.what.split(" ")[0]])], handed=why)
                same = kept
            if same:
                r = same[0]
                if len(same) > 1:
                    exact = next((x for x in same if live.tool_call_id is not None and x.tool_call_id == live.tool_call_id), None)
                    if exact is not None:
                        # A call that did not return keeps no id (it is read from the ToolMessage): an
                        # earlier failed attempt in the same task (a retry, an interrupt then resumed) goes first.
                        r = next((x for x in same if x.index < exact.index and x.call.error_type and x.tool_call_id is None and x.call.task_id == exact.call.task_id), exact)
                    else:
                        r = next((x for x in same if live.task_path is not None and x.task_path == live.task_path), r)
                r.used = True
                return r
            same_kind = [r for r in self.recorded if r.call.kind == live.kind]
            scored = sorted(((r.differing(live, self.offsets.get(r.path, 0)), r) for r in same_kind if not r.used), key=lambda x: (len(x[0]), _weight(x[0]), x[1].index))
            return Miss(live, [Candidate(r.call.call_id, r.call.name, r.call.step, r.call.node, r.arguments, d) for d, r in scored[:3]])

    def unused(self) -> list[RecordedCall]:
        """Recordings no live call asked for, but for calls made inside a call that did not run
        live (answered from the recording or an override, or never made): those were never to be made."""
        return [r for r in self.recorded if not r.used and all(o.live for o in self.outer(r))]

    def outer(self, r: RecordedCall) -> list[RecordedCall]:
        """The recorded calls ``r`` was made inside, innermost first."""
        out: list[RecordedCall] = []
        found = self._outer.get(r.index)
        while found is not None and found not in out:  # a damaged recording's loop ends here
            out.append(found)
            found = self._outer.get(found.index)
        return out

    def inner(self, r: RecordedCall) -> list[RecordedCall]:
        """Every recorded call made inside ``r`` (and inside those), outermost first."""
        out: list[RecordedCall] = []
        seen = {r.index}
        for c in self._inner.get(r.index, ()):
            if c.index not in seen:
                seen.add(c.index)
                out.append(c)
        for c in out:  # grows as it goes: the calls inside each, after it
            for k in self._inner.get(c.index, ()):
                if k.index not in seen:
                    seen.add(k.index)
                    out.append(k)
        return out


def _has_twins(slot: list[RecordedCall]) -> bool:
    """Whether two recordings of one caller were asked the same (so which answers which is a question)."""
    return len(slot) > 1 and any(a.arguments == b.arguments for i, a in enumerate(slot) for b in slot[i + 1 :])


def _match_interrupts(recorded: list[RecordedCall], interrupts: dict[str, list[Any]]) -> None:
    """Give each call that stopped at ``interrupt()`` the value it interrupted with.

    The call keeps the value itself (its output); a fixture, which keeps no output for a
    call that did not return, has it in its task's interrupt events: the k-th such call
    of a task is the task's k-th interrupt.
    """
    seen: dict[str | None, int] = {}
    for r in recorded:
        if r.call.error_type != "GraphInterrupt":
            continue
        k = seen.get(r.call.task_id, 0)
        seen[r.call.task_id] = k + 1
        out = r.call.output
        if isinstance(out, list) and out:
            r.interrupt = (out[0],)
        elif k < len(interrupts.get(r.call.task_id or "", ())):
            r.interrupt = (interrupts[r.call.task_id or ""][k],)


def _weight(fields: list[str]) -> int:
    # Prefer a candidate from the same caller with other arguments over one from elsewhere.
    return sum(MATCH_FIELDS.index(f) for f in fields)


def normalize_arguments(kind: str, inputs: Any, normalize: Normalizer) -> Any:
    """What a call was asked, without ids and call parameters that vary run to run."""
    if kind == "model" and isinstance(inputs, dict):
        out = {"messages": normalize(inputs.get("messages", inputs.get("prompts")))}
        if inputs.get("tools"):
            # The tools offered are a set: some graphs build the list from a set (langgraph-supervisor's
            # handoff tools), so its order changes from process to process.
            out["tools"] = sorted(normalize(inputs["tools"]), key=_tool_name)
        return out
    return normalize(inputs)


def _tool_name(tool: Any) -> str:
    if isinstance(tool, dict):
        inner = tool.get("function") if isinstance(tool.get("function"), dict) else tool
        return str(inner.get("name", ""))
    return str(tool)


# -- answers --------------------------------------------------------------------


class RecordedError(Exception):
    """Base of errors rebuilt from a recording whose type graphtape cannot import (it never imports names from data)."""

    recorded_type = "Exception"


_ERROR_TYPES: dict[str, type[Exception]] = {}
_ERROR_LOCK = threading.Lock()


def rebuild_error(type_name: str | None, message: str | None, frames: Any = None, fields: Any = None) -> Exception:
    """An exception with the recorded type name and message, so error paths reproduce.

    Built-in exception types are used as they are; LangChain's ToolException
    too; so is the one class of that name among the modules this process has
    already loaded (the graph's own, which its ``retry_on`` and ``except`` name:
    see ``loaded_errors``). Any other recorded type becomes a ``RecordedError``
    subclass of the same name (``except ThatType`` cannot match it; catching by
    ``Exception`` or by name does).
    """
    name = type_name or "Exception"
    message = message or ""
    builtin = getattr(builtins, name, None)
    if isinstance(builtin, type) and issubclass(builtin, Exception) and builtin.__module__ == "builtins":
        try:
            return builtin(message)
        except TypeError:  # e.g. UnicodeDecodeError wants five arguments
            pass
    if name == "ToolException":
        from langchain_core.tools import ToolException

        return ToolException(message)
    safe = name if name.isidentifier() else "RecordedError"
    loaded = loaded_error(safe, message, frames, fields) if safe != "RecordedError" else None
    if loaded is not None:
        return loaded
    with _ERROR_LOCK:
        cls = _ERROR_TYPES.get(safe)
        if cls is None:
            cls = _ERROR_TYPES[safe] = _stand_in(safe)
    try:
        error = cls(message)
    except TypeError:  # a built-in base that wants more than a message (an exception group)
        with _ERROR_LOCK:
            cls = _ERROR_TYPES[safe] = _stand_in(safe, shared_base=False)
        error = cls(message)
    error.__dict__.update(kept_fields(fields, cls))  # what the error carried (a status code), as recorded
    return error


def _stand_in(name: str, *, shared_base: bool = True) -> type[Exception]:
    """A ``RecordedError`` subclass named ``name``, also of the built-in class the loaded classes
    of that name share (``except ValueError`` still catches it) unless ``shared_base`` is off."""
    attrs = {"recorded_type": name, "__module__": "graphtape.replay.recorded"}
    for base in builtin_bases(name) if shared_base else ():
        try:
            return type(name, (RecordedError, base), attrs)
        except TypeError:  # a built-in with a layout of its own (OSError): the plain stand-in
            break
    return type(name, (RecordedError,), attrs)


def message_from_plain(value: Any) -> Any:
    """A recorded model output (plain dict) as an ``AIMessage``; text becomes its content."""
    from langchain_core.messages import AIMessage

    if isinstance(value, dict) and value.get("type") in ("ai", "AIMessageChunk"):
        fields = {k: v for k, v in value.items() if k in AIMessage.model_fields and k != "type"}
        fields.pop("tool_call_chunks", None)
        return AIMessage(**fields)
    if isinstance(value, str):
        return AIMessage(content=value)
    if value is None:
        return AIMessage(content="")
    return AIMessage(content=str(value))


_MESSAGE_CLASSES = {"ai": "AIMessage", "human": "HumanMessage", "system": "SystemMessage", "tool": "ToolMessage", "function": "FunctionMessage", "remove": "RemoveMessage"}
_COMMAND_FIELDS = ("graph", "update", "resume", "goto")


def revive_command(value: Any) -> Any:
    """A recorded ``Command`` (a tool's or node's return, decoded as plain data) rebuilt, so its
    ``update`` and ``goto`` happen in the replay; messages in it and ``Send`` packets in its
    ``goto`` are rebuilt too. Only these allow-listed LangGraph and LangChain types are made,
    never a name read from the recording; anything else is returned as it is."""
    if not (isinstance(value, dict) and value.get("__type__") == "Command"):
        return value
    from langgraph.types import Command

    fields = {k: value[k] for k in _COMMAND_FIELDS if k in value}
    if isinstance(fields.get("update"), dict):
        fields["update"] = {k: _revive_messages(v) if k == "messages" else v for k, v in fields["update"].items()}
    if "goto" in fields:
        goto = fields["goto"]
        fields["goto"] = [_revive_send(g) for g in goto] if isinstance(goto, list) else _revive_send(goto)
    return Command(**fields)


def adopt_live_ids(command: Any, live_messages: Any) -> Any:
    """A rebuilt ``Command`` whose update carries the state's messages (a handoff does) gets the
    live run's message ids for them.

    LangGraph gives a message its id when it enters the state, afresh every run. A recorded
    handoff holds the recording's ids; handed back as they are, ``add_messages`` would take
    the state's own messages for new ones and add them twice.
    """
    update = getattr(command, "update", None)
    if not isinstance(update, dict) or not isinstance(update.get("messages"), list) or not isinstance(live_messages, list):
        return command
    for recorded, live in zip(update["messages"], live_messages):
        same = type(recorded) is type(live) and getattr(recorded, "content", None) == getattr(live, "content", None)
        if same and getattr(live, "id", None) is not None:
            recorded.id = live.id
    return command


def _revive_send(value: Any) -> Any:
    if isinstance(value, dict) and value.get("__type__") == "Send" and isinstance(value.get("node"), str):
        from langgraph.types import Send

        return Send(value["node"], value.get("arg"))
    return value


def _revive_messages(value: Any) -> Any:
    if isinstance(value, list):
        return [_revive_message(m) for m in value]
    return _revive_message(value)


def _revive_message(value: Any) -> Any:
    if not isinstance(value, dict) or value.get("type") not in _MESSAGE_CLASSES:
        return value
    import langchain_core.messages as lc

    cls = getattr(lc, _MESSAGE_CLASSES[value["type"]])
    fields = {k: v for k, v in value.items() if k in cls.model_fields and k != "type"}
    try:
        return cls(**fields)
    except Exception:  # noqa: BLE001 - a message that no longer validates stays plain data
        return value


class Opaque:
    """Stands in for a recorded value that had no safe encoding (a lock, a handle).

    It carries the recorded type's name and repr and nothing else, so code
    that only passes such a value along, or fails to serialize it, behaves
    as it did; nothing named in the recording is imported.
    """

    __slots__ = ("_repr",)

    def __init__(self, text: str) -> None:
        self._repr = text

    def __repr__(self) -> str:
        return self._repr


_OPAQUE_TYPES: dict[str, type] = {}


def revive_opaque(value: Any) -> Any:
    """Replace "no safe encoding" markers in a recorded value with ``Opaque`` stand-ins."""
    if isinstance(value, dict):
        if value.get("unserializable") is True and isinstance(value.get("__type__"), str):
            qualname = value["__type__"].rpartition(".")[2]
            safe = qualname if qualname.isidentifier() else "Opaque"
            with _ERROR_LOCK:
                cls = _OPAQUE_TYPES.get(safe)
                if cls is None:
                    cls = _OPAQUE_TYPES[safe] = type(safe, (Opaque,), {"__slots__": (), "__module__": "graphtape.replay.recorded"})
            return cls(str(value.get("repr", f"<{safe}>")))
        return {k: revive_opaque(v) for k, v in value.items()}
    if isinstance(value, list):
        return [revive_opaque(v) for v in value]
    return value
