"""Checkpoint savers: the tee that records, and a light one for graphs without memory.

``TeeSaver`` wraps the graph's own checkpointer (say a PostgresSaver kept for
memory): every call is delegated unchanged, so the user's saver keeps working,
and ``put`` / ``put_writes`` are also reported to the recording session.
Graphs compiled without a checkpointer get ``RunScopedSaver`` underneath: it
keeps checkpoints by reference only for the life of one run, so attaching
graphtape does not give the graph memory it did not have.
"""

from __future__ import annotations

import threading
from datetime import datetime
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple, WRITES_IDX_MAP

RUN_KEY = "__graphtape_run"
_RUN_THREAD = "\x00run:"  # a lent saver's key for a run given no thread (no thread id starts so)
KEEP_CHECKPOINTS = 2

SessionLookup = Callable[[dict], Any]  # the run's session from its config's "configurable"


def _conf(config: dict) -> dict:
    return config.get("configurable", {}) if config else {}


class TeeSaver(BaseCheckpointSaver):
    """Delegates every call to ``inner`` and records checkpoints and writes."""

    def __init__(self, inner: BaseCheckpointSaver, lookup: SessionLookup) -> None:
        super().__init__(serde=inner.serde)
        self.inner = inner
        self._lookup = lookup
        # Asked once per updated channel per superstep: the inner saver's own, without a hop.
        self.get_next_version = inner.get_next_version  # type: ignore[method-assign]
        # graphtape's own in-memory saver: its saves are cheaper than LangGraph's thread hop to
        # them, so they run in place (recorder.inline_saves). A user's saver keeps its hop.
        self.saves_inline = isinstance(inner, RunScopedSaver)

    def __getattr__(self, name: str) -> Any:
        # Anything the base class does not define (setup(), conn, ...) is the inner saver's.
        if name in ("inner", "_lookup", "saves_inline"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    @property
    def config_specs(self) -> list:
        return self.inner.config_specs

    # -- recording -------------------------------------------------------------
    def _session_of(self, config: dict) -> tuple[Any, dict]:
        conf = config.get("configurable") or {} if config else {}
        return self._lookup(conf), conf

    def _record_put(self, session: Any, conf: dict, checkpoint: dict, metadata: dict, new_versions: dict) -> None:
        try:
            session.on_checkpoint(conf.get("checkpoint_ns", ""), checkpoint, metadata, conf.get("checkpoint_id"), new_versions, made_at=_made_at(checkpoint))
        except Exception as exc:  # noqa: BLE001
            session.fault(f"checkpoint: {type(exc).__name__}: {exc}")
            if session.strict:
                raise

    def seed_delta_channels(self, session: Any, checkpoint: dict, at: dict) -> None:
        """Before ``session`` hears of its namespace's first checkpoint, ``checkpoint``: what its
        DeltaChannels held at ``at`` (the checkpoint the run goes on from), as the inner saver
        rebuilds it (see ``recorder.delta_channels``). Usually nothing is asked."""
        ns = at["configurable"].get("checkpoint_ns", "")
        names = session.delta_seed_wanted(ns, checkpoint)
        if not names:
            return
        try:
            histories = self.inner.get_delta_channel_history(config=at, channels=names)
        except Exception as exc:  # noqa: BLE001 - an async-only saver: the channels go unrecorded
            session.seed_deltas(ns, names, error=exc)
        else:
            session.seed_deltas(ns, names, histories)

    def _record_writes(self, config: dict, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str) -> None:
        session, conf = self._session_of(config)
        if session is None:
            return
        try:
            session.on_writes(conf.get("checkpoint_ns", ""), conf.get("checkpoint_id"), writes, task_id, task_path)
        except Exception as exc:  # noqa: BLE001
            session.fault(f"writes: {type(exc).__name__}: {exc}")
            if session.strict:
                raise

    # -- sync API ----------------------------------------------------------------
    def put(self, config, checkpoint, metadata, new_versions):  # type: ignore[override]
        out = self.inner.put(config, checkpoint, metadata, new_versions)
        session, conf = self._session_of(config)
        if session is not None:
            if conf.get("checkpoint_id"):
                self.seed_delta_channels(session, checkpoint, config)
            self._record_put(session, conf, checkpoint, metadata, new_versions)
        return out

    def put_writes(self, config, writes, task_id, task_path=""):  # type: ignore[override]
        self.inner.put_writes(config, writes, task_id, task_path)
        self._record_writes(config, writes, task_id, task_path)

    def get_tuple(self, config):  # type: ignore[override]
        return self.inner.get_tuple(config)

    def list(self, config, *, filter=None, before=None, limit=None) -> Iterator[CheckpointTuple]:  # type: ignore[override]
        return self.inner.list(config, filter=filter, before=before, limit=limit)

    def delete_thread(self, thread_id):  # type: ignore[override]
        return self.inner.delete_thread(thread_id)

    def delete_for_runs(self, run_ids):  # type: ignore[override]
        return self.inner.delete_for_runs(run_ids)

    def copy_thread(self, source_thread_id, target_thread_id):  # type: ignore[override]
        return self.inner.copy_thread(source_thread_id, target_thread_id)

    def prune(self, thread_ids, *, strategy="keep_latest"):  # type: ignore[override]
        return self.inner.prune(thread_ids, strategy=strategy)

    def get_delta_channel_history(self, *, config, channels):  # type: ignore[override]
        return self.inner.get_delta_channel_history(config=config, channels=channels)

    def get_next_version(self, current, channel):  # type: ignore[override]
        return self.inner.get_next_version(current, channel)

    # -- async API ---------------------------------------------------------------
    async def aput(self, config, checkpoint, metadata, new_versions):  # type: ignore[override]
        out = await self.inner.aput(config, checkpoint, metadata, new_versions)
        session, conf = self._session_of(config)
        if session is not None:
            ns = conf.get("checkpoint_ns", "")
            names = session.delta_seed_wanted(ns, checkpoint) if conf.get("checkpoint_id") else []
            if names:
                try:
                    histories = await self.inner.aget_delta_channel_history(config=config, channels=names)
                except Exception as exc:  # noqa: BLE001
                    session.seed_deltas(ns, names, error=exc)
                else:
                    session.seed_deltas(ns, names, histories)
            self._record_put(session, conf, checkpoint, metadata, new_versions)
        return out

    async def aput_writes(self, config, writes, task_id, task_path=""):  # type: ignore[override]
        await self.inner.aput_writes(config, writes, task_id, task_path)
        self._record_writes(config, writes, task_id, task_path)

    async def aget_tuple(self, config):  # type: ignore[override]
        return await self.inner.aget_tuple(config)

    async def alist(self, config, *, filter=None, before=None, limit=None) -> AsyncIterator[CheckpointTuple]:  # type: ignore[override]
        async for item in self.inner.alist(config, filter=filter, before=before, limit=limit):
            yield item

    async def adelete_thread(self, thread_id):  # type: ignore[override]
        return await self.inner.adelete_thread(thread_id)

    async def adelete_for_runs(self, run_ids):  # type: ignore[override]
        return await self.inner.adelete_for_runs(run_ids)

    async def acopy_thread(self, source_thread_id, target_thread_id):  # type: ignore[override]
        return await self.inner.acopy_thread(source_thread_id, target_thread_id)

    async def aprune(self, thread_ids, *, strategy="keep_latest"):  # type: ignore[override]
        return await self.inner.aprune(thread_ids, strategy=strategy)

    async def aget_delta_channel_history(self, *, config, channels):  # type: ignore[override]
        return await self.inner.aget_delta_channel_history(config=config, channels=channels)


class RunScopedSaver(BaseCheckpointSaver):
    """Keeps checkpoints in memory, by reference, until their thread is dropped.

    Stands in for "no checkpointer": nothing is copied or serialized (the
    recorder encodes what it needs), and ``drop_thread`` at run end forgets
    everything, so a graph without memory stays without memory.
    """

    keeps_threads = False  # a replay's saver keeps its thread across the replay's invocations

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        # (thread_id, ns) -> list of (checkpoint, metadata, parent_checkpoint_id)
        self._cps: dict[tuple[str, str], list[tuple[dict, dict, str | None]]] = {}
        # (thread_id, ns, checkpoint_id) -> {(task_id, idx): (task_id, channel, value, task_path)}
        self._writes: dict[tuple[str, str, str], dict[tuple[str, int], tuple[str, str, Any, str]]] = {}

    @staticmethod
    def thread_key(conf: dict) -> str:
        """Where a run's checkpoints are kept: its thread, or, for a run given none, graphtape's
        run key (LangGraph needs no thread for a saver it is lent, and a node sees none, as bare)."""
        thread = conf.get("thread_id")
        return str(thread) if thread is not None else _RUN_THREAD + str(conf.get(RUN_KEY))

    @staticmethod
    def _coords(thread: str, ns: str, checkpoint_id: str) -> dict:
        """A checkpoint's config, naming its thread as the run named it (a thread, or the run key)."""
        if thread.startswith(_RUN_THREAD):
            return {"configurable": {RUN_KEY: thread[len(_RUN_THREAD) :], "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}}
        return {"configurable": {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}}

    def _tuple(self, thread: str, ns: str, cp: dict, md: dict, parent: str | None) -> CheckpointTuple:
        cfg = self._coords(thread, ns, cp["id"])
        parent_cfg = self._coords(thread, ns, parent) if parent else None
        writes = self._writes.get((thread, ns, cp["id"]), {})
        pending = [(w[0], w[1], w[2]) for _, w in sorted(writes.items(), key=lambda kv: (kv[1][3], kv[0][0], kv[0][1]))]
        return CheckpointTuple(cfg, cp, md, parent_cfg, pending)

    def get_tuple(self, config):  # type: ignore[override]
        conf = _conf(config)
        key = (self.thread_key(conf), conf.get("checkpoint_ns", ""))
        with self._lock:
            items = self._cps.get(key)
            if not items:
                return None
            wanted = conf.get("checkpoint_id")
            for cp, md, parent in reversed(items):
                if wanted is None or cp["id"] == wanted:
                    return self._tuple(key[0], key[1], cp, md, parent)
        return None

    def list(self, config, *, filter=None, before=None, limit=None):  # type: ignore[override]
        conf = _conf(config)
        key = (self.thread_key(conf), conf.get("checkpoint_ns", ""))
        with self._lock:
            items = list(reversed(self._cps.get(key, [])))
            out = [self._tuple(key[0], key[1], cp, md, parent) for cp, md, parent in items]
        if before is not None:
            bid = _conf(before).get("checkpoint_id")
            out = [t for t in out if t.checkpoint["id"] < bid]
        if filter:
            out = [t for t in out if all(t.metadata.get(k) == v for k, v in filter.items())]
        return iter(out[:limit] if limit else out)

    def put(self, config, checkpoint, metadata, new_versions):  # type: ignore[override]
        conf = _conf(config)
        thread, ns = self.thread_key(conf), conf.get("checkpoint_ns", "")
        with self._lock:
            kept = self._cps.setdefault((thread, ns), [])
            kept.append((checkpoint, dict(metadata), conf.get("checkpoint_id")))
            # Within a run LangGraph reads only the latest checkpoint; holding every one
            # would keep every step's state alive (and slow the garbage collector).
            while len(kept) > KEEP_CHECKPOINTS:
                old, _, _ = kept.pop(0)
                self._writes.pop((thread, ns, old["id"]), None)
        return self._coords(thread, ns, checkpoint["id"])

    def put_writes(self, config, writes, task_id, task_path=""):  # type: ignore[override]
        conf = _conf(config)
        key = (self.thread_key(conf), conf.get("checkpoint_ns", ""), conf.get("checkpoint_id"))
        with self._lock:
            bucket = self._writes.setdefault(key, {})
            for idx, (ch, val) in enumerate(writes):
                slot = (task_id, WRITES_IDX_MAP.get(ch, idx))
                if slot[1] >= 0 and slot in bucket:
                    continue
                bucket[slot] = (task_id, ch, val, task_path)

    def delete_thread(self, thread_id):  # type: ignore[override]
        self.drop_thread(str(thread_id))

    def drop_thread(self, thread_id: str) -> None:
        """Forget a finished run's checkpoints."""
        with self._lock:
            for key in [k for k in self._cps if k[0] == thread_id]:
                del self._cps[key]
            for key in [k for k in self._writes if k[0] == thread_id]:
                del self._writes[key]

    async def aget_tuple(self, config):  # type: ignore[override]
        return self.get_tuple(config)

    async def alist(self, config, *, filter=None, before=None, limit=None):  # type: ignore[override]
        for item in self.list(config, filter=filter, before=before, limit=limit):
            yield item

    async def aput(self, config, checkpoint, metadata, new_versions):  # type: ignore[override]
        return self.put(config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config, writes, task_id, task_path=""):  # type: ignore[override]
        self.put_writes(config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id):  # type: ignore[override]
        self.drop_thread(str(thread_id))

    def get_next_version(self, current, channel):  # type: ignore[override]
        if current is None:
            return 1
        if isinstance(current, int):
            return current + 1
        return int(str(current).split(".")[0]) + 1


def _made_at(checkpoint: dict) -> float | None:
    """When LangGraph made ``checkpoint`` (its ``ts``, UTC), or None if it does not say."""
    try:
        made = datetime.fromisoformat(checkpoint["ts"])
    except (KeyError, TypeError, ValueError):
        return None
    return made.timestamp() if made.tzinfo is not None else None
