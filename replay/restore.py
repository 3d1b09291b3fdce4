"""Put a recorded checkpoint back into a LangGraph saver, so the graph resumes there.

The graph is resumed, not rebuilt: the checkpoint keeps its recorded id, so
LangGraph derives the same task ids (and so the same subgraph namespaces)
for the next superstep, and its channel versions and versions-seen make the
same nodes (and pending Send packets) run next. A subgraph checkpoint is
restored together with the parent checkpoints above it, so the parent
re-enters the subgraph task and the subgraph resumes at its own step.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from graphtape.recorder import Checkpoint, RunStore, StepNotFound
from graphtape.recorder.session import NULL_TASK_ID  # LangGraph's writes of no task (private there)
from graphtape.replay.normalize import is_persistent


@dataclass(frozen=True, slots=True)
class Restored:
    """The checkpoints put into the saver: the root's, and the one replay starts from."""

    root_step: int
    ns: str
    step: int
    checkpoint: dict[str, Any]
    metadata: dict[str, Any]
    parent_id: str | None
    # The subgraph namespaces between the root and ``ns`` (a subgraph in a subgraph), each with the
    # step it was put back after: the replay goes on there from that step, not from its start.
    between: tuple[tuple[str, int], ...] = ()
    # The never-checkpointed channels' values handed to the resumed run (root only): what a fork
    # hands on past the checkpoint its edit makes.
    untracked: tuple[tuple[str, Any], ...] = ()


def _checkpoint_format() -> int:
    """The checkpoint format this LangGraph writes (4 in 1.x).

    Not ``langgraph.checkpoint.base.LATEST_VERSION``, which still says 2: a checkpoint
    marked older is migrated on load, and that migration drops the values of channels a
    node wrote last (a pydantic state lost its fields on every resume). The recorded
    channel values are in the running LangGraph's own format, so they are marked as such.
    """
    try:
        from langgraph.pregel._checkpoint import empty_checkpoint
    except ImportError:  # another layout: LangGraph's public empty checkpoint says what it writes
        from langgraph.checkpoint.base import empty_checkpoint
    return int(empty_checkpoint()["v"])


def as_langgraph(cp: Checkpoint) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(checkpoint, metadata)`` in LangGraph's shapes, as the running LangGraph writes them."""
    checkpoint = {
        "v": _checkpoint_format(),
        "id": cp.checkpoint_id,
        "ts": dt.datetime.now(dt.timezone.utc).isoformat(),
        "channel_values": dict(cp.channel_values),
        "channel_versions": dict(cp.channel_versions),
        "versions_seen": {k: dict(v) for k, v in cp.versions_seen.items()},
        "updated_channels": None,
    }
    metadata = {"source": cp.source or "loop", "step": cp.step, "parents": {}}
    return checkpoint, metadata


def replay_saver() -> Any:
    """A fresh in-memory saver whose channel versions continue the restored checkpoint's kind.

    LangGraph compares versions with ``>``: a recording made with integer
    versions (graphtape's own saver) must continue with integers, one made
    by a user's saver with that saver's strings. ``restore`` tells the saver
    which kind it put in. It keeps checkpoints by reference, like the saver a
    graph without memory records with: serializing every superstep (as
    LangGraph's ``InMemorySaver`` does) cost a replay more than running its graph.
    """
    from langgraph.checkpoint.base import copy_checkpoint
    from langgraph.checkpoint.memory import InMemorySaver

    from graphtape.recorder.saver import RunScopedSaver

    class ReplaySaver(RunScopedSaver):
        int_versions = False
        keeps_threads = True

        def get_next_version(self, current: Any, channel: Any) -> Any:
            if isinstance(current, int) or (current is None and self.int_versions):
                return (current or 0) + 1
            return InMemorySaver.get_next_version(self, current, channel)  # type: ignore[arg-type]

        held: tuple[str, str, str] | None = None  # (thread, ns, checkpoint id) of the untracked values put back
        # The serializer of the graph's own saver, when it has one: what LangGraph loads from such a
        # saver went through it (a tuple comes back a list), so a checkpoint the replay itself saved
        # is loaded through it too. The restored seeds are not: they were live values when recorded.
        serde: Any = None
        seeds: frozenset[str] = frozenset()  # ids of the restored checkpoints (set by ``restore``)
        # The thread a run given none is kept under: a replay of a run whose nodes saw no thread
        # runs without one too, on the thread its checkpoints were restored to. The checkpoints
        # it hands LangGraph still name that thread (LangGraph's checkpoint events read one).
        unthreaded: str | None = None

        def thread_key(self, conf: dict) -> str:  # type: ignore[override]
            if conf.get("thread_id") is None and self.unthreaded is not None:
                return self.unthreaded
            return RunScopedSaver.thread_key(conf)

        def get_tuple(self, config: Any) -> Any:
            # LangGraph changes a loaded checkpoint in place (versions_seen); the seed checkpoint
            # the replay records must stay as restored, so each load gets its own copy.
            found = super().get_tuple(config)
            if found is None:
                return None
            checkpoint = copy_checkpoint(found.checkpoint)
            if self.serde is None or checkpoint["id"] in self.seeds:
                return found._replace(checkpoint=checkpoint)
            checkpoint["channel_values"] = {ch: self._reloaded(v) for ch, v in checkpoint["channel_values"].items()}
            pending = [(task, ch, self._reloaded(v)) for task, ch, v in found.pending_writes or ()]
            return found._replace(checkpoint=checkpoint, pending_writes=pending)

        def _reloaded(self, value: Any) -> Any:
            try:
                return self.serde.loads_typed(self.serde.dumps_typed(value))
            except Exception:  # noqa: BLE001 - a value the serializer cannot take is handed on as it is
                return value

        def forget_held(self) -> None:
            """Drop the untracked values put back for the first invocation: LangGraph keeps them for
            one invocation, so a resume that loads the same checkpoint starts without them, as it did."""
            if self.held is not None:
                writes = self._writes.get(self.held, {})
                for key in [k for k in writes if k[0] == NULL_TASK_ID]:
                    del writes[key]
                self.held = None

    return ReplaySaver()


def restore(store: RunStore, run_id: str, step: int, ns: str, saver: Any, thread_id: str, *, untracked: Iterable[str] = (), revive: Callable[[str, dict[str, Any]], None] | None = None) -> Restored:
    """Restore ``run_id``'s checkpoint after ``step`` of namespace ``ns`` (and its parents) into ``saver``.

    ``untracked`` names the root graph's channels LangGraph never checkpoints (``UntrackedValue``);
    the recording keeps what they held with each step's state, and they are handed to the resumed run.
    ``revive(ns, values)`` gives restored values the types the graph declares (``state_types``).
    """
    root_step = step
    between: tuple[tuple[str, int], ...] = ()
    if ns:
        parent_ns, parent_step = _parent_of(store, run_id, ns)
        parent = restore(store, run_id, parent_step, parent_ns, saver, thread_id, untracked=untracked, revive=revive)
        root_step = parent.root_step
        between = (*parent.between, (parent_ns, parent_step)) if parent_ns else ()
    cp = store.checkpoint_at(run_id, step, ns, typed=True)
    checkpoint, metadata = as_langgraph(cp)
    if revive is not None:
        revive(ns, checkpoint["channel_values"])
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns}}
    if cp.parent_checkpoint_id:
        config["configurable"]["checkpoint_id"] = cp.parent_checkpoint_id
    if any(isinstance(v, int) for v in cp.channel_versions.values()):
        saver.int_versions = True
    saved = saver.put(config, checkpoint, metadata, dict(cp.channel_versions))
    saver.seeds |= {checkpoint["id"]}
    held = [(ch, checkpoint["channel_values"][ch]) for ch in untracked if ch in checkpoint["channel_values"]] if not ns else []
    if held:
        # LangGraph drops these from a checkpoint it loads; pending writes of no task are applied
        # when a run resumes there, before its first step: the one way into such a channel.
        saver.put_writes(saved, held, NULL_TASK_ID)
        saver.held = (thread_id, ns, saved["configurable"]["checkpoint_id"])
    return Restored(root_step, ns, step, checkpoint, metadata, cp.parent_checkpoint_id, between, tuple(held))


def hold_untracked(saver: Any, config: dict[str, Any], values: Iterable[tuple[str, Any]]) -> None:
    """Hand ``values`` of never-checkpointed channels to the run resuming at ``config``'s checkpoint
    instead of the restored one (a fork's edit made a checkpoint after it, which LangGraph saved
    without them): as writes of no task, applied before its first step."""
    saver.forget_held()
    held = list(values)
    if held:
        saver.put_writes(config, held, NULL_TASK_ID)
        conf = config["configurable"]
        saver.held = (conf["thread_id"], conf.get("checkpoint_ns", ""), conf["checkpoint_id"])


def restore_edit(
    store: RunStore, run_id: str, step: int, saver: Any, config: dict[str, Any], *, revive: Callable[[str, dict[str, Any]], None] | None = None, ns: str = "", into: str = ""
) -> None:
    """Put the state the recording's ``step`` (of namespace ``ns``) holds on the replay's thread,
    after the latest checkpoint of namespace ``into`` (the same subgraph, under the replay's task
    id): an ``update_state`` made while the run waited at an interrupt. It is the person's edit,
    not the graph's doing, so it is taken as recorded, not worked out again."""
    from langgraph.checkpoint.base.id import uuid6

    cp = store.checkpoint_at(run_id, step, ns, typed=True)
    checkpoint, metadata = as_langgraph(cp)
    if revive is not None:
        revive(ns, checkpoint["channel_values"])
    conf = {k: v for k, v in config["configurable"].items() if k != "checkpoint_id"}
    head = saver.get_tuple({"configurable": {**conf, "checkpoint_ns": into}})
    after = {"configurable": {**conf, "checkpoint_ns": into, **({"checkpoint_id": head.checkpoint["id"]} if head is not None else {})}}
    saver.put(after, {**checkpoint, "id": str(uuid6(clock_seq=step))}, metadata, dict(cp.channel_versions))


@dataclass(frozen=True, slots=True)
class Memory:
    """A persistent subgraph's namespace as the replay starts: which recorded step of it was put
    back, and which root step ran each of its recorded steps."""

    # The recorded step the replay's steps of the namespace follow (their numbers go on from it);
    # None: nothing was put back, and the replay makes the namespace's steps from its first.
    after: int | None
    roots: dict[int, int]  # recorded step of the namespace -> the root step whose task ran it
    checkpoint_id: str | None = None  # of the checkpoint put back (its step is ``after``)
    # Put back at its input step, for LangGraph to resume: its loop then starts a step later than
    # the recording's, which applied the input itself, and counts one more step to its limit.
    at_input: bool = False


def restore_memories(
    store: RunStore, run_id: str, root_step: int, root_details: list[Any], saver: Any, thread_id: str, *, resumed: tuple[str, int] | None = None
) -> dict[str, Memory]:
    """Put back what each persistent subgraph remembered when the replay starts at ``root_step``.

    A subgraph compiled with ``checkpointer=True`` keeps its state across a thread's runs,
    in a namespace named after its node, without a task id (``"memory"``). Each time the
    node runs, the namespace gets an input step and the steps after it; the k-th such
    stretch is the node's k-th run in the root steps. The memory at the start is the last
    step of the stretches run by then, or, before any, what the first began from (the
    earlier turns' memory, before the new input). A stretch entered in the very step the
    replay resumes with is resumed by LangGraph from its input step: that one is put back,
    and the replay makes no input step of its own there.

    ``resumed`` is the namespace and step a replay resumes in (``--ns``), already put back by
    ``restore``: that memory is the step asked for, not what the root step remembered.

    Returns, per namespace it can compare, where the replay's steps there follow on from
    (a namespace whose memory could not be put back is left out: its steps are not the recording's).
    """
    out: dict[str, Memory] = {}
    for ns in sorted(store.namespaces(run_id), key=lambda n: n.count("|")):  # a parent before its children
        parent_ns, _, node = ns.rpartition("|")
        if parent_ns:
            # One nested in another (each compiled with checkpointer=True): its node runs in the
            # parent's steps, each run by the root step its parent's memory names.
            parent = out.get(parent_ns)
            if parent is None or ":" in node:
                continue  # inside a subgraph whose state lives only as long as its task
            ran = [parent.roots[d.step.step] for d in store.step_details(run_id, parent_ns) if d.step.step in parent.roots and any(t.node == node for t in d.tasks)]
        elif is_persistent(ns):
            ran = [d.step.step for d in root_details if any(t.node == ns for t in d.tasks)]
        else:
            continue  # the root, or a subgraph whose state lives only as long as its task
        stretches: list[list[Any]] = []
        for s in store.list_steps(run_id, ns):
            if s.source == "input" or not stretches:
                stretches.append([])
            stretches[-1].append(s)
        roots = {s.step: ran[k] for k, stretch in enumerate(stretches[: len(ran)]) for s in stretch}
        if resumed is not None and resumed[0] == ns:
            out[ns] = Memory(resumed[1], roots)
            continue
        done = sum(1 for step in ran if step <= root_step)
        drop_input = at_input = False
        # (A nested one is not: its parent, resumed there, runs its node again, a new stretch.)
        if not parent_ns and done < len(stretches) and done < len(ran) and ran[done] == root_step + 1:
            step, at_input = stretches[done][0], True  # resumed at its input, as LangGraph resumes it
        elif 0 < done <= len(stretches):
            step = stretches[done - 1][-1]
        elif stretches and stretches[0][0].source == "input" and stretches[0][0].step > -1:
            step, drop_input = stretches[0][0], True
        else:
            if stretches and stretches[0][0].source == "input":
                out[ns] = Memory(None, roots)  # the run's first memory: the replay starts it afresh, as the run did
            continue
        if not step.checkpoint_id:
            continue  # a step that never completed stored no state
        cp = store.checkpoint_at(run_id, step.step, ns, typed=True)
        checkpoint, metadata = as_langgraph(cp)
        if drop_input:
            for key in ("channel_values", "channel_versions"):
                checkpoint[key].pop("__start__", None)  # the new input: the subgraph applies it again
            checkpoint["id"] = cp.parent_checkpoint_id or checkpoint["id"]
            metadata = {"source": "loop", "step": cp.step - 1, "parents": {}}
        saver.put({"configurable": {"thread_id": thread_id, "checkpoint_ns": ns}}, checkpoint, metadata, dict(checkpoint["channel_versions"]))
        out[ns] = Memory(metadata["step"], roots, checkpoint["id"], at_input)
    return out


def untracked_channels(graph: Any) -> list[str]:
    """The graph's channels LangGraph keeps out of checkpoints (``UntrackedValue``), such as
    langchain's per-run model and tool call counters."""
    from langgraph.channels.untracked_value import UntrackedValue

    return sorted(k for k, ch in (getattr(graph, "channels", None) or {}).items() if isinstance(ch, UntrackedValue))


def _parent_of(store: RunStore, run_id: str, ns: str) -> tuple[str, int]:
    """The parent namespace and the parent step to resume from, so its next task runs the subgraph ``ns``.

    The parent is the namespace whose task ran ``ns``; it is not always ``ns`` less its last
    segment: a subgraph run by a functional ``@task`` sits under the entrypoint's segment too
    (``entry:<id>|task:<id>``, run by the root's ``task``), and a subgraph a node runs again is
    numbered (``node:<id>|1``, run by the root's ``node``). So each shorter prefix is asked in turn.
    """
    prefix = ns
    while prefix:
        prefix = prefix.rpartition("|")[0]
        details = store.step_details(run_id, prefix)
        for i, d in enumerate(details):
            if any(ns in t.subgraph_ns for t in d.tasks):
                if i == 0:
                    break
                return prefix, details[i - 1].step.step
        else:
            continue
        break
    raise StepNotFound(f"run {run_id}: no parent step ran the subgraph {ns!r}, so it cannot be resumed on its own")
