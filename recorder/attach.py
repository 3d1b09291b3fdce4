"""``Recorder``: attach graphtape to a compiled LangGraph graph.

``attach`` returns a copy of the graph whose class overrides only ``stream``
and ``astream``; every other entry point (invoke, batch, astream_events,
stream_events, with_config copies) goes through those two, so each
invocation becomes a recorded run. The copy's checkpointer is a tee over the
user's own, and a callback handler is added to the run's config. Nothing the
graph returns changes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import os
import platform
import re
import secrets
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from typing import Any, NamedTuple

import orjson
from langchain_core.callbacks import BaseCallbackManager
from langgraph.cache.base import BaseCache
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.constants import CONFIG_KEY_CHECKPOINTER
from langgraph.store.base import BaseStore

from graphtape.recorder import http_capture, inline_saves, run_gate
from graphtape.recorder.cache_hits import HitNamingCache
from graphtape.recorder.call_waits import CallWaits
from graphtape.recorder.capture import CaptureHandler
from graphtape.recorder.choices import Choice
from graphtape.recorder.env_secrets import env_secret_patterns
from graphtape.recorder.errors import GraphtapeError, RecorderFault, SchemaVersionError, StoreError
from graphtape.recorder.fault_hints import fault_hint
from graphtape.recorder.graph_info import GraphInfo, describe
from graphtape.recorder.graph_origin import Origin, display_name, origin_of
from graphtape.recorder.learned_secrets import RunRedactor
from graphtape.recorder.lone_surrogates import json_bytes
from graphtape.recorder.printed_modes import PrintedCheckpoints, printed_modes
from graphtape.recorder.redaction import Redactor
from graphtape.recorder.saver import RUN_KEY, RunScopedSaver, TeeSaver
from graphtape.recorder.session import ERROR, INTERRUPT, NULL_TASK_ID, RunSession, host_and_pid, task_path
from graphtape.recorder.snapshots import snapshot
from graphtape.recorder.store import Batch, RunStore, SqlStore
from graphtape.recorder.store.connection import check_url
from graphtape.recorder.store.sql_store import for_writing, is_not_a_store, open_for_writing
from graphtape.recorder.store.urls import shown_url
from graphtape.recorder.store_opening import START_WAIT_S, BackgroundOpen
from graphtape.recorder.store_capture import RecordingStore, runtime_recording_store, unwrapped
from graphtape.recorder.stream_view import CHECKPOINT_MODES, StreamShape, awithout_checkpoints, awithout_key, without_checkpoints, without_key
from graphtape.recorder.thread_keys import run_thread, stored_thread_id
from graphtape.recorder.waiting_subgraphs import waiting_subgraphs
from graphtape.recorder.writer import CLOSE_WAIT_S, LOCK_WAIT_S, Writer, in_forked_child

try:
    from langgraph._internal._constants import CONFIG_KEY_RUNTIME
except ImportError:  # another LangGraph layout: the key it has used since Runtime came in
    CONFIG_KEY_RUNTIME = "__pregel_runtime"
try:
    from langgraph._internal._config import ensure_config as _langgraph_config
except ImportError:  # another LangGraph layout: LangChain's merge, which inherits the same way
    from langchain_core.runnables.config import ensure_config as _lc_ensure_config

    def _langgraph_config(*configs: Any) -> Any:
        return _lc_ensure_config(next((c for c in reversed(configs) if c), None))


class Durability(Choice):
    """When recorded supersteps reach the database (LangGraph's names)."""

    ASYNC = "async"  # background writer; the graph never waits on the database
    SYNC = "sync"  # each superstep is committed before the next one starts
    # Written when the run ends (or at flush/close): cheapest for a graph that never waits
    # (a replay); a crash mid-run loses that run, as LangGraph's "exit" loses its checkpoints.
    EXIT = "exit"


class Carried(NamedTuple):
    """A task that finished in a run that then failed: ``invoke(None)`` goes on with its writes
    (LangGraph's pending writes) and does not run it again."""

    task_id: str
    node: str
    path: str
    writes: tuple[tuple[str, Any], ...]


@dataclasses.dataclass(frozen=True)
class Lineage:
    """Where a replayed or forked run comes from (written on its run row).

    ``seed`` is the checkpoint the run resumes from, as ``(checkpoint,
    metadata, parent_id)``: recorded as the run's first step, so the new run
    shows the state it started with and can be diffed from there. ``carried``
    are the tasks of the step after it that LangGraph will not run, their
    writes being an earlier run's (see ``Carried``).
    """

    parent_run_id: str
    step: int
    edit: Any = None
    seed: tuple[Any, Any, str | None] | None = None
    # A fork's edit is a superstep of its own (LangGraph's update_state): the root steps after
    # it are stored this many lower, so the fork's steps carry the original run's numbers.
    step_shift: int = 0
    graph_name: str | None = None  # the source run's graph name, kept by its replays and forks
    # The recursion limit the run's graph sees; a replay gives only its root loop a lower one
    # (to end at the recorded step), and the run's config keeps the recorded number.
    recursion_limit: int | None = None
    carried: tuple[Carried, ...] = ()
    # The thread the run is stored and looked up under. A replay's graph runs on the thread id
    # its recording saw (a node may read it), but that thread is the recorded runs': a live
    # resume on it must find them, never the replay.
    thread_key: str | None = None
    # Checkpoints put back beside the seed (what a subgraph with memory of its own remembered), by
    # id, with their steps: a task that starts from one is numbered after it, as it was recorded.
    known_steps: Mapping[str, int] = dataclasses.field(default_factory=dict)


_log = logging.getLogger("graphtape")
_STREAM_KW_DURABILITY = "durability"
_STREAM_KW_CONTEXT = "context"
_TASK_KEYS = ("__pregel_task_id", "__pregel_scratchpad")
# Said once with a store Recorder() cannot open: the run goes on, and this is how to record elsewhere.
OPEN_HINT = " (runs are kept and written once it opens; to record elsewhere, pass Recorder(PATH_OR_URL) or set $GRAPHTAPE_DB)"


class Recorder:
    """Records every run of the graphs it is attached to into one store.

    ``Recorder()`` writes to ``$GRAPHTAPE_DB`` or ``./graphtape.db``; pass a
    path or a SQLAlchemy URL (``postgresql+psycopg://...``) to choose.
    ``strict=True`` raises recorder faults instead of counting them.
    ``http=False`` leaves the HTTP requests a run's own code makes unrecorded
    (see ``http_capture``).

    A store that is down, missing, read-only or locked never stops the graph:
    ``Recorder(...)`` warns once and keeps trying to open it, and rows the
    store does not take are kept and written once it does. A server that does
    not answer holds ``Recorder(...)`` at most 2 s: the open goes on in the
    background. ``sync`` waits for
    a locked store at most ``lock_wait`` seconds (default 2) before the run
    goes on and its rows are left to the background retry. Each such fault is
    counted (``fault_count``, and on the run, shown by the TUI's ``i``). Only a
    ``db`` that names no usable store (not a path or URL, another backend, a
    store of another schema version) raises here.

    ``store`` records into a store already open instead of opening ``db``
    (a replay records beside the store it reads: ``SqlStore.beside``); the
    recorder closes it when it closes.
    """

    def __init__(
        self,
        db: str | os.PathLike | None = None,
        *,
        durability: str | Durability = Durability.ASYNC,
        strict: bool = False,
        redact_patterns: str | re.Pattern[str] | Iterable[str | re.Pattern[str]] = (),
        redact_keys: str | Iterable[str] = (),
        http: bool = True,
        lock_wait: float = LOCK_WAIT_S,
        store: SqlStore | None = None,
    ) -> None:
        self.durability = Durability.parse(durability)
        self.http = http
        self.strict = strict
        self.redact_keys = _as_tuple(redact_keys)
        self.redact_patterns = _as_tuple(redact_patterns)
        Redactor(self.redact_patterns, self.redact_keys)  # a bad pattern fails here, not mid-run
        # Text redacted when it was recorded, handed back by a replay: not scanned again (set by replay).
        self.known_clean_text: frozenset[str] = frozenset()
        # Where this recorder's warnings go instead of the graphtape logger (set by replay, which
        # says in its own one line why it could not be recorded).
        self.warnings_to: Callable[[str], None] | None = None
        if lock_wait <= 0:
            raise ValueError(f"lock_wait must be a positive number of seconds, got {lock_wait!r}")
        self._sessions: dict[str, RunSession] = {}
        self._call_waits = CallWaits()  # which calls runs wait on: when the writer is woken
        self._recent: weakref.WeakValueDictionary[str, RunSession] = weakref.WeakValueDictionary()
        self._lock = threading.Lock()
        self._interrupted: dict[tuple[str, str], str] = {}
        self._warned: set[str] = set()
        self.last_run_id: str | None = None
        self.fault_count = 0
        if store is not None and db is not None:
            raise ValueError("Recorder takes a db or an open store, not both")
        given, store = store, None
        url = given.url if given is not None else check_url(db)  # a db that names no store raises; one that cannot be reached yet does not
        self._shown_url = shown_url(url)  # for repr: where it records, never the password
        open_error: StoreError | None = None
        opener: Callable[..., SqlStore] = lambda: open_for_writing(url)  # noqa: E731
        try:
            if given is not None:
                store = for_writing(given)
            elif url.startswith("sqlite"):
                store = opener()
            else:
                # A server that does not answer holds a connect for its whole timeout: the program
                # goes on after START_WAIT_S at most, the open in the background (the writer asks again).
                opener = BackgroundOpen(opener, f"cannot open {shown_url(url)}").attempt
                store = opener(START_WAIT_S)
        except SchemaVersionError:
            raise
        except StoreError as exc:
            if strict or is_not_a_store(exc):
                raise
            open_error = exc
            self._write_fault(exc, None, False, hint=OPEN_HINT)
        self.writer = Writer(
            store,
            background=self.durability is not Durability.SYNC,
            hold=self.durability is Durability.EXIT,
            on_fault=self._write_fault,
            lock_wait=lock_wait,
            opener=opener,
            open_error=open_error,
            on_rows_lost=self._rows_lost,
        )

    def __repr__(self) -> str:
        return f"Recorder({self._shown_url!r}, durability={self.durability.value!r})"

    # -- public --------------------------------------------------------------
    def attach(self, graph: Any, *, name: str | None = None, tags: Iterable[str] = (), graph_ref: str | None = None, lineage: Lineage | None = None) -> Any:
        """Return a recorded copy of ``graph`` (the original is left untouched).

        ``graph_ref`` (``module:attr`` or ``path.py:attr``) lets replay, fork and
        exported fixtures find the graph again without ``--graph``. Left out, it is
        found when the first run starts if the module that called ``attach``
        holds the graph in a module-level attribute (``graph = rec.attach(...)``);
        pass it for a graph built inside a function. ``lineage`` is set by
        replay and fork.
        """
        if not hasattr(graph, "stream") or not hasattr(graph, "checkpointer") or not hasattr(graph, "copy"):
            raise TypeError(f"attach() needs a compiled LangGraph graph (builder.compile()), got {type(graph).__name__}")
        info = describe(graph)
        binding = _Binding(self, name or info.name, info, list(_as_tuple(tags)), graph_ref, lineage)
        binding.named = name is not None
        if self.http:
            try:
                http_capture.prepare()
            except Exception:  # noqa: BLE001 - the first run tries again, and records why it could not
                pass
        copy = self._bound(graph, binding)
        if graph_ref is None and lineage is None:  # a replay's graph is a fresh copy: no module holds it
            binding.origin = origin_of(graph, copy)
        return copy

    def _bound(self, graph: Any, binding: _Binding) -> Any:
        """A copy of ``graph`` recorded under ``binding``: its checkpointer teed (or one lent), its store recorded."""
        earlier = getattr(type(graph), "_graphtape_binding", None)
        base_cls = type(graph).__mro__[1] if earlier is not None else type(graph)
        own = graph.checkpointer
        if isinstance(own, TeeSaver):
            own = own.inner
        if earlier is not None and own is earlier.scoped:
            own = None  # lent by an earlier attach: not the graph's own
        update: dict[str, Any] = {}
        if isinstance(own, BaseCheckpointSaver):
            update["checkpointer"] = TeeSaver(own, self._session_for)
        else:
            binding.scoped = RunScopedSaver()
            binding.lent = TeeSaver(binding.scoped, self._session_for)
            # A graph without memory keeps none of its own: each run is lent this one through its
            # config (LangGraph's dev server refuses to serve a graph that holds a checkpointer).
            # checkpointer=False reads none from the config, and a lent one from an earlier attach
            # is replaced: there it is the graph's.
            if graph.checkpointer is not None:
                update["checkpointer"] = binding.lent
        if isinstance(getattr(graph, "store", None), BaseStore):
            # The graph's long-term memory: what its tasks read and write is recorded too.
            update["store"] = RecordingStore(unwrapped(graph.store))
            binding.records_store = True
        cache = getattr(graph, "cache", None)
        if isinstance(cache, BaseCache) and not isinstance(cache, HitNamingCache):
            update["cache"] = HitNamingCache(cache)  # a hit names the task it served (no callback does)
        copy = base_cls.copy(graph, update=update)
        copy.__class__ = _recorded_class(base_cls, binding)
        return copy

    def _rebound(self, graph: Any, like: _Binding) -> Any:
        """A copy of a recorded graph given another checkpointer or store (LangGraph's server
        lends each run its own): recorded like the graph it was copied from."""
        info = describe(graph)
        binding = _Binding(self, like.name if like.named else info.name, info, like.tags, like.graph_ref, like.lineage)
        binding.named, binding.origin = like.named, like.origin
        return self._bound(graph, binding)

    @property
    def store(self) -> RunStore:
        """The store runs are recorded into (``StoreError`` while it cannot be opened)."""
        return self.writer.open_store()

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Wait until every recorded step so far was tried; ``True`` if all of it is in the database."""
        return self.writer.flush(timeout)

    def close(self, timeout: float = CLOSE_WAIT_S) -> None:
        """Flush and release the store, trying rows it has not taken yet for up to ``timeout`` seconds."""
        self.writer.close(timeout)
        # A writer still held by a store that never answered keeps its connection: closing it from
        # here would wait on that same silent server (the process's exit lets it go).
        if self.writer.store is not None and not self.writer.held_by_the_store:
            self.writer.store.close()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- internals -------------------------------------------------------------
    def _session_for(self, conf: dict) -> RunSession | None:
        """The session of the run whose config's ``configurable`` is ``conf``."""
        run_id = conf.get(RUN_KEY)
        return self._sessions.get(run_id) if run_id else None

    def _warn(self, message: str) -> None:
        if self.warnings_to is not None:
            self.warnings_to(message)
        else:
            _log.warning("graphtape: %s", message)

    def _write_fault(self, exc: Exception, batch: Batch | None, lost: bool, hint: str = "") -> None:
        """Count a write fault and note it on the runs it concerns (their fault log, shown by the TUI's ``i``);
        ``hint`` (what to do) goes on its warning only."""
        self.fault_count += 1
        line = str(exc).splitlines()[0] if str(exc) else ""
        message = f"store write failed: {type(exc).__name__}: {line}"
        if message not in self._warned and len(self._warned) < 100:
            self._warned.add(message)  # one warning per distinct problem, not one per retry
            self._warn(f"{type(exc).__name__}: {line}{hint or fault_hint(exc)}")
        run_ids: set[str] = set()
        if batch is not None:
            run_ids.update(r["run_id"] for r in batch.steps)
            run_ids.update(r["run_id"] for r in batch.calls)
            run_ids.update(r["id"] for r in batch.runs_new)
            run_ids.update(rid for rid, _ in batch.runs_update)
        # A run that ended may still be written (its rows wait in the writer): its session is found
        # here while anything refers to it, so a fault before its last update is built counts there.
        targets = [s for r in run_ids if (s := self._recent.get(r)) is not None] if batch is not None else list(self._sessions.values())
        for s in targets:
            s.fault(message)  # never the session's lock: this runs on the writer's thread too
            if self.strict:
                s.pending_error = RecorderFault(message)
        if batch is not None:
            # A run that ended already: its last update (built, still waiting to be written) carries the fault.
            for rid, fields in batch.runs_update:
                if "fault_log" in fields:
                    log = orjson.loads(fields["fault_log"]) if fields["fault_log"] else []
                    if len(log) < 50:
                        log.append(message[:500])
                    fields["faults"] = (fields.get("faults") or 0) + 1
                    fields["fault_log"] = _json(log)

    def _rows_lost(self, run_ids: set[str]) -> None:
        """The writer dropped steps of these runs: their next frames start afresh (see ``RowsLost``)."""
        for run_id in run_ids:
            session = self._recent.get(run_id)
            if session is not None:
                session.frames_lost(locked=False)

    def _begin(self, binding: _Binding, graph: Any, input: Any, config: dict | None, kwargs: dict, *, is_async: bool = False) -> tuple[RunSession | None, dict, dict]:
        """Open a run (or continue an interrupted one on resume); never raises unless strict."""
        config = dict(config or {})
        if _inside_a_parent_task(graph, config):
            return None, config, kwargs  # called as a subgraph of another graph: the parent records
        conf = dict(config.get("configurable") or {})
        thread_id = conf.get("thread_id")
        generated = thread_id is None
        if not generated and binding.lineage is not None and binding.lineage.thread_key is not None:
            thread_id = binding.lineage.thread_key
        if generated:
            # Stored as the run's thread, named after the run: the run's id is the one value
            # identical runs store differently (a replay of such a run: the replay's thread). A
            # graph run on the saver graphtape lends, or on a replay's, keeps it out of the config
            # (its nodes, callbacks and traces see no thread, as bare); those savers key the run
            # themselves. A graph with a saver of its own needs a thread, and so do LangGraph's
            # checkpoint events, which name it: the lent saver's checkpoints name none.
            new_run_id = secrets.token_hex(8)
            thread_id = run_thread(new_run_id)
            if binding.lineage is not None and binding.lineage.thread_key is not None:
                thread_id = binding.lineage.thread_key
            if not _runs_without_a_thread(binding, graph, conf) or (binding.lent is not None and _streams_checkpoints(graph, kwargs)):
                conf["thread_id"] = thread_id
        config["configurable"] = conf
        try:
            # The secrets in this process's environment, by value (a key in no known format is still
            # named there), and those the run's calls are handed, once they are (learned_secrets).
            redactor = RunRedactor(self.redact_patterns + env_secret_patterns(), self.redact_keys, known_clean=self.known_clean_text)
            thread_id = stored_thread_id(str(thread_id), redactor)
            store = self.writer.store  # None while it cannot be opened: the run is kept for it
            run_id, seq_start, resumed = (new_run_id, 0, False) if generated else self._run_id_for(binding, thread_id, input, store)
            if store is not None:
                store.forget_written_blobs()
            known = store.checkpoint_steps(run_id) if resumed and store is not None else None
            steps_known = {**binding.lineage.known_steps, **(known or {})} if binding.lineage is not None else known
            session = RunSession(run_id=run_id, writer=self.writer, graph=binding.info, redactor=redactor, strict=self.strict, seq_start=seq_start, known_checkpoints=steps_known, call_waits=self._call_waits)
            session.thread_id = thread_id  # type: ignore[attr-defined]
            session.keys_cache = isinstance(getattr(graph, "cache", None), HitNamingCache)
            if input is not None and type(input).__name__ != "Command":
                # The input step's value, as passed: LangGraph hands the saver that checkpoint
                # later (async durability, astream), by when it has given the messages ids in place.
                session.passed_input = snapshot(input)
            if binding.lineage is not None:
                session.step_shift = binding.lineage.step_shift
            conf[RUN_KEY] = run_id
            session.saver_thread = RunScopedSaver.thread_key(conf)  # type: ignore[attr-defined]
            lent = conf.get(CONFIG_KEY_CHECKPOINTER)
            if isinstance(lent, BaseCheckpointSaver) and not isinstance(lent, TeeSaver):
                conf[CONFIG_KEY_CHECKPOINTER] = TeeSaver(lent, self._session_for)  # the caller lends one: recorded too
            elif lent is None and binding.lent is not None and graph.checkpointer is None:
                conf[CONFIG_KEY_CHECKPOINTER] = binding.lent
            if (runtime := runtime_recording_store(conf.get(CONFIG_KEY_RUNTIME))) is not None:
                conf[CONFIG_KEY_RUNTIME] = runtime  # LangGraph runs with this store, not the graph's
            config["configurable"] = conf
            config["callbacks"] = _with_handler(config.get("callbacks"), CaptureHandler(session))
            if self.durability is Durability.SYNC and kwargs.get(_STREAM_KW_DURABILITY) is None:
                kwargs = {**kwargs, _STREAM_KW_DURABILITY: "sync"}
            if binding.scoped is not None and (kwargs.get(_STREAM_KW_DURABILITY) == "exit" or kwargs.get("checkpoint_during") is False):
                # "exit" saves only the last checkpoint, and the saver is graphtape's own (the graph has
                # none): every superstep is saved, so every superstep is recorded. Nothing else sees it.
                kwargs = {k: v for k, v in kwargs.items() if k != "checkpoint_during"}
                kwargs[_STREAM_KW_DURABILITY] = "sync" if self.durability is Durability.SYNC else "async"
            elif binding.scoped is None and (kwargs.get(_STREAM_KW_DURABILITY) == "exit" or kwargs.get("checkpoint_during") is False):
                # The graph's own saver is handed only the run's last checkpoint, as asked: that is all
                # graphtape sees of it. Said on the run and once here, not left to look like a short run.
                why = "durability='exit' with the graph's own checkpointer: LangGraph saves only the run's last checkpoint, so only that superstep is recorded (the default 'async' records every one)"
                session.fault(why)
                if why not in self._warned:
                    self._warned.add(why)
                    self._warn(why)
            with self._lock:
                self._sessions[run_id] = session
                self._recent[run_id] = session
            self.last_run_id = run_id
            self._write_run_start(session, binding, input, _with_bound_config(graph, config), kwargs, resumed, is_async)
            seed = binding.take_seed() if not resumed else None
            carried = binding.lineage.carried if seed is not None and binding.lineage is not None else ()
            session.command_input = type(input).__name__ == "Command" and getattr(input, "resume", None) is None
            session.answers_by_id = type(input).__name__ == "Command" and isinstance(getattr(input, "resume", None), Mapping)
            # A run that goes on from its thread's checkpoint starts there; so does a replay given no
            # thread (its recording had none): its own saver holds the checkpoint it goes on from.
            # So does a Command(resume=...) that resumes no recorded pause (its thread's last run
            # failed after the answer, or was recorded elsewhere).
            if seed is None and (input is None or type(input).__name__ == "Command") and not resumed and (not generated or binding.lineage is not None):
                seed, carried = _thread_checkpoint(graph, config, lambda: self._recorded_tasks(store, thread_id, binding, run_id))
            elif seed is None and resumed and known is not None:
                head = _thread_head(graph, config)  # read once: its own writes, and the edits that led to it
                session.loaded_writes = [(ch, v) for task_id, ch, v in (head[1].pending_writes or ()) if task_id == NULL_TASK_ID] if head else []
                edits = _edited_while_paused(*head, known) if head else []
                for checkpoint, metadata, parent_id in edits[:-1]:  # each edit is a step; the last is the seed
                    session.on_checkpoint("", checkpoint, metadata, parent_id, checkpoint.get("channel_versions", {}))
                seed = edits[-1] if edits else None
                for ns, checkpoint, metadata, parent_id in _subgraph_edits_while_paused(graph, conf, known):
                    session.on_checkpoint(ns, checkpoint, metadata, parent_id, checkpoint.get("channel_versions", {}))
            if seed is not None:
                checkpoint, metadata, parent_id = seed
                if isinstance(graph.checkpointer, TeeSaver):  # what its DeltaChannels held there
                    at = {"configurable": {**conf, "checkpoint_ns": "", "checkpoint_id": checkpoint["id"]}}
                    graph.checkpointer.seed_delta_channels(session, checkpoint, at)
                session.on_checkpoint("", checkpoint, metadata, parent_id, checkpoint.get("channel_versions", {}))
                for task in carried:
                    session.on_carried(checkpoint["id"], task.task_id, task.node, task.path, task.writes)
            session.http = self._start_http(session)  # type: ignore[attr-defined]
            inline_saves.acquire()
            session.inline_saves = True  # type: ignore[attr-defined]
            return session, config, kwargs
        except Exception as exc:  # noqa: BLE001
            if self.strict:
                raise RecorderFault(f"graphtape could not start recording: {exc}") from exc
            self._warn(f"not recording this run: {type(exc).__name__}: {exc}")
            return None, config, kwargs

    def _recorded_tasks(self, store: RunStore | None, thread_id: str, binding: _Binding, run_id: str) -> dict[str, tuple[str, str]]:
        """Task id -> (node, path) of the thread's last recorded step: a functional API's @task
        calls, which LangGraph's state does not list, are named as the run that made them saw them."""
        if store is None:
            return {}
        self.flush()  # that run's last steps may still wait in the writer
        try:
            run = store.latest_run_for_thread(str(thread_id), display_name(binding.info.name, binding.graph_ref), excluding=run_id)
            steps = store.list_steps(run.id) if run is not None else []
            return {t.task_id: (t.node, t.path) for t in store.step_detail(run.id, steps[-1].step).tasks} if steps else {}
        except Exception:  # noqa: BLE001 - not knowing leaves them unnamed, and run again by a replay, as before
            return {}

    def _start_http(self, session: RunSession) -> bool:
        """Patch the HTTP clients for this run (counted, undone at its end); a failure only loses the HTTP calls."""
        if not self.http:
            return False
        try:
            http_capture.acquire()
        except Exception as exc:  # noqa: BLE001
            if self.strict:
                raise
            session.fault(f"http capture not installed: {type(exc).__name__}: {exc}")
            return False
        return True

    def _run_id_for(self, binding: _Binding, thread_id: str, input: Any, store: RunStore | None) -> tuple[str, int, bool]:
        is_resume = type(input).__name__ == "Command" and getattr(input, "resume", None) is not None
        if is_resume and store is not None:
            key = (binding.name, str(thread_id))
            run_id = self._interrupted.pop(key, None)
            if run_id is None:
                # Asked in another process (or of another Recorder): the run is stored under the
                # name its rows carry, which is where the graph came from when LangGraph's is the default.
                binding.find_graph_ref()
                prev = store.latest_run_for_thread(str(thread_id), display_name(binding.info.name, binding.graph_ref))
                if prev is not None and prev.status == "interrupted" and prev.status_reason == "interrupt":
                    run_id = prev.id
            if run_id is not None:
                self.flush()
                return run_id, store.max_seq(run_id), True
        return secrets.token_hex(8), 0, False

    def _write_run_start(self, session: RunSession, binding: _Binding, input: Any, config: dict, kwargs: dict, resumed: bool, is_async: bool = False) -> None:
        conf = {k: v for k, v in config.get("configurable", {}).items() if not k.startswith("__")}
        host, pid = host_and_pid()
        now = time.time()
        # Secrets handed to the run under a key are hidden by value wherever it quotes them (a resumed run too).
        session.learn([input, conf, config.get("metadata"), kwargs.get(_STREAM_KW_CONTEXT)])
        if resumed:
            fields = {"status": "running", "status_reason": None, "ended_at": None, "owner_host": host, "owner_pid": pid, "heartbeat_at": now}
            self.writer.submit(lambda: Batch(runs_update=[(session.run_id, fields)], blobs=session._take_blobs()))
            return
        binding.find_graph_ref()
        limit = binding.lineage.recursion_limit if binding.lineage is not None and binding.lineage.recursion_limit is not None else config.get("recursion_limit")
        cfg = {"configurable": conf, "tags": config.get("tags"), "metadata": config.get("metadata"), "recursion_limit": limit, "stream": {k: v for k, v in kwargs.items() if k != _STREAM_KW_CONTEXT and isinstance(v, (str, int, bool, list, type(None)))}}
        if is_async:
            cfg["async"] = True  # replay drives the graph as it ran: an async-only hook has no sync side
        if config.get(BOUND_KEYS):
            cfg["bound"] = config[BOUND_KEYS]
        runs_with = getattr(config.get("configurable", {}).get(CONFIG_KEY_RUNTIME), "store", None)  # before the graph's
        if binding.records_store or isinstance(runs_with, RecordingStore):
            cfg["store"] = True  # its store calls are all here: a strict replay answers its reads from them
        row: dict[str, Any] = {
            "id": session.run_id,
            "name": session.redactor.scrub(binding.name),  # a run named after a ticket may quote a key
            "graph_name": (binding.lineage and binding.lineage.graph_name) or display_name(binding.info.name, binding.graph_ref),
            "graph_ref": binding.graph_ref,
            "thread_id": str(session.thread_id),  # type: ignore[attr-defined]
            "status": "running",
            "started_at": now,
            "heartbeat_at": now,
            "graph": _json(binding.info.to_json()),
            "versions": _json(_versions()),
            "tags": _json([session.redactor.scrub(str(t)) for t in binding.tags]),
            "step_count": 0,
            "owner_host": host,
            "owner_pid": pid,
            "durability": self.durability.value,
        }
        lineage = binding.lineage
        if lineage is not None:
            row.update(parent_run_id=lineage.parent_run_id, fork_step=lineage.step)
        # The input is encoded now, on the caller's thread: LangGraph changes the caller's
        # objects in place as the run goes (add_messages gives messages ids), and the stored
        # input must be what the caller passed, the same for identical runs.
        row["inputs"] = _json(session.encoder.encode(input))
        # The run's Runtime context (``invoke(..., context=...)`` on a graph with a context_schema):
        # a replay hands the graph the same one. Encoded now too, as the caller passed it.
        context = kwargs.get(_STREAM_KW_CONTEXT)
        context_enc = session.encoder.encode(context) if context is not None else None

        def work() -> Batch:
            config_enc = session.encoder.encode(cfg)
            if context_enc is not None and isinstance(config_enc, dict):
                config_enc = {**config_enc, "context": context_enc}
            row["config"] = _json(config_enc)
            if lineage is not None and lineage.edit is not None:
                row["fork_edit"] = _json(session.encoder.encode(lineage.edit))
            return Batch(runs_new=[row], blobs=session._take_blobs())

        self.writer.submit(work)

    def _end(self, binding: _Binding, session: RunSession | None, error: BaseException | None, config: dict | None = None, *, at_breakpoint: bool = False) -> None:
        if session is None:
            if binding.scoped is not None and config:
                binding.scoped.drop_thread(RunScopedSaver.thread_key(config.get("configurable") or {}))
            return
        try:
            session.flush_pending()
            session.flush_open_calls()
            status, reason = "ok", None
            fields: dict[str, Any] = {}
            if error is not None:
                name = type(error).__name__
                if isinstance(error, (KeyboardInterrupt, GeneratorExit)) or name == "CancelledError":
                    status, reason = "interrupted", "cancelled"
                elif isinstance(error, SystemExit):
                    status, reason = "interrupted", "exited"  # sys.exit() inside the run: stopped, not failed
                else:
                    status = "error"
                    fields["error_type"] = name
                    fields["error_message"] = session.redactor.scrub(str(error) or name)[:4000]
            elif session.root_interrupted:
                status, reason = "interrupted", "interrupt"
                self._interrupted[(binding.name, str(session.thread_id))] = session.run_id  # type: ignore[attr-defined]
            elif at_breakpoint:
                status, reason = "interrupted", "breakpoint"  # the next run on the thread (invoke(None)) goes on from here
            now = time.time()

            def work() -> Batch:
                fields.update(
                    status=status,
                    status_reason=reason,
                    ended_at=now,
                    heartbeat_at=now,
                    step_count=max(session.max_step + 1, 0),
                    redactions=session.redactor.count,
                    faults=session.faults,
                    fault_log=_json(session.fault_log) if session.fault_log else None,
                )
                return Batch(runs_update=[(session.run_id, dict(fields))], blobs=session._take_blobs())

            self.writer.submit(work)
            if self.strict and error is None and self.writer.background:
                # Strict: the run's rows are encoded and tried before the run returns (the writer's
                # thread does it under async and exit durability), so a fault there raises here.
                self.writer.flush(CLOSE_WAIT_S)
            if session.pending_error is not None and self.strict and error is None:
                raise session.pending_error
        finally:
            if getattr(session, "http", False):
                http_capture.release()
            if getattr(session, "inline_saves", False):
                inline_saves.release()
            with self._lock:
                self._sessions.pop(session.run_id, None)
            if binding.scoped is not None:
                binding.scoped.drop_thread(session.saver_thread)  # type: ignore[attr-defined]
            self.writer.submit(lambda: (session.forget(), None)[1])
            self.writer.release()  # the run ended: its rows go in now (durability "exit" too)
            if in_forked_child() and self.writer.background:
                # A forked worker may end with os._exit (multiprocessing, a pool terminated, a
                # prefork server recycling it): no exit hook writes what is left, so the run is
                # written before it returns.
                try:
                    self.writer.flush(CLOSE_WAIT_S)
                except Exception:  # noqa: BLE001 - a fault is the writer's to report, never the run's
                    pass


class _Binding:
    __slots__ = ("recorder", "name", "named", "info", "tags", "graph_ref", "origin", "scoped", "lent", "lineage", "records_store", "_seed")

    def __init__(self, recorder: Recorder, name: str, info: GraphInfo, tags: list[str], graph_ref: str | None, lineage: Lineage | None = None) -> None:
        self.recorder = recorder
        self.name = name
        self.info = info
        self.tags = tags
        self.graph_ref = graph_ref
        self.scoped: RunScopedSaver | None = None  # the run-scoped saver of a graph without memory
        self.lent: TeeSaver | None = None  # ...teed, as each run is lent it
        self.lineage = lineage
        self._seed = lineage.seed if lineage is not None else None
        self.named = True
        self.origin: Origin | None = None
        self.records_store = False  # the graph has a store: its reads and writes are recorded as calls

    def find_graph_ref(self) -> None:
        """Look up where the graph came from (once found, kept); an unnamed run takes that name."""
        if self.graph_ref is not None or self.origin is None:
            return
        ref = self.origin.reference()
        if ref is None:
            return
        self.graph_ref, self.origin = ref, None
        if not self.named:
            self.name = display_name(self.info.name, ref)

    def take_seed(self) -> tuple[Any, Any, str | None] | None:
        """The lineage's seed checkpoint, once: only the run's first invocation starts from it."""
        seed, self._seed = self._seed, None
        return seed


def _runs_on_the_lent_saver(binding: _Binding, graph: Any, conf: dict) -> bool:
    """Whether the run is saved by the saver graphtape lends (the graph has none, the caller lends none)."""
    return binding.lent is not None and graph.checkpointer in (None, binding.lent) and conf.get(CONFIG_KEY_CHECKPOINTER) is None


def _runs_without_a_thread(binding: _Binding, graph: Any, conf: dict) -> bool:
    """Whether the run's saver keys a run given no thread itself: the saver graphtape lends, or
    graphtape's own in-memory one the graph holds (a replay's, which keeps such a run apart)."""
    own = getattr(graph.checkpointer, "inner", None)
    return _runs_on_the_lent_saver(binding, graph, conf) or (isinstance(own, RunScopedSaver) and conf.get(CONFIG_KEY_CHECKPOINTER) is None)


def _streams_checkpoints(graph: Any, kwargs: dict) -> bool:
    """Whether the run streams or prints checkpoint events (``checkpoints``, ``debug``)."""
    if StreamShape(graph, kwargs).may_hold_checkpoints():
        return True
    return any(m in CHECKPOINT_MODES for m in printed_modes(kwargs))


def _inside_a_parent_task(graph: Any, config: dict) -> bool:
    """Whether LangGraph runs this call as a subgraph of the task that makes it: the config passed
    names a parent task, or, naming no checkpoint of its own, it inherits the config of the node it
    is called from (``inner.invoke(x)`` in a node). Such a call interrupts, checkpoints and streams
    as part of its parent, so giving it a thread of its own would change what it does."""
    if any(k in (config.get("configurable") or {}) for k in _TASK_KEYS):
        return True
    try:
        merged = _langgraph_config(getattr(graph, "config", None), config)
    except Exception:  # noqa: BLE001 - a config LangGraph itself will refuse: it says why, not us
        return False
    return any(k in (merged.get("configurable") or {}) for k in _TASK_KEYS)


BOUND_KEYS = "graphtape_bound_keys"  # set by _with_bound_config, stored as the run config's "bound"


def _with_bound_config(graph: Any, config: dict) -> dict:
    """The run's config as LangGraph runs it: what ``graph.with_config(...)`` bound, under what the
    call passed (configurable values a node reads, a recursion limit), so a replay of the graph
    without that binding runs it the same."""
    bound = getattr(graph, "config", None)
    if not bound:
        return config
    try:
        from langchain_core.runnables.config import merge_configs

        merged = dict(merge_configs(bound, config))
    except Exception:  # noqa: BLE001 - an odd bound config: the call's, as before
        return config
    # The configurable keys only the binding gave: the graph's defaults, which a replay takes from
    # today's graph when it binds them too (a changed default is then a difference, not hidden).
    own = (config.get("configurable") or {}) if isinstance(config, dict) else {}
    given = bound.get("configurable") if isinstance(bound, dict) else None
    keys = sorted(k for k in given if isinstance(k, str) and k not in own and not k.startswith("__")) if isinstance(given, dict) else []
    if keys:
        merged[BOUND_KEYS] = keys
    return merged


def _recorded_class(base: type, binding: _Binding) -> type:
    def stream(self: Any, input: Any, config: dict | None = None, **kwargs: Any) -> Iterator[Any]:
        run_gate.check()  # a file loaded for its graph runs it: stopped before a run is opened
        rec = binding.recorder
        session, config, kwargs = rec._begin(binding, self, input, config, kwargs)
        printer, kwargs = PrintedCheckpoints.take(self, kwargs)
        chunks = raw = base.stream(self, input, config, **kwargs)
        if (shape := StreamShape(self, kwargs)).may_hold_checkpoints():
            # The lent saver's events are not the caller's stream; the graph's own saver's are, as
            # they would be without graphtape (its run key left out of their configs).
            chunks = without_checkpoints(chunks, shape) if binding.scoped is not None else without_key(chunks, shape, RUN_KEY)
        if printer is not None:
            chunks = printer.chunks(chunks)
        try:
            yield from chunks
        except BaseException as exc:
            raw.close()  # a stream closed early: LangGraph saves where it stopped before the run ends
            rec._end(binding, session, exc, config)
            raise
        rec._end(binding, session, None, config, at_breakpoint=session is not None and _at_breakpoint(self, config, kwargs))

    async def astream(self: Any, input: Any, config: dict | None = None, **kwargs: Any) -> AsyncIterator[Any]:
        run_gate.check()
        rec = binding.recorder
        session, config, kwargs = await _open_off_the_loop(rec, binding, self, input, config, kwargs)
        printer, kwargs = PrintedCheckpoints.take(self, kwargs)
        chunks = raw = base.astream(self, input, config, **kwargs)
        if (shape := StreamShape(self, kwargs)).may_hold_checkpoints():
            chunks = awithout_checkpoints(chunks, shape) if binding.scoped is not None else awithout_key(chunks, shape, RUN_KEY)
        if printer is not None:
            chunks = printer.achunks(chunks)
        try:
            async for chunk in chunks:
                yield chunk
        except BaseException as exc:
            # Closed early (aclose, a break in ``async with aclosing(...)``): LangGraph's stream is
            # closed now, as it is without graphtape, so its saver has the checkpoint where it stopped
            # before the caller goes on (and maybe closes that saver). ``async for`` alone leaves it
            # to the garbage collector.
            if chunks is not raw:
                await chunks.aclose()
            await raw.aclose()
            rec._end(binding, session, exc, config)
            raise
        stopped = False
        if session is not None and _has_breakpoints(self, kwargs):
            try:
                stopped = bool((await self.aget_state(config)).next)
            except Exception:  # noqa: BLE001 - not knowing leaves the run "ok", as before
                stopped = False
        rec._end(binding, session, None, config, at_breakpoint=stopped)

    def copy(self: Any, update: dict[str, Any] | None = None) -> Any:
        out = base.copy(self, update)
        if update and not _REBIND_KEYS.isdisjoint(update):
            return binding.recorder._rebound(out, binding)
        return out  # the same saver, store and name (with_config): recorded as it is

    stream.__doc__ = base.stream.__doc__
    astream.__doc__ = base.astream.__doc__
    copy.__doc__ = base.copy.__doc__
    return type(base.__name__, (base,), {"stream": stream, "astream": astream, "copy": copy, "_graphtape_binding": binding, "__module__": base.__module__})


async def _open_off_the_loop(rec: Recorder, binding: _Binding, graph: Any, input: Any, config: dict | None, kwargs: dict) -> tuple[RunSession | None, dict, dict]:
    """``rec._begin`` in a worker thread: resuming a run reads the store, and a thread's checkpoint
    is read through the saver's sync API (LangGraph's dev server fails a run that blocks its loop;
    async-only savers refuse the loop). A run cancelled while it is being opened ends as
    cancelled, by whichever side sees the other done: never left "running"."""
    lock = threading.Lock()
    handed: list[Any] = []  # the opened run, once the coroutine may take it
    dropped: list[BaseException] = []  # the cancellation, once the thread must close the run itself

    def open_run() -> tuple[RunSession | None, dict, dict]:
        opened = rec._begin(binding, graph, input, config, kwargs, is_async=True)
        with lock:
            if not dropped:
                handed.append(opened)
                return opened
        rec._end(binding, opened[0], dropped[0], opened[1])
        return opened

    try:
        return await asyncio.to_thread(open_run)
    except asyncio.CancelledError as exc:
        with lock:
            if not handed:
                dropped.append(exc)
        if handed:
            opened = handed[0]
            rec._end(binding, opened[0], exc, opened[1])
        raise


# What a copy of a recorded graph may change that changes how it is recorded.
_REBIND_KEYS = frozenset({"checkpointer", "store", "name"})


def _has_breakpoints(graph: Any, kwargs: dict) -> bool:
    """Whether the run may stop before or after a node (``interrupt_before``/``_after``, compiled or passed)."""
    return bool(getattr(graph, "interrupt_before_nodes", None) or getattr(graph, "interrupt_after_nodes", None) or kwargs.get("interrupt_before") or kwargs.get("interrupt_after"))


def _at_breakpoint(graph: Any, config: dict, kwargs: dict) -> bool:
    """Whether a run that ended without error stopped at a static breakpoint (nodes are still to run)."""
    if not _has_breakpoints(graph, kwargs):
        return False
    conf = {k: v for k, v in (config.get("configurable") or {}).items() if k != "checkpoint_id"}
    try:
        # The thread's latest checkpoint: a run started from a checkpoint's own config (the one
        # get_state or get_state_history gave) names that checkpoint, which still has nodes next.
        return bool(graph.get_state({**config, "configurable": conf}).next)
    except Exception:  # noqa: BLE001 - not knowing leaves the run "ok", as before
        return False


def _users_saver(graph: Any) -> BaseCheckpointSaver | None:
    """The saver the graph was compiled with, that graphtape tees (none: it lends one that keeps no thread)."""
    saver = getattr(graph.checkpointer, "inner", None)
    kept = isinstance(saver, BaseCheckpointSaver) and (not isinstance(saver, RunScopedSaver) or saver.keeps_threads)
    return saver if kept else None


def _thread_checkpoint(graph: Any, config: dict, recorded: Callable[[], dict[str, tuple[str, str]]] = dict) -> tuple[tuple[Any, Any, str | None] | None, tuple[Carried, ...]]:
    """The checkpoint a run given no input goes on from (after a breakpoint, an ``update_state``,
    an error, or from an earlier checkpoint): the run's first step, so it can be replayed alone.
    With it, the tasks whose writes the run carries over instead of running them (after an error)."""
    saver = _users_saver(graph)
    if saver is None:
        return None, ()
    try:
        found = saver.get_tuple(config)
    except Exception:  # noqa: BLE001 - an async-only saver, a lost connection: the run starts at its next step
        return None, ()
    if found is None:
        return None, ()
    parent = ((found.parent_config or {}).get("configurable") or {}).get("checkpoint_id")
    return (found.checkpoint, found.metadata, parent), _carried_tasks(graph, config, found.pending_writes or (), recorded)


def _thread_head(graph: Any, config: dict) -> tuple[BaseCheckpointSaver, Any] | None:
    """The user's saver and the thread's latest root checkpoint (none: no saver of theirs, or not readable)."""
    saver = _users_saver(graph)
    if saver is None:
        return None
    conf = {k: v for k, v in (config.get("configurable") or {}).items() if k not in ("checkpoint_id", RUN_KEY)}
    try:
        found = saver.get_tuple({"configurable": {**conf, "checkpoint_ns": ""}})
    except Exception:  # noqa: BLE001 - an async-only saver, a lost connection: not recorded, as before
        return None
    return (saver, found) if found is not None else None


def _edited_while_paused(saver: BaseCheckpointSaver, head: Any, known: Mapping[str, int]) -> list[tuple[Any, Any, str | None]]:
    """The ``update_state`` checkpoints made while the run waited at an interrupt, oldest first,
    from the thread's ``head`` back: recorded as the run's next steps (nothing else sees them);
    the resumed run goes on from the last."""
    edits: list[tuple[Any, Any, str | None]] = []
    found = head
    try:
        while found is not None and len(edits) < _MAX_EDITS_WHILE_PAUSED:
            if (found.metadata or {}).get("source") != "update" or found.checkpoint["id"] in known:
                break
            parent = ((found.parent_config or {}).get("configurable") or {}).get("checkpoint_id")
            edits.append((found.checkpoint, found.metadata, parent))
            found = saver.get_tuple({"configurable": {**found.config["configurable"], "checkpoint_id": parent}}) if parent else None
    except Exception:  # noqa: BLE001 - an async-only saver, a lost connection: the edits are not recorded, as before
        return []
    return edits[::-1]


_MAX_EDITS_WHILE_PAUSED = 100  # a chain of edits longer than this is cut to its newest (each is a saver read)


def _subgraph_edits_while_paused(graph: Any, conf: Mapping[str, Any], known: Mapping[str, int]) -> list[tuple[str, Any, Any, str | None]]:
    """``update_state`` checkpoints made in the namespaces of subgraphs waiting at an interrupt
    (``update_state(get_state(config, subgraphs=True).tasks[0].state.config, ...)``), oldest first
    per namespace, as ``(namespace, checkpoint, metadata, parent id)``: the subgraph's steps."""
    saver = _users_saver(graph)
    if saver is None:
        return []
    base = {k: v for k, v in conf.items() if k not in ("checkpoint_id", "checkpoint_ns", RUN_KEY) and not str(k).startswith("__")}
    try:
        waiting = waiting_subgraphs(graph.get_state({"configurable": {**base, "checkpoint_ns": ""}}, subgraphs=True))
    except Exception:  # noqa: BLE001 - an async-only saver, a lost connection: not recorded, as before
        return []
    out: list[tuple[str, Any, Any, str | None]] = []
    for ns in waiting:
        try:
            head = saver.get_tuple({"configurable": {**base, "checkpoint_ns": ns}})
        except Exception:  # noqa: BLE001 - as above
            continue
        if head is not None:
            out += [(ns, *edit) for edit in _edited_while_paused(saver, head, known)]
    return out


_NOT_CARRIED = frozenset((ERROR, INTERRUPT, "__error_source_node__"))  # a task that failed or stopped runs again


def _carried_tasks(graph: Any, config: dict, pending: Any, recorded: Callable[[], dict[str, tuple[str, str]]] = dict) -> tuple[Carried, ...]:
    """The tasks of the next step that finished before the run stopped, with the writes LangGraph applies for them."""
    writes: dict[str, list[tuple[str, Any]]] = {}
    rerun: set[str] = set()
    for task_id, channel, value in pending:
        if task_id == NULL_TASK_ID:
            continue
        if channel in _NOT_CARRIED:
            rerun.add(task_id)
        writes.setdefault(task_id, []).append((channel, value))
    done = {t: w for t, w in writes.items() if t not in rerun}
    if not done:
        return ()
    try:
        tasks = graph.get_state(config).tasks  # their nodes and paths (pending writes hold ids only)
    except Exception:  # noqa: BLE001 - not knowable: the run is recorded without them, as before
        return ()
    out = [Carried(t.id, t.name, task_path(t.path), tuple(done.pop(t.id))) for t in tasks if t.id in done]
    if done:  # tasks the state does not list (a functional API's @task calls): as recorded
        named = recorded()
        out += [Carried(task_id, *named[task_id], tuple(writes)) for task_id, writes in done.items() if task_id in named]
    return tuple(out)


def _with_handler(callbacks: Any, handler: CaptureHandler) -> Any:
    if callbacks is None:
        return [handler]
    if isinstance(callbacks, list):
        return [*callbacks, handler]
    if isinstance(callbacks, BaseCallbackManager):
        manager = callbacks.copy()
        manager.add_handler(handler, inherit=True)
        return manager
    # Anything else (a lone handler, a tuple) LangChain rejects: hand it on so the run fails as bare.
    return callbacks


def _as_tuple(items: Any) -> tuple:
    # A lone pattern (or tag) is one, not a sequence of one-character ones.
    if isinstance(items, (str, re.Pattern)):
        return (items,)
    return tuple(items)


@functools.cache
def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for dist in ("graphtape", "langgraph", "langchain-core", "langgraph-checkpoint", "sqlalchemy"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            pass
    return out


def _json(tree: Any) -> str:
    return json_bytes(tree).decode()


__all__ = ["Recorder", "Durability", "GraphtapeError", "Lineage"]
