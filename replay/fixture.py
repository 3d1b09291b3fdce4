"""Regression fixtures: a recorded run as one self-contained, reviewable JSON file, and back.

``export_fixture`` turns a run in the store into a fixture: where to resume
(the starting checkpoint: values, channel versions, versions seen), then per
superstep what a replay checks and answers from: the tasks and their
updates, the route decisions, interrupt and resume values, the tool and
model calls (inputs, outputs, errors, and how long to hold a call a node
gave up waiting for), and the state keys that changed. Values stay in the
codec's typed envelopes, so messages come back as messages; each message is
stored once in a ``messages`` table and referred to as ``{"$b": key}``.

The bytes are deterministic: values keep their recorded key order (code
may depend on it), one value per line, volatile ids
(task, call, message and interrupt ids, checkpoint ids, timestamps)
renumbered or dropped, so exporting the same run twice gives the same file
and a re-recorded fixture diffs cleanly in review. Everything passes through
the recorder's ``Redactor`` again on the way out.

``import_fixture`` writes a fixture back into a store as a run that
``replay()`` resumes and compares against, and the TUI opens. Fixtures come
from other people: the file is bounded in size and depth, checked for shape,
and nothing it names is imported or executed (its graph reference is shown,
never loaded).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import stat
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from graphtape.recorder.codec import BLOB_REF, ENVELOPE, MAX_DEPTH, DecodeError, Decoder, blob_hash, collect_refs
from graphtape.recorder.errors import GraphtapeError, RunNotFound
from graphtape.recorder.frames import FrameState
from graphtape.recorder.records import FLAG_ERROR, FLAG_INTERRUPT, FLAG_PENDING, FLAG_RESUME
from graphtape.recorder.redaction import MARK, Redactor
from graphtape.recorder.store import Batch, RunStore, SqlStore, expand_payload, pack, squeeze, unpack
from graphtape.recorder.tracebacks import MAX_FRAMES, scrubbed_frames, valid_frames

__all__ = [
    "FORMAT_KEY",
    "FORMAT_VERSION",
    "FixtureError",
    "ImportedFixture",
    "StepRange",
    "dumps_fixture",
    "export_fixture",
    "fixture_run_id",
    "import_fixture",
    "parse_fixture",
    "portable_graph_ref",
    "read_fixture",
    "write_fixture",
]

FORMAT_KEY = "graphtape_fixture"
# v1: the first format.
FORMAT_VERSION = 1
MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_STEPS = 100_000
MAX_CALLS = 1_000_000
MAX_HOLD_MS = 600_000
MAX_STEP_NUMBER = 2**31 - 1  # step numbers (and counts) go into integer columns
# The checkpoint an imported fixture resumes from. LangGraph derives the next
# task ids from it, so a fixed id makes replays of a fixture name their tasks alike.
START_CHECKPOINT_ID = "00000000-0000-6000-8000-000000000000"
KEYFRAME_EVERY = 64

ABOUT = (
    "graphtape regression fixture: a recorded LangGraph run that a test replays against today's code "
    "(@pytest.mark.graphtape); `graphtape import FILE` opens it in the TUI. Values are graphtape's typed "
    'envelopes ({"$t": kind, ...}); {"$b": key} refers to an entry of "messages". Steps list what each '
    "superstep did and the state keys it changed."
)

_STATUSES = ("ok", "error", "interrupted")
_STRUCTURAL = frozenset({ENVELOPE, "cls", "type"})
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]{4,}")
_PRIVATE_MODULE = re.compile(r"_graphtape_(?:user|fixture)_(\w+?)_[0-9a-f]{8}\b")
_SAFE_KEY = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_MESSAGE_KINDS = {"AIMessage": "ai", "AIMessageChunk": "ai", "HumanMessage": "human", "SystemMessage": "system", "ToolMessage": "tool"}
_CONFIG_DROP = frozenset({"thread_id", "checkpoint_id", "checkpoint_ns", "checkpoint_map"})


SLICE_TAG = "slice-of:"  # on a run imported from a fixture cut short: the step the recording went to


class FixtureError(GraphtapeError):
    """A fixture cannot be written or read: the message says which file, where, and what to do."""


# ---------------------------------------------------------------------------
# Step ranges and graph references
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StepRange:
    """Which supersteps to export: ``first`` to ``last`` inclusive (None: from the start / to the end).

    The replay resumes from the checkpoint before ``first`` and checks every
    step up to ``last``.
    """

    first: int | None = None
    last: int | None = None

    @classmethod
    def parse(cls, text: str | None) -> StepRange:
        """``"A:B"``, ``"A:"``, ``":B"`` or ``"A"``; a bad range raises ``FixtureError``."""
        if text is None or not text.strip():
            return cls()
        head, sep, tail = text.strip().partition(":")

        def num(part: str) -> int | None:
            part = part.strip()
            if not part:
                return None
            try:
                return int(part)
            except ValueError:
                raise FixtureError(f"bad step range {text!r}: use A:B, A:, :B or A with whole numbers") from None

        first, last = num(head), num(tail) if sep else num(head)
        if first is not None and last is not None and last < first:
            raise FixtureError(f"bad step range {text!r}: the last step comes before the first")
        return cls(first, last)


def portable_graph_ref(ref: str | None, base: str | os.PathLike | None = None) -> str | None:
    """``ref`` with a file path made relative to ``base`` (default: the current directory) when under it.

    ``module:attr`` references stay as they are; a file outside ``base``
    keeps its absolute path (the caller should warn: it names one machine).
    """
    if not ref:
        return None
    target, sep, attr = ref.rpartition(":")
    if not sep or not target or not (target.endswith(".py") or "/" in target or os.sep in target):
        return ref
    path = Path(target)
    if not path.is_absolute():
        return f"{path.as_posix()}:{attr}"
    root = Path(base if base is not None else os.getcwd()).resolve()
    try:
        rel = path.resolve().relative_to(root)
    except ValueError:
        return f"{path.as_posix()}:{attr}"
    return f"{rel.as_posix()}:{attr}"


def is_machine_path(ref: str | None) -> bool:
    """Whether a graph reference names an absolute file path (so it only works on one machine)."""
    if not ref:
        return False
    target = ref.rpartition(":")[0]
    return bool(target) and (target.endswith(".py") or "/" in target) and (Path(target).is_absolute() or bool(re.match(r"^[A-Za-z]:[\\/]", target)))


# ---------------------------------------------------------------------------
# Reading a run as stored (encoded values, blob references unresolved)
# ---------------------------------------------------------------------------


def _sql(store: RunStore) -> SqlStore:
    if not isinstance(store, SqlStore):
        raise FixtureError(f"exporting needs graphtape's SQL store, got {type(store).__name__}")
    return store


def _raw_run(store: SqlStore, run_id: str) -> Any:
    import sqlalchemy as sa

    from graphtape.recorder import schema as S

    rows = store._read(sa.select(S.runs.c.inputs, S.runs.c.config).where(S.runs.c.id == run_id))
    if not rows:
        raise RunNotFound(f"no run {run_id}")
    return rows[0]


def _raw_steps(store: SqlStore, run_id: str, ns: str) -> list[Any]:
    import sqlalchemy as sa

    from graphtape.recorder import schema as S

    c = S.steps.c
    return store._read(
        sa.select(c.seq, c.step, c.source, c.checkpoint_id, c.created_at, c.is_key, c.flags, c.payload)
        .where(c.run_id == run_id, c.ns == ns)
        .order_by(c.seq)
    )


def _raw_calls(store: SqlStore, run_id: str) -> list[Any]:
    import sqlalchemy as sa

    from graphtape.recorder import schema as S

    c = S.calls.c
    return store._read(sa.select(S.calls).where(c.run_id == run_id, c.step.is_not(None)).order_by(c.started_at, c.id))


def _loads(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        raise FixtureError("the store holds a damaged value (not JSON): re-record the run") from None


@dataclass
class _Step:
    """One superstep of one namespace with its rows merged, as ``step_detail`` merges them."""

    step: int
    source: str | None
    completed: bool
    tasks: list[dict]
    routes: list[dict]
    events: list[dict]
    state: tuple[dict, dict, dict] | None  # (values, versions, versions seen) after it, encoded


def _read_namespace(store: SqlStore, run_id: str, ns: str) -> list[_Step]:
    """Every step of ``ns`` in order, with the encoded state after each completed one."""
    order: dict[int, int] = {}
    merged: dict[int, dict] = {}
    frames = FrameState()
    for r in _raw_steps(store, run_id, ns):
        payload = expand_payload(unpack(r.payload), r.created_at)
        pending = bool((r.flags or 0) & FLAG_PENDING)
        m = merged.get(r.step)
        if m is None:
            m = merged[r.step] = {"tasks": {}, "routes": {}, "events": [], "source": None, "completed": False, "state": None}
            order[r.step] = r.seq
        elif not pending and not m["completed"]:
            order[r.step] = r.seq  # the completed row keeps its place, as list_steps shows it
        for t in payload.get("t", []):
            m["tasks"][t["id"]] = t
        by_task: dict[Any, list[dict]] = {}
        for d in payload.get("r", []):
            by_task.setdefault(d.get("task"), []).append(d)
        m["routes"].update(by_task)
        m["events"].extend(payload.get("e", []))
        frame = payload.get("s")
        if frame is not None and not pending:
            frames.apply(frame, bool(r.is_key))
            m["state"] = (dict(frames.values), dict(frames.versions), {k: dict(v) for k, v in frames.seen.items()})
        if not pending:
            m["completed"] = True
            m["source"] = r.source
    out = []
    for step in sorted(merged, key=lambda s: order[s]):
        m = merged[step]
        routes = [d for rs in m["routes"].values() for d in rs]
        out.append(_Step(step, m["source"], m["completed"], list(m["tasks"].values()), routes, m["events"], m["state"]))
    return out


def _internal(name: str) -> bool:
    return name.startswith("branch:") or name.startswith("__") or ":" in name and name.split(":", 1)[0] in ("join", "start")


def _public(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if not _internal(k)}


# ---------------------------------------------------------------------------
# Export
# ---------------------------------------------------------------------------


class _Exporter:
    """Turns stored (encoded) values into fixture values: resolved, redacted, renumbered, tabled."""

    def __init__(self, store: SqlStore, redactor: Redactor) -> None:
        self.store = store
        self.redactor = redactor
        self.ids: dict[str, str] = {}
        self.counts: Counter[str] = Counter()
        self.tasks: dict[str, str] = {}
        self.calls: dict[str, str] = {}
        self.table: dict[str, Any] = {}
        self.table_keys: dict[bytes, str] = {}
        self._raw_blobs: dict[str, Any] = {}
        self._done_blobs: dict[str, Any] = {}

    # -- ids -----------------------------------------------------------------------
    def stable(self, original: str, prefix: str) -> str:
        """A stable stand-in for a volatile id, numbered in order of first appearance."""
        got = self.ids.get(original)
        if got is None:
            self.counts[prefix] += 1
            got = self.ids[original] = f"{prefix}-{self.counts[prefix]}"
        return got

    def task(self, task_id: str | None) -> str | None:
        if task_id is None:
            return None
        got = self.tasks.get(task_id)
        if got is None:
            got = self.tasks[task_id] = f"t{len(self.tasks) + 1}"
        return got

    def ns(self, ns: str) -> str:
        """A namespace with its task ids renumbered (``"child:<uuid>"`` -> ``"child:t4"``)."""
        if not ns:
            return ""
        parts = []
        for part in ns.split("|"):
            node, sep, tid = part.partition(":")
            parts.append(f"{node}:{self.task(tid)}" if sep and tid else part)
        return "|".join(parts)

    # -- values ----------------------------------------------------------------------
    def value(self, tree: Any) -> Any:
        """A stored value as the fixture holds it."""
        refs = collect_refs(tree).difference(self._raw_blobs)
        if refs:
            self._raw_blobs.update(self.store.blobs(refs))
        return self._walk(tree, 0)

    def channels(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """State channels by name: the recorder encodes each channel's value on its own,
        so (as when recording) channel names are not judged as secret keys; their values are."""
        refs = collect_refs(list(values.values())).difference(self._raw_blobs)
        if refs:
            self._raw_blobs.update(self.store.blobs(refs))
        return {k: self._walk(v, 1) for k, v in values.items()}

    def text(self, s: str | None) -> str | None:
        return None if s is None else self.redactor.scrub(s)

    def frames(self, frames: list[list[Any]]) -> list[list[Any]]:
        """A traceback, scrubbed again like every exported string."""
        return scrubbed_frames(frames, self.redactor.scrub)

    def _walk(self, x: Any, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise FixtureError("a recorded value is nested too deeply to export")
        t = type(x)
        if t is str:
            return self.redactor.scrub(x)
        if t is list:
            return [self._walk(i, depth + 1) for i in x]
        if t is not dict:
            return x
        ref = x.get(BLOB_REF)
        if type(ref) is str and len(x) == 1:
            return self._blob(ref, depth)
        kind = x.get(ENVELOPE)
        secret = self.redactor.is_secret_key
        if kind is None:
            out = {}
            for k, v in x.items():  # recorded order: user code may depend on it (json.dumps)
                if secret(k) and v is not None and v != "":
                    out[self.redactor.scrub(k)] = self.redactor.mark()
                else:
                    out[self.redactor.scrub(k)] = self._walk(v, depth + 1)
            return out
        if kind == "dict" and type(x.get("v")) is list:
            pairs = []
            for pair in x["v"]:
                if type(pair) is list and len(pair) == 2:
                    k, v = pair
                    hidden = type(k) is str and secret(k) and v is not None and v != ""
                    pairs.append([self._walk(k, depth + 1), self.redactor.mark() if hidden else self._walk(v, depth + 1)])
                else:
                    pairs.append(self._walk(pair, depth + 1))
            return {ENVELOPE: "dict", "v": pairs}
        out = {k: (v if k in _STRUCTURAL else self._walk(v, depth + 1)) for k, v in x.items()}
        if kind in ("lc.msg", "lc.doc"):
            return self._tabled(out, kind)
        if kind == "unserializable":
            # Only its class name is ever used (a stand-in when replayed): drop what varies
            # between runs and machines, the object's address and a file-loaded module's private name.
            for k in ("type", "repr"):
                if type(out.get(k)) is str:
                    out[k] = _ADDRESS.sub("", _PRIVATE_MODULE.sub(r"\1", out[k]))
        if kind == "lg.interrupt":
            v = out.get("v")
            if isinstance(v, dict) and type(v.get("id")) is str and v["id"]:
                v["id"] = self.stable(v["id"], "interrupt")
        return out

    def _blob(self, h: str, depth: int) -> Any:
        done = self._done_blobs.get(h)
        if done is not None:
            return done
        if h not in self._raw_blobs:
            raise FixtureError(f"the run refers to a value the store no longer holds (blob {h}): the store was damaged or collected")
        done = self._done_blobs[h] = self._walk(self._raw_blobs[h], depth + 1)
        return done

    def _tabled(self, env: dict, kind: str) -> dict:
        v = env.get("v")
        ident = v.get("id") if isinstance(v, dict) else None
        if type(ident) is str and ident:
            # Every id, not only minted ones: a re-recorded run holds ids a fixture gave it
            # (answers keep theirs), which must number like the fresh ones they stand for.
            ident = v["id"] = self.stable(ident, "msg" if kind == "lc.msg" else "doc")
        canonical = orjson.dumps(env)
        key = self.table_keys.get(canonical)
        if key is None:
            if type(ident) is str and _SAFE_KEY.match(ident):
                base = ident
            else:
                label = _MESSAGE_KINDS.get(str(env.get("cls")), "msg") if kind == "lc.msg" else "doc"
                base = f"{label}-{hashlib.blake2b(canonical, digest_size=4).hexdigest()}"
            key, n = base, 1
            while key in self.table:
                n += 1
                key = f"{base}~{n}"
            self.table[key] = env
            self.table_keys[canonical] = key
        return {BLOB_REF: key}


def export_fixture(
    store: RunStore,
    run_ref: str,
    *,
    graph: str | None = None,
    steps: StepRange | str | None = None,
    redact_patterns: Iterable[str] = (),
    redact_keys: Iterable[str] = (),
    origin: str | None = None,
    base_dir: str | os.PathLike | None = None,
) -> dict[str, Any]:
    """The fixture of run ``run_ref`` (a dict; ``dumps_fixture`` gives its bytes).

    ``graph`` is the import path written into the fixture (default: the run's
    recorded one), made relative to ``base_dir`` (default: the current
    directory) when it points at a file under it. ``steps`` limits the
    supersteps checked. ``origin`` names another run in the store whose
    inputs and config to keep (a re-recorded run keeps its fixture's).
    """
    sql = _sql(store)
    rng = steps if isinstance(steps, StepRange) else StepRange.parse(steps)
    run = sql.get_run(run_ref)
    if run.status == "running":
        raise FixtureError(f"run {run.id} is still recording: export it once it has ended")
    ex = _Exporter(sql, Redactor(tuple(redact_patterns), tuple(redact_keys)))

    root = _read_namespace(sql, run.id, "")
    done = [s for s in root if s.completed]
    if not done:
        raise FixtureError(f"run {run.id} has no completed step to resume from")
    last_recorded = root[-1].step
    sliced_of = [int(t[len(SLICE_TAG):]) for t in run.tags if str(t).startswith(SLICE_TAG) and t[len(SLICE_TAG):].lstrip("-").isdigit()]
    if sliced_of:
        last_recorded = max(last_recorded, sliced_of[0])  # an imported window of a longer run
    if rng.first is not None and not any(s.step >= rng.first for s in root):
        raise FixtureError(f"run {run.id} has no step {rng.first} (steps {root[0].step}..{last_recorded})")
    if rng.first is None:
        start = done[0]
    else:
        before = [s for s in done if s.step < rng.first]
        if not before:
            raise FixtureError(f"cannot start at step {rng.first}: run {run.id} has no completed step before it to resume from (its first is {done[0].step})")
        start = before[-1]
    last = root[-1].step if rng.last is None else rng.last
    if rng.last is not None and not any(s.step == rng.last for s in root):
        raise FixtureError(f"run {run.id} has no step {rng.last} (steps {root[0].step}..{last_recorded})")
    chosen = [s for s in root if start.step < s.step <= last]
    if not chosen:
        raise FixtureError(f"nothing to check: run {run.id} has no step after {start.step}" + (f" up to {last}" if rng.last is not None else ""))

    raw = _raw_run(sql, origin or run.id)
    config = _export_config(ex, _loads(raw.config), start.step - root[0].step)
    inputs = ex.value(_loads(raw.inputs))
    assert start.state is not None
    values, versions, seen = start.state
    versions, seen = _stable_versions(versions, seen)
    start_entry = {
        "after_step": start.step,
        "values": ex.channels(values),
        "versions": dict(versions),
        "versions_seen": {n: dict(s) for n, s in seen.items()},
    }

    calls = _raw_calls(sql, run.id)
    holds = _holds(sql, run.id, calls, run.ended_at)
    calls_by: dict[tuple[str, int], list[Any]] = {}
    for c in calls:
        calls_by.setdefault((c.ns, c.step), []).append(c)

    prev = _public(start_entry["values"])
    step_entries = []
    entered: dict[str, int] = {}
    for s in chosen:
        entry, prev = _step_entry(ex, s, prev, calls_by.get(("", s.step), []), holds)
        step_entries.append(entry)
        for t in s.tasks:
            for sub in t.get("sub", []):
                entered.setdefault(sub.split("|")[0], s.step)
    final_state = prev

    subgraphs = []
    for ns in sql.namespaces(run.id):
        if not ns or ns.split("|")[0] not in entered:
            continue
        sub_prev: dict[str, Any] = {}
        sub_steps = []
        for s in _read_namespace(sql, run.id, ns):
            entry, sub_prev = _step_entry(ex, s, sub_prev, calls_by.get((ns, s.step), []), holds)
            sub_steps.append(entry)
        subgraphs.append({"ns": ex.ns(ns), "steps": sub_steps})

    outcome: dict[str, Any] = {"status": run.status}
    if run.status_reason:
        outcome["reason"] = run.status_reason
    if run.error_type or run.error_message:
        outcome["error"] = {"type": run.error_type, "message": ex.text(run.error_message)}

    fixture: dict[str, Any] = {
        FORMAT_KEY: FORMAT_VERSION,
        "about": ABOUT,
        "name": run.name,
        "graph": portable_graph_ref(graph or run.graph_ref, base_dir),
        "graph_name": run.graph_name,
        "outcome": outcome,
        "inputs": inputs,
        "config": config,
    }
    if last < last_recorded:
        fixture["slice"] = {"to": last, "of": last_recorded}
    fixture["start"] = start_entry
    fixture["steps"] = step_entries
    if subgraphs:
        fixture["subgraphs"] = subgraphs
    fixture["final_state"] = final_state
    fixture["messages"] = _fold_idless(fixture, ex.table)
    fixture["redacted"] = {"when_recorded": run.redactions, "in_this_file": _marked(fixture)}
    return fixture


def _fold_idless(fixture: dict[str, Any], table: dict[str, Any]) -> dict[str, Any]:
    """Point references to an id-less message at the one stored copy of it that has an id.

    The recorder encodes values after the node returned, racing LangGraph's
    ``add_messages``, which gives new messages their ids in place: the same
    message may be recorded with or without its id. Folding the id-less copy
    into its only id'd twin makes the file the same whichever way the race went.
    """
    twins: dict[bytes, list[str]] = {}
    idless: list[tuple[str, bytes]] = []
    for key, env in table.items():
        v = env.get("v")
        if not isinstance(v, dict):
            continue
        content = orjson.dumps({**env, "v": {k: x for k, x in v.items() if k != "id"}})
        if v.get("id") is None:
            idless.append((key, content))
        else:
            twins.setdefault(content, []).append(key)
    alias = {key: twins[content][0] for key, content in idless if len(twins.get(content, ())) == 1}
    if alias:

        def walk(x: Any) -> Any:
            if type(x) is list:
                return [walk(i) for i in x]
            if type(x) is not dict:
                return x
            if len(x) == 1 and x.get(BLOB_REF) in alias:
                return {BLOB_REF: alias[x[BLOB_REF]]}
            return {k: walk(v) for k, v in x.items()}

        for part in ("inputs", "config", "start", "steps", "subgraphs", "final_state"):
            if part in fixture:
                fixture[part] = walk(fixture[part])
    return {k: v for k, v in sorted(table.items()) if k not in alias}


def _export_config(ex: _Exporter, config: Any, offset: int) -> dict[str, Any]:
    """What a replay forwards: configurable (no thread or checkpoint keys), recursion limit, tags, metadata, the run context."""
    config = config if isinstance(config, dict) and ENVELOPE not in config else {}
    out: dict[str, Any] = {}
    conf = config.get("configurable")
    if isinstance(conf, dict) and ENVELOPE not in conf:
        kept = {k: v for k, v in conf.items() if k not in _CONFIG_DROP and not k.startswith("__")}
        if kept:
            out["configurable"] = ex.value(kept)
    limit = config.get("recursion_limit")
    if type(limit) is int:
        out["recursion_limit"] = limit
    if offset > 0:
        # LangGraph counts the limit from where a run starts: a fixture that starts later keeps the
        # recorded limit (what its subgraphs saw) and says how much later, so the replay ends where it did.
        out["recursion_offset"] = offset
    for key in ("tags", "metadata", "context"):
        if config.get(key):
            out[key] = ex.value(config[key])
    return dict(sorted(out.items()))


def _stable_versions(versions: dict, seen: dict) -> tuple[dict, dict]:
    """Channel versions as they are when whole numbers; others (random suffixes) as their rank, order kept."""
    every = list(versions.values()) + [v for s in seen.values() for v in s.values()]
    if all(type(v) is int for v in every):
        return versions, seen
    if all(type(v) in (int, float) for v in every):
        ranked = sorted(set(every))
    elif all(type(v) is str for v in every):
        ranked = sorted(set(every))
    else:
        return versions, seen
    rank = {v: i + 1 for i, v in enumerate(ranked)}
    return {c: rank[v] for c, v in versions.items()}, {n: {c: rank[v] for c, v in s.items()} for n, s in seen.items()}


def _holds(store: SqlStore, run_id: str, calls: list[Any], run_end: float | None) -> dict[str, int]:
    """Call id -> milliseconds a replay must hold its answer: calls a node stopped waiting for (timeouts).

    Mirrors the replay's rule: a call that outlived its task or its run is
    replayed as slow as it was (rounded up to 10 ms). One that never returned
    is held until 50 ms after its node stopped waiting (its task ended),
    rounded up to 50 ms: what the node saw, without the run's timing jitter,
    so re-recording the same behaviour writes the same number.
    """
    ends: dict[str, float] = {}
    for ns in store.namespaces(run_id):
        for s in _read_namespace(store, run_id, ns):
            for t in s.tasks:
                if t.get("t0") is not None and t.get("ms") is not None:
                    ends[t["id"]] = t["t0"] + t["ms"] / 1000
    out = {}
    for c in calls:
        task_end = ends.get(c.task_id or "")
        if c.error_type == "Unfinished":
            if task_end is not None:
                hold = _ceil(task_end - c.started_at + 0.05, 0.05)
            else:
                hold = _ceil((run_end - c.started_at + 0.05) if run_end is not None else 1.0, 0.01)
        elif c.latency_ms is None:
            continue
        else:
            finished = c.started_at + c.latency_ms / 1000
            late = (task_end is not None and finished > task_end + 0.001) or (run_end is not None and finished > run_end + 0.001)
            hold = _ceil(c.latency_ms / 1000, 0.01) if late else 0.0
        if hold > 0:
            out[c.call_id] = min(MAX_HOLD_MS, int(round(hold * 1000)))
    return out


def _ceil(seconds: float, quantum: float) -> float:
    return max(quantum, math.ceil(seconds / quantum - 1e-9) * quantum)


def _task_sort_key(t: dict) -> tuple:
    # A step's tasks are stored by (path, task id); ids change every run, paths do not (a
    # Send's path holds its index). Imported runs have no paths: their stored order stands.
    return (t.get("path", ""), t.get("node", ""))


def _step_entry(ex: _Exporter, s: _Step, prev: dict[str, Any], calls: list[Any], holds: dict[str, int]) -> tuple[dict, dict]:
    """One step as the fixture holds it, and the public state after it."""
    entry: dict[str, Any] = {"step": s.step}
    if s.source and s.source != "loop":
        entry["source"] = s.source
    if not s.completed:
        entry["completed"] = False
    tasks = sorted(s.tasks, key=_task_sort_key)
    entry["tasks"] = []
    for t in tasks:
        task: dict[str, Any] = {"id": ex.task(t["id"]), "node": t.get("node", "?")}
        if t.get("w"):
            task["writes"] = ex.value(t["w"])
        if t.get("et") or t.get("em"):
            task["error"] = {"type": t.get("et"), "message": ex.text(t.get("em"))}
            if valid_frames(t.get("tb")):
                task["error"]["traceback"] = ex.frames(valid_frames(t["tb"]))
        if t.get("i"):
            task["interrupts"] = ex.value(t["i"])
        if isinstance(t.get("att"), list) and t["att"]:
            # Earlier attempts of a retried task; durations are run to run noise, left out.
            task["attempts"] = [{"n": a.get("n"), "error": {"type": a.get("et"), "message": ex.text(a.get("em"))} if a.get("et") else None} for a in t["att"] if isinstance(a, dict)]
        if t.get("c"):
            task["cached"] = True
        if t.get("sub"):
            task["subgraphs"] = [ex.ns(n) for n in t["sub"]]
        entry["tasks"].append(task)
    routes = []
    for d in sorted(s.routes, key=lambda d: (d.get("src") or "", d.get("kind") or "", orjson.dumps(d.get("dest")))):
        route: dict[str, Any] = {"from": d.get("src"), "kind": d.get("kind"), "to": list(d.get("dest") or [])}
        if d.get("router"):
            route["router"] = d["router"]
        if "ret" in d:
            route["returned"] = ex.value(d["ret"])
        if d.get("sends"):
            route["sends"] = ex.value(d["sends"])
        if d.get("task"):
            route["task"] = ex.task(d["task"])
        routes.append(route)
    if routes:
        entry["routes"] = routes
    events = []
    for e in s.events:
        event: dict[str, Any] = {"kind": e.get("kind"), "value": ex.value(e.get("v"))}
        if e.get("task"):
            event["task"] = ex.task(e["task"])
        if e.get("node"):
            event["node"] = e["node"]
        events.append(event)
    if events:
        entry["events"] = events
    order = {t["id"]: i for i, t in enumerate(tasks)}
    out_calls = []
    for c in sorted(calls, key=lambda c: order.get(c.task_id, len(order))):  # stable: started_at order within a task
        call: dict[str, Any] = {"id": ex.calls.setdefault(c.call_id, f"c{len(ex.calls) + 1}"), "kind": c.kind, "name": c.name, "node": c.node, "task": ex.task(c.task_id)}
        call["inputs"] = ex.value(_loads(c.inputs))
        if c.error_type:
            call["error"] = {"type": c.error_type, "message": ex.text(c.error_message)}
            if c.traceback and valid_frames(_loads(c.traceback)):
                call["error"]["traceback"] = ex.frames(valid_frames(_loads(c.traceback)))
        else:
            call["output"] = ex.value(_loads(c.output))
        if holds.get(c.call_id):
            call["hold_ms"] = holds[c.call_id]
        out_calls.append(call)
    if out_calls:
        entry["calls"] = out_calls
    if s.completed and s.state is not None:
        now = ex.channels(_public(s.state[0]))
        entry["state"] = _state_change(prev, now)
        prev = now
    return entry, prev


def _state_change(prev: dict[str, Any], now: dict[str, Any]) -> dict[str, Any]:
    """The keys a step changed: set (new value), append (items added to a list), drop (removed)."""
    set_: dict[str, Any] = {}
    append: dict[str, Any] = {}
    for k, new in now.items():
        old = prev.get(k, _MISSING)
        if old is not _MISSING and old == new:
            continue
        if type(old) is list and type(new) is list and len(new) > len(old) and new[: len(old)] == old:
            append[k] = new[len(old) :]
        else:
            set_[k] = new
    drop = sorted(k for k in prev if k not in now)
    out: dict[str, Any] = {}
    if set_:
        out["set"] = set_
    if append:
        out["append"] = append
    if drop:
        out["drop"] = drop
    return out


_MISSING = object()


def _marked(fixture: dict[str, Any], limit: int = 50) -> list[str]:
    """Where the file holds a redaction mark (``steps[3].calls[0].inputs.api_key``), at most ``limit``."""
    found: list[str] = []

    def walk(x: Any, path: str, depth: int) -> None:
        if len(found) >= limit or depth > MAX_DEPTH + 20:
            return
        if type(x) is str:
            if MARK in x:
                found.append(path or "(top)")
        elif type(x) is dict:
            for k, v in x.items():
                walk(v, f"{path}.{k}" if path else str(k), depth + 1)
        elif type(x) is list:
            for i, v in enumerate(x):
                walk(v, f"{path}[{i}]", depth + 1)

    for key in ("inputs", "config", "start", "steps", "subgraphs", "messages", "outcome"):
        if key in fixture:
            walk(fixture[key], key, 0)
    return found


# ---------------------------------------------------------------------------
# Bytes and files
# ---------------------------------------------------------------------------


def dumps_fixture(fixture: Mapping[str, Any]) -> bytes:
    """The fixture's bytes: UTF-8 JSON, one value per line, the same for the same fixture."""
    return (json.dumps(fixture, indent=1, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


def write_fixture(path: str | os.PathLike, fixture: Mapping[str, Any], *, overwrite: bool = False) -> int:
    """Write the fixture to ``path`` (atomically, creating folders, mode 0600); returns the size in bytes.

    An existing file is replaced only with ``overwrite=True``: a fixture is
    usually a committed test expectation, and losing one silently breaks a test.
    """
    target = Path(path)
    data = dumps_fixture(fixture)
    if not overwrite and target.exists():
        raise FixtureError(f"{target} exists: pass --force to replace it, or -o to write another file")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, target)
    except OSError as exc:
        raise FixtureError(f"cannot write {target}: {exc.strerror or exc}") from None
    return len(data)


def read_fixture(path: str | os.PathLike) -> dict[str, Any]:
    """Read and check a fixture file; any problem is a one-line ``FixtureError``.

    Only a regular file is read, and never more than the size limit: ``stat``
    says nothing true of ``/dev/zero`` or a FIFO, so the read itself is capped.
    """
    p = Path(path)
    too_big = f"{p} is larger than {MAX_FILE_BYTES // (1024 * 1024)} MB: fixtures are limited to that (export fewer steps with --steps)"
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise FixtureError(f"no fixture at {p}") from None
    except IsADirectoryError:
        raise FixtureError(f"cannot read fixture {p}: it is a directory") from None
    except OSError as exc:
        raise FixtureError(f"cannot read fixture {p}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise FixtureError(f"cannot read fixture {p}: it is a directory")
        if not stat.S_ISREG(info.st_mode):
            raise FixtureError(f"cannot read fixture {p}: not a regular file (a device, a pipe or a socket)")
        if info.st_size > MAX_FILE_BYTES:
            raise FixtureError(too_big)
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise FixtureError(f"cannot read fixture {p}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) > MAX_FILE_BYTES:
        raise FixtureError(too_big)
    return parse_fixture(data, str(p))


def parse_fixture(data: bytes | str, label: str = "fixture") -> dict[str, Any]:
    """Parse and check fixture bytes: JSON, a known format version, the right shape, bounded."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    if len(data) > MAX_FILE_BYTES:
        raise FixtureError(f"{label} is larger than {MAX_FILE_BYTES // (1024 * 1024)} MB: refusing to read it")
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise FixtureError(f"{label} is not valid JSON ({str(exc).splitlines()[0]}): a damaged or hand-edited fixture? re-export it") from None
    if not isinstance(doc, dict) or FORMAT_KEY not in doc:
        raise FixtureError(f"{label} is not a graphtape fixture (no {FORMAT_KEY!r} version at the top): export one with `graphtape export RUN -o FILE`")
    version = doc[FORMAT_KEY]
    if type(version) is not int:
        raise FixtureError(f"{label} has an unreadable fixture format version {version!r:.40}")
    if version > FORMAT_VERSION:
        raise FixtureError(
            f"{label} was written by a newer graphtape (fixture format v{version}; this one reads v{FORMAT_VERSION}): upgrade graphtape to use it"
        )
    if version < 1:
        raise FixtureError(f"{label} uses fixture format v{version}, which this graphtape cannot read: re-export it from its run")
    _check(doc, label)
    return doc


# ---------------------------------------------------------------------------
# Shape checks
# ---------------------------------------------------------------------------


class _Shape:
    def __init__(self, label: str) -> None:
        self.label = label

    def fail(self, where: str, what: str) -> None:
        raise FixtureError(f"{self.label}: {where}: {what} (a damaged or hand-edited fixture? re-export it)")

    def get(self, d: dict, key: str, types: tuple[type, ...], where: str, *, required: bool = True) -> Any:
        if key not in d:
            if required:
                self.fail(where, f"missing {key!r}")
            return None
        v = d[key]
        if v is None and type(None) in types:
            return v
        if type(v) is bool and bool not in types:
            self.fail(f"{where}.{key}", f"expected {_names(types)}, got {_kind(v)}")
        if not isinstance(v, types):
            self.fail(f"{where}.{key}", f"expected {_names(types)}, got {_kind(v)}")
        return v

    def value(self, v: Any, where: str) -> None:
        """An encoded value: bounded depth (the codec checks envelopes when it decodes)."""
        stack = [(v, 0)]
        while stack:
            x, depth = stack.pop()
            if depth > MAX_DEPTH:
                self.fail(where, f"a value is nested deeper than {MAX_DEPTH} levels")
            if type(x) is dict:
                stack.extend((i, depth + 1) for i in x.values())
            elif type(x) is list:
                stack.extend((i, depth + 1) for i in x)


def _names(types: tuple[type, ...]) -> str:
    names = {dict: "an object", list: "a list", str: "a string", int: "a whole number", float: "a number", bool: "true or false", type(None): "null"}
    return " or ".join(dict.fromkeys(names.get(t, t.__name__) for t in types))


def _kind(v: Any) -> str:
    return _names((type(v),))


def _check(doc: dict, label: str) -> None:
    sh = _Shape(label)
    sh.get(doc, "name", (str,), "top")
    sh.get(doc, "graph", (str, type(None)), "top", required=False)
    sh.get(doc, "graph_name", (str, type(None)), "top", required=False)
    outcome = sh.get(doc, "outcome", (dict,), "top")
    status = sh.get(outcome, "status", (str,), "outcome")
    if status not in _STATUSES:
        sh.fail("outcome.status", f"{status!r:.40} is not one of {', '.join(_STATUSES)}")
    sh.get(outcome, "reason", (str, type(None)), "outcome", required=False)
    err = sh.get(outcome, "error", (dict,), "outcome", required=False)
    if err is not None:
        sh.get(err, "type", (str, type(None)), "outcome.error")
        sh.get(err, "message", (str, type(None)), "outcome.error", required=False)
    sh.value(doc.get("inputs"), "inputs")
    sh.value(sh.get(doc, "config", (dict,), "top"), "config")
    sl = sh.get(doc, "slice", (dict,), "top", required=False)
    if sl is not None:
        sh.get(sl, "to", (int,), "slice")
        sh.get(sl, "of", (int,), "slice")
    start = sh.get(doc, "start", (dict,), "top")
    after = sh.get(start, "after_step", (int,), "start")
    if not -1 <= after <= MAX_STEP_NUMBER:
        sh.fail("start.after_step", f"{after} is not a step number (-1 to {MAX_STEP_NUMBER})")
    sh.value(sh.get(start, "values", (dict,), "start"), "start.values")
    versions = sh.get(start, "versions", (dict,), "start")
    for c, v in versions.items():
        if type(v) not in (int, float, str):
            sh.fail(f"start.versions.{c}", f"a channel version must be a number or a string, got {_kind(v)}")
    seen = sh.get(start, "versions_seen", (dict,), "start")
    for n, s in seen.items():
        if type(s) is not dict:
            sh.fail(f"start.versions_seen.{n}", f"expected an object, got {_kind(s)}")
    steps = sh.get(doc, "steps", (list,), "top")
    if not steps:
        sh.fail("steps", "no steps: a fixture checks at least one step")
    task_ids: set[str] = set()
    n_calls = _check_steps(sh, steps, "steps", after, task_ids)
    subs = sh.get(doc, "subgraphs", (list,), "top", required=False) or []
    for i, sub in enumerate(subs):
        where = f"subgraphs[{i}]"
        if type(sub) is not dict:
            sh.fail(where, f"expected an object, got {_kind(sub)}")
        ns = sh.get(sub, "ns", (str,), where)
        if not ns:
            sh.fail(f"{where}.ns", "a subgraph namespace cannot be empty")
        n_calls += _check_steps(sh, sh.get(sub, "steps", (list,), where), f"{where}.steps", None, task_ids)
    if len(steps) + sum(len(s.get("steps", [])) for s in subs) > MAX_STEPS:
        sh.fail("steps", f"more than {MAX_STEPS} steps")
    if n_calls > MAX_CALLS:
        sh.fail("steps", f"more than {MAX_CALLS} calls")
    sh.value(doc.get("final_state"), "final_state")
    table = sh.get(doc, "messages", (dict,), "top", required=False) or {}
    for key, v in table.items():
        sh.value(v, f"messages.{key}")
        if collect_refs(v):
            sh.fail(f"messages.{key}", "a message cannot refer to other entries")


def _check_steps(sh: _Shape, steps: list, where: str, after: int | None, task_ids: set[str]) -> int:
    last = after
    n_calls = 0
    for i, s in enumerate(steps):
        w = f"{where}[{i}]"
        if type(s) is not dict:
            sh.fail(w, f"expected an object, got {_kind(s)}")
        n = sh.get(s, "step", (int,), w)
        if last is not None and n <= last:
            sh.fail(f"{w}.step", f"step {n} does not come after step {last}" + (" (where the fixture starts)" if last == after and i == 0 else ""))
        if not -1 <= n <= MAX_STEP_NUMBER:
            sh.fail(f"{w}.step", f"{n} is not a step number (-1 to {MAX_STEP_NUMBER})")
        last = n
        sh.get(s, "source", (str,), w, required=False)
        sh.get(s, "completed", (bool,), w, required=False)
        ids = set()
        for j, t in enumerate(sh.get(s, "tasks", (list,), w)):
            tw = f"{w}.tasks[{j}]"
            if type(t) is not dict:
                sh.fail(tw, f"expected an object, got {_kind(t)}")
            tid = sh.get(t, "id", (str,), tw)
            if not tid or "|" in tid or ":" in tid:
                sh.fail(f"{tw}.id", f"{tid!r:.40} is not a task id (non-empty, without '|' or ':')")
            if tid in task_ids:
                sh.fail(f"{tw}.id", f"task id {tid!r:.40} is used twice")
            task_ids.add(tid)
            ids.add(tid)
            sh.get(t, "node", (str,), tw)
            sh.value(sh.get(t, "writes", (dict,), tw, required=False), f"{tw}.writes")
            err = sh.get(t, "error", (dict,), tw, required=False)
            if err is not None:
                sh.get(err, "type", (str, type(None)), f"{tw}.error")
                sh.get(err, "message", (str, type(None)), f"{tw}.error", required=False)
                _check_frames(sh, err, f"{tw}.error")
            sh.value(sh.get(t, "interrupts", (list,), tw, required=False), f"{tw}.interrupts")
            for k, attempt in enumerate(sh.get(t, "attempts", (list,), tw, required=False) or []):
                aw = f"{tw}.attempts[{k}]"
                if not isinstance(attempt, dict):
                    sh.fail(aw, "expected an object")
                sh.get(attempt, "n", (int,), aw)
                err = sh.get(attempt, "error", (dict, type(None)), aw, required=False)
                if err is not None:
                    sh.get(err, "type", (str, type(None)), f"{aw}.error")
                    sh.get(err, "message", (str, type(None)), f"{aw}.error", required=False)
            sh.get(t, "cached", (bool,), tw, required=False)
            for k, sub in enumerate(sh.get(t, "subgraphs", (list,), tw, required=False) or []):
                if type(sub) is not str or not sub:
                    sh.fail(f"{tw}.subgraphs[{k}]", "expected a namespace string")
        for j, r in enumerate(sh.get(s, "routes", (list,), w, required=False) or []):
            rw = f"{w}.routes[{j}]"
            if type(r) is not dict:
                sh.fail(rw, f"expected an object, got {_kind(r)}")
            sh.get(r, "from", (str,), rw)
            sh.get(r, "kind", (str,), rw)
            for k, d in enumerate(sh.get(r, "to", (list,), rw)):
                if type(d) is not str:
                    sh.fail(f"{rw}.to[{k}]", f"expected a node name, got {_kind(d)}")
            sh.get(r, "router", (str, type(None)), rw, required=False)
            sh.value(r.get("returned"), f"{rw}.returned")
            sh.value(sh.get(r, "sends", (list,), rw, required=False), f"{rw}.sends")
            _task_ref(sh, r, ids, rw)
        for j, e in enumerate(sh.get(s, "events", (list,), w, required=False) or []):
            ew = f"{w}.events[{j}]"
            if type(e) is not dict:
                sh.fail(ew, f"expected an object, got {_kind(e)}")
            kind = sh.get(e, "kind", (str,), ew)
            if kind not in ("interrupt", "resume"):
                sh.fail(f"{ew}.kind", f"{kind!r:.40} is not interrupt or resume")
            sh.value(e.get("value"), f"{ew}.value")
            sh.get(e, "node", (str, type(None)), ew, required=False)
            _task_ref(sh, e, ids, ew)
        for j, c in enumerate(sh.get(s, "calls", (list,), w, required=False) or []):
            cw = f"{w}.calls[{j}]"
            if type(c) is not dict:
                sh.fail(cw, f"expected an object, got {_kind(c)}")
            sh.get(c, "id", (str,), cw)
            if sh.get(c, "kind", (str,), cw) not in ("tool", "model"):
                sh.fail(f"{cw}.kind", "expected tool or model")
            sh.get(c, "name", (str,), cw)
            sh.get(c, "node", (str, type(None)), cw, required=False)
            sh.get(c, "task", (str, type(None)), cw, required=False)
            sh.value(c.get("inputs"), f"{cw}.inputs")
            sh.value(c.get("output"), f"{cw}.output")
            err = sh.get(c, "error", (dict,), cw, required=False)
            if err is not None:
                sh.get(err, "type", (str,), f"{cw}.error")
                sh.get(err, "message", (str, type(None)), f"{cw}.error", required=False)
                _check_frames(sh, err, f"{cw}.error")
            hold = sh.get(c, "hold_ms", (int, float), cw, required=False)
            if hold is not None and not (0 <= hold <= MAX_HOLD_MS):
                sh.fail(f"{cw}.hold_ms", f"must be between 0 and {MAX_HOLD_MS}")
            n_calls += 1
        state = sh.get(s, "state", (dict,), w, required=False)
        if state is not None:
            sh.value(sh.get(state, "set", (dict,), f"{w}.state", required=False), f"{w}.state.set")
            for k, items in (sh.get(state, "append", (dict,), f"{w}.state", required=False) or {}).items():
                if type(items) is not list:
                    sh.fail(f"{w}.state.append.{k}", f"expected a list of items, got {_kind(items)}")
                sh.value(items, f"{w}.state.append.{k}")
            for k, key in enumerate(sh.get(state, "drop", (list,), f"{w}.state", required=False) or []):
                if type(key) is not str:
                    sh.fail(f"{w}.state.drop[{k}]", "expected a state key")
            if s.get("completed") is False:
                sh.fail(f"{w}.state", "a step that did not complete has no state")
    return n_calls


def _check_frames(sh: _Shape, err: dict, where: str) -> None:
    """An error's traceback, if any: a list of ``[file, line, function, source]`` frames."""
    frames = sh.get(err, "traceback", (list,), where, required=False)
    if frames is not None and valid_frames(frames) != frames:
        sh.fail(f"{where}.traceback", f"expected at most {MAX_FRAMES + 1} frames of [file, line, function, source]")


def _task_ref(sh: _Shape, d: dict, ids: set[str], where: str) -> None:
    tid = sh.get(d, "task", (str, type(None)), where, required=False)
    if tid is not None and tid not in ids:
        sh.fail(f"{where}.task", f"{tid!r:.40} is not a task of this step")


# ---------------------------------------------------------------------------
# Import
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ImportedFixture:
    """A fixture loaded into a store: its run id, and whether that run was already there."""

    run_id: str
    name: str
    graph: str | None
    steps: int
    calls: int
    already: bool = False


def fixture_run_id(fixture: Mapping[str, Any]) -> str:
    """The run id a fixture imports as: the same fixture always gets the same id."""
    canonical = orjson.dumps(fixture, option=orjson.OPT_SORT_KEYS)
    return hashlib.blake2b(canonical, digest_size=8).hexdigest()


class _Importer:
    """Builds the rows of a fixture's run, checking every value decodes."""

    def __init__(self, fixture: dict[str, Any], run_id: str, label: str) -> None:
        self.f = fixture
        self.run_id = run_id
        self.label = label
        self.blobs: dict[str, tuple[bool, bytes]] = {}
        self.hashes: dict[str, str] = {}
        self.trees: dict[str, Any] = {}
        for key, tree in (fixture.get("messages") or {}).items():
            data = orjson.dumps(tree)
            h = blob_hash(data)
            self.hashes[key] = h
            self.trees[h] = tree
            self.blobs[h] = squeeze(data)
        self.typed = Decoder(self.trees, typed=True)
        self.plain = Decoder(self.trees, typed=False)

    def value(self, tree: Any, where: str, *, typed: bool = True) -> Any:
        """The tree with message keys replaced by blob hashes; checked to decode (as live objects)."""
        out = self._rehash(tree, where, 0)
        try:
            (self.typed if typed else self.plain).decode(out)
        except DecodeError as exc:
            raise FixtureError(f"{self.label}: {where}: {exc}") from None
        except RecursionError:
            raise FixtureError(f"{self.label}: {where}: a value is nested too deeply") from None
        return out

    def _rehash(self, x: Any, where: str, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise FixtureError(f"{self.label}: {where}: a value is nested deeper than {MAX_DEPTH} levels")
        t = type(x)
        if t is list:
            return [self._rehash(i, where, depth + 1) for i in x]
        if t is not dict:
            return x
        ref = x.get(BLOB_REF)
        if len(x) == 1 and BLOB_REF in x:
            if type(ref) is not str or ref not in self.hashes:
                raise FixtureError(f"{self.label}: {where}: refers to {ref!r:.60}, which is not in the fixture's messages")
            return {BLOB_REF: self.hashes[ref]}
        return {k: self._rehash(v, where, depth + 1) for k, v in x.items()}

    def batch(self) -> tuple[Batch, int, int]:
        f = self.f
        now = time.time()
        seq = 0
        rows: list[dict] = []
        calls: list[dict] = []
        pending_calls: list[tuple[dict, int]] = []
        start = f["start"]
        values = self.value(start["values"], "start.values", typed=True)
        state = FrameState()
        key = {"v": values, "cv": dict(start["versions"]), "vs": {n: dict(s) for n, s in start["versions_seen"].items()}}
        state.apply(key, True)
        seq += 1
        source = "input" if start["after_step"] < 0 else "loop"
        rows.append(self._row("", seq, start["after_step"], source, START_CHECKPOINT_ID, now, True, 0, {"t": [], "r": [], "e": [], "s": key}, "", "", ""))
        root_last = start["after_step"]
        namespaces = [("", "steps", f["steps"], state)]
        namespaces += [(sub["ns"], f"subgraphs[{i}].steps", sub["steps"], FrameState()) for i, sub in enumerate(f.get("subgraphs") or [])]
        for ns, where, steps, fs in namespaces:
            since_key = 0
            first_frame = not ns
            for i, s in enumerate(steps):
                w = f"{where}[{i}]"
                seq += 1
                completed = s.get("completed", True) is not False
                payload, flags, nodes, writes, summary = self._payload(s, w)
                frame = None
                is_key = False
                if completed:
                    frame = self._frame(fs, s.get("state") or {}, f"{w}.state")
                    since_key += 1
                    if not first_frame or since_key >= KEYFRAME_EVERY:
                        frame = {"v": dict(fs.values), "cv": dict(fs.versions), "vs": {n: dict(v) for n, v in fs.seen.items()}}
                        is_key, first_frame, since_key = True, True, 0
                    payload["s"] = frame
                else:
                    flags |= FLAG_PENDING
                created = now + seq * 0.001
                rows.append(self._row(ns, seq, s["step"], s.get("source") or "loop", None, created, is_key, flags, payload, nodes, writes, summary))
                if not ns:
                    root_last = s["step"]
                for j, c in enumerate(s.get("calls") or []):
                    row = self._call(ns, s["step"], c, f"{w}.calls[{j}]", created)
                    calls.append(row)
                    if c.get("hold_ms"):
                        pending_calls.append((row, c["hold_ms"]))
        end = now + (seq + 1) * 0.001
        for row, hold_ms in pending_calls:
            # The replay holds a call (run end - start + 50 ms) if it never returned, else its latency
            # when it outlived its run: place each so the replay holds it as recorded.
            hold = hold_ms / 1000
            if row["error_type"] == "Unfinished":
                row["started_at"] = end + 0.05 - hold
            else:
                row["started_at"] = end - hold + 0.0011
                row["latency_ms"] = hold_ms
        outcome = f["outcome"]
        err = outcome.get("error") or {}
        run = {
            "id": self.run_id,
            "name": f["name"],
            "graph_name": f.get("graph_name") or f["name"],
            # Never the fixture's graph reference: replaying must not import what a file names.
            "graph_ref": None,
            "thread_id": f"fixture-{self.run_id}",
            "status": outcome["status"],
            "status_reason": outcome.get("reason"),
            "error_type": err.get("type"),
            "error_message": err.get("message"),
            "started_at": now,
            "ended_at": end,
            "heartbeat_at": end,
            "inputs": _json(self.value(f.get("inputs"), "inputs")),
            "config": _json(self.value(f.get("config") or {}, "config")),
            "graph": None,
            "versions": _json({FORMAT_KEY: f[FORMAT_KEY]}),
            # A fixture cut at step N imports as a run that ends at N; the tag keeps that it is a
            # window of a longer recording, so exporting the run again cuts it the same way.
            "tags": _json(["fixture", *([f"{SLICE_TAG}{f['slice']['of']}"] if isinstance(f.get("slice"), dict) else [])]),
            "step_count": max(root_last + 1, 0),
            "redactions": _count(f.get("redacted")),
            "faults": 0,
        }
        if f.get("final_state") is not None:
            self.value(f["final_state"], "final_state")
        batch = Batch(runs_new=[run], steps=rows, calls=calls, blobs=dict(self.blobs))
        return batch, sum(1 for r in rows if not r["ns"]) - 1, len(calls)

    def _row(self, ns: str, seq: int, step: int, source: str, cp: str | None, created: float, is_key: bool, flags: int, payload: dict, nodes: str, writes: str, summary: str) -> dict:
        return {
            "run_id": self.run_id,
            "ns": ns,
            "seq": seq,
            "step": step,
            "source": source,
            "checkpoint_id": cp,
            "parent_checkpoint_id": None,
            "created_at": created,
            "duration_ms": None,
            "is_key": is_key,
            "nodes": nodes,
            "writes": writes,
            "summary": summary,
            "flags": flags,
            "payload": pack(payload),
        }

    def _payload(self, s: dict, w: str) -> tuple[dict, int, str, str, str]:
        from graphtape.recorder.session import _summary

        flags = 0
        tasks = []
        index = {}
        keys: dict[str, None] = {}
        for j, t in enumerate(s["tasks"]):
            tw = f"{w}.tasks[{j}]"
            row: dict[str, Any] = {"id": t["id"], "node": t["node"], "path": ""}
            if t.get("writes"):
                row["w"] = self.value(t["writes"], f"{tw}.writes", typed=True)
                keys.update((k, None) for k in t["writes"] if k != ENVELOPE)
            if t.get("error"):
                row["et"] = t["error"].get("type")
                row["em"] = t["error"].get("message")
                if t["error"].get("traceback"):
                    row["tb"] = t["error"]["traceback"]
                flags |= FLAG_ERROR
            if t.get("interrupts"):
                row["i"] = self.value(t["interrupts"], f"{tw}.interrupts", typed=True)
            if t.get("attempts"):
                row["att"] = [{"n": a.get("n"), "et": (a.get("error") or {}).get("type"), "em": (a.get("error") or {}).get("message")} for a in t["attempts"]]
                flags |= FLAG_INTERRUPT
            if t.get("cached"):
                row["c"] = True
            if t.get("subgraphs"):
                row["sub"] = list(t["subgraphs"])
            index[t["id"]] = j
            tasks.append(row)
        routes = []
        for j, r in enumerate(s.get("routes") or []):
            rw = f"{w}.routes[{j}]"
            d: dict[str, Any] = {"src": r["from"], "kind": r["kind"], "router": r.get("router"), "dest": list(r["to"])}
            if "returned" in r:
                d["ret"] = self.value(r["returned"], f"{rw}.returned", typed=True)
            if r.get("sends"):
                d["sends"] = self.value(r["sends"], f"{rw}.sends", typed=True)
            if r.get("task") is not None:
                d["ti"] = index.get(r["task"])
            routes.append(d)
        events = []
        for j, e in enumerate(s.get("events") or []):
            d = {"kind": e["kind"], "v": self.value(e.get("value"), f"{w}.events[{j}].value", typed=True)}
            if e.get("task") is not None:
                d["ti"] = index.get(e["task"])
            if e.get("node"):
                d["node"] = e["node"]
            if e["kind"] == "resume":
                flags |= FLAG_RESUME
            events.append(d)
        summary = _summary([{**r, "ret": r.get("ret")} for r in routes], tasks)
        nodes = ",".join(dict.fromkeys(t["node"] for t in tasks))
        writes = "," + ",".join(keys) + "," if keys else ""
        return {"t": tasks, "r": routes, "e": events}, flags, nodes, writes, summary

    def _frame(self, fs: FrameState, change: dict, where: str) -> dict:
        """Apply a step's state change to ``fs``; returns it as a stored delta frame."""
        set_ = {k: self.value(v, f"{where}.set.{k}", typed=True) for k, v in (change.get("set") or {}).items()}
        lists = {}
        for k, items in (change.get("append") or {}).items():
            base = fs.values.get(k)
            if not isinstance(base, list):
                raise FixtureError(f"{self.label}: {where}.append.{k}: appends to {k!r}, which is not a list in the state before this step")
            lists[k] = {"k": len(base), "a": self.value(items, f"{where}.append.{k}", typed=True)}
        drop = [k for k in change.get("drop") or [] if k in fs.values]
        delta = {"v": set_, "l": lists, "x": drop, "cv": {}, "vs": {}}
        fs.apply(delta, False)
        return delta

    def _call(self, ns: str, step: int, c: dict, where: str, created: float) -> dict:
        err = c.get("error") or {}
        return {
            "run_id": self.run_id,
            "ns": ns,
            "step": step,
            "task_id": c.get("task"),
            "node": c.get("node"),
            "call_id": f"{self.run_id}-{c['id']}"[:36],
            "parent_call_id": None,
            "kind": c["kind"],
            "name": c["name"],
            "inputs": _json(self.value(c.get("inputs"), f"{where}.inputs")),
            "output": _json(self.value(c.get("output"), f"{where}.output")),
            "error_type": err.get("type"),
            "error_message": err.get("message"),
            "traceback": _json(err["traceback"]) if err.get("traceback") else None,
            "started_at": created,
            "latency_ms": None,
            "input_tokens": None,
            "output_tokens": None,
            "total_tokens": None,
            "streamed": False,
        }


def _json(tree: Any) -> str:
    return orjson.dumps(tree).decode()


def _count(redacted: Any) -> int:
    n = redacted.get("when_recorded") if isinstance(redacted, dict) else None
    return n if type(n) is int and 0 <= n <= MAX_STEP_NUMBER else 0


def import_fixture(store: RunStore, fixture: dict[str, Any], *, label: str = "fixture") -> ImportedFixture:
    """Write a checked fixture (``read_fixture``) into ``store`` as a run; idempotent.

    The run id comes from the fixture's content, so importing the same file
    twice finds the run already there. The fixture's graph reference is
    reported, not stored as the run's: replaying an imported run names its
    graph explicitly.
    """
    run_id = fixture_run_id(fixture)
    steps = len(fixture["steps"])
    n_calls = sum(len(s.get("calls") or []) for s in fixture["steps"])
    try:
        if store.get_run(run_id).id == run_id:
            return ImportedFixture(run_id, fixture["name"], fixture.get("graph"), steps, n_calls, already=True)
    except RunNotFound:
        pass
    batch, steps, n_calls = _Importer(fixture, run_id, label).batch()
    store.write(batch)
    return ImportedFixture(run_id, fixture["name"], fixture.get("graph"), steps, n_calls)
