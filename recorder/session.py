"""One run being recorded: joins what the saver and the callbacks see.

The saver reports checkpoints (state after each superstep) and each task's
writes (its update, ``branch:to:*`` routes, Send packets, interrupts, errors).
The callback handler reports node timings and errors, router return values,
Command results, and tool / chat-model calls. A superstep is finalized when
its checkpoint arrives; whatever is left when the run ends (an interrupted or
failed step) is stored as a pending step.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


from graphtape.recorder.cache_hits import forget_ran, hit_of, note_ran
from graphtape.recorder.call_waits import CallWaits
from graphtape.recorder.channel_writes import is_send as _is_send
from graphtape.recorder.channel_writes import stored
from graphtape.recorder.codec import Encoder
from graphtape.recorder.delta_channels import DeltaValues
from graphtape.recorder.frames import FrameBuilder
from graphtape.recorder.graph_info import END, START, GraphInfo
from graphtape.recorder.lone_surrogates import json_bytes
from graphtape.recorder.records import FLAG_CARRIED, FLAG_ERROR, FLAG_INTERRUPT, FLAG_PENDING, FLAG_RESUME, NOT_FAILURES
from graphtape.recorder.redaction import MARK, Redactor
from graphtape.recorder.snapshots import ChannelCopies, containers, snapshot
from graphtape.recorder.statement_params import bound_by_name
from graphtape.recorder.store import Batch, pack, squeeze
from graphtape.recorder.tracebacks import frames_of, scrubbed_frames
from graphtape.recorder.writer import Writer, for_run

HEARTBEAT_S = 30.0
NULL_TASK_ID = "00000000-0000-0000-0000-000000000000"
BRANCH = "branch:to:"
JOIN = "join:"
TASKS = "__pregel_tasks"
INTERRUPT = "__interrupt__"
RESUME = "__resume__"
ERROR = "__error__"
RETURN = "__return__"
_CONTROL_CHANNELS = {TASKS, INTERRUPT, RESUME, ERROR, RETURN, "__no_writes__", "__error_source_node__", "__scheduled__"}


@dataclass
class TaskAcc:
    """What is known so far about one task (a node execution)."""

    ns: str
    task_id: str
    step: int | None = None
    cp_id: str | None = None
    node: str | None = None
    path: str = ""
    writes: list[tuple[str, Any]] = field(default_factory=list)
    t0: float | None = None
    perf0: float | None = None
    duration_ms: float | None = None
    error: BaseException | None = None
    error_frames: list | None = None  # the error's traceback, read while it still exists
    attempts: list[dict] = field(default_factory=list)  # earlier attempts of a retried task
    output: Any = None
    untracked: dict[str, Any] = field(default_factory=dict)  # its writes to never-checkpointed channels
    routers: list[tuple[str, Any]] = field(default_factory=list)
    parent_command: Any = None
    seen_callback: bool = False
    has_writes: bool = False
    interrupts: list[Any] = field(default_factory=list)
    resumes: list[Any] = field(default_factory=list)
    carried: bool = False  # not run: its writes are an earlier run's, applied by LangGraph
    cache_key: str | None = None  # served from the cache: under this key (name and digest of its arguments)
    cache_warm: bool = True  # ...which was there before the run began, not put there by an earlier call of it


_NOT_PASSED = object()
_ERROR_CHAIN = 4  # errors of a chain (raised from, or while handling, another) read for bound secrets


def call_site(metadata: Mapping[str, Any] | None) -> tuple[str, str | None, str | None, int | None]:
    """Where a callback run happened: ``(namespace, node, task id, step)`` from LangGraph's metadata.

    A task a node pushed (a functional-API ``@task``) is named under its caller's namespace
    (``"entry:<id>|fetch:<id>"``) but runs in the caller's own graph: it is filed there.
    The recorder and the replay both place calls with this, so they always agree.
    """
    md = metadata or {}
    task_ns = md.get("langgraph_checkpoint_ns", "") or ""
    path = md.get("langgraph_path")
    if type(task_ns) is str and "|" not in task_ns and not (type(path) is tuple and path and path[0] == "__pregel_push"):
        # The common case, a node of the root graph ("agent:<task id>"): no namespace to walk.
        node, _, task_id = task_ns.partition(":")
        return "", md.get("langgraph_node", node or None), task_id or None, md.get("langgraph_step")
    ns, node, task_id = split_task_ns(str(task_ns))
    for _ in range(push_depth(path)):
        ns = ns.rpartition("|")[0]
    return ns, md.get("langgraph_node", node), task_id, md.get("langgraph_step")


def push_depth(path: Any) -> int:
    """How many callers deep a task's path nests: ``("__pregel_push", ("__pregel_pull", "entry"), 0, True)``
    is a task pushed by node ``entry`` (1); a node's own path, or a Send's, is 0."""
    depth = 0
    while isinstance(path, tuple) and len(path) > 1 and path[0] == "__pregel_push" and isinstance(path[1], tuple):
        depth += 1
        path = path[1]
    return depth


def split_task_ns(task_ns: str) -> tuple[str, str | None, str | None]:
    """``"a:1|b:2"`` -> (namespace ``"a:1"``, node ``"b"``, task id ``"2"``)."""
    if not task_ns:
        return "", None, None
    parent, _, last = task_ns.rpartition("|")
    node, _, task_id = last.partition(":")
    return parent, node or None, task_id or None


class RunSession:
    """Accumulates one run and hands finished pieces to the writer."""

    def __init__(
        self,
        *,
        run_id: str,
        writer: Writer,
        graph: GraphInfo,
        redactor: Redactor,
        strict: bool,
        seq_start: int = 0,
        known_checkpoints: Mapping[str, int] | None = None,
        call_waits: CallWaits | None = None,
    ) -> None:
        self.run_id = run_id
        self.writer = writer
        self.call_waits = call_waits if call_waits is not None else CallWaits()
        self.graph = graph
        self.redactor = redactor
        self.strict = strict
        self.cache_keys_set: set[str] = set()  # cache keys this run's tasks put in the graph's cache
        self.cache_ran: list[int] = []  # ids of the writes of its tasks that ran in a graph with a cache (see cache_hits)
        self.keys_cache = False  # the graph has a cache: a task that ran is named by the key it is cached under
        self.faults = 0
        self.fault_log: list[str] = []
        self.pending_error: Exception | None = None
        self.encoder = Encoder(redactor, sink=self, on_fault=self._encode_fault)
        self._lock = threading.RLock()
        self._fault_lock = threading.Lock()
        self._tasks: dict[tuple[str, str], TaskAcc] = {}
        self._cp_step: dict[str, int] = dict(known_checkpoints or {})
        self._ready: dict[str, dict[int, tuple]] = {}
        self._last_cp: dict[str, tuple[str, float]] = {}
        self._frames: dict[str, FrameBuilder] = {}
        self._events: dict[tuple[str, int], list[dict]] = {}
        self._loose_events: list[tuple[str, str | None, dict]] = []
        self._children: dict[str, list[str]] = {}  # task id -> the subgraph namespaces it ran
        self._calls: dict[str, dict] = {}
        self._beat = self._opened = time.time()
        self._unfinished: dict[str, dict] = {}
        self._seq = seq_start
        self._blobs: dict[str, tuple[bool, bytes]] = {}
        self.root_interrupted = False
        self.max_step = -1
        self.step_shift = 0  # root steps are stored this many lower (a fork: see Lineage.step_shift)
        self._hidden_channels: set[str] = set()
        self._plain_channels: set[str] = set()  # state channels whose names are not secrets
        self._copies = ChannelCopies()
        self._untracked_now: dict[str, dict[str, Any]] = {}  # ns -> never-checkpointed channel -> value now
        self._deltas = DeltaValues()  # what DeltaChannels hold: LangGraph keeps it out of checkpoints
        self._delta_copies = ChannelCopies()
        self._null_deltas: dict[tuple[str, str | None], list[tuple[str, Any]]] = {}  # (ns, checkpoint) -> Command writes to them
        self.passed_input: Any = _NOT_PASSED  # the run's input as the caller passed it (set by attach)
        self.command_input = False  # the run was invoked with Command(update=..., goto=...): its writes are its input
        # Resumed with answers by interrupt id: LangGraph writes each under its task, so the
        # human's edit (Command(resume={...}, update=...)) comes with no answer beside it.
        self.answers_by_id = False
        self.loaded_writes: list[tuple[str, Any]] = []  # a resumed run's checkpoint's writes of no task, which LangGraph puts again

    # -- faults --------------------------------------------------------------
    def _encode_fault(self, why: str) -> None:
        self.fault(f"unserializable value: {why}")
        if self.strict:
            from graphtape.recorder.errors import RecorderFault

            raise RecorderFault(f"graphtape could not encode a value ({why})")

    def fault(self, message: str) -> None:
        # Its own lock, not the session's: the writer's thread counts faults here while a graph
        # thread may hold the session's lock waiting for that writer to catch up (``submit``).
        with self._fault_lock:
            self.faults += 1
            if len(self.fault_log) < 50:
                self.fault_log.append(message[:500])

    def frames_lost(self, *, locked: bool = True) -> None:
        """A write failed: start every namespace afresh with a keyframe, re-send blobs.

        ``locked=False``: called by the writer where work items run, which alone touch the frame
        builders and the encoder (a graph thread may hold the session's lock while it submits)."""
        if not locked:
            for builder in list(self._frames.values()):
                builder.force_key()
            self.encoder.forget()
            return
        with self._lock:
            for builder in self._frames.values():
                builder.force_key()
            self.encoder.forget()

    # -- BlobSink -------------------------------------------------------------
    def put_blob(self, data: bytes) -> str:
        from graphtape.recorder.codec import blob_hash

        h = blob_hash(data)
        if h not in self._blobs:
            packed = squeeze(data)
            self._blobs[h] = packed
        return h

    def _take_blobs(self) -> dict[str, tuple[bool, bytes]]:
        blobs, self._blobs = self._blobs, {}
        return blobs

    # -- saver side ------------------------------------------------------------
    def _task(self, ns: str, task_id: str) -> TaskAcc:
        key = (ns, task_id)
        acc = self._tasks.get(key)
        if acc is None:
            acc = self._tasks[key] = TaskAcc(ns=ns, task_id=task_id)
            if ns:
                parent_ns, node, parent_task = split_task_ns(ns)
                if parent_task is None and node is not None and node.isdigit() and parent_ns:
                    # A node that runs one subgraph again: LangGraph numbers the later runs
                    # (``"node:<task id>|1"``), each run by that same task.
                    parent_ns, node, parent_task = split_task_ns(parent_ns)
                if parent_task is None and node is not None:
                    # A subgraph with memory of its own (compiled with checkpointer=True), added as a
                    # node or run from a node's code, is named by the node alone: its parent is that
                    # node's task running now.
                    running = [a.task_id for (n, _), a in list(self._tasks.items()) if n == parent_ns and a.node == node and a.duration_ms is None]
                    parent_task = running[0] if len(running) == 1 else None
                if parent_task is not None:
                    # By task id alone: a ``@task`` that runs a graph names its caller in the
                    # namespace (``"entry:<id>|task:<id>"``) but is a task of its caller's graph.
                    kids = self._children.setdefault(parent_task, [])
                    if ns not in kids:
                        kids.append(ns)
        return acc

    def _step_of(self, acc: TaskAcc) -> int | None:
        if acc.step is None and acc.cp_id is not None and acc.cp_id in self._cp_step:
            acc.step = self._cp_step[acc.cp_id] + 1
        return acc.step

    def on_writes(self, ns: str, checkpoint_id: str | None, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str) -> None:
        """A task's writes, attached to the checkpoint it started from."""
        with self._lock:
            if task_id == NULL_TASK_ID:
                self.learn(list(writes))  # a human's answer or edit: Command(resume={"password": ...})
                deltas = self.graph.for_ns(ns).deltas
                if deltas:
                    self._null_deltas.setdefault((ns, checkpoint_id), []).extend((ch, containers(v)) for ch, v in writes if ch in deltas)
                for ch, v in writes:
                    if ch == RESUME:
                        self._loose_events.append((ns, checkpoint_id, {"kind": "resume", "v": v}))
                edit = stored((ch, containers(v)) for ch, v in writes if ch not in (RESUME, INTERRUPT, ERROR) and not self._loaded(ch, v))
                if edit and (self.command_input or self.answers_by_id or any(ch == RESUME for ch, _ in writes)):
                    # Command(resume=..., update=...): the human's edit goes in with the answer;
                    # Command(update=..., goto=...) as a run's input: what it writes is that input.
                    self._loose_events.append((ns, checkpoint_id, {"kind": "update", "v": edit}))
                self._place_events()
                return
            acc = self._task(ns, task_id)
            acc.cp_id = checkpoint_id
            self._step_of(acc)
            acc.path = task_path
            self.learn(list(writes))  # (channel, value) pairs: a channel named like a secret too
            hit = hit_of(writes) if not acc.seen_callback else None  # served from the cache: no code ran
            if hit is not None:
                acc.cache_key, acc.cache_warm = hit.key, hit.key not in self.cache_keys_set
            elif self.keys_cache and acc.seen_callback:
                note_ran(self, acc, writes)
            if acc.node is None:
                parts = task_path.lstrip("~").split(", ")
                if len(parts) >= 2 and parts[0] == "__pregel_pull":
                    acc.node = parts[1]
                elif hit is not None:
                    acc.node = hit.name  # a @task served from the cache: its path holds no name
            acc.has_writes = True
            for ch, v in writes:
                if ch == INTERRUPT:
                    acc.interrupts.extend(v if isinstance(v, (list, tuple)) else [v])
                elif ch == RESUME:
                    # ``interrupt()`` writes every resume value its task has used so far (a node
                    # asking twice writes [a], then [a, b]): the latest list replaces the last.
                    if isinstance(v, list):
                        acc.resumes = list(v)
                    else:
                        acc.resumes.append(v)
                elif ch == ERROR:
                    if acc.error is None:
                        acc.error = v if isinstance(v, BaseException) else RuntimeError(str(v))
                        acc.error_frames = frames_of(acc.error)
                else:
                    acc.writes.append((ch, containers(v)))  # encoded later: as written now
            self._drain(ns, force=False)

    def on_carried(self, checkpoint_id: str, task_id: str, node: str, path: str, writes: Sequence[tuple[str, Any]]) -> None:
        """A task of the step after ``checkpoint_id`` that will not run: it finished in an earlier
        run that then failed, and LangGraph applies the writes it made then (its pending writes)."""
        with self._lock:
            acc = self._task("", task_id)
            acc.cp_id = checkpoint_id
            self._step_of(acc)
            acc.node, acc.path, acc.carried, acc.has_writes = node, path, True, True
            acc.writes.extend((ch, containers(v)) for ch, v in writes)

    def _loaded(self, channel: str, value: Any) -> bool:
        """Whether this write was already on the checkpoint the run resumed (an earlier invocation's
        Command update, which LangGraph puts again with the answer): taken once."""
        for i, (ch, v) in enumerate(self.loaded_writes):
            try:
                same = ch == channel and (v is value or v == value)
            except Exception:  # noqa: BLE001 - a value that cannot be compared is not the same
                same = False
            if same:
                del self.loaded_writes[i]
                return True
        return False

    def _drop_carried(self) -> None:
        """LangGraph saves a fork checkpoint only when a run goes back to an earlier checkpoint
        (time travel), and such a run reruns that step's tasks: their earlier writes are not applied."""
        for key in [k for k, acc in self._tasks.items() if acc.carried]:
            del self._tasks[key]

    def _place_events(self) -> None:
        keep = []
        for ns, cp, ev in self._loose_events:
            if cp in self._cp_step:
                self._events.setdefault((ns, self._cp_step[cp] + 1), []).append(ev)
            else:
                keep.append((ns, cp, ev))
        self._loose_events = keep

    def on_checkpoint(
        self, ns: str, checkpoint: Mapping[str, Any], metadata: Mapping[str, Any], parent_id: str | None, new_versions: Mapping[str, Any], *, made_at: float | None = None
    ) -> None:
        """A superstep finished in ``ns``: queue it; it is written once its tasks' writes are in.

        ``made_at``: when LangGraph made the checkpoint. Its saver hears of it later, in the
        background while the next step runs, so that is the step's time: a call made in a
        subgraph is placed in the step that was running by it. Used only if it falls in this
        run, after the namespace's step before (a checkpoint it goes on from is older).
        """
        now = time.time()
        with self._lock:
            step = int(metadata.get("step", -1))
            cp_id = checkpoint["id"]
            self._cp_step[cp_id] = step
            prev = self._last_cp.get(ns)
            if prev is None and ns == "":
                self.learn(checkpoint.get("channel_values"))  # a thread's state from runs before this one
            if made_at is not None and max(self._opened, prev[1] if prev else 0.0) <= made_at < now:
                now = made_at
            self._last_cp[ns] = (cp_id, now)
            duration = (now - prev[1]) * 1000 if prev else None
            values = checkpoint.get("channel_values", {})
            updated = checkpoint.get("updated_channels") or list(new_versions)
            untracked = self.graph.for_ns(ns).untracked
            if untracked and any(k in untracked for k in values):
                # Only a replay's seed (a restored checkpoint) holds these: what the channels hold now.
                self._untracked_now.setdefault(ns, {}).update({k: v for k, v in values.items() if k in untracked})
            if metadata.get("source") == "input":
                values = snapshot(values)  # the caller's own objects, which the run goes on to change in place
                if ns == "" and self.passed_input is not _NOT_PASSED and START in values:
                    values[START] = self.passed_input  # as passed, whenever this checkpoint reaches the saver
            else:
                values = self._copies.of(ns, values, updated)  # encoded later: as they are now
            info = (
                step,
                cp_id,
                parent_id,
                now,
                duration,
                values,
                checkpoint.get("channel_versions", {}),
                checkpoint.get("versions_seen", {}),
                updated,
                metadata.get("source"),
            )
            self._ready.setdefault(ns, {})[step] = info
            if ns == "":
                if metadata.get("source") == "fork":
                    self._drop_carried()
                self.max_step = max(self.max_step, step - self.step_shift)  # as stored: a fork keeps the original's numbers
            if self._loose_events:
                self._place_events()
            self._drain(ns, force=False)

    def _drain(self, ns: str, force: bool) -> None:
        """Write the ready steps of ``ns`` in order, once their tasks have all reported."""
        ready = self._ready.get(ns)
        while ready:
            step = min(ready)
            tasks = [a for (n, _), a in self._tasks.items() if n == ns and self._step_of(a) == step]
            if not force and any(not a.has_writes and a.error is None for a in tasks):
                return
            info = ready.pop(step)
            for acc in tasks:
                del self._tasks[(ns, acc.task_id)]
            deltas = self.graph.for_ns(ns).deltas
            if deltas:
                info = self._with_deltas(ns, deltas, info, tasks)
            self._emit_step(ns, info, tasks, self._events.pop((ns, step), []))

    # -- DeltaChannel state ------------------------------------------------------
    def delta_seed_wanted(self, ns: str, checkpoint: Mapping[str, Any]) -> list[str]:
        """Before a checkpoint of ``ns`` is reported: if it is the namespace's first in this run,
        the delta channels whose value where the run goes on from only the saver can rebuild
        (its ``get_delta_channel_history`` there). Usually none."""
        with self._lock:
            specs = self.graph.for_ns(ns).deltas
            return DeltaValues.wanted(specs, checkpoint) if specs and ns not in self._last_cp else []

    def seed_deltas(self, ns: str, names: list[str], histories: Any = None, error: BaseException | None = None) -> None:
        """What the saver rebuilt for ``names``; or, if it could not (``error``), they are left
        out of the states until a snapshot: unknown, never recorded wrong."""
        with self._lock:
            if error is None:
                try:
                    self._deltas.seed(ns, self.graph.for_ns(ns).deltas, histories)
                    return
                except Exception as exc:  # noqa: BLE001 - the user's reducer, replaying the saver's writes
                    error = exc
            self._deltas.lose(ns, names)
            if self.strict:
                raise error
            self.fault(f"delta channels {names}: {type(error).__name__}: {error}")

    def _with_deltas(self, ns: str, deltas: Mapping[str, Any], info: tuple, tasks: list[TaskAcc]) -> tuple:
        """``info`` with the delta channels' values in its state, rebuilt from the writes that made
        the step: a resume's ``Command`` update first, then the tasks' in task-path order."""
        values, versions, parent_id = info[5], info[6], info[2]
        ordered = sorted(tasks, key=lambda a: (a.path, a.task_id))
        batches = [self._null_deltas.pop((ns, parent_id), []), [w for a in ordered for w in a.writes]]
        rebuilt, errors = self._deltas.advance(ns, deltas, values, versions, batches)
        for why in errors:
            if self.strict:
                from graphtape.recorder.errors import RecorderFault

                raise RecorderFault(f"graphtape could not rebuild a {why}")
            self.fault(why)
        touched = {ch for writes in batches for ch, _ in writes} | {k for k in deltas if k in values}
        plain = {k: v for k, v in values.items() if k not in deltas}
        plain.update(self._delta_copies.of(ns, rebuilt, touched))
        return (*info[:5], plain, *info[6:])

    def _emit_step(self, ns: str, info: tuple, tasks: list[TaskAcc], events: list[dict]) -> None:
        step, cp_id, parent_id, now, duration, values, versions, seen, updated, source = info
        self._seq += 1
        seq = self._seq
        values = self._with_untracked(ns, values, tasks)
        frames = self._frames.get(ns)
        if frames is None:
            frames = self._frames[ns] = FrameBuilder(self.encoder.encode)

        kids = self._kids(ns, tasks)

        # Work items run one at a time on the writer (thread or lock), which alone
        # touches the encoder, frame builders and pending blobs: no session lock
        # here, so the graph's callbacks never wait on encoding.
        def work() -> Batch:
            try:
                with self.encoder.packets_once():
                    frame, is_key = frames.build(self._hide_secret_channels(values), versions, seen, updated, _size)
                    row = self._step_row(ns, seq, step, source, cp_id, parent_id, now, duration, tasks, events, frame, is_key, kids)
            except BaseException:
                # This step is lost (counted by the writer): the next frame must not be a delta on it.
                frames.force_key()
                raise
            batch = Batch(steps=[row], blobs=self._take_blobs())
            if now - self._beat > HEARTBEAT_S:
                # Readers on other hosts tell a live long run from a dead one by this.
                self._beat = now
                batch.runs_update.append((self.run_id, {"heartbeat_at": now, "step_count": max(self.max_step + 1, 0)}))
            return batch

        self.writer.submit(for_run(work, self.run_id, steps=1))

    def _with_untracked(self, ns: str, values: Mapping[str, Any], tasks: list[TaskAcc]) -> Mapping[str, Any]:
        """The step's state with the values its never-checkpointed channels hold (langchain's per-run
        call counters): LangGraph keeps them out of checkpoints, but the graph sees them, and a replay
        or a fixture that starts after this step must hand them back. Only plain data (numbers,
        text, lists and dicts of them) is kept: a live resource held there cannot be restored."""
        held = self._untracked_now.setdefault(ns, {})
        for acc in tasks:
            held.update({k: v for k, v in acc.untracked.items() if _plain_data(v)})
        return {**values, **held} if held else values

    def _hide_secret_channels(self, values: Mapping[str, Any]) -> Mapping[str, Any]:
        """State channels named like secrets (``openai_api_key``, ``db_password``) are stored redacted,
        as a secret under a mapping key is: a channel is the state's top-level key."""
        keys = values.keys()
        if keys <= self._plain_channels:
            return values  # the usual case: every channel already judged not a secret
        secret = self.redactor.is_secret_key
        if not any(secret(k) for k in keys):
            self._plain_channels.update(keys)
            return values
        out = {}
        for k, v in values.items():
            if secret(k) and v is not None and not (type(v) is str and not v):
                if k not in self._hidden_channels:  # counted once per channel, not once per step
                    self._hidden_channels.add(k)
                    self.redactor.mark()
                v = MARK
            out[k] = v
        return out

    # -- callback side ---------------------------------------------------------
    def on_node_start(self, ns: str, task_id: str, node: str, step: int | None) -> None:
        with self._lock:
            acc = self._task(ns, task_id)
            if acc.carried:  # it runs after all (time travel to a checkpoint LangGraph does not fork)
                acc.carried, acc.has_writes = False, False
                acc.writes.clear()
            if acc.seen_callback and acc.duration_ms is not None:
                # The same task starting again: a RetryPolicy retry. The attempt before is kept
                # (number, error, duration); the task's outcome is its last attempt's.
                acc.attempts.append(
                    {
                        "n": len(acc.attempts) + 1,
                        "et": type(acc.error).__name__ if acc.error is not None else None,
                        "em": _message(acc.error) if acc.error is not None else None,
                        "ms": round(acc.duration_ms, 3),
                    }
                )
                acc.error, acc.error_frames, acc.output, acc.duration_ms, acc.untracked = None, None, None, None, {}
            acc.node = node
            if step is not None:
                acc.step = step
            acc.seen_callback = True
            acc.t0 = time.time()
            acc.perf0 = time.perf_counter()

    def on_node_end(self, ns: str, task_id: str, output: Any, error: BaseException | None) -> None:
        with self._lock:
            acc = self._tasks.get((ns, task_id))
            if acc is None:
                return
            if acc.perf0 is not None:
                acc.duration_ms = (time.perf_counter() - acc.perf0) * 1000
            acc.output = output
            acc.untracked = _untracked_writes(output, self.graph.for_ns(ns).untracked)
            if error is not None:
                name = type(error).__name__
                if name == "ParentCommand":
                    acc.parent_command = error.args[0] if error.args else None
                elif name not in NOT_FAILURES and acc.error is None:
                    self.learn_from_error(error)
                    acc.error = error
                    acc.error_frames = frames_of(error)

    def learn_from_error(self, error: BaseException) -> None:
        """The secrets a failed SQL statement was bound with, named by their columns, hidden in
        the error's text and fields (and the rest of the run) like those a call is handed."""
        seen = 0
        try:
            while error is not None and seen < _ERROR_CHAIN:
                bound = bound_by_name(error)  # reads attributes: an odd error's may raise
                if bound:
                    self.learn(bound)
                error = error.__cause__ or error.__context__  # a tool's error raised from the driver's
                seen += 1
        except Exception as exc:  # noqa: BLE001 - the error is recorded all the same
            self.fault(f"learning secrets by value: {type(exc).__name__}")  # its text may quote them

    def learn(self, values: Any) -> None:
        """Remember the secrets ``values`` holds under secret keys (a call's inputs, the run's
        input and config, a task's writes), to hide them by value wherever the run quotes them
        afterwards: a node that writes ``{"api_key": key}`` and a later ``f"calling with {key}"``."""
        learn = getattr(self.redactor, "learn", None)  # a RunRedactor's (learned_secrets)
        if learn is None:
            return
        try:
            learn(values)
        except Exception as exc:  # noqa: BLE001 - the run is recorded all the same
            self.fault(f"learning secrets by value: {type(exc).__name__}")  # its text may quote them

    def on_router_end(self, ns: str, task_id: str, router: str, returned: Any) -> None:
        with self._lock:
            self._task(ns, task_id).routers.append((router, returned))

    def begin_call(self, call_id: str, record: dict) -> None:
        # A secret the call is handed by name is hidden by value in what comes back (its error
        # quoting it, its answer echoing it) and in what the run records after.
        self.learn(record.get("inputs"))
        with self._lock:
            self._calls[call_id] = record
        if self.call_waits.may_wait(record["kind"], record["name"]):
            self.writer.wake()  # the graph will likely wait on it: the writer goes meanwhile

    def end_call(self, call_id: str, **fields: Any) -> None:
        with self._lock:
            rec = self._calls.pop(call_id, None)
            late = rec is None and call_id in self._unfinished
            if late:
                rec = self._unfinished.pop(call_id)
        if rec is None:
            return
        rec.update(fields)
        self.call_waits.took(rec["kind"], rec["name"], rec.get("latency_ms"))
        if late:
            # The call outlived its run (a timed-out tool thread): complete its row.
            def finish() -> Batch:
                update = {k: rec.get(k) for k in ("latency_ms", "error_type", "input_tokens", "output_tokens", "total_tokens")}
                update["output"] = _json(self.encoder.encode(rec.get("output")))
                update["error_message"] = self.redactor.scrub(rec["error_message"]) if rec.get("error_message") else None
                update["traceback"] = _json(scrubbed_frames(rec["traceback"], self.redactor.scrub)) if rec.get("traceback") else None
                if not rec.get("error_type"):
                    update["error_type"] = None
                return Batch(calls_update=[(call_id, update)], blobs=self._take_blobs())

            self.writer.submit(finish)
            return
        # Sync durability: committed with its superstep (or the run's end), not alone.
        self.writer.submit(self._call_work(call_id, rec), with_next=True)

    def flush_open_calls(self) -> None:
        """Write calls still running at run end, marked unfinished; a late return completes them."""
        with self._lock:
            still = list(self._calls.items())
            self._calls.clear()
            self._unfinished.update(still)
        for call_id, rec in still:
            rec = dict(rec)
            rec.setdefault("error_type", "Unfinished")
            rec.setdefault("error_message", "the call had not returned when the run ended")
            self.writer.submit(self._call_work(call_id, rec))

    def _call_work(self, call_id: str, rec: dict):
        enc = self.encoder.encode

        def work() -> Batch:
            inputs = _json(enc(rec.get("inputs")))
            output = _json(enc(rec.get("output")))
            if "returned" in rec:
                self.encoder.same_as(rec["returned"], rec["output"])
            row = {
                "run_id": self.run_id,
                "ns": rec["ns"],
                "step": rec["step"] - self.step_shift if rec["ns"] == "" and rec["step"] is not None else rec["step"],
                "task_id": rec["task_id"],
                "node": rec["node"],
                "call_id": call_id,
                "parent_call_id": rec.get("parent_call_id"),
                "kind": rec["kind"],
                "name": rec["name"],
                "inputs": inputs,
                "output": output,
                "error_type": rec.get("error_type"),
                "error_message": self.redactor.scrub(rec["error_message"]) if rec.get("error_message") else None,
                "traceback": _json(scrubbed_frames(rec["traceback"], self.redactor.scrub)) if rec.get("traceback") else None,
                "started_at": rec["started_at"],
                "latency_ms": rec.get("latency_ms"),
                "input_tokens": rec.get("input_tokens"),
                "output_tokens": rec.get("output_tokens"),
                "total_tokens": rec.get("total_tokens"),
                "streamed": bool(rec.get("streamed")),
            }
            return Batch(calls=[row], blobs=self._take_blobs())

        return for_run(work, self.run_id, calls=1)

    def call_record(self, call_id: str) -> dict | None:
        """The open (or written-as-unfinished) call with this id."""
        with self._lock:
            return self._calls.get(call_id) or self._unfinished.get(call_id)

    def is_call(self, run_id: str) -> bool:
        return run_id in self._calls

    def mark_streamed(self, call_id: str) -> None:
        rec = self._calls.get(call_id)
        if rec is not None:
            rec["streamed"] = True

    # -- run end -------------------------------------------------------------
    def flush_pending(self) -> None:
        """Store steps that started but never checkpointed (interrupt, error, kill)."""
        with self._lock:
            for ns in sorted(self._ready, key=lambda n: (n.count("|"), n)):
                self._drain(ns, force=True)
            groups: dict[tuple[str, int], list[TaskAcc]] = {}
            for acc in list(self._tasks.values()):
                if self._step_of(acc) is None:
                    continue
                groups.setdefault((acc.ns, acc.step), []).append(acc)
            self._tasks.clear()
            for (ns, step) in list(self._events):
                if step is not None:
                    groups.setdefault((ns, step), [])
            pending = []
            for (ns, step), tasks in sorted(groups.items(), key=lambda kv: (kv[0][0].count("|"), kv[0][0], kv[0][1])):
                events = self._events.pop((ns, step), [])
                self._seq += 1
                pending.append((ns, step, self._seq, tasks, events, self._kids(ns, tasks)))
                if ns == "" and any(t.interrupts for t in tasks):
                    self.root_interrupted = True
            now = time.time()

        def work() -> Batch:
            with self.encoder.packets_once():
                rows = [self._step_row(ns, seq, step, None, None, None, now, None, tasks, events, None, False, kids) for ns, step, seq, tasks, events, kids in pending]
            return Batch(steps=rows, blobs=self._take_blobs())

        if pending:
            self.writer.submit(for_run(work, self.run_id, steps=len(pending)))

    def forget(self) -> None:
        self.encoder.forget()
        forget_ran(self)
        self._frames.clear()
        self._copies.forget()
        self._delta_copies.forget()

    # -- building rows ---------------------------------------------------------
    def _kids(self, ns: str, tasks: list[TaskAcc]) -> dict[str, list[str]]:
        out = {}
        for acc in tasks:
            found = self._children.pop(acc.task_id, None)
            if found:
                out[acc.task_id] = list(found)
        return out

    def _step_row(
        self,
        ns: str,
        seq: int,
        step: int,
        source: str | None,
        cp_id: str | None,
        parent_id: str | None,
        now: float,
        duration: float | None,
        tasks: list[TaskAcc],
        events: list[dict],
        frame: dict | None,
        is_key: bool,
        kids: dict[str, list[str]],
    ) -> dict:
        enc = self.encoder.encode
        flags = 0 if frame is not None else FLAG_PENDING
        task_rows = []
        routes: list[dict] = []
        ev_rows = [{"kind": e["kind"], "v": enc(e.get("v"))} for e in events]
        if ev_rows:
            flags |= FLAG_RESUME
        if len(tasks) > 1:
            tasks = sorted(tasks, key=lambda a: (a.path, a.task_id))
        # One interrupt can surface in two tasks (a @task, and the entrypoint waiting on it):
        # it is one event, the innermost task's (the longest path).
        owner: dict[Any, TaskAcc] = {}
        for acc in tasks:
            for it in acc.interrupts:
                key = getattr(it, "id", None) or id(it)
                if key not in owner or len(acc.path) > len(owner[key].path):
                    owner[key] = acc
        for acc in tasks:
            row: dict[str, Any] = {"id": acc.task_id, "node": acc.node or "?", "path": acc.path}
            # A functional-API @task's result is its write to __return__: kept, shown as its update.
            update = {ch: v for ch, v in acc.writes if ch == RETURN or (not ch.startswith(BRANCH) and ch not in _CONTROL_CHANNELS and not ch.startswith("join:"))}
            update.update(acc.untracked)
            if update:
                row["w"] = enc(update)
            if acc.t0 is not None:
                row["dt"] = round((now - acc.t0) * 1000, 2)
            if acc.duration_ms is not None:
                row["ms"] = round(acc.duration_ms, 3)
            if acc.error is not None:
                row["et"] = type(acc.error).__name__
                row["em"] = self.redactor.scrub(_message(acc.error))[:_MESSAGE_KEPT]  # scrubbed, then cut: a key across the cut is whole
                if acc.error_frames:
                    row["tb"] = scrubbed_frames(acc.error_frames, self.redactor.scrub)
                flags |= FLAG_ERROR
            if acc.attempts:
                row["att"] = [{**a, "em": self.redactor.scrub(a["em"])[:_MESSAGE_KEPT] if a.get("em") else None} for a in acc.attempts]
            if acc.interrupts:
                row["i"] = enc(list(acc.interrupts))
                flags |= FLAG_INTERRUPT
            if acc.resumes:
                flags |= FLAG_RESUME
            # The answers so far came before this attempt's question (a node that asks twice).
            for r in acc.resumes:
                ev_rows.append({"kind": "resume", "v": enc(r), "task": acc.task_id, "node": acc.node})
            for it in acc.interrupts:
                if owner.get(getattr(it, "id", None) or id(it)) is acc:
                    ev_rows.append({"kind": "interrupt", "v": enc(getattr(it, "value", it)), "task": acc.task_id, "node": acc.node})
            if acc.carried:
                row["cw"] = enc(stored(acc.writes))
                flags |= FLAG_CARRIED
            elif not acc.seen_callback and acc.has_writes and acc.node not in (START, None) and acc.error is None and not acc.interrupts:
                row["c"] = True
            if acc.cache_key is not None:
                row["ck"] = [acc.cache_key, acc.cache_warm]
            if acc.task_id in kids:
                row["sub"] = kids[acc.task_id]
            task_rows.append(row)
            if acc.error is None and not acc.interrupts:
                routes.extend(self._routes(acc))
        if ev_rows and any(e["kind"] == "resume" and e.get("task") for e in ev_rows):
            ev_rows = [e for e in ev_rows if e["kind"] != "resume" or e.get("task")]
        first = last = None
        for a in tasks:
            if a.t0 is not None and a.duration_ms is not None:
                end = a.t0 + a.duration_ms / 1000
                first = a.t0 if first is None or a.t0 < first else first
                last = end if last is None or end > last else last
        if first is not None:
            duration = (last - first) * 1000
        nodes = ",".join(dict.fromkeys(t["node"] for t in task_rows))
        index = {t["id"]: i for i, t in enumerate(task_rows)}
        for items in (routes, ev_rows):
            for item in items:
                if "task" in item:
                    item["ti"] = index.get(item.pop("task"))
        payload = {"t": task_rows, "r": routes, "e": ev_rows}
        if frame is not None:
            payload["s"] = frame
        return {
            "run_id": self.run_id,
            "ns": ns,
            "seq": seq,
            "step": step - self.step_shift if ns == "" else step,
            "source": source,
            "checkpoint_id": cp_id,
            "parent_checkpoint_id": parent_id,
            "created_at": now,
            "duration_ms": duration,
            "is_key": is_key,
            "nodes": nodes,
            "writes": _written_keys(task_rows, tasks),
            "summary": _summary(routes, task_rows),
            "flags": flags,
            "payload": pack(payload),
        }

    def _routes(self, acc: TaskAcc) -> list[dict]:
        """Explain the task's branch writes and Send packets as route decisions."""
        enc = self.encoder.encode
        node = acc.node or "?"
        branch_dests = [ch[len(BRANCH) :] for ch, _ in acc.writes if ch.startswith(BRANCH)]
        # An edge from several nodes (``add_edge(["a", "b"], "c")``) is LangGraph's ``join:a+b:c``
        # channel: each source writes its name there, and the target runs once all have.
        branch_dests += [ch.split(":", 2)[2] for ch, _ in acc.writes if ch.startswith(JOIN) and ch.count(":") >= 2]
        sends = [v for ch, v in acc.writes if ch == TASKS]
        explained: set[str] = set()
        send_ids: set[int] = set()
        out: list[dict] = []
        graph = self.graph.for_ns(acc.ns)  # a subgraph's routers are its own
        path_maps = graph.router_names(node)
        for router, returned in acc.routers:
            values = returned if isinstance(returned, list) else [returned]
            dests: list[str] = []
            packets = []
            for v in values:
                if _is_send(v):
                    packets.append(v)
                    send_ids.add(id(v))
                    continue
                ends = path_maps.get(router)
                key = _route_key(v)
                dest = ends.get(key, key) if ends else key
                dests.append(END if dest in ("END", END) else dest)
            explained.update(dests)
            kind = "send" if packets and not dests else "conditional"
            d = {"src": node, "kind": kind, "router": router, "ret": enc(returned), "dest": dests + [p.node for p in packets], "task": acc.task_id}
            if packets:
                d["sends"] = [{"node": p.node, "arg": _packet_arg(enc, p)} for p in packets]
            out.append(d)
        for cmd in _commands(acc.output):
            gotos = cmd.goto if isinstance(cmd.goto, (list, tuple)) else ([cmd.goto] if cmd.goto else [])
            dests = [g for g in gotos if isinstance(g, str)]
            packets = [g for g in gotos if _is_send(g)]
            send_ids.update(id(p) for p in packets)
            explained.update(dests)
            d = {"src": node, "kind": "command", "router": None, "ret": enc({"goto": cmd.goto, "update": cmd.update}), "dest": dests + [p.node for p in packets], "task": acc.task_id}
            if packets:
                d["sends"] = [{"node": p.node, "arg": _packet_arg(enc, p)} for p in packets]
            if dests or packets:
                out.append(d)
        if acc.parent_command is not None:
            cmd = acc.parent_command
            gotos = cmd.goto if isinstance(cmd.goto, (list, tuple)) else ([cmd.goto] if cmd.goto else [])
            dests = [g if isinstance(g, str) else g.node for g in gotos]
            explained.update(dests)  # the parent's branch write for the same handoff is this route, not another
            out.append(
                {
                    "src": node,
                    "kind": "parent-command",
                    "router": None,
                    "ret": enc({"goto": cmd.goto, "update": cmd.update, "graph": ns_names(cmd.graph)}),
                    "dest": dests,
                    "task": acc.task_id,
                }
            )
        loose_sends = [s for s in sends if id(s) not in send_ids]
        if loose_sends:
            # Sends nothing explained: a router whose callback never fired (agent middleware edges).
            via = graph.router_to(node, loose_sends[0].node)
            out.append({"src": node, "kind": "send", "router": via, "dest": [s.node for s in loose_sends], "sends": [{"node": s.node, "arg": _packet_arg(enc, s)} for s in loose_sends], "task": acc.task_id})
        static = [d for d in branch_dests if d not in explained]
        decided = [d for d in static if (node, d) not in graph.edges and graph.router_names(node)]
        if decided:
            # A branch write no static edge explains came from one of the node's routers, one that
            # ran without a callback; jump_to in the node's update names why (agent middleware).
            static = [d for d in static if d not in decided]
            jump = next((v for ch, v in acc.writes if ch == "jump_to"), None)
            for dest in decided:
                d = {"src": node, "kind": "conditional", "router": graph.router_to(node, dest), "dest": [dest], "task": acc.task_id}
                if jump is not None:
                    d["ret"] = enc({"jump_to": jump})
                out.append(d)
        ends_here = graph.ends_here(node)
        if not out and not static and not branch_dests and acc.error is None and ends_here:
            # LangGraph writes nothing for an edge to END, nor for a node that may end the run
            # (its declared destinations hold END) or that has no way on: the run ended here.
            static = [END]
        if not out and not static and not branch_dests and graph.router_names(node) and not acc.routers and acc.has_writes and acc.error is None:
            # A router without a callback that sent the run to END writes nothing at all.
            static = []
            out.append({"src": node, "kind": "conditional", "router": graph.router_to(node, END), "dest": [END], "task": acc.task_id})
        if static:
            out.append({"src": node, "kind": "static", "router": None, "dest": static, "task": acc.task_id})
        return out


def ns_names(ns: Any) -> Any:
    """``"alice:<task id>|tools:<task id>"`` -> ``"alice|tools"``: a namespace without the task
    ids LangGraph draws afresh every run, so the same route reads the same in every run."""
    if not isinstance(ns, str) or ":" not in ns:
        return ns
    return "|".join(part.split(":", 1)[0] for part in ns.split("|"))


def _written_keys(task_rows: list[dict], tasks: list[TaskAcc]) -> str:
    keys: dict[str, None] = {}
    for acc in tasks:
        for ch, _ in acc.writes:
            if not ch.startswith(BRANCH) and ch not in _CONTROL_CHANNELS and not ch.startswith("join:"):
                keys[ch] = None
    return "," + ",".join(keys) + "," if keys else ""


def _untracked_writes(output: Any, untracked: frozenset[str]) -> dict[str, Any]:
    """What a node wrote to never-checkpointed channels: LangGraph keeps those writes from the
    saver, so they are read from the node's returned update (a dict or a Command's)."""
    if not untracked:
        return {}
    found: dict[str, Any] = {}
    for item in output if isinstance(output, (list, tuple)) else [output]:
        update = item.update if type(item).__name__ == "Command" else item
        if isinstance(update, dict):
            found.update({k: containers(v) for k, v in update.items() if k in untracked})
    return found


def _plain_data(value: Any, depth: int = 0) -> bool:
    if value is None or type(value) in (bool, int, float, str):
        return True
    if depth > 8:
        return False
    if type(value) in (list, tuple):
        return all(_plain_data(v, depth + 1) for v in value)
    if type(value) is dict:
        return all(type(k) is str and _plain_data(v, depth + 1) for k, v in value.items())
    return False


def _packet_arg(enc: Any, packet: Any) -> Any:
    """A Send's argument as encoded with the packet (met once per step, see ``packets_once``)."""
    tree = enc(packet)
    if isinstance(tree, dict) and tree.get("$t") == "lg.send" and "arg" in tree:
        return tree["arg"]
    return enc(packet.arg)


def _route_key(v: Any) -> str:
    return v if isinstance(v, str) else str(v)


def task_path(path: Any) -> str:
    """A task's path as LangGraph writes it with the task's writes (``~__pregel_pull, agent``)."""
    try:
        from langgraph.pregel._algo import task_path_str
    except ImportError:  # moved in another LangGraph version: the path is only shown
        return str(path)
    return task_path_str(path)


def _commands(output: Any) -> list[Any]:
    items = output if isinstance(output, (list, tuple)) else [output]
    return [o for o in items if type(o).__name__ == "Command" and hasattr(o, "goto")]


_MESSAGE_KEPT = 4000  # characters of an error message stored


def _message(exc: BaseException) -> str:
    if exc.args and type(exc.args[0]) is object:
        # A cancellation whose message is a bare sentinel (LangGraph cancels a step's
        # tasks with ``task.cancel(object())``): its repr is an address, another every run.
        return type(exc).__name__
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001
        text = ""
    return (text or type(exc).__name__)[: 25 * _MESSAGE_KEPT]  # cut to _MESSAGE_KEPT once scrubbed


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _summary(routes: list[dict], tasks: list[dict]) -> str:
    parts = []
    for r in routes:
        dest = ", ".join(dict.fromkeys(r["dest"])) or END
        ti = r.get("ti")
        if isinstance(ti, int) and 0 <= ti < len(tasks) and tasks[ti].get("c"):
            parts.append(f"{r['src']} → {dest} (from LangGraph's cache)")  # neither the node nor its router ran
        elif isinstance(ti, int) and 0 <= ti < len(tasks) and "cw" in tasks[ti]:
            parts.append(f"{r['src']} → {dest} (carried from an earlier run)")  # it ran there, before another task failed
        elif r["kind"] == "conditional" and "ret" not in r:
            parts.append(f"{r['src']} → {dest} (decided by {r['router']})")  # a router that reports no return value
        elif r["kind"] == "conditional":
            parts.append(f"{r['src']} → {dest} ({r['router']} returned {_short_plain(r.get('ret'))})")
        elif r["kind"] == "send":
            via = f" via {r['router']}" if r.get("router") else ""
            parts.append(f"{r['src']} ⇉ {len(r.get('sends', []))}× {dest}{via}")
        elif r["kind"] == "command":
            parts.append(f"{r['src']} → {dest} (Command goto)")
        elif r["kind"] == "parent-command":
            parts.append(f"{r['src']} → parent {dest} (Command.PARENT)")
        else:
            parts.append(f"{r['src']} → {dest}")
    for t in tasks:
        if t.get("et"):
            parts.append(f"{t['node']} ✗ {t['et']}")
        if t.get("i"):
            parts.append(f"{t['node']} ⏸ interrupt")
    return "; ".join(dict.fromkeys(parts))


def _short_plain(enc_value: Any) -> str:
    if isinstance(enc_value, dict) and "$t" in enc_value:
        return "Send(...)" if enc_value.get("$t") == "lg.send" else "…"
    if isinstance(enc_value, list):
        return "[" + ", ".join(_short_plain(v) for v in enc_value[:4]) + (", …" if len(enc_value) > 4 else "") + "]"
    return _short(enc_value)


def _json(tree: Any) -> str:
    return json_bytes(tree).decode()


def _size(frame: dict) -> int:
    return len(json_bytes(frame))


def host_and_pid() -> tuple[str, int]:
    return socket.gethostname(), os.getpid()
