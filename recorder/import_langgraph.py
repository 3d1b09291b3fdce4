"""Import LangGraph's own checkpoints (SqliteSaver, PostgresSaver) as graphtape runs.

The source is only read: SQLite is opened with ``mode=ro``, PostgreSQL in
read-only transactions. Each thread becomes one run whose namespaces are the
thread's checkpoint namespaces (``""`` is the root graph); each checkpoint on
the thread's current branch becomes a step with its full state, the tasks
that produced it (from the writes stored against its parent), and the
``branch:to:X`` writes as route decisions. The graph itself is not in the
checkpoints, so a route is ``conditional`` only when it can be told: the node
went to different places over the thread; otherwise it is an ``edge`` (taken,
reason unknown). Checkpoints on abandoned forks (time travel,
``update_state`` from an old checkpoint) are counted, not imported.

LangGraph's blobs are decoded with its own ``JsonPlusSerializer``, pickle
off and msgpack restricted to LangGraph's built-in safe types
(``allowed_msgpack_modules=None``): any other type comes back as its plain
fields and is named in the summary. Values are then encoded, redacted and
stored like recorded ones, through ``RunStore.write``.
"""

from __future__ import annotations

import hashlib
import sqlite3
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError

from graphtape.recorder.codec import Encoder, blob_hash
from graphtape.recorder.errors import GraphtapeError, RunNotFound
from graphtape.recorder.frames import FrameBuilder
from graphtape.recorder.records import FLAG_ERROR, FLAG_INTERRUPT, FLAG_PENDING, FLAG_RESUME
from graphtape.recorder.redaction import Redactor
from graphtape.recorder.store import Batch, SqlStore, pack, squeeze
from graphtape.recorder.store import shown_url
from graphtape.recorder.store.sqlite_shape import shape_problem
from graphtape.recorder.thread_keys import stored_thread_id

__all__ = ["ImportSummary", "LangGraphImportError", "import_langgraph"]

BRANCH = "branch:to:"
TASKS = "__pregel_tasks"
ERROR = "__error__"
INTERRUPT = "__interrupt__"
RESUME = "__resume__"
_CONTROL = {TASKS, ERROR, INTERRUPT, RESUME, "__return__", "__no_writes__", "__error_source_node__", "__scheduled__"}
_PULL = "~__pregel_pull, "
_PUSH = "~__pregel_push, "


class LangGraphImportError(GraphtapeError):
    """The source is not a readable LangGraph checkpoint database."""


@dataclass
class ImportedRun:
    """One thread turned into a run."""

    run_id: str
    thread_id: str
    status: str
    steps: int
    namespaces: int
    skipped_checkpoints: int
    already: bool = False


@dataclass
class ImportSummary:
    """What ``import_langgraph`` did: runs written, runs already there, values it would not rebuild."""

    source: str
    runs: list[ImportedRun] = field(default_factory=list)
    blocked_types: dict[str, int] = field(default_factory=dict)

    @property
    def imported(self) -> int:
        return sum(1 for r in self.runs if not r.already)

    @property
    def already(self) -> int:
        return sum(1 for r in self.runs if r.already)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "imported": self.imported,
            "already_imported": self.already,
            "steps": sum(r.steps for r in self.runs if not r.already),
            "skipped_checkpoints": sum(r.skipped_checkpoints for r in self.runs),
            "blocked_types": dict(sorted(self.blocked_types.items())),
            "runs": [r.__dict__ for r in self.runs],
        }


# ---------------------------------------------------------------------------
# Reading the source
# ---------------------------------------------------------------------------


@dataclass
class _Checkpoint:
    thread_id: str
    ns: str
    id: str
    parent_id: str | None
    type: str | None
    data: Any  # bytes (SQLite) or the JSONB dict (PostgreSQL)
    metadata: dict


class _Source:
    """The checkpoint tables of one database, read-only."""

    def __init__(self, url: str) -> None:
        self.label, self.engine, self.kind = _open(url)
        insp = sa.inspect(self.engine)
        try:
            tables = set(insp.get_table_names())
        except SQLAlchemyError as exc:
            raise LangGraphImportError(f"cannot read {self.label}: {_one_line(exc)}") from None
        if self.kind == "sqlite":
            need = {"checkpoints", "writes"}
            self.writes_table = "writes"
            self.value_col = "value"
        else:
            need = {"checkpoints", "checkpoint_blobs", "checkpoint_writes"}
            self.writes_table = "checkpoint_writes"
            self.value_col = "blob"
        if not need <= tables:
            missing = ", ".join(sorted(need - tables))
            saver = "SqliteSaver" if self.kind == "sqlite" else "PostgresSaver"
            raise LangGraphImportError(f"{self.label} has no LangGraph {saver} tables (missing: {missing}): point at the checkpointer's database")
        cols = {c["name"] for c in insp.get_columns(self.writes_table)}
        self.has_task_path = "task_path" in cols

    def _rows(self, sql: str, **params: Any) -> list[Any]:
        try:
            with self.engine.connect() as conn:
                return list(conn.execute(sa.text(sql), params))
        except SQLAlchemyError as exc:
            raise LangGraphImportError(f"cannot read {self.label}: {_one_line(exc)}") from None

    def threads(self, only: Iterable[str] = ()) -> list[str]:
        only = list(only)
        rows = self._rows("SELECT DISTINCT thread_id FROM checkpoints ORDER BY thread_id")
        found = [str(r[0]) for r in rows]
        if only:
            missing = [t for t in only if t not in found]
            if missing:
                raise LangGraphImportError(f"{self.label} has no thread {missing[0]!r} (it has {len(found)} thread(s))")
            return [t for t in found if t in only]
        return found

    def checkpoints(self, thread_id: str) -> list[_Checkpoint]:
        rows = self._rows(
            "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata "
            "FROM checkpoints WHERE thread_id = :t ORDER BY checkpoint_ns, checkpoint_id",
            t=thread_id,
        )
        return [_Checkpoint(str(r[0]), r[1] or "", r[2], r[3], r[4], r[5], _metadata(r[6])) for r in rows]

    def writes(self, thread_id: str) -> dict[tuple[str, str], list[tuple[str, str, int, str, str | None, bytes]]]:
        """(ns, checkpoint id) -> [(task id, task path, idx, channel, type, value)] in LangGraph's apply order."""
        path = "task_path" if self.has_task_path else "''"
        rows = self._rows(
            f"SELECT checkpoint_ns, checkpoint_id, task_id, {path}, idx, channel, type, {self.value_col} "
            f"FROM {self.writes_table} WHERE thread_id = :t",
            t=thread_id,
        )
        out: dict[tuple[str, str], list] = {}
        for ns, cid, task_id, task_path, idx, channel, type_, value in rows:
            out.setdefault((ns or "", cid), []).append((task_id, task_path or "", int(idx), channel, type_, value))
        for items in out.values():
            items.sort(key=lambda w: (w[1] == "", w[1], w[0], w[2]))
        return out

    def blobs(self, thread_id: str) -> dict[tuple[str, str, str], tuple[str, bytes | None]]:
        """PostgreSQL only: (ns, channel, version) -> (type, bytes)."""
        if self.kind == "sqlite":
            return {}
        rows = self._rows("SELECT checkpoint_ns, channel, version, type, blob FROM checkpoint_blobs WHERE thread_id = :t", t=thread_id)
        return {(r[0] or "", r[1], str(r[2])): (r[3], r[4]) for r in rows}

    def close(self) -> None:
        self.engine.dispose()


def _open(url: str) -> tuple[str, sa.Engine, str]:
    text = url.strip()
    if text.startswith(("postgres://", "postgresql://", "postgresql+psycopg://")):
        if text.startswith("postgres://"):
            text = "postgresql://" + text[len("postgres://") :]
        if text.startswith("postgresql://"):
            text = "postgresql+psycopg://" + text[len("postgresql://") :]
        try:
            sa.engine.make_url(text)
        except Exception:  # noqa: BLE001 - any parse failure is the user's URL
            raise LangGraphImportError(f"not a database URL: {shown_url(url)!r}") from None
        label = shown_url(text)  # shown, stored with the runs and in every error: never the password

        def read_only(dbapi_conn: Any, _record: Any) -> None:
            # Every transaction on every connection is read-only: the server refuses any write.
            with dbapi_conn.cursor() as cur:
                cur.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
            dbapi_conn.commit()

        try:
            engine = sa.create_engine(text, poolclass=sa.pool.NullPool)
            sa.event.listen(engine, "connect", read_only)
            with engine.connect() as conn:
                conn.exec_driver_sql("SELECT 1")
        except ModuleNotFoundError as exc:
            raise LangGraphImportError(f"cannot open {label}: driver {exc.name!r} is not installed (pip install 'graphtape[postgres]')") from None
        except (SQLAlchemyError, OSError) as exc:
            raise LangGraphImportError(f"cannot open {label}: {_one_line(exc)}") from None
        return label, engine, "postgresql"
    if "://" in text and not text.startswith("sqlite:///"):
        raise LangGraphImportError(f"unsupported source {shown_url(text)!r}: give sqlite:///path/to/checkpoints.db, a file path, or a postgresql:// URL")
    path = Path(text[len("sqlite:///") :] if text.startswith("sqlite:///") else text).expanduser()
    if not path.is_file():
        raise LangGraphImportError(f"no SQLite file at {path}")
    ro = "file:" + urllib.parse.quote(str(path.resolve())) + "?mode=ro"

    def connect() -> sqlite3.Connection:
        return sqlite3.connect(ro, uri=True, check_same_thread=False)

    try:
        engine = sa.create_engine("sqlite://", creator=connect, poolclass=sa.pool.NullPool)
        with engine.connect() as conn:
            problem = shape_problem(lambda sql: conn.exec_driver_sql(sql).fetchall(), ("checkpoints", "writes", "checkpoint_blobs", "checkpoint_writes"))
    except SQLAlchemyError as exc:
        raise LangGraphImportError(f"cannot open {path} read-only: {_one_line(exc)}") from None
    if problem is not None:
        raise LangGraphImportError(f"{path} is not a checkpoint file as LangGraph's savers make it ({problem}): refusing to read it")
    return str(path), engine, "sqlite"


def _metadata(raw: Any) -> dict:
    if isinstance(raw, dict):
        return raw
    if raw is None:
        return {}
    try:
        value = orjson.loads(bytes(raw) if isinstance(raw, (bytes, memoryview)) else raw)
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


# ---------------------------------------------------------------------------
# Decoding LangGraph's blobs, safely
# ---------------------------------------------------------------------------


class _SafeSerde:
    """LangGraph's JsonPlusSerializer with pickle off and only its safe msgpack types rebuilt."""

    def __init__(self, blocked: dict[str, int]) -> None:
        from langgraph.checkpoint.serde.event_hooks import register_serde_event_listener
        from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

        self.serde = JsonPlusSerializer(pickle_fallback=False, allowed_json_modules=None, allowed_msgpack_modules=None)
        self.blocked = blocked

        def listen(event: Any) -> None:
            if event.get("kind", "").endswith("blocked"):
                name = f"{event.get('module')}.{event.get('name')}"
                self.blocked[name] = self.blocked.get(name, 0) + 1

        self._unregister = register_serde_event_listener(listen)

    def loads(self, type_: str | None, data: Any) -> Any:
        if type_ is None or data is None:
            return None
        if type_ == "pickle":
            self.blocked["pickle"] = self.blocked.get("pickle", 0) + 1
            return "<pickled value: not imported (graphtape never unpickles)>"
        try:
            return _unwrap(self.serde.loads_typed((type_, bytes(data))))
        except Exception as exc:  # noqa: BLE001 - a damaged or unknown value is marked, the import goes on
            self.blocked[type_] = self.blocked.get(type_, 0) + 1
            return f"<undecodable {type_} value: {type(exc).__name__}>"

    def close(self) -> None:
        self._unregister()


def _unwrap(value: Any) -> Any:
    # A delta channel's stored snapshot holds the value itself.
    if type(value).__name__ == "_DeltaSnapshot":
        return getattr(value, "value", value)
    return value


# ---------------------------------------------------------------------------
# Turning a thread into a run
# ---------------------------------------------------------------------------


class _Sink:
    def __init__(self) -> None:
        self.blobs: dict[str, tuple[bool, bytes]] = {}

    def put_blob(self, data: bytes) -> str:
        h = blob_hash(data)
        if h not in self.blobs:
            self.blobs[h] = squeeze(data)
        return h


def _lineage(cps: list[_Checkpoint]) -> list[_Checkpoint]:
    """The current branch of one namespace: the newest checkpoint and its ancestors, oldest first."""
    by_id = {c.id: c for c in cps}
    chain: list[_Checkpoint] = []
    cur: _Checkpoint | None = max(cps, key=lambda c: c.id)
    seen: set[str] = set()
    while cur is not None and cur.id not in seen:
        seen.add(cur.id)
        chain.append(cur)
        cur = by_id.get(cur.parent_id) if cur.parent_id else None
    return chain[::-1]


def _ts(checkpoint: dict, fallback: float) -> float:
    ts = checkpoint.get("ts") if isinstance(checkpoint, dict) else None
    if isinstance(ts, str):
        try:
            return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()
        except ValueError:
            pass
    return fallback


def _node_of(task_path: str, sends: list[str] | None = None) -> str | None:
    """The node a task ran: named in a pull task's path; a push task's path indexes the Sends before it."""
    if task_path.startswith(_PULL):
        return task_path[len(_PULL) :].split(",")[0].strip() or None
    if task_path.startswith(_PUSH) and sends:
        head = task_path[len(_PUSH) :].split(",")[0].strip()
        if head.isdigit() and int(head) < len(sends):
            return sends[int(head)]
    return None


def _run_id(source: str, thread_id: str, head: str) -> str:
    return hashlib.blake2b(f"langgraph|{source}|{thread_id}|{head}".encode(), digest_size=8).hexdigest()


class _ThreadImport:
    def __init__(self, source: _Source, serde: _SafeSerde, thread_id: str, label: str) -> None:
        self.source = source
        self.serde = serde
        self.thread_id = thread_id
        self.label = label
        self.sink = _Sink()
        self.encoder = Encoder(Redactor(), self.sink)

    def build(self, store: SqlStore) -> ImportedRun:
        cps = self.source.checkpoints(self.thread_id)
        by_ns: dict[str, list[_Checkpoint]] = {}
        for c in cps:
            by_ns.setdefault(c.ns, []).append(c)
        lines = {ns: _lineage(items) for ns, items in by_ns.items()}
        kept = sum(len(v) for v in lines.values())
        root = lines.get("") or next(iter(lines.values()))
        run_id = _run_id(self.label, self.thread_id, root[-1].id)
        try:
            done = store.get_run(run_id)
            return ImportedRun(run_id, stored_thread_id(self.thread_id, self.encoder.redactor), done.status, done.step_count, len(lines), len(cps) - kept, already=True)
        except RunNotFound:
            pass
        writes = self.source.writes(self.thread_id)
        blobs = self.source.blobs(self.thread_id)
        # Routes: a node that went to different places over the thread was routed by a condition.
        dests_by_node: dict[str, set[tuple[str, ...]]] = {}
        for items in writes.values():
            per_task: dict[str, tuple[str | None, list[str]]] = {}
            for task_id, task_path, _idx, channel, _t, _v in items:
                node, dests = per_task.setdefault(task_id, (_node_of(task_path), []))
                if channel.startswith(BRANCH):
                    dests.append(channel[len(BRANCH) :])
            for node, dests in per_task.values():
                if node:
                    dests_by_node.setdefault(node, set()).add(tuple(sorted(dests)))
        conditional = {n for n, ds in dests_by_node.items() if len(ds) > 1}

        ordered = sorted((c for items in lines.values() for c in items), key=lambda c: (c.id, c.ns))
        builders: dict[str, FrameBuilder] = {}
        prev_values: dict[str, dict[str, Any]] = {}
        prev_versions: dict[str, dict[str, Any]] = {}
        prev_seen_nodes: dict[str, dict[str, Any]] = {}
        sends_before: dict[str, list[str]] = {}
        step_rows: list[dict] = []
        seq = 0
        first_ts = last_ts = None
        status, reason, err_type, err_msg = "ok", None, None, None
        inputs = None
        graph_nodes: dict[str, None] = {}
        for c in ordered:
            checkpoint = self._checkpoint(c, blobs)
            ts = _ts(checkpoint, last_ts or 0.0)
            first_ts = ts if first_ts is None else first_ts
            last_ts = ts
            values = {k: _unwrap(v) for k, v in (checkpoint.get("channel_values") or {}).items()}
            versions = dict(checkpoint.get("channel_versions") or {})
            seen = {n: dict(s) for n, s in (checkpoint.get("versions_seen") or {}).items()}
            old = prev_values.get(c.ns, {})
            for k, v in values.items():  # same value as before: same object, so frames store only changes
                before = old.get(k)
                if before is not None:
                    if type(v) is list and type(before) is list:
                        n = 0
                        while n < min(len(v), len(before)) and _same(v[n], before[n]):
                            v[n] = before[n]
                            n += 1
                        if n == len(v) == len(before):
                            values[k] = before
                    elif _same(v, before):
                        values[k] = before
            updated = [k for k, ver in versions.items() if prev_versions.get(c.ns, {}).get(k) != ver]
            prev_values[c.ns], prev_versions[c.ns] = values, versions
            # A fork checkpoint (time travel) is made before any task runs: the writes stored against
            # its parent are the abandoned branch's, not what produced it.
            forked = c.metadata.get("source") == "fork"
            tasks = writes.get((c.ns, c.parent_id), []) if c.parent_id and not forked else []
            ran_nodes = [] if forked else [n for n, s in seen.items() if prev_seen_nodes.get(c.ns, {}).get(n) != s and (n == "__start__" or not n.startswith("__"))]
            prev_seen_nodes[c.ns] = seen
            task_rows, routes, flags, events = self._tasks(tasks, ran_nodes, conditional, sends_before.get(c.ns, []))
            sends_before[c.ns] = [d for r in routes if r["kind"] == "send" for d in r["dest"]]
            for t in task_rows:
                if t["node"] not in ("?", "__start__"):
                    graph_nodes[t["node"]] = None
            if c.ns == "" and c.metadata.get("source") == "input" and inputs is None:
                start = values.get("__start__")
                inputs = self.encoder.encode(start if start is not None else {k: v for k, v in values.items() if not _internal(k)})
            if c.ns not in builders:
                builders[c.ns] = FrameBuilder(self.encoder.encode)
            frame, is_key = builders[c.ns].build(values, versions, seen, updated, _size)
            seq += 1
            step_rows.append(
                self._step_row(run_id, c, seq, ts, task_rows, routes, events, flags, frame, is_key)
            )
        # Writes against a branch's newest checkpoint belong to a step that never finished: error or interrupt.
        for ns, chain in lines.items():
            head = chain[-1]
            pending = writes.get((ns, head.id), [])
            if not pending:
                continue
            task_rows, routes, flags, events = self._tasks(pending, [], conditional, sends_before.get(ns, []))
            if not flags & (FLAG_ERROR | FLAG_INTERRUPT):
                continue
            seq += 1
            step = int(head.metadata.get("step", 0)) + 1
            payload = {"t": task_rows, "r": [], "e": events}
            step_rows.append(
                {
                    "run_id": run_id,
                    "ns": ns,
                    "seq": seq,
                    "step": step,
                    "source": "loop",
                    "checkpoint_id": None,
                    "parent_checkpoint_id": head.id,
                    "created_at": last_ts or 0.0,
                    "duration_ms": None,
                    "is_key": False,
                    "nodes": ",".join(dict.fromkeys(t["node"] for t in task_rows)),
                    "writes": "",
                    "summary": _summary([], task_rows),
                    "flags": flags | FLAG_PENDING,
                    "payload": pack(payload),
                }
            )
            if ns == "":
                failed = next((t for t in task_rows if "et" in t), None)
                if failed is not None:
                    status, err_type, err_msg = "error", failed["et"], failed.get("em")
                else:
                    status, reason = "interrupted", "interrupt"
        root_steps = [r for r in step_rows if r["ns"] == "" and r["checkpoint_id"]]
        meta0 = root[0].metadata
        stored = stored_thread_id(self.thread_id, self.encoder.redactor)  # a thread named by a token stores no token
        run = {
            "id": run_id,
            "name": f"langgraph:{stored}",
            "graph_name": str(meta0.get("graph_id") or "langgraph"),
            "graph_ref": None,
            "thread_id": stored,
            "status": status,
            "status_reason": reason,
            "error_type": err_type,
            "error_message": err_msg,
            "started_at": first_ts or 0.0,
            "ended_at": last_ts or 0.0,
            "heartbeat_at": last_ts or 0.0,
            "inputs": _json(inputs),
            "config": _json(self.encoder.encode({"configurable": {"thread_id": self.thread_id}, "imported_from": self.label})),
            "graph": _json({"name": str(meta0.get("graph_id") or "langgraph"), "nodes": list(graph_nodes), "subgraph_nodes": [], "edges": [], "conditional_edges": []}),
            "versions": _json({"imported": "langgraph-checkpoint"}),
            "tags": _json(["imported", "langgraph"]),
            "step_count": (max(r["step"] for r in root_steps) + 1) if root_steps else 0,
            "owner_host": None,
            "owner_pid": None,
            "durability": None,
        }
        batch = Batch(runs_new=[run], steps=step_rows, blobs=self.sink.blobs)
        store.write(batch)
        return ImportedRun(run_id, stored, status, len(step_rows), len(lines), len(cps) - kept)  # shown as stored: no token on the terminal

    def _checkpoint(self, c: _Checkpoint, blobs: dict) -> dict:
        if self.source.kind == "sqlite":
            value = self.serde.loads(c.type, c.data)
            return value if isinstance(value, dict) else {}
        checkpoint = dict(c.data) if isinstance(c.data, dict) else _metadata(c.data)
        values = dict(checkpoint.get("channel_values") or {})
        for channel, version in (checkpoint.get("channel_versions") or {}).items():
            hit = blobs.get((c.ns, channel, str(version)))
            if hit is not None and hit[0] != "empty":
                values[channel] = self.serde.loads(hit[0], hit[1])
        checkpoint["channel_values"] = values
        return checkpoint

    def _tasks(self, items: list, ran_nodes: list[str], conditional: set[str], sends: list[str]) -> tuple[list[dict], list[dict], int, list[dict]]:
        """Task rows, routes, step flags and events from the writes of one superstep."""
        enc = self.encoder.encode
        tasks: dict[str, dict] = {}
        by_task: dict[str, list[tuple[str, Any]]] = {}
        task_rows: list[dict] = []
        routes: list[dict] = []
        events: list[dict] = []
        flags = 0
        for task_id, task_path, _idx, channel, type_, value in items:
            if not task_path and channel == RESUME:
                # Command(resume=...) from the caller: an event of the step, not a task.
                events.append({"kind": "resume", "v": enc(self.serde.loads(type_, value))})
                flags |= FLAG_RESUME
                continue
            tasks.setdefault(task_id, {"id": task_id, "node": _node_of(task_path, sends), "path": task_path})
            by_task.setdefault(task_id, []).append((channel, self.serde.loads(type_, value)))
        named = {t["node"] for t in tasks.values()}
        unnamed = [n for n in ran_nodes if n not in named]
        for i, (task_id, row) in enumerate(tasks.items()):
            if row["node"] is None:
                row["node"] = unnamed.pop(0) if len(unnamed) > 1 else unnamed[0] if unnamed else "?"
            node = row["node"]
            update = {}
            dests: list[str] = []
            sends: list[Any] = []
            for channel, value in by_task[task_id]:
                if channel.startswith(BRANCH):
                    dests.append(channel[len(BRANCH) :])
                elif channel == TASKS:
                    sends.append(value)
                elif channel == ERROR:
                    row["et"], row["em"] = _error(value)
                    flags |= FLAG_ERROR
                elif channel == INTERRUPT:
                    its = value if isinstance(value, (list, tuple)) else [value]
                    row["i"] = enc(list(its))
                    flags |= FLAG_INTERRUPT
                    events.extend({"kind": "interrupt", "v": enc(getattr(it, "value", it)), "ti": i, "node": node} for it in its)
                elif channel == RESUME:
                    events.append({"kind": "resume", "v": enc(value), "ti": i, "node": node})
                    flags |= FLAG_RESUME
                elif channel not in _CONTROL and not channel.startswith("join:"):
                    update[channel] = value
            if update:
                row["w"] = enc(update)
            if dests:
                kind = "conditional" if node in conditional else "edge"
                routes.append({"src": node, "kind": kind, "router": None, "dest": dests, "ti": i})
            packets = [s for s in sends if hasattr(s, "node") and hasattr(s, "arg")]
            if packets:
                routes.append({"src": node, "kind": "send", "router": None, "dest": [p.node for p in packets], "sends": [{"node": p.node, "arg": enc(p.arg)} for p in packets], "ti": i})
            task_rows.append(row)
        return task_rows, routes, flags, events

    def _step_row(self, run_id: str, c: _Checkpoint, seq: int, ts: float, task_rows: list, routes: list, events: list, flags: int, frame: dict, is_key: bool) -> dict:
        written: dict[str, None] = {}
        for t in task_rows:
            written.update(dict.fromkeys(self._written(t)))
        return {
            "run_id": run_id,
            "ns": c.ns,
            "seq": seq,
            "step": int(c.metadata.get("step", seq - 2)),
            "source": str(c.metadata.get("source") or "loop")[:16],
            "checkpoint_id": c.id,
            "parent_checkpoint_id": c.parent_id,
            "created_at": ts,
            "duration_ms": None,
            "is_key": is_key,
            "nodes": ",".join(dict.fromkeys(t["node"] for t in task_rows)),
            "writes": "," + ",".join(written) + "," if written else "",
            "summary": _summary(routes, task_rows),
            "flags": flags,
            "payload": pack({"t": task_rows, "r": routes, "e": events, "s": frame}),
        }

    @staticmethod
    def _written(task: dict) -> list[str]:
        w = task.get("w")
        return list(w) if isinstance(w, dict) and "$t" not in w else []


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # noqa: BLE001 - odd __eq__: treat as changed
        return False


def _error(value: Any) -> tuple[str, str]:
    text = str(value)
    if isinstance(value, BaseException):
        return type(value).__name__, text
    head, sep, rest = text.partition("(")
    if sep and head.isidentifier():
        return head, rest.rstrip(")").strip("'\"") or head
    return "Error", text


def _summary(routes: list[dict], tasks: list[dict]) -> str:
    parts = []
    for r in routes:
        dest = ", ".join(dict.fromkeys(r["dest"]))
        parts.append(f"{r['src']} → {dest}" + (" (send)" if r["kind"] == "send" else ""))
    for t in tasks:
        if "et" in t:
            parts.append(f"{t['node']} failed: {t['et']}")
        elif "i" in t:
            parts.append(f"{t['node']} interrupted")
    return "; ".join(parts)


def _internal(name: str) -> bool:
    return name.startswith(BRANCH) or name.startswith("__")


def _size(frame: dict) -> int:
    return len(orjson.dumps(frame))


def _json(tree: Any) -> str | None:
    return None if tree is None else orjson.dumps(tree).decode()


def _one_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


# ---------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------


def check_source(source_url: str, threads: Iterable[str] = ()) -> None:
    """Open the source read-only and find the threads asked for, or raise ``LangGraphImportError``.

    For callers that make the target store only once the import can start: a
    mistyped source must not leave a new, empty store behind.
    """
    source = _Source(source_url)
    try:
        source.threads(threads)
    finally:
        source.close()


def import_langgraph(
    source_url: str,
    store: SqlStore,
    *,
    threads: Iterable[str] = (),
    progress: Callable[[str, int, int | None], None] | None = None,
) -> ImportSummary:
    """Import every thread (or those named) of a LangGraph checkpoint database into ``store``.

    Idempotent: a thread whose newest checkpoint was imported before is
    reported as already imported; a thread that has moved on since imports
    as a new run.
    """
    source = _Source(source_url)
    summary = ImportSummary(source=source.label)
    serde = _SafeSerde(summary.blocked_types)
    try:
        names = source.threads(threads)
        for i, thread_id in enumerate(names):
            summary.runs.append(_ThreadImport(source, serde, thread_id, source.label).build(store))
            if progress is not None:
                progress("importing threads", i + 1, len(names))
    finally:
        serde.close()
        source.close()
    return summary
