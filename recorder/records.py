"""What the store hands to readers: plain, immutable records.

Values inside records are already decoded to plain JSON-like data (messages
are dicts with a ``type``), which is what the TUI, ``show`` and diffs need;
``RunStore.state_at(..., typed=True)`` gives live objects for resuming.
``StepRow`` (and ``calls(..., encoded=True)``) keep values encoded, for
readers that copy a recording rather than show it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# Step flags, stored as a bit set.
FLAG_ERROR = 1
FLAG_INTERRUPT = 2
FLAG_RESUME = 4
FLAG_PENDING = 8  # the step started but never produced a checkpoint
FLAG_CARRIED = 16  # a task of the step did not run: LangGraph applied what it wrote in an earlier run

# How LangGraph stops a node or a call that did not fail: an interrupt(), a Command to the parent.
# A call that stopped so keeps the type (a replay stops it the same way) but is no failure.
NOT_FAILURES = frozenset({"GraphInterrupt", "NodeInterrupt", "ParentCommand", "GraphBubbleUp"})

STORE = "store"  # the kind of a call to the graph's long-term memory store
# Calls a node's own code makes that a tool or model call can make too (ChatOpenAI's request to
# its provider, a tool's memory read): made inside one, they are part of it (``parent_call_id``).
SENT = "sent"  # the kind of a tool call's own write to the graph's state (recorder.tool_sends)
PART_OF_A_CALL = ("http", STORE, SENT)


_TEXT, _NUMBER = (str,), (int, float)
_MAYBE_TEXT, _MAYBE_NUMBER, _MAYBE_INT = (str, type(None)), (int, float, type(None)), (int, type(None))


def _check_fields(record: Any, kinds: tuple[tuple[str, tuple[type, ...]], ...]) -> None:
    """Raise ``ValueError`` when a field read from a store is not of the type graphtape writes.

    A store is data from elsewhere (SQLite keeps any type in any column): a record whose
    fields are not what graphtape writes is damaged, said once where it is built (reads turn
    the error into a one-line ``StoreError``), not a crash wherever a field is first used.
    """
    for name, allowed in kinds:
        value = getattr(record, name)
        if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
            raise ValueError(f"{type(record).__name__}.{name} holds a {type(value).__name__}")


_RUN_FIELD_TYPES = (
    ("id", _TEXT), ("name", _TEXT), ("graph_name", _TEXT), ("status", _TEXT), ("started_at", _NUMBER),
    ("ended_at", _MAYBE_NUMBER), ("step_count", (int,)), ("thread_id", _MAYBE_TEXT), ("status_reason", _MAYBE_TEXT),
    ("error_type", _MAYBE_TEXT), ("error_message", _MAYBE_TEXT), ("graph_ref", _MAYBE_TEXT), ("tags", (list,)),
    ("parent_run_id", _MAYBE_TEXT), ("fork_step", _MAYBE_INT), ("redactions", (int,)), ("faults", (int,)), ("durability", _MAYBE_TEXT),
)
_STEP_FIELD_TYPES = (
    ("run_id", _TEXT), ("ns", _TEXT), ("seq", (int,)), ("step", (int,)), ("source", _MAYBE_TEXT), ("checkpoint_id", _MAYBE_TEXT),
    ("parent_checkpoint_id", _MAYBE_TEXT), ("created_at", _NUMBER), ("duration_ms", _MAYBE_NUMBER), ("nodes", (list,)),
    ("summary", _TEXT), ("flags", (int,)),
)
_ROW_FIELD_TYPES = (
    ("seq", (int,)), ("step", (int,)), ("source", _MAYBE_TEXT), ("checkpoint_id", _MAYBE_TEXT), ("created_at", _NUMBER), ("flags", (int,)), ("payload", (dict,)),
)
_CALL_FIELD_TYPES = (
    ("call_id", _TEXT), ("kind", _TEXT), ("name", _TEXT), ("ns", _TEXT), ("step", _MAYBE_INT), ("node", _MAYBE_TEXT),
    ("task_id", _MAYBE_TEXT), ("error_type", _MAYBE_TEXT), ("error_message", _MAYBE_TEXT), ("started_at", _NUMBER),
    ("latency_ms", _MAYBE_NUMBER), ("input_tokens", _MAYBE_INT), ("output_tokens", _MAYBE_INT), ("total_tokens", _MAYBE_INT),
    ("parent_call_id", _MAYBE_TEXT), ("streamed", (bool, int)),
)


@dataclass(frozen=True, slots=True)
class RunInfo:
    """One recorded invocation of a graph (a resume continues its run)."""

    id: str
    name: str
    graph_name: str
    status: str
    started_at: float
    ended_at: float | None
    step_count: int
    thread_id: str | None = None
    status_reason: str | None = None
    error_type: str | None = None
    error_message: str | None = None
    graph_ref: str | None = None
    tags: list[str] = field(default_factory=list)
    parent_run_id: str | None = None
    fork_step: int | None = None
    redactions: int = 0
    faults: int = 0
    durability: str | None = None

    def __post_init__(self) -> None:
        _check_fields(self, _RUN_FIELD_TYPES)
        if not all(isinstance(t, str) for t in self.tags):
            raise ValueError("RunInfo.tags holds something other than text")

    @property
    def duration_s(self) -> float | None:
        return None if self.ended_at is None else self.ended_at - self.started_at

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class RunDetail:
    """The heavier parts of a run, read on demand."""

    run: RunInfo
    inputs: Any
    output: Any  # the state after the last completed step
    config: Any
    graph: Any
    versions: dict[str, str]
    fork_edit: Any
    fault_log: list[str]


@dataclass(frozen=True, slots=True)
class TaskInfo:
    """A node execution inside a superstep."""

    task_id: str
    node: str
    path: str
    writes: dict[str, Any]
    error_type: str | None = None
    error_message: str | None = None
    interrupts: list[Any] = field(default_factory=list)
    started_at: float | None = None
    duration_ms: float | None = None
    cached: bool = False
    cache_key: str | None = None  # a cached task's key: its name and the digest of its arguments
    cache_warm: bool = True  # that key was in the cache before the run began (not put there by the run)
    subgraph_ns: list[str] = field(default_factory=list)
    traceback: list[list[Any]] | None = None  # frames [file, line, function, source] of its error
    attempts: list[dict[str, Any]] = field(default_factory=list)  # earlier attempts (RetryPolicy): n, et, em, ms
    # Not run: LangGraph applied the writes it made in an earlier run on the thread (a pending
    # write of a task that finished before another failed), as ``[[channel, value], ...]``; a
    # ``Send`` is ``["__pregel_tasks", node, arg]``.
    carried: list[Any] | None = None


@dataclass(frozen=True, slots=True)
class RouteInfo:
    """Why the run went where it went after a node."""

    source: str
    kind: str  # conditional | send | command | static | parent-command
    destinations: list[str]
    router: str | None = None
    returned: Any = None
    sends: list[dict[str, Any]] = field(default_factory=list)
    task_id: str | None = None


@dataclass(frozen=True, slots=True)
class EventInfo:
    """An interrupt raised, a resume value supplied, or the update a resume brought with it.

    An ``update`` event's value is the channel writes of ``Command(resume=..., update=...)``
    (or its ``goto``), as ``[[channel, value], ...]``; a ``Send`` is ``[channel, node, arg]``.
    """

    kind: str  # interrupt | resume | update
    value: Any
    task_id: str | None = None
    node: str | None = None


@dataclass(frozen=True, slots=True)
class StepInfo:
    """A superstep of one namespace: what ran, where it went, what it cost."""

    run_id: str
    ns: str
    seq: int
    step: int
    source: str | None
    checkpoint_id: str | None
    parent_checkpoint_id: str | None
    created_at: float
    duration_ms: float | None
    nodes: list[str]
    summary: str
    flags: int

    def __post_init__(self) -> None:
        _check_fields(self, _STEP_FIELD_TYPES)

    @property
    def has_error(self) -> bool:
        return bool(self.flags & FLAG_ERROR)

    @property
    def has_interrupt(self) -> bool:
        return bool(self.flags & FLAG_INTERRUPT)

    @property
    def pending(self) -> bool:
        return bool(self.flags & FLAG_PENDING)


@dataclass(frozen=True, slots=True)
class StepDetail:
    """Everything recorded about one superstep except its state."""

    step: StepInfo
    tasks: list[TaskInfo]
    routes: list[RouteInfo]
    events: list[EventInfo]
    next: list[str]


@dataclass(frozen=True, slots=True)
class StepRow:
    """One stored row of a superstep: its payload unpacked, its values still encoded (blob references unresolved).

    A step can have several rows (interrupted then resumed, writes that came
    late); ``RunStore.step_rows`` hands them over unmerged, in order.
    """

    seq: int
    step: int
    source: str | None
    checkpoint_id: str | None
    created_at: float
    is_key: bool  # its state frame is a keyframe, not a delta
    flags: int
    payload: dict[str, Any]  # "t" tasks, "r" routes, "e" events, "s" the state frame (completed rows)

    def __post_init__(self) -> None:
        _check_fields(self, _ROW_FIELD_TYPES)

    @property
    def pending(self) -> bool:
        return bool(self.flags & FLAG_PENDING)


@dataclass(frozen=True, slots=True)
class CallInfo:
    """A tool or chat-model call made inside a node."""

    call_id: str
    kind: str  # tool | model
    name: str
    ns: str
    step: int | None
    node: str | None
    task_id: str | None
    inputs: Any
    output: Any  # the state after the last completed step
    error_type: str | None
    error_message: str | None
    started_at: float
    latency_ms: float | None
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    parent_call_id: str | None = None
    streamed: bool = False
    traceback: list[list[Any]] | None = None  # frames [file, line, function, source] of its error
    # The output as stored (blob references unresolved): a replay decodes it with its types
    # (Documents, datetimes, a Command's Send packets) to hand a tool's answer back as it was.
    encoded_output: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        _check_fields(self, _CALL_FIELD_TYPES)


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A recorded checkpoint in LangGraph's own shape, for resuming."""

    checkpoint_id: str
    parent_checkpoint_id: str | None
    ns: str
    step: int
    source: str | None
    channel_values: dict[str, Any]
    channel_versions: dict[str, Any]
    versions_seen: dict[str, dict[str, Any]]
