"""``replay`` and ``fork``: resume the user's graph at a recorded step and compare.

The flow: read the recording (store API) -> restore the checkpoint into a
fresh in-memory saver (the user's own checkpointer is never written) ->
attach a recorder, so the replay is itself a recorded run linked to its
source -> run with tool and model calls answered from the recording ->
answer recorded interrupts with their recorded resume values -> compare the
two runs in the store and name every divergence.
"""

from __future__ import annotations

import asyncio
import dataclasses
import difflib
import os
import secrets
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.memory import InMemoryStore

from graphtape.recorder import CallInfo, GraphtapeError, Recorder, RunStore, SqlStore
from graphtape.recorder.attach import Carried, Lineage
from graphtape.recorder.channel_writes import as_writes
from graphtape.recorder.codec import enums_known
from graphtape.recorder.errors import RunNotFound
from graphtape.recorder.http_capture import answering_http
from graphtape.recorder.redaction import Redactor
from graphtape.recorder.saver import RunScopedSaver
from graphtape.recorder.session import INTERRUPT, task_path
from graphtape.recorder.store.read_only import is_read_only_error
from graphtape.recorder.store_capture import is_write, unwrapped
from graphtape.recorder.thread_keys import run_thread
from graphtape.recorder.tracebacks import frame_text, frames_of, raised_at
from graphtape.recorder.unwritten import last_before_gap
from graphtape.recorder.waiting_subgraphs import node_path, waiting_subgraphs
from graphtape.recorder.writer import CLOSE_WAIT_S, flush_writers_into
from graphtape.recorder.http_exchange import HTTP
from graphtape.recorder.records import FLAG_CARRIED, FLAG_INTERRUPT, FLAG_RESUME, SENT, STORE

from graphtape.replay.answers import RecordingAnswerer, ReplayMiss
from graphtape.replay.cache import RecordedCache, cached_nodes, join_channels, recorded_executions, with_recorded_subgraph_caches
from graphtape.replay.calls import CallBook, LiveCall, Miss
from graphtape.replay.http_answers import RecordedHttp, live_http_note
from graphtape.replay.compare import RunComparison, Side
from graphtape.replay.divergence_order import entered_steps, order_key
from graphtape.replay.context import recorded_context, with_runtime
from graphtape.replay.fixture_format import FIXTURE_TAG
from graphtape.replay.gc_threshold import fewer_collections
from graphtape.replay.injected import HandedCheck, derived_keys
from graphtape.replay.intercept import answering
from graphtape.replay.stepless import no_steps_message
from graphtape.replay.limits import Limits, lowered_limit, recorded_limits
from graphtape.replay.message_ids import recorded_ids, with_recorded_ids
from graphtape.replay.modes import ReplayMode
from graphtape.replay.normalize import Normalizer, is_persistent, namespaces_named, ns_path
from graphtape.replay.override_names import overridden, unknown_overrides, unreached_overrides
from graphtape.replay.recording_check import RecorderWarnings, not_recorded
from graphtape.replay.restore import Memory, Restored, hold_untracked, replay_saver, restore, restore_edit, restore_memories, untracked_channels
from graphtape.replay.result import Divergence, ReplayResult, ordered
from graphtape.replay.state_types import StateTypes
from graphtape.replay.store_answers import RecordedStore
from graphtape.replay.store_guard import ReplayStore


class ReplayError(GraphtapeError):
    """A replay could not be set up (bad step, bad graph, bad edit)."""


_NOT_FORWARDED = ("thread_id", "checkpoint_id", "checkpoint_ns", "checkpoint_map")


def replay(
    run_id: str,
    graph: Any,
    from_step: int | None = None,
    mode: str | ReplayMode = ReplayMode.STRICT,
    *,
    ns: str = "",
    db: str | os.PathLike | None = None,
    store: RunStore | None = None,
    overrides: Mapping[str, Callable[..., Any]] | None = None,
    mock_nodes: Iterable[str] = (),
    ignore: Iterable[str] = (),
    state_keys: Iterable[str] | None = None,
    require_all_used: bool = False,
    on_miss: str = "stop",
    to_step: int | None = None,
    progress: Callable[[str, int, int | None], None] | None = None,
) -> ReplayResult:
    """Re-run recorded run ``run_id`` on ``graph`` from ``from_step`` and compare.

    ``graph`` is the user's compiled graph (today's code). ``from_step``
    defaults to the run's first step (a full replay); with ``ns`` it is a step
    of that subgraph namespace, which resumes at its own step. ``overrides``
    maps a tool name (or a model name, or ``"model"``) to a function that
    answers in place of the recording; ``mock_nodes`` serves those nodes'
    recorded updates instead of running them; ``ignore`` lists volatile state
    paths (``messages.*.id``) and ``state_keys`` limits the state compared to
    those keys. ``on_miss="live"`` lets a call the recording cannot answer
    run live (it is still reported), as does a tool handed other state or
    memories than its recording was: how expectations are re-recorded. The
    replay is recorded as a new run in the same store, linked to its source.
    ``to_step`` stops the replay after that root step (a window of the run,
    like a fixture exported with ``--steps``): nothing after it is compared.
    ``progress(phase, done, total)`` is told how far the replay has come.
    """
    if on_miss not in ("stop", "live"):
        raise ReplayError(f"unknown on_miss {on_miss!r}: use 'stop' or 'live'")
    return _Run(run_id, graph, db=db, store=store, mode=mode, ignore=ignore, overrides=overrides, mock_nodes=mock_nodes, state_keys=state_keys, progress=progress).go(
        from_step, ns=ns, update=None, as_node=None, require_all_used=require_all_used, miss_goes_live=on_miss == "live", to_step=to_step
    )


def fork(
    run_id: str,
    graph: Any,
    at_step: int,
    update: Any,
    *,
    as_node: str | None = None,
    mode: str | ReplayMode = ReplayMode.STRICT,
    ns: str = "",
    db: str | os.PathLike | None = None,
    store: RunStore | None = None,
    overrides: Mapping[str, Callable[..., Any]] | None = None,
    ignore: Iterable[str] = (),
    progress: Callable[[str, int, int | None], None] | None = None,
) -> ReplayResult:
    """Apply ``update`` to the state after ``at_step`` and continue as a new, linked run.

    The edit goes through the graph's reducers as if node ``as_node`` had
    written it (LangGraph's ``update_state``); the new run records its parent
    run, the step and the edit. In every mode a call the edit changed runs
    live (so does a tool handed a state or memories the edit changed);
    ``strict`` (the default) answers every call that still matches the
    recording from it, ``tools`` only tools, ``live`` none: a fork makes no
    more live calls than its edit asks for.
    """
    return _Run(run_id, graph, db=db, store=store, mode=mode, ignore=ignore, overrides=overrides, mock_nodes=(), progress=progress).go(
        at_step, ns=ns, update=update, as_node=as_node, require_all_used=False, miss_goes_live=True
    )


class _Run:
    def __init__(self, run_id: str, graph: Any, *, db: Any, store: RunStore | None, mode: Any, ignore: Iterable[str], overrides: Any, mock_nodes: Iterable[str], state_keys: Iterable[str] | None = None, progress: Callable[[str, int, int | None], None] | None = None) -> None:
        self.progress = progress
        if not hasattr(graph, "stream") or not hasattr(graph, "copy") or not hasattr(graph, "nodes"):
            if isinstance(graph, str):  # a reference as --graph and the pytest marker take it
                raise ReplayError(f"replay needs the compiled graph itself, not the reference {graph!r}: load it first (from graphtape.replay.loading import load_graph; load_graph({graph!r}))")
            raise ReplayError(f"replay needs a compiled LangGraph graph (builder.compile()), got {type(graph).__name__}")
        self.mode = ReplayMode.parse(mode)
        ignore = list(ignore)
        try:
            self.normalize = Normalizer(ignore, state_keys)  # state: the user's ignore paths apply
            self.arg_normalize = Normalizer()  # call arguments: only volatile ids are dropped
            self.handed_normalize = Normalizer(ignore)  # the state a tool is handed: every key it reads counts
        except ValueError as exc:
            raise ReplayError(str(exc)) from None
        self.graph = graph
        self.types = StateTypes(graph)
        self.overrides = dict(overrides or {})
        self.mock_nodes = list(mock_nodes)
        unknown = [n for n in self.mock_nodes if n not in graph.nodes]
        if unknown:
            raise ReplayError(f"cannot mock node(s) {', '.join(unknown)}: the graph has {', '.join(sorted(graph.nodes))}")
        self.own_store = store is None
        self.store = store if store is not None else SqlStore(db, create=False)
        if isinstance(getattr(self.store, "url", None), str):
            flush_writers_into(self.store.url)  # a run this process is recording there: written whole first
        try:
            # The run and its config in one read (every replay needs the config).
            try:
                detail = self.store.run_detail(run_id, output=False)
            except RunNotFound as exc:
                if db is None and store is None:  # the default store, while the run was likely recorded elsewhere
                    raise RunNotFound(f"{exc}; with no db= given, the default store is read: pass db= the file or URL the run was recorded into") from None
                raise
            if detail.run.status == "running":
                # What it has so far is not where it goes: every step not yet written would read as a divergence.
                raise ReplayError(f"run {detail.run.id} is still being recorded: replay or fork it once it has ended")
        except BaseException:
            if self.own_store:
                self.store.close()
            raise
        # Set per replay by _go: where it stops, the steps it spans, and the limit a resume uses.
        self._to_step: int | None = None
        self._span: tuple[int, int] = (0, 0)
        self._resume_limit: int | None = None
        self._thread_key: str | None = None  # the thread the replay's run is stored under (set by _go)
        self._unthreaded = False  # the recorded run was given no thread, and its replay is given none (set by _go)
        self._memories: dict[str, Memory] = {}  # each persistent subgraph's memory as put back (set by _go)
        self._limits: Limits | None = None
        self._context: Any = None  # the recorded Runtime context, rebuilt with the graph's context_schema
        self._ran_async = False  # the recording ran the graph with ainvoke/astream
        self.run = detail.run
        self._run_config: dict[str, Any] = detail.config if isinstance(detail.config, dict) else {}  # a store is data from elsewhere
        self._store_recorded = self._run_config.get("store") is True  # recorded with its store: every read is in it
        self._entered_memo: dict[str, int] | None = None
        self._details_memo: dict[str, list[Any]] = {}
        self._root_steps_memo: list[Any] | None = None
        self._saver: Any = None  # the replay's own saver, set by _go
        self._namespaces_memo: list[str] | None = None

    def go(self, step: int | None, *, ns: str, update: Any, as_node: str | None, require_all_used: bool, miss_goes_live: bool = False, to_step: int | None = None) -> ReplayResult:
        try:
            # Restored values, answers and the final state are decoded with the Enum classes the
            # graph's schema names: a member comes back as itself, not as its bare value.
            if update is None and self.overrides:  # a fork may go where the recording never went: its tools are new
                why = unknown_overrides(self.overrides, self.store.calls(self.run.id, encoded=True))
                if why is not None:
                    raise ReplayError(why)
            ns = self._named_ns(ns)
            with fewer_collections(), enums_known(self.types.enums()):
                return self._go(step, ns=ns, update=update, as_node=as_node, require_all_used=require_all_used, miss_goes_live=miss_goes_live, to_step=to_step)
        finally:
            if self.own_store:
                self.store.close()

    def _named_ns(self, ns: str) -> str:
        """``ns`` as stored: a subgraph's path without task ids (``child``, ``a|b``, as ``diff --ns``
        takes it) names its one namespace; a path the run ran twice stays ambiguous and is refused."""
        if not ns:
            return ns
        same = namespaces_named(self.store.namespaces(self.run.id), ns)
        if len(same) > 1:
            raise ReplayError(f"run {self.run.id} ran subgraph {ns!r} {len(same)} times: name one by its namespace ({', '.join(map(repr, same))})")
        return same[0] if same else ns

    def _go(self, step: int | None, *, ns: str, update: Any, as_node: str | None, require_all_used: bool, miss_goes_live: bool, to_step: int | None = None) -> ReplayResult:
        kind = "replay" if update is None else "fork"
        self.store.require_writable(f"{kind} records the {kind} as a new run")
        steps = self.store.list_steps(self.run.id, ns) if ns else self._root_steps()
        if not steps:
            if not ns:
                raise ReplayError(no_steps_message(self.run, kind))
            known = [n for n in self.store.namespaces(self.run.id) if n]
            has = f"its subgraph namespaces: {', '.join(map(repr, known))}" if known else "it ran no subgraph: leave --ns out"
            raise ReplayError(f"run {self.run.id} has no steps in namespace {ns!r}; {has}")
        asked = step
        if step is None:
            step = steps[0].step
        moved_past_input = False
        if ns and update is None:
            # A subgraph resumed at its input step is handed its input again by its parent task,
            # so LangGraph does not run its __start__ as recorded: it goes on from the step after.
            at = next((i for i, s in enumerate(steps) if s.step == step), None)
            if at is not None and steps[at].source == "input" and at + 1 < len(steps) and steps[at + 1].checkpoint_id:
                step, moved_past_input = steps[at + 1].step, asked is not None
        if not any(s.step == step and s.checkpoint_id for s in steps):
            done = [s.step for s in steps if s.checkpoint_id]
            span = f"steps {done[0]}..{done[-1]}" if len(done) > 1 else f"only step {done[0]} has a checkpoint" if done else "no step has a checkpoint"
            raise ReplayError(f"run {self.run.id} has no completed step {step}" + (f" in {ns!r}" if ns else "") + f" to resume from ({span})")
        saver = self._saver = replay_saver()
        own = getattr(self.graph, "checkpointer", None)
        if isinstance(own, BaseCheckpointSaver) and not isinstance(own, RunScopedSaver):
            saver.serde = own.serde  # what a resume loads went through the graph's saver (restore.py)
        # The thread the recording's nodes saw, where they saw one (a node may read it): the
        # replay's saver is its own. The replay's run is stored under a thread of its own.
        conf = self._run_config.get("configurable")
        seen = conf.get("thread_id") if isinstance(conf, dict) else None
        self._thread_key = f"graphtape-replay-{secrets.token_hex(6)}"
        thread_id = seen if isinstance(seen, str) and seen else self._thread_key
        # A run given no thread was stored under one named after it, and its nodes saw none: the
        # replay's graph runs without one too (its checkpoints are kept on the replay's thread).
        self._unthreaded = seen is None and self.run.thread_id == run_thread(self.run.id)
        if self._unthreaded:
            saver.unthreaded = thread_id
        untracked = untracked_channels(self.graph)
        restored = restore(self.store, self.run.id, step, ns, saver, thread_id, untracked=untracked, revive=self.types.revive)
        self._memories = restore_memories(self.store, self.run.id, restored.root_step, self._details(""), saver, thread_id, resumed=(ns, restored.step) if ns else None)
        base = self.graph.copy(update={"checkpointer": saver})
        guard = None
        today = getattr(base, "store", None)
        if today is not None:
            guard = ReplayStore(unwrapped(today))  # read, never written: a what-if run
        elif self._store_recorded and self.mode.answers(STORE):
            # Recorded with a store the graph does not hold now (LangGraph's server lends one to
            # each run): an empty one is lent, and the recording answers what it was asked.
            guard = ReplayStore(InMemoryStore())
        if guard is not None:
            base = base.copy(update={"store": guard})
        if self.mock_nodes:
            base = _with_mocked_nodes(base, self.store, self.run.id, self.mock_nodes)
        cached = cached_nodes(base, {n for s in self._root_steps() for n in s.nodes}) - set(self.mock_nodes)
        if cached:
            # LangGraph's cache lookups are answered from the recording: a hit replays as a hit.
            typed = self.store.step_details(self.run.id, "", typed=True)
            base = base.copy(update={"cache": RecordedCache(recorded_executions(typed, cached, restored.root_step, join_channels(base)))})
        if not ns:
            base = with_recorded_subgraph_caches(base, lambda path: self._entered_subgraphs(path, restored.root_step))
        config = self._config(thread_id, restored)
        carried = self._carry_over(base, saver, config, restored) if update is None and not ns else ()
        stopped_at = self._stopped_at(restored.root_step) if to_step is None and not ns else None
        if stopped_at is not None:
            to_step = stopped_at  # nothing after it was recorded: the replay stops where the run was stopped
        if to_step is not None and (ns or to_step <= restored.root_step):
            raise ReplayError(f"to_step must be a root step after {restored.root_step}" + (" (not with a subgraph namespace)" if ns else ""))
        self._to_step = to_step
        self._span = (restored.root_step, max((s.step for s in self._root_steps()), default=restored.root_step))
        edit = None
        notes: list[str] = []  # what the reader should know about how the edit went in
        offset = 0  # a fork's edit is one more step in the namespace it edits
        seed = (restored.checkpoint, restored.metadata, restored.parent_id) if not ns else None
        if update is not None:
            if not ns:
                _check_edit_keys(base, update)
            if isinstance(update, dict):
                update = self.types.revive_edit(ns, update)
            values, apply_as = update, as_node
            if not ns and restored.metadata.get("source") == "input" and as_node is None:
                # The input step: the edit changes the run's input (kept, with the edited keys replaced).
                values, apply_as = _edited_input(restored.checkpoint, update), "__input__"
            elif not ns:
                values, apply_as, note = self._keep_command_route(step, update, as_node)
                notes += [note] if note else []
            # A subgraph is edited in its own namespace: its checkpoint moves on, the parent's stays.
            target = {"configurable": {**config["configurable"], "checkpoint_ns": ns}} if ns else config
            target = with_runtime(target, self._context, base)
            try:
                base.update_state(target, values, as_node=apply_as)
            except Exception as exc:  # noqa: BLE001 - the user's edit: say why it does not apply
                raise ReplayError(self._edit_failed(step, ns, exc)) from None
            if not ns:
                edited = saver.get_tuple(config)
                seed = (edited.checkpoint, edited.metadata, edited.parent_config["configurable"]["checkpoint_id"] if edited.parent_config else None)
                # The run resumes after the edit's checkpoint, which LangGraph saved without the
                # never-checkpointed channels (langchain's per-run call counters): they go on from
                # there as restored, an edit of one taking its edited value.
                held = dict(restored.untracked)
                if isinstance(update, dict):
                    held.update((k, v) for k, v in update.items() if k in untracked)
                hold_untracked(saver, edited.config, held.items())
            edit = {"kind": "fork", "update": update, "as_node": as_node, "mode": self.mode.value, "ns": ns or None}
            offset = 1
        else:
            edit = {"kind": "replay", "mode": self.mode.value, "ns": ns or None}

        if moved_past_input:
            notes.append(f"step {asked} of {ns} is its input step: the replay starts after it, at step {step}, where the subgraph's own work begins")
        if stopped_at is not None and self.run.status == "incomplete":
            notes.append(f"the recorded run is incomplete ({self.run.status_reason}: see graphtape show {self.run.id[:8]}): the replay stops at step {stopped_at}, the last before what is missing, and compares up to it")
        elif stopped_at is not None:
            notes.append(f"the recorded run was {self.run.status_reason} after step {stopped_at}: the replay stops there and compares up to it")
        offsets = {ns_path(ns): offset}
        recorded_calls = self._calls_after(restored.root_step, ns, step)
        if update is None:
            # A message that enters the state without an id gets the one the recording gave it.
            base = with_recorded_ids(base, lambda: recorded_ids(self.store, self.run.id, restored.root_step, recorded_calls, stand_ins=FIXTURE_TAG in self.run.tags))
        book = CallBook(self._as_answered([c for c in recorded_calls if c.kind not in (HTTP, STORE, SENT)]), self.arg_normalize, delay=self._delay_test(), offsets=offsets, interrupts=self._interrupts(), task_paths=self._task_paths)
        handed = None
        if miss_goes_live:
            # A call that may run live is answered only by a recording handed the same state and memories.
            handed = HandedCheck(self.store, self.run.id, self.handed_normalize, derived=derived_keys(self.graph), calls=recorded_calls, written=guard.writes if guard is not None else lambda: ())
        answerer = RecordingAnswerer(book, self.mode, self.arg_normalize, self.overrides, miss_goes_live=miss_goes_live, typed_decode=lambda tree: self.store.decode(tree, typed=True), handed=handed, sent=[c for c in recorded_calls if c.kind == SENT])
        http = RecordedHttp(recorded_calls, offsets=offsets, miss_goes_live=miss_goes_live)
        memory = RecordedStore(recorded_calls, self.arg_normalize, offsets=offsets, miss_goes_live=miss_goes_live)
        if guard is not None and self._store_recorded and self.mode.answers(STORE):
            guard.answers = memory  # the recording holds every read: today's store is not asked
        # Calls are answered at once, so the graph never waits: writing while it runs would only
        # take the interpreter from it. The replay is written when it ends (and can be made again).
        # Recorded beside the store this replay reads: the same engine, not a second one opened and checked.
        beside = SqlStore.beside(self.store) if isinstance(self.store, SqlStore) else None
        recorder = Recorder(None if beside is not None else self.store.url, durability="exit", store=beside)
        recorder.known_clean_text = answerer.recorded_text
        warnings = recorder.warnings_to = RecorderWarnings()
        lineage = Lineage(
            parent_run_id=self.run.id, step=step, edit=edit, seed=seed, step_shift=0 if ns else offset, graph_name=self.run.graph_name,
            recursion_limit=None if self._resume_limit is None else int(self._resume_limit), carried=carried, thread_key=self._thread_key,
            known_steps={m.checkpoint_id: m.after for m in self._memories.values() if m.checkpoint_id is not None and m.after is not None},
        )
        app = recorder.attach(base, name=self.run.name, tags=[f"{edit['kind']}-of:{self.run.id}"], graph_ref=self.run.graph_ref, lineage=lineage)
        error: BaseException | None = None
        ran = False
        try:
            with answering(answerer), answering_http(http if self.mode.answers(HTTP) else None), recorded_limits(self._memory_limits()):
                first = self._time_travel(config, restored) if update is None and not ns else None
                error = self._drive(app, config, shift=0 if ns else offset, first=first, opens=update is None and not ns)
            ran = True
        finally:
            recorder.flush()
            run_id = recorder.last_run_id
            # A store that refuses the replay for want of a permission will not grant it while
            # the replay waits: say so now rather than after the recorder's retries.
            failing = recorder.writer.failing
            recorder.close(0.0 if failing is not None and is_read_only_error(failing) else CLOSE_WAIT_S)
            if not ran:
                warnings.pass_on()  # the replay stops on an error of its own, which says nothing of these
        why = not_recorded(self.store, run_id, recorder.fault_count, warnings.lines, edit["kind"])
        if why is not None:
            raise ReplayError(why)
        warnings.pass_on()
        within = self._entered_within()
        replayed_within = self._replayed_entries(run_id) if any(m.live.ns for m in [*answerer.misses, *http.misses, *memory.misses]) else {}
        stops = [*answerer.misses, *(m for m in memory.misses if not is_write(m.live.name))]  # misses that stopped the replay
        found: list[Divergence] = []
        for m in [*answerer.misses, *http.misses, *memory.misses]:
            live = m.live
            live_step = None if live.step is None else live.step - offsets.get(live.path, 0)
            root = None
            if live.path in self._memories and live_step is not None:
                root = self._memories[live.path].roots.get(live_step)  # a memory's step: the root step that ran it
            stopped = _miss_outcome(live)
            how = f"was handed other {m.handed.what} than its recording" if m.handed is not None else "has no matching recording"
            found.append(
                Divergence(
                    m.kind,
                    None if live.step is None else live.step - offset,
                    live.node,
                    f"{live.kind} call {live.name!r} {how}" + (" (it ran live)" if miss_goes_live else stopped),
                    m.handed.recorded if m.handed is not None else m.candidates[0].arguments if m.candidates and m.kind == "arguments" else None,
                    m.handed.actual if m.handed is not None else live.arguments,
                    live.path,
                    [c.to_dict() for c in m.candidates],
                    # by its own namespace in the replay, where known: a subgraph run twice has two
                    order=order_key(live.ns, live_step, replayed_within, root) if live.ns and live.ns in replayed_within else order_key(live.path, live_step, within, root),
                )
            )
        final_state = None
        status = "error" if error is not None else "ok"
        if run_id is not None:
            found.extend(self._compare(run_id, restored, ns, step, offset, within))
            try:
                detail = self.store.run_detail(run_id, typed=True)  # final state: the graph's own types (allow-listed)
                replayed, final_state = detail.run, detail.output
                if isinstance(final_state, dict):
                    self.types.revive("", final_state)  # and the models its schema names
            except GraphtapeError:
                replayed = self.store.get_run(run_id)
            status = replayed.status
            if not stops and to_step is None:
                found.extend(_end_divergences(self.run, replayed))
            if to_step is not None:
                found = [d for d in found if self._inside_window(d, to_step)]
                status = "ok" if error is None else status
        unused = [
            {"call_id": r.call.call_id, "kind": r.call.kind, "name": r.call.name, "step": r.call.step, "node": r.call.node}
            for r in [*book.unused(), *http.unused(), *memory.unused()]
            if self.mode.answers(r.call.kind) and not overridden(self.overrides, r.call.kind, r.call.name) and (to_step is None or (r.call.step is not None and r.call.step <= to_step))
        ]
        if require_all_used:
            # Calls after the point where a miss stopped the replay were never reached, not skipped.
            cut = min((m.live.step - offsets.get(m.live.path, 0) for m in stops if m.live.step is not None and not m.live.path), default=None) if not miss_goes_live else None
            for u in unused:
                if cut is not None and (u["step"] is None or u["step"] >= cut):
                    continue
                found.append(Divergence("missing", u["step"], u["node"], f"recorded {u['kind']} call {u['name']!r} was never made", u, None))
        return ReplayResult(
            run_id=run_id,
            source_run_id=self.run.id,
            from_step=step,
            ns=ns,
            mode=self.mode.value,
            divergences=ordered(found),
            status=status,
            # The live exception's text, scrubbed as the recorder scrubs the one it stores: a
            # report goes to terminals and CI logs.
            error=None if error is None else Redactor().scrub(f"{type(error).__name__}: {error}"),
            final_state=final_state,
            served={**answerer.served, **({HTTP: http.served} if http.served else {}), **({STORE: memory.served} if memory.served else {})},
            unused_calls=unused,
            kind=edit["kind"],
            notes=notes + answerer.override_notes() + unreached_overrides(self.overrides, book) + live_http_note(self.store, run_id, self.mode) + answerer.held_notes() + self._redaction_note(found),
        )

    def _inside_window(self, d: Divergence, to_step: int) -> bool:
        """Whether a divergence falls inside a replay that stops after root step ``to_step``. A
        subgraph's falls inside its parent's step; one with memory of its own keeps one namespace
        for every run of its node, and a step of it falls in the root step that ran it."""
        if d.step is None:
            return True
        if not d.ns:
            return d.step <= to_step
        memory = self._memories.get(d.ns)
        root = memory.roots.get(d.step) if memory is not None else None
        return root is None or root <= to_step

    def _redaction_note(self, found: list[Divergence]) -> list[str]:
        """Why a recording with secrets in it may diverge where nothing changed: the replay is handed
        the redacted values, and a node that reads a secret's own characters decides differently."""
        count = self.run.redactions
        if not found or not count:
            return []
        return [
            f"the recording had {count} secret value{'s' * (count != 1)} redacted, and the replay was handed them redacted: "
            "a node that reads a secret itself (its prefix, its length) decides differently (--ignore what it writes, or record with fewer redact_keys)"
        ]

    # -- pieces ------------------------------------------------------------------------
    def _keep_command_route(self, step: int, update: Any, as_node: str | None) -> tuple[Any, str | None, str | None]:
        """``(values, as_node, note)`` for an edit after a node that routed with ``Command(goto=...)``.

        LangGraph's ``update_state`` runs the node's writers, not the node: a
        decision made inside the node (its ``goto``) is not made again, and the
        edited run would stop right after the edit. The edit is applied as that
        node's ``Command`` with the recorded ``goto``, so the fork goes where the
        recording went and the edit flows on from there. When that cannot be
        done, ``note`` says why (the report shows it).
        """
        try:
            detail = self.store.step_detail(self.run.id, step, typed=True)  # Send packets as the graph's types
        except GraphtapeError:
            return update, as_node, None
        # A subgraph node's Command(graph=Command.PARENT) is its root node's route ("parent-command").
        commands = [r for r in detail.routes if r.kind in ("command", "parent-command") and r.destinations]
        if not commands or not isinstance(update, dict):
            return update, as_node, None
        from langgraph.types import Command, Send

        sources = sorted({r.source for r in commands})
        node = as_node or (sources[0] if len(sources) == 1 else None)
        goto: list[Any] = []
        sent = False
        for r in commands:
            if r.source != node:
                continue
            left = list(r.destinations)
            for packet in r.sends:  # Command(goto=[Send(...), ...]): each packet as it was sent
                if isinstance(packet, dict) and isinstance(packet.get("node"), str):
                    goto.append(Send(packet["node"], packet.get("arg")))
                    sent = True
                    if packet["node"] in left:
                        left.remove(packet["node"])
            goto += [d for d in left if d != "__end__"]
        if node is None or not goto:
            went = "; ".join(f"{r.source} → {', '.join(r.destinations)}" for r in commands)
            why = f"the edit is applied as {as_node!r}, so the fork goes on from {as_node}'s edges" if as_node else f"several nodes routed with Command in step {step} ({', '.join(sources)}): name one with as_node to follow its goto"
            return update, as_node, f"step {step} routed with Command(goto=...) ({went}), which LangGraph does not take again after an edit: {why}"
        note = f"step {step} sent Send packets with Command(goto=...): the fork sends them as recorded, with the arguments worked out before the edit" if sent else None
        return Command(update=update, goto=goto if len(goto) > 1 else goto[0]), node, note

    def _edit_failed(self, step: int, ns: str, exc: BaseException) -> str:
        """Why an edit does not apply, in one line; a step where several nodes ran names them."""
        first = str(exc).splitlines()[0] if str(exc) else ""
        if type(exc).__name__ == "InvalidUpdateError" and first.startswith("Ambiguous update"):
            try:
                nodes = list(dict.fromkeys(t.node for t in self.store.step_detail(self.run.id, step, ns).tasks))
            except GraphtapeError:
                nodes = []
            if len(nodes) > 1:
                return f"cannot apply the edit at step {step}: {', '.join(nodes)} all ran in it; say which node the edit is from (as_node, or --as-node)"
        frames = frames_of(exc)
        where = f" (raised at {frame_text(raised_at(frames))})" if frames else ""
        return f"cannot apply the edit at step {step}: {type(exc).__name__}: {first}{where}"

    def _carry_over(self, graph: Any, saver: Any, config: dict, restored: Restored) -> tuple[Carried, ...]:
        """Hand LangGraph the writes of the tasks the recording carried over from an earlier run.

        A run that went on after an error (``invoke(None)``) did not run the tasks of its first
        step that had finished before the error: LangGraph applied what they wrote then. The
        replay gives the restored checkpoint the same pending writes, under the ids LangGraph
        gives those tasks now (matched by node and path), so it does not run them either.
        """
        after = next((s for s in self._root_steps() if s.step > restored.root_step), None)
        if after is None or not after.flags & FLAG_CARRIED:
            return ()
        recorded = [t for t in self.store.step_detail(self.run.id, after.step, typed=True).tasks if t.carried is not None]
        live = list(graph.get_state(config).tasks)
        target = {"configurable": {**config["configurable"], "checkpoint_ns": "", "checkpoint_id": restored.checkpoint["id"]}}
        out = []
        for t in recorded:
            match = next((x for x in live if x.name == t.node and task_path(x.path) == t.path), None) or next((x for x in live if x.name == t.node), None)
            if match is not None:
                live.remove(match)
                task_id, path = match.id, task_path(match.path)
            elif t.path.startswith("~__pregel_push"):
                # A functional API's @task call, which the state does not list: LangGraph gives it
                # the same id again from the same checkpoint and path, and finds its writes by it.
                task_id, path = t.task_id, t.path
            else:
                continue  # the graph has no such task now: it runs, and the comparison says so
            writes = tuple(as_writes(t.carried))
            saver.put_writes(target, writes, task_id, path)
            out.append(Carried(task_id, t.node, path, writes))
        return tuple(out)

    def _entered_subgraphs(self, path: tuple[str, ...], after: int) -> list[list[Any]]:
        """Typed step details of each time the subgraph at ``path`` (node names from the root) was
        entered, within root entries after root step ``after``, in order."""
        entered = self._entered()
        names = [
            n for n in self._namespaces() if [p.split(":")[0] for p in n.split("|")] == list(path) and entered.get(n.split("|")[0], -1) > after
        ]
        return [self.store.step_details(self.run.id, n, typed=True) for n in _by_spawn(names, lambda n: self._details(n))]

    def _runs_again(self, n: str, root_after: int) -> bool:
        """Whether a replay going on after root step ``root_after`` makes the recorded subgraph
        namespace ``n`` again: its task ran after that step or, inside a subgraph with memory of its
        own, after the step of that memory the replay starts from."""
        top = n.split("|")[0]
        memory = self._memories.get(top)
        if memory is None:
            return self._entered().get(top, -1) > root_after
        if memory.after is None:
            return True
        child = "|".join(n.split("|")[:2])
        spawned = next((d.step.step for d in self._details(top) for t in d.tasks if child in t.subgraph_ns), None)
        return spawned is not None and spawned > memory.after

    def _task_paths(self) -> dict[str, str]:
        """Each recorded task's path (the same in a replay, unlike its id), by task id."""
        return {t.task_id: t.path for n in self._namespaces() for d in self._details(n) for t in d.tasks}

    def _interrupts(self) -> dict[str, list[Any]]:
        """Each recorded task's interrupt values, in order (a call inside it that stopped at
        ``interrupt()`` is answered by stopping there again)."""
        out: dict[str, list[Any]] = {}
        for n in self._namespaces():
            for d in self._details(n):
                for e in d.events:
                    if e.kind == "interrupt" and e.task_id:
                        out.setdefault(e.task_id, []).append(e.value)
        return out

    def _entered(self) -> dict[str, int]:
        if self._entered_memo is None:
            self._entered_memo = _entered_at(self._details(""))
        return self._entered_memo

    def _entered_within(self) -> dict[str, int]:
        """Each subgraph namespace (and its path without task ids) -> its parent's step that ran it."""
        full = entered_steps(self._namespaces(), self._details)
        by_path: dict[str, int] = {}
        for n, at in full.items():
            by_path.setdefault(ns_path(n), at)
        return {**by_path, **full}

    def _replayed_entries(self, run_id: str | None) -> dict[str, int]:
        """Each namespace of the replay -> its parent's step that ran it (root steps are numbered
        as the recording's); empty where the replay was not recorded."""
        if run_id is None:
            return {}
        return entered_steps(self.store.namespaces(run_id), lambda n: self.store.step_details(run_id, n, writes=False))

    def _namespaces(self) -> list[str]:
        """The recording's namespaces, read once per replay."""
        if self._namespaces_memo is None:
            self._namespaces_memo = self.store.namespaces(self.run.id)
        return self._namespaces_memo

    def _root_steps(self) -> list[Any]:
        """The recording's root steps, read once per replay."""
        if self._root_steps_memo is None:
            self._root_steps_memo = self.store.list_steps(self.run.id)
        return self._root_steps_memo

    def _details(self, ns: str) -> list[Any]:
        """The recording's step details of a namespace, read once per replay (routes as stored: only the comparer reads them)."""
        memo = self._details_memo
        if ns not in memo:
            memo[ns] = self.store.step_details(self.run.id, ns, writes=False, encoded_routes=True)
        return memo[ns]

    def _config(self, thread_id: str, restored: Restored) -> dict[str, Any]:
        recorded = self._run_config
        conf = recorded.get("configurable")
        conf = {k: v for k, v in conf.items() if k not in _NOT_FORWARDED and not str(k).startswith("__")} if isinstance(conf, dict) else {}
        # A default the recorded graph bound (with_config) that today's graph binds too is today's:
        # a changed default shows as a difference. A graph given without the binding runs as recorded.
        today = (getattr(self.graph, "config", None) or {}).get("configurable")
        bound = recorded.get("bound")
        if isinstance(today, dict) and isinstance(bound, list):
            for key in bound:
                if isinstance(key, str) and key in today:
                    conf.pop(key, None)
        conf["thread_id"] = thread_id
        config: dict[str, Any] = {"configurable": conf}
        try:
            self._context = recorded_context(self.graph, recorded.get("context"))
        except GraphtapeError as exc:
            raise ReplayError(str(exc)) from None
        self._ran_async = recorded.get("async") is True
        limit = recorded.get("recursion_limit")
        if not isinstance(limit, int):
            limit = _default_recursion_limit()
        if limit is not None:
            # LangGraph stops at (start step + 1) + limit + 1, counted from where it
            # starts; a fresh run starts at its input step, one before the checkpoint a run
            # that goes on with a thread starts from. Keep the recorded end. A fixture that
            # starts later says how many steps before its start the recording began.
            later = recorded.get("recursion_offset")
            later = later if type(later) is int and later > 0 else 0
            first_step = self._root_steps()[0]
            fresh = later > 0 or first_step.source == "input"
            # Only the root run counts from where it resumes: subgraphs and the error keep the recorded limit.
            self._limits = lowered_limit(limit, restored.root_step - (first_step.step - later), fresh=fresh)
            if restored.ns:
                # The subgraph resumed in its own namespace counts its limit from there as well.
                first_ns = self.store.list_steps(self.run.id, restored.ns)[0]
                inner = lowered_limit(limit, restored.step - first_ns.step, fresh=first_ns.source == "input")
                self._limits = dataclasses.replace(self._limits, resumed_ns=restored.ns, ns_lowered=inner.lowered, ns_stop_shift=inner.stop_shift)
            config["recursion_limit"] = self._limits.lowered
            self._resume_limit = limit
        return config

    def _memory_limits(self) -> Limits | None:
        """The limits, with the stop of each persistent subgraph put back at its input step moved
        one step back: LangGraph resumes it there, a step after the recording's loop began."""
        resumed = {n: -1 for n, m in self._memories.items() if m.at_input}
        if self._limits is None or not resumed:
            return self._limits
        return dataclasses.replace(self._limits, ns_shifts=resumed)

    def _calls_after(self, root_step: int, ns: str, step: int) -> list[CallInfo]:
        entered = self._entered()
        out = []
        for c in self.store.calls(self.run.id):
            if c.step is None:
                continue
            if c.ns == ns and c.step > step:
                out.append(c)
            elif c.ns == "" and c.step > root_step:
                out.append(c)
            elif c.ns not in ("", ns) and self._entered_by(c, entered) > root_step:
                out.append(c)
        return out

    def _entered_by(self, call: CallInfo, entered: dict[str, int]) -> int:
        """The root step whose task ran the subgraph ``call`` was made in (-1: none found).

        A subgraph compiled with ``checkpointer=True`` keeps one namespace, its node's name,
        whichever task runs it: the task whose run spans the call's start made it."""
        top = call.ns.split("|")[0]
        if top in entered:
            return entered[top]
        if not is_persistent(top):
            return -1
        for d in self._details(""):
            for t in d.tasks:
                if t.node == top and t.started_at is not None and t.duration_ms is not None and t.started_at <= call.started_at <= t.started_at + t.duration_ms / 1000:
                    return d.step.step
        return -1

    def _as_answered(self, calls: list[CallInfo]) -> list[CallInfo]:
        """The recorded calls as the replay answers them.

        A call cancelled while it ran is kept as abandoned (its node stopped waiting for it) and
        is held, never failed. But where the cancellation went through its node too (the run was
        cancelled, or LangGraph cancelled the task when another of its step failed), the task
        ended as cancelled: the call is answered so (after its hold), and the task ends so again.
        """
        if not any(c.error_type == "Unfinished" and c.latency_ms is not None for c in calls):
            return calls
        cancelled = {t.task_id: t.error_message for n in self._namespaces() for d in self._details(n) for t in d.tasks if t.error_type == "CancelledError"}
        return [
            dataclasses.replace(c, error_type="CancelledError", error_message=cancelled[c.task_id])
            if c.error_type == "Unfinished" and c.latency_ms is not None and c.task_id in cancelled
            else c
            for c in calls
        ]

    def _delay_test(self) -> Callable[[CallInfo], float]:
        """How long to hold each recorded call: 0, unless its node stopped waiting for it.

        A node that gave up on a slow call (a timeout) must give up again, so
        such a call is replayed as slow as it was; one that never returned is
        held until the recorded run had ended, one its caller cancelled (``asyncio.wait_for``)
        until just after it was cancelled. Either way it is never raised back as a
        cancellation: the node's own timeout ends it again.
        """
        ends: dict[str, float] = {}
        for n in self._namespaces():
            for d in self._details(n):
                for t in d.tasks:
                    if t.started_at is not None and t.duration_ms is not None:
                        ends[t.task_id] = t.started_at + t.duration_ms / 1000
        run_end = self.run.ended_at

        def delay(call: CallInfo) -> float:
            if call.error_type in ("Unfinished", "CancelledError"):  # CancelledError: how older recordings kept a cancelled call
                if call.latency_ms is not None:
                    return call.latency_ms / 1000 + 0.05
                return (run_end - call.started_at + 0.05) if run_end is not None else 1.0
            if call.latency_ms is None:
                return 0.0
            finished = call.started_at + call.latency_ms / 1000
            task_end = ends.get(call.task_id or "")
            late = (task_end is not None and finished > task_end + 0.001) or (run_end is not None and finished > run_end + 0.001)
            return call.latency_ms / 1000 if late else 0.0

        return delay

    def _stopped_at(self, start: int) -> int | None:
        """The last completed root step of a run whose process died (or that was cancelled) while
        it recorded, if the replay starts before it: what happened after it was never recorded, so
        nothing after it can be answered or compared. Of an incomplete run (the store did not
        take all of it), the last step before the first one missing."""
        done = sorted({s.step for s in self._root_steps() if not s.pending})
        if self.run.status == "incomplete":
            last = last_before_gap(done, start)
            return last if last is not None and last > start else None
        if self.run.status != "interrupted" or self.run.status_reason not in ("killed", "cancelled", "exited"):
            return None
        last = done[-1] if done else None
        return last if last is not None and last > start else None

    def _time_travel(self, config: dict, restored: Restored) -> dict | None:
        """The config that starts the replay as the recording went on from ``restored``: addressed
        to that checkpoint when LangGraph forked there (the run went back to an earlier checkpoint,
        so its next step is a ``fork`` checkpoint and that step's tasks ran again)."""
        after = next((s for s in self._root_steps() if s.step > restored.root_step), None)
        if after is None or after.source != "fork":
            return None
        return {**config, "configurable": {**config["configurable"], "checkpoint_id": restored.checkpoint["id"]}}

    def _drive(self, app: Any, config: dict, *, shift: int = 0, first: dict | None = None, opens: bool = False) -> BaseException | None:
        """Run to the end, answering recorded interrupts with their recorded resume values.

        ``shift``: the root steps a fork's edit added (its checkpoint): the recording's step of an
        interrupt is the replay's, less that. ``first``: the config of the first invocation, when
        it differs (it addresses a checkpoint); resumes go on from the thread's latest. ``opens``:
        the replay starts where the run started, so it is invoked with what the run was given.
        """
        from langgraph.types import Command

        resumes, updates, openings = self._recorded_resumes()
        payload: Any = None
        start = self._span[0]
        if opens and start == self._root_steps()[0].step and start + 1 in openings:
            # The run was invoked with Command(update=..., goto=...): it is its input, as recorded
            # (a goto is a write to the node's trigger channel).
            payload = Command(update=openings[start + 1])
        stops = self._breakpoints()
        edits = self._edits_while_paused()
        for _ in range(1000):
            try:
                if self._run_once(app, payload, self._as_run(first or config), stops):
                    return None  # the window ends here, as asked
            except ReplayMiss as exc:
                return exc
            except Exception as exc:  # noqa: BLE001 - the graph's own failure is part of the comparison
                return exc
            first, stops = None, {}
            if self._saver is not None:
                self._saver.forget_held()
            snapshot = app.get_state(config)
            pending = [(t.name, i, task_path(t.path)) for t in snapshot.tasks for i in t.interrupts] or self._unlisted_interrupts(config)
            if not pending:
                return None
            step = (snapshot.metadata or {}).get("step", 0) + 1 - shift
            edited = step in edits
            while step in edits:
                # The state was edited while the run waited here: each edit is a step, and the
                # answer goes on from the last.
                restore_edit(self.store, self.run.id, step, self._saver, config, revive=self.types.revive)
                step += 1
            edited = self._restore_subgraph_edits(app, config, step) or edited
            values = resumes.get(step)
            if not values:
                return None  # the recording stopped at this interrupt too (or diverged: compared later)
            edit = updates.pop(step, None)
            # After an edit the waiting task starts again at the new checkpoint, under a new interrupt
            # id: a lone answer is given as a value, as it was given then (by_id).
            answer, left = _resume_for(pending, values, by_id=not edited)
            payload = Command(resume=answer, update=edit) if edit else Command(resume=answer)
            if self._resume_limit is not None:
                config = {**config, "recursion_limit": self._resume_limit}  # a resume counts from itself, as recorded
            resumes[step] = left
        return None

    def _unlisted_interrupts(self, config: dict) -> list[tuple[str | None, Any, str | None]]:
        """Interrupts waiting on the thread that LangGraph's state does not list: a task a Command's
        goto started (its trigger is a write of no task, which the state's next tasks leave out)."""
        found = self._saver.get_tuple({"configurable": {**config["configurable"], "checkpoint_ns": ""}}) if self._saver is not None else None
        return [(None, i, None) for _, ch, v in (found.pending_writes or ()) if ch == INTERRUPT for i in (v if isinstance(v, (list, tuple)) else [v])] if found is not None else []

    def _restore_subgraph_edits(self, app: Any, config: dict, step: int) -> bool:
        """Put back the ``update_state`` edits the recording holds in the namespaces of subgraphs
        waiting at root ``step``, each into the same subgraph waiting in the replay (its namespace
        holds the replay's task id); True if there were any."""
        recorded = {n: e for n in self._namespaces() if n and self._entered().get(n.split("|")[0]) == step and (e := self._edited_steps(n))}
        if not recorded or self._saver is None:
            return False
        live = _by_node_path(waiting_subgraphs(app.get_state(config, subgraphs=True)))
        restored = False
        for ns, steps in recorded.items():
            into = live.get(node_path(ns))
            if into is None:
                continue  # not waiting in the replay (or ambiguous): the comparison says where it went
            for s in steps:
                restore_edit(self.store, self.run.id, s, self._saver, config, revive=self.types.revive, ns=ns, into=into)
            restored = True
        return restored

    def _edited_steps(self, ns: str) -> list[int]:
        """Steps of namespace ``ns`` the recording holds as edits made while it waited at an interrupt."""
        return _edits_while_paused_in(self.store.list_steps(self.run.id, ns))

    def _edits_while_paused(self) -> set[int]:
        """Root steps the recording holds as ``update_state`` checkpoints made between an interrupt and its answer."""
        return set(_edits_while_paused_in(self._root_steps()))

    def _breakpoints(self) -> dict[str, Any]:
        """Breakpoints the run was invoked with (``invoke(..., interrupt_after=[...])``), as
        recorded: its first invocation stopped there, so the replay's does too."""
        stream = self._run_config.get("stream")
        stream = stream if isinstance(stream, dict) else {}
        return {k: v for k in ("interrupt_before", "interrupt_after") if _is_breakpoint_list(v := stream.get(k))}

    def _as_run(self, config: dict) -> dict:
        """The config the graph runs with: a run given no thread gets none (the state is read with one)."""
        if not self._unthreaded:
            return config
        return {**config, "configurable": {k: v for k, v in config["configurable"].items() if k != "thread_id"}}

    def _run_once(self, app: Any, payload: Any, config: dict, stops: Mapping[str, Any] | None = None) -> bool:
        """One invocation; True when it was stopped at ``to_step`` (the end of the window)."""
        to_step = self._to_step
        is_async = self._ran_async or _is_async_only(self.graph)
        kwargs = {"context": self._context} if self._context is not None else {}
        kwargs.update(stops or {})
        if to_step is None and self.progress is None:
            if is_async:
                _run_coroutine(lambda: app.ainvoke(payload, config, **kwargs))
            else:
                app.invoke(payload, config, **kwargs)
            return False
        first, last = self._span
        total = (to_step if to_step is not None else last) - first

        def reached(chunk: Any) -> bool:
            step = (chunk.get("metadata") or {}).get("step", -1) if isinstance(chunk, dict) else -1
            if self.progress is not None and step > first and (chunk.get("config") or {}).get("configurable", {}).get("checkpoint_ns", "") == "":
                self.progress("replaying supersteps", min(step - first, total), total)
            return to_step is not None and step >= to_step

        if is_async:

            async def window() -> bool:
                async for chunk in app.astream(payload, config, stream_mode="checkpoints", **kwargs):
                    if reached(chunk):
                        return True
                return False

            return bool(_run_coroutine(window))
        stream = app.stream(payload, config, stream_mode="checkpoints", **kwargs)
        try:
            for chunk in stream:
                if reached(chunk):
                    return True
            return False
        finally:
            stream.close()

    def _recorded_resumes(self) -> tuple[dict[int, list[Resume]], dict[int, list[tuple[str, Any]]], dict[int, list[tuple[str, Any]]]]:
        """Per root step, the recorded resume values, the writes a resume brought with it
        (``Command(resume=..., update=...)``), and the writes a run invoked with
        ``Command(update=..., goto=...)`` was given (an update before any answer), as LangGraph's update tuples."""
        out: dict[int, list[Resume]] = {}
        updates: dict[int, list[tuple[str, Any]]] = {}
        openings: dict[int, list[tuple[str, Any]]] = {}
        short: dict[int, int] = {}  # root steps whose questions outnumber the root's own answers: by how many
        if any(s.flags & FLAG_RESUME for s in self._root_steps()):
            for d in self.store.step_details(self.run.id, "", typed=True):
                for e in d.events:
                    if e.kind == "resume":
                        out.setdefault(d.step.step, []).append((e.node, e.value, None, _NOT_KNOWN))
                    elif e.kind == "update":
                        (updates if d.step.step in out else openings).setdefault(d.step.step, []).extend(as_writes(e.value))
                asked = sum(1 for e in d.events if e.kind == "interrupt")
                if d.step.step in out and asked > len(out[d.step.step]) and not d.step.pending:
                    short[d.step.step] = asked - len(out[d.step.step])
        for step, found in self._subgraph_resumes(answered=set(out) - set(short)).items():
            if step in short:
                # A node that asked, then called a subgraph that asked too: the subgraph's answer
                # is recorded in its own steps, after the node's.
                out[step].extend(found[: short[step]])
            else:
                out[step] = found
        return out, updates, openings

    def _subgraph_resumes(self, answered: set[int]) -> dict[int, list[Resume]]:
        """Resumes of interrupts raised inside subgraphs that the run answered by interrupt id
        (``Command(resume={id: value})``, how parallel interrupts are answered): LangGraph hands
        those to the waiting tasks alone, so they are recorded in the subgraphs' steps, not the
        root's. Per root step (those the root's own resumes answered left out, and their
        subgraphs not read), each with the root task it answers (its node and task path)."""
        waiting: dict[str, tuple[int, Any]] = {}  # top subgraph namespace -> (root step, root task)
        for d in self._details(""):
            if d.step.step in answered:
                continue
            asked = {e.task_id for e in d.events if e.kind == "interrupt"}
            for t in d.tasks:
                if t.task_id in asked or t.interrupts:
                    for sub in t.subgraph_ns:
                        waiting.setdefault(sub.split("|")[0], (d.step.step, t))
        out: dict[int, list[Resume]] = {}
        if not waiting:
            return out
        for n in self._namespaces():
            found = waiting.get(n.split("|")[0]) if n else None
            if found is None:
                continue
            step, task = found
            for d in self.store.step_details(self.run.id, n, typed=True):
                out.setdefault(step, []).extend((task.node, value, task.path, asked) for value, asked in _answers_with_questions(d.events))
        return out

    def _compare(self, run_id: str, restored: Restored, ns: str, step: int, offset: int, entered: dict[str, int]) -> list[Divergence]:
        if self.progress is not None:
            self.progress("comparing with the recording", 0, None)
        replayed: dict[str, list[Any]] = {}

        def read_details(run: str, n: str) -> list[Any]:
            if run == self.run.id:
                return self._details(n)
            if n not in replayed:
                replayed[n] = self.store.step_details(run, n, writes=False, encoded_routes=True)
            return replayed[n]

        memories = {n: m for n, m in self._memories.items() if n != ns}
        roots = {n: m.roots for n, m in memories.items()}
        cmp = RunComparison(self.store, self.normalize, self.mode, order=entered, arg_normalize=self.arg_normalize, read_details=read_details, roots=roots)
        # Calls answered from the recording match it by construction; only live ones are compared after the fact.
        live_kinds = [k for k in ("tool", "model") if not self.mode.answers(k)]
        rec_calls = self.store.calls(self.run.id) if live_kinds else []
        rep_calls = self.store.calls(run_id) if live_kinds else []
        rec_root_after = restored.root_step
        root_offset = 0  # a fork's root steps are stored with the original's numbers (Lineage.step_shift)
        cmp.namespace(Side(self.run.id, "", rec_root_after), Side(run_id, "", rec_root_after + root_offset), _in_ns(rec_calls, ""), _in_ns(rep_calls, ""))
        if ns:
            cmp.namespace(Side(self.run.id, ns, step), Side(run_id, ns, step + offset), _in_ns(rec_calls, ns), _in_ns(rep_calls, ns))
        for n, after in restored.between:  # the subgraphs holding ``ns`` go on from where they were put back
            cmp.namespace(Side(self.run.id, n, after), Side(run_id, n, after), _in_ns(rec_calls, n), _in_ns(rep_calls, n))
        resumed = {ns, *(n for n, _ in restored.between)}
        for n, memory in memories.items():
            # A subgraph with memory of its own keeps one namespace across its node's runs: the
            # replay's steps there go on from the step put back, under the recording's numbers.
            cmp.namespace(Side(self.run.id, n, memory.after), Side(run_id, n, memory.after), _in_ns(rec_calls, n), _in_ns(rep_calls, n))
        rec_ns = [n for n in self._namespaces() if n and n not in resumed and n not in memories and self._runs_again(n, rec_root_after)]
        rep_ns = [n for n in self.store.namespaces(run_id) if n and n not in resumed and n not in memories]
        rec_ns = _by_spawn(rec_ns, lambda n: read_details(self.run.id, n))
        rep_ns = _by_spawn(rep_ns, lambda n: read_details(run_id, n))
        for a, b in _pair_namespaces(rec_ns, rep_ns):
            if a is None or b is None:
                continue  # a subgraph that did (not) run shows as a route divergence in its parent
            cmp.namespace(Side(self.run.id, a, None), Side(run_id, b, None), _in_ns(rec_calls, a), _in_ns(rep_calls, b))
        return cmp.found


def _miss_outcome(live: LiveCall) -> str:
    """What became of a call the recording could not answer, as a report says it."""
    if live.kind == HTTP:
        return " (refused inside the node: it never left the machine)"
    if live.kind == STORE and is_write(live.name):
        return " (the write was kept in the replay, as every replay's writes are)"
    return " (the replay stopped here)"


def _state_keys(graph: Any) -> list[str]:
    """The keys a state update may name: the graph's channels, without LangGraph's own."""
    return sorted(k for k in getattr(graph, "channels", {}) if not k.startswith("__") and ":" not in k)


def _check_edit_keys(graph: Any, update: Any) -> None:
    """A fork edit naming a key the state does not have is refused before anything runs."""
    if not isinstance(update, Mapping):
        return
    keys = _state_keys(graph)
    if not keys:
        raise ReplayError("this graph keeps no state to edit (a functional-API entrypoint keeps only what it returns): replay it instead")
    unknown = [k for k in update if k not in keys]
    if keys and unknown:
        close = difflib.get_close_matches(str(unknown[0]), keys, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ReplayError(f"the state has no key {unknown[0]!r}{hint}: its keys are {', '.join(keys)}")


def _edited_input(checkpoint: Mapping[str, Any], update: Mapping[str, Any]) -> Any:
    """The run's recorded input with the edited keys replaced (an edit at the input step)."""
    recorded = (checkpoint.get("channel_values") or {}).get("__start__")
    if isinstance(recorded, Mapping):
        return {**recorded, **update}
    return dict(update)


def _in_ns(calls: list[CallInfo], ns: str) -> list[CallInfo]:
    return [c for c in calls if c.ns == ns]


def _by_spawn(namespaces: list[str], read: Callable[[str], list[Any]]) -> list[str]:
    """Subgraph namespaces in the order of the tasks that entered them, level by level.

    Parallel tasks (two ``Send`` packets to one subgraph node) enter their subgraphs
    in whatever order their threads get there; the step and path of each entering
    task (``__pregel_push`` and the packet's index) are the same in every run.
    """
    entered: dict[str, tuple[int, str]] = {}
    for parent in sorted({n.rpartition("|")[0] for n in namespaces}):
        for d in read(parent):
            for t in d.tasks:
                for sub in t.subgraph_ns:
                    entered.setdefault(sub, (d.step.step, t.path))

    def key(n: str) -> tuple[tuple[int, str], ...]:
        parts = n.split("|")
        return tuple(entered.get("|".join(parts[: i + 1]), (1 << 30, "")) for i in range(len(parts)))

    return sorted(namespaces, key=key)  # stable: what no task names keeps its order


def _pair_namespaces(rec: list[str], rep: list[str]) -> list[tuple[str | None, str | None]]:
    """Pair subgraph namespaces by their path without task ids, in the order they are given."""
    by_path: dict[str, list[str]] = {}
    for n in rep:
        by_path.setdefault(ns_path(n), []).append(n)
    out: list[tuple[str | None, str | None]] = []
    for n in rec:
        same = by_path.get(ns_path(n))
        if n in rep:
            out.append((n, n))
            if same and n in same:
                same.remove(n)
        else:
            out.append((n, same.pop(0) if same else None))
    out.extend((None, n) for rest in by_path.values() for n in rest)
    return out


def _entered_at(root_details: list[Any]) -> dict[str, int]:
    """Root step that entered each top-level subgraph namespace (``"child:<task id>"``)."""
    out: dict[str, int] = {}
    for d in root_details:
        for t in d.tasks:
            for sub in t.subgraph_ns:
                out.setdefault(sub.split("|")[0], d.step.step)
    return out


# A recorded resume: the node it answered, the value, and the answered root task's path when the
# resume was recorded inside a subgraph (see ``_subgraph_resumes``).
Resume = tuple[str | None, Any, str | None, Any]  # (node, answer, task path, the question it answered)
_NOT_KNOWN = object()  # a question not known: a root task's answers are given by task, in order


def _answers_with_questions(events: list[Any]) -> list[tuple[Any, Any]]:
    """A subgraph step's answers, each with the question its task asked it about (the task's k-th
    answer answers its k-th question): parallel tasks inside a subgraph all surface under one
    root task, so their answers go by the question each waiting task asks again."""
    asked: dict[Any, list[Any]] = {}
    out: list[tuple[Any, Any]] = []
    for e in events:
        if e.kind == "interrupt":
            asked.setdefault(e.task_id, []).append(e.value)
    taken: dict[Any, int] = {}
    for e in events:
        if e.kind == "resume":
            k = taken.get(e.task_id, 0)
            taken[e.task_id] = k + 1
            questions = asked.get(e.task_id, [])
            out.append((e.value, questions[k] if k < len(questions) else _NOT_KNOWN))
    return out


def _resume_for(pending: list[tuple[str, Any, str]], values: list[Resume], *, by_id: bool = True) -> tuple[Any, list[Resume]]:
    """The answer for the waiting interrupts, and the recorded answers left for later. A lone
    interrupt is answered by its id, unless ``by_id`` is off (its id is not the one it waits under)."""
    left = list(values)
    if len(pending) == 1:
        # By id when it has one: parallel tasks may all be waiting while the state shows one
        # (a functional entrypoint surfaces one at a time), and a bare value answers none of them.
        intr = pending[0][1]
        pick = _answering(left, intr) or left[0]
        left.remove(pick)
        return ({intr.id: pick[1]} if by_id and isinstance(getattr(intr, "id", None), str) else pick[1]), left
    out = {}
    for node, intr, path in pending:
        # The answer to the question it asks, else the same task (its path: a Send packet's
        # place), else the same node, else the next in order.
        pick = _answering(left, intr) or next((v for v in left if v[2] is not None and v[2] == path), None) or next((v for v in left if v[0] == node), left[0] if left else None)
        if pick is None:
            break
        left.remove(pick)
        out[intr.id] = pick[1]
    return out, left


def _answering(left: list[Resume], intr: Any) -> Resume | None:
    """The recorded answer to the question ``intr`` asks, when answers are known by question."""
    asked = getattr(intr, "value", _NOT_KNOWN)
    for v in left:
        if v[3] is not _NOT_KNOWN:
            try:
                if v[3] == asked:
                    return v
            except Exception:  # noqa: BLE001 - values that cannot be compared answer nothing here
                continue
    return None


def _end_divergences(recorded: Any, replayed: Any) -> list[Divergence]:
    rec = (recorded.status, recorded.error_type, recorded.error_message)
    rep = (replayed.status, replayed.error_type, replayed.error_message)
    if rec == rep:
        return []
    return [Divergence("error", None, None, f"the run ended {replayed.status} instead of {recorded.status}", {"status": rec[0], "error": rec[1], "message": rec[2]}, {"status": rep[0], "error": rep[1], "message": rep[2]})]


def _run_coroutine(make: Callable[[], Any]) -> Any:
    """Run an async graph to completion, also when called from inside a running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    # Inside a loop (an async test, a notebook): run on a thread with its own loop, same context.
    import concurrent.futures
    import contextvars

    ctx = contextvars.copy_context()
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(ctx.run, lambda: asyncio.run(make())).result()


def _default_recursion_limit() -> int | None:
    try:
        from langgraph._internal._config import DEFAULT_RECURSION_LIMIT
    except ImportError:  # moved in another LangGraph version: leave LangGraph's default alone
        return None
    return DEFAULT_RECURSION_LIMIT  # as it is: its type tells LangGraph's config merges it was not given


def _is_breakpoint_list(value: Any) -> bool:
    """``"*"`` or a list of node names: what LangGraph takes (a recording is data from elsewhere)."""
    return value == "*" or isinstance(value, list) and all(type(n) is str for n in value) and bool(value)


def _is_async_only(graph: Any) -> bool:
    """Whether some node has only an async implementation, so the graph must run with ``ainvoke``."""
    for node in graph.nodes.values():
        bound = getattr(node, "bound", None)
        if getattr(bound, "func", True) is None and getattr(bound, "afunc", None) is not None:
            return True
    return False


def _with_mocked_nodes(graph: Any, store: RunStore, run_id: str, names: list[str]) -> Any:
    """A copy of ``graph`` whose named nodes return their recorded updates instead of running."""
    from langchain_core.runnables import RunnableLambda
    from langgraph.types import Command

    recorded: dict[tuple[int, str], list[Any]] = {}
    routes: dict[tuple[int, str], list[str]] = {}
    for d in store.step_details(run_id, "", typed=True):
        for t in d.tasks:
            if t.node in names:
                recorded.setdefault((d.step.step, t.node), []).append(t.writes or {})
        for r in d.routes:
            if r.kind == "command" and r.source in names:
                routes.setdefault((d.step.step, r.source), []).extend(r.destinations)

    def serve(name: str) -> Callable[..., Any]:
        def node(state: Any, config: dict) -> Any:
            step = (config.get("metadata") or {}).get("langgraph_step")
            updates = recorded.get((step, name))
            if not updates:
                raise ReplayMiss(Miss(LiveCall("node", name, step, "", name, None)))
            update = updates.pop(0)
            goto = routes.get((step, name))
            return Command(update=update, goto=goto) if goto else update

        return node

    nodes = dict(graph.nodes)
    for name in names:
        nodes[name] = nodes[name].copy(update={"bound": RunnableLambda(serve(name), name=name)})
    return graph.copy(update={"nodes": nodes})


def _edits_while_paused_in(steps: Iterable[Any]) -> list[int]:
    """Of a namespace's steps (in order), the ``update_state`` checkpoints made between an interrupt
    and its answer: the first holds the waiting task, the others follow it."""
    out: list[int] = []
    for s in steps:
        if s.source == "update" and (s.flags & FLAG_INTERRUPT or (out and s.step - 1 == out[-1])):
            out.append(s.step)
    return out


def _by_node_path(namespaces: list[str]) -> dict[str, str]:
    """Live namespaces by their node path, where only one waits at that path."""
    seen: dict[str, list[str]] = {}
    for ns in namespaces:
        seen.setdefault(node_path(ns), []).append(ns)
    return {path: found[0] for path, found in seen.items() if len(found) == 1}
