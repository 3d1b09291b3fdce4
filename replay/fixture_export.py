"""Exporting a run as a regression fixture: what a replay resumes from, checks and answers from, and nothing volatile.

``export_fixture`` turns a run in the store into a fixture: where to resume
(the starting checkpoint: values, channel versions, versions seen), then per
superstep what a replay checks and answers from: the tasks and their
updates, the route decisions, interrupt and resume values, the tool and
model calls (inputs, outputs, errors, and how long to hold a call a node
gave up waiting for), and the state keys that changed. Values stay in the
codec's typed envelopes, so messages come back as messages; each message is
stored once in a ``messages`` table and referred to as ``{"$b": key}``.

The run is read through the store's API as it is stored (``iter_step_rows``,
``encoded_inputs``, ``calls(encoded=True)``, ``blobs``): values keep their
recorded key order (code may depend on it), volatile ids (task, call,
message and interrupt ids, checkpoint ids, timestamps) are renumbered or
dropped, so exporting the same run twice gives the same file. Everything
passes through the recorder's ``Redactor`` again on the way out.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from graphtape.recorder.codec import BLOB_REF, ENVELOPE, MAX_DEPTH, as_imported, collect_refs, reused_cost
from graphtape.recorder.env_secrets import env_secret_patterns
from graphtape.recorder.frames import FrameState
from graphtape.recorder.graph_info import is_internal_channel
from graphtape.recorder.history_blocks import CAT
from graphtape.recorder.string_chunks import SCAT, joined
from graphtape.recorder.records import SENT, STORE, CallInfo
from graphtape.recorder.redaction import MARK, Redactor
from graphtape.recorder.store import RunStore, merge_events, read_budget
from graphtape.recorder.store.read_guard import _READ_BUDGET
from graphtape.recorder.store.read_steps import cache_key_of, listed_order
from graphtape.recorder.error_fields import KEY as ERROR_FIELDS
from graphtape.recorder.tracebacks import scrubbed_frames, valid_frames
from graphtape.recorder.unwritten import last_before_gap
from graphtape.replay.fixture_format import ABOUT, FORMAT_KEY, FORMAT_VERSION, MAX_HOLD_MS, SLICE_TAG, FixtureError
from graphtape.replay.normalize import is_persistent
from graphtape.replay.stepless import no_steps_message


_STRUCTURAL = frozenset({ENVELOPE, "cls", "type"})
_SAFE_KEY = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_MESSAGE_KINDS = {"AIMessage": "ai", "AIMessageChunk": "ai", "HumanMessage": "human", "SystemMessage": "system", "ToolMessage": "tool"}
_CONFIG_DROP = frozenset({"thread_id", "checkpoint_id", "checkpoint_ns", "checkpoint_map"})


# -- step ranges and graph references ---------------------------------------------


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


# -- reading a run as stored (encoded values, blob references unresolved) ----------


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


@dataclass(frozen=True, slots=True)
class _Outline:
    """Where a namespace's steps are, read from its row marks (no payloads): the steps in the
    order they are listed, which completed, and the row that finishes each."""

    order: list[int]
    completed: frozenset[int]
    last_seq: dict[int, int]


def _outline(store: RunStore, run_id: str, ns: str) -> _Outline:
    marks = store.step_row_marks(run_id, ns)
    return _Outline(listed_order(marks), frozenset(step for _, step, pending in marks if not pending), {step: seq for seq, step, _ in marks})


def _steps_or_refuse(store: RunStore, run_id: str, ns: str, outline: _Outline, *, state: bool = True) -> Iterator[_Step]:
    """``_steps``, with a row of another shape (a damaged or hand-edited store) refused in one line."""
    try:
        yield from _steps(store, run_id, ns, outline, state=state)
    except (TypeError, ValueError, AttributeError, KeyError, IndexError) as exc:
        raise FixtureError(f"run {run_id} holds damaged data (its steps: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})") from None


def _steps(store: RunStore, run_id: str, ns: str, outline: _Outline, *, state: bool = True) -> Iterator[_Step]:
    """Every step of ``ns`` in the order listed, with the encoded state after each completed one
    (``state=False``: without it), each handed out once its last row is read.

    Streamed: a long run is read a page of rows at a time and only the steps not yet handed
    out are held (a step's rows are nearly always together), so exporting 10,000 steps holds
    what the fixture needs, not every step's state (1.2 GB for a 10,000-message history).
    """
    order = outline.order
    merged: dict[int, dict] = {}
    frames = FrameState()
    i = 0

    def ready(upto: int | None) -> Iterator[_Step]:
        nonlocal i
        while i < len(order) and (upto is None or outline.last_seq[order[i]] <= upto):
            m = merged.pop(order[i])
            i += 1
            routes = [d for rs in m["routes"].values() for d in rs]
            yield _Step(m["step"], m["source"], m["completed"], list(m["tasks"].values()), routes, m["events"], m["state"])

    for r in store.iter_step_rows(run_id, ns):
        payload = r.payload
        pending = r.pending
        m = merged.get(r.step)
        if m is None:
            m = merged[r.step] = {"step": r.step, "tasks": {}, "routes": {}, "events": [], "source": None, "completed": False, "state": None}
        for t in payload.get("t", []):
            m["tasks"][t["id"]] = t
        by_task: dict[Any, list[dict]] = {}
        for d in payload.get("r", []):
            by_task.setdefault(d.get("task"), []).append(d)
        m["routes"].update(by_task)
        m["events"] = merge_events(m["events"], payload.get("e", []))
        frame = payload.get("s")
        if frame is not None and not pending:
            frames.apply(frame, bool(r.is_key))
            if state:
                m["state"] = (dict(frames.values), dict(frames.versions), {k: dict(v) for k, v in frames.seen.items()})
        if not pending:
            m["completed"] = True
            m["source"] = r.source
        yield from ready(r.seq)
    yield from ready(None)


def _public(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if not is_internal_channel(k)}


# -- export -----------------------------------------------------------------------


class _Exporter:
    """Turns stored (encoded) values into fixture values: resolved, redacted, renumbered, tabled."""

    def __init__(self, store: RunStore, redactor: Redactor) -> None:
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
        self._in_entry = 0  # walking inside a tabled message or document: what it holds stays inline
        self._lists: dict[str, tuple[list, list]] = {}  # channel -> its last list as stored, and as exported

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
        self._read_blobs(tree)
        return self._walk(tree, 0)

    def channels(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """State channels by name: the recorder encodes each channel's value on its own,
        so (as when recording) channel names are not judged as secret keys; their values are.

        A list that grew since the channel's last export (a history, a message more each
        step) is exported from where it grew: walking it whole at every step made exporting a
        long run cost the square of its length (10,000 steps: two minutes)."""
        out: dict[str, Any] = {}
        for k, v in values.items():
            last = self._lists.get(k)
            if type(v) is list and last is not None and len(v) >= len(last[0]) and v[: len(last[0])] == last[0]:
                tail = v[len(last[0]) :]
                self._read_blobs(tail)
                out[k] = last[1] + [self._walk(item, 2) for item in tail]  # as _walk walks a list's items
            else:
                self._read_blobs(v)
                out[k] = self._walk(v, 1)
            if type(v) is list and type(out[k]) is list:
                self._lists[k] = (v, out[k])
        return out

    def _read_blobs(self, tree: Any) -> None:
        """Read the blobs ``tree`` refers to, and the blocks of the long histories among them (left as references)."""
        refs = collect_refs(tree).difference(self._raw_blobs)
        while refs:
            found = self.store.blobs(refs)
            self._raw_blobs.update(found)
            refs = collect_refs([t for t in found.values() if type(t) is dict or type(t) is list]).difference(self._raw_blobs)

    def text(self, s: str | None) -> str | None:
        return None if s is None else self.redactor.scrub(s)

    def frames(self, frames: list[list[Any]]) -> list[list[Any]]:
        """A traceback, scrubbed again like every exported string."""
        return scrubbed_frames(frames, self.redactor.scrub)

    def _secret(self, key: str, value: Any, depth: int) -> Any:
        """A recorded value under a secret key, as the recorder keeps it: marked, or its scheme,
        a connection URL's host, a schema, kept (``Redactor.kept_value``)."""
        kept = self.redactor.kept_value(key, value)
        if kept is None:
            return self.redactor.mark()
        return self._walk(kept, depth + 1) if type(kept) is dict else kept

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
                    out[self.redactor.scrub(k)] = self._secret(k, v, depth)
                else:
                    out[self.redactor.scrub(k)] = self._walk(v, depth + 1)
            return out
        if kind == CAT and type(x.get("v")) is list:
            return self._flattened(x["v"], depth)
        if kind == SCAT and type(x.get("v")) is list:
            return self._whole_string(x["v"], depth)
        if kind == "dict" and type(x.get("v")) is list:
            pairs = []
            for pair in x["v"]:
                if type(pair) is list and len(pair) == 2:
                    k, v = pair
                    hidden = type(k) is str and secret(k) and v is not None and v != ""
                    pairs.append([self._walk(k, depth + 1), self._secret(k, v, depth) if hidden else self._walk(v, depth + 1)])
                else:
                    pairs.append(self._walk(pair, depth + 1))
            return {ENVELOPE: "dict", "v": pairs}
        if kind in ("lc.msg", "lc.doc"):
            # An entry of the fixture's message table is whole in itself (a tool message's artifact
            # holds its Documents, not references to other entries): the format refuses nesting.
            self._in_entry += 1
            try:
                out = {k: (v if k in _STRUCTURAL else self._walk(v, depth + 1)) for k, v in x.items()}
            finally:
                self._in_entry -= 1
            self._renumber(out, kind)
            return self._tabled(out, kind) if not self._in_entry else out
        out = {k: (v if k in _STRUCTURAL else self._walk(v, depth + 1)) for k, v in x.items()}
        if kind == "unserializable":
            # Only its class name is ever used (a stand-in when replayed): drop what varies
            # between runs and machines, the object's address and a file-loaded module's private name.
            for k in ("type", "repr"):
                if type(out.get(k)) is str:
                    out[k] = as_imported(out[k])
        if kind == "lg.interrupt":
            v = out.get("v")
            if isinstance(v, dict) and type(v.get("id")) is str and v["id"]:
                v["id"] = self.stable(v["id"], "interrupt")
        return out

    def _flattened(self, parts: list, depth: int) -> list:
        """A history stored as blocks, as the one list it is: a fixture does not depend on how a store cuts it."""
        out: list = []
        for part in parts:
            items = self._walk(part, depth + 1)
            if type(items) is not list:
                raise FixtureError("a recorded history is damaged (a block of it is not a list): the store was damaged")
            out += items
        return out

    def _whole_string(self, parts: list, depth: int) -> str:
        """A very long string stored as chunks, as the one string it is (scrubbed whole, as recorded)."""
        try:
            text, _ = joined([self._walk(part, depth + 1) for part in parts])
        except ValueError as exc:
            raise FixtureError(f"a recorded string is damaged ({exc}): the store was damaged") from None
        return self.redactor.scrub(text)

    def _blob(self, h: str, depth: int) -> Any:
        done = self._done_blobs.get(h)
        if done is not None:
            budget = _READ_BUDGET.get()
            if budget is not None:
                budget.spend(reused_cost(h, done)[1])  # written out once per place: its text counts each time
            return self._inline(done)
        if h not in self._raw_blobs:
            raise FixtureError(f"the run refers to a value the store no longer holds (blob {h}): the store was damaged or collected")
        done = self._done_blobs[h] = self._walk(self._raw_blobs[h], depth + 1)
        return done

    def _inline(self, value: Any) -> Any:
        """``value``, with a reference to a table entry replaced by the entry, inside another entry."""
        if self._in_entry and type(value) is dict and len(value) == 1 and type(value.get(BLOB_REF)) is str and value[BLOB_REF] in self.table:
            return self.table[value[BLOB_REF]]
        return value

    def _renumber(self, env: dict, kind: str) -> None:
        v = env.get("v")
        ident = v.get("id") if isinstance(v, dict) else None
        if type(ident) is str and ident:
            # Every id, not only minted ones: a re-recorded run holds ids a fixture gave it
            # (answers keep theirs), which must number like the fresh ones they stand for.
            v["id"] = self.stable(ident, "msg" if kind == "lc.msg" else "doc")

    def _tabled(self, env: dict, kind: str) -> dict:
        v = env.get("v")
        ident = v.get("id") if isinstance(v, dict) else None
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


@read_budget()  # the whole export is one read: what it inflates and builds is bounded in all
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
    rng = steps if isinstance(steps, StepRange) else StepRange.parse(steps)
    run = store.get_run(run_ref)
    if run.status == "running":
        raise FixtureError(f"run {run.id} is still recording: export it once it has ended")
    ex = _Exporter(store, Redactor(tuple(redact_patterns) + env_secret_patterns(), tuple(redact_keys)))

    try:
        outline = _outline(store, run.id, "")
    except (TypeError, ValueError) as exc:
        raise FixtureError(f"run {run.id} holds damaged data (its steps: {type(exc).__name__})") from None
    listed = outline.order
    done = [step for step in listed if step in outline.completed]
    if not listed:
        raise FixtureError(no_steps_message(run, "export"))
    if not done:
        raise FixtureError(f"run {run.id} has no completed step to resume from")
    if run.status == "incomplete":
        # The store did not take all of it: a fixture of what is missing would replay as divergences.
        upto = last_before_gap(done)
        if rng.last is None or rng.last > upto:
            raise FixtureError(
                f"run {run.id} is incomplete ({run.status_reason}): export the steps the store holds in full "
                f"with --steps :{upto}, or first put back its missing rows (graphtape show {run.id[:8]} says where they are)"
            )
    for ns in store.namespaces(run.id):
        if is_persistent(ns):
            first = store.list_steps(run.id, ns)[:1]
            if first and first[0].source == "input" and first[0].step > -1:
                raise FixtureError(
                    f"run {run.id}: subgraph {ns!r} (compiled with checkpointer=True) remembers earlier runs of its thread, "
                    "which a fixture does not carry: replay the run from the store, or export its thread's first run"
                )
    last_recorded = listed[-1]
    sliced_of = [int(t[len(SLICE_TAG):]) for t in run.tags if str(t).startswith(SLICE_TAG) and t[len(SLICE_TAG):].lstrip("-").isdigit()]
    if sliced_of:
        last_recorded = max(last_recorded, sliced_of[0])  # an imported window of a longer run
    if rng.first is not None and not any(step >= rng.first for step in listed):
        raise FixtureError(f"run {run.id} has no step {rng.first} (steps {listed[0]}..{last_recorded})")
    if rng.first is None:
        start_step = done[0]
    else:
        before = [step for step in done if step < rng.first]
        if not before:
            raise FixtureError(f"cannot start at step {rng.first}: run {run.id} has no completed step before it to resume from (its first is {done[0]})")
        start_step = before[-1]
    last = listed[-1] if rng.last is None else rng.last
    if rng.last is not None and rng.last not in outline.last_seq:
        raise FixtureError(f"run {run.id} has no step {rng.last} (steps {listed[0]}..{last_recorded})")
    if not any(start_step < step <= last for step in listed):
        raise FixtureError(f"nothing to check: run {run.id} has no step after {start_step}" + (f" up to {last}" if rng.last is not None else ""))

    stored_inputs, stored_config = store.encoded_inputs(origin or run.id)
    config = _export_config(ex, stored_config, start_step - listed[0])
    inputs = ex.value(stored_inputs)

    # The steps are read once, in order, as the file is built: the start's state, then each step.
    root = _steps_or_refuse(store, run.id, "", outline)
    early: list[_Step] = []  # a step listed before the start (not seen in practice): checked after it, in order
    start = None
    for s in root:
        if s.step == start_step:
            start = s
            break
        if start_step < s.step <= last:
            early.append(s)
    if start is None or start.state is None:
        raise FixtureError(f"run {run.id} holds damaged data (step {start_step} has no state to resume from)")
    values, versions, seen = start.state
    versions, seen = _stable_versions(versions, seen)
    start_entry = {
        "after_step": start.step,
        "values": ex.channels(values),
        "versions": dict(versions),
        "versions_seen": {n: dict(s) for n, s in seen.items()},
    }
    if start.step > -1 and start.source == "input":
        # A later run on a thread starts at its own input step, as a first run does at -1: a
        # replay counts its recursion limit (RemainingSteps) from there.
        start_entry["source"] = "input"

    calls = [c for c in store.calls(run.id, encoded=True) if c.step is not None]
    holds = _holds(store, run.id, calls, run.ended_at)
    calls_by: dict[tuple[str, int], list[Any]] = {}
    for c in calls:
        calls_by.setdefault((c.ns, c.step), []).append(c)

    prev = _public(start_entry["values"])
    step_entries = []
    entered: dict[str, int] = {}
    for s in itertools.chain(early, root):
        if not start_step < s.step <= last:
            continue
        entry, prev = _step_entry(ex, s, prev, calls_by.get(("", s.step), []), holds)
        step_entries.append(entry)
        for t in s.tasks:
            for sub in t.get("sub", []):
                entered.setdefault(sub.split("|")[0], s.step)
    final_state = prev

    subgraphs = []
    for ns in store.namespaces(run.id):
        if not ns or ns.split("|")[0] not in entered:
            continue
        sub_prev: dict[str, Any] = {}
        sub_steps = []
        for s in _steps_or_refuse(store, run.id, ns, _outline(store, run.id, ns)):
            entry, sub_prev = _step_entry(ex, s, sub_prev, calls_by.get((ns, s.step), []), holds)
            sub_steps.append(entry)
        subgraphs.append({"ns": ex.ns(ns), "steps": sub_steps})

    outcome: dict[str, Any] = {"status": run.status}
    if run.status_reason:
        outcome["reason"] = run.status_reason
    if run.error_type or run.error_message:
        outcome["error"] = {"type": run.error_type, "message": ex.text(run.error_message)}

    fixture: dict[str, Any] = {
        FORMAT_KEY: _format_needed(step_entries, subgraphs),
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


def _format_needed(steps: list[dict[str, Any]], subgraphs: list[dict[str, Any]]) -> int:
    """The oldest format that holds the fixture: v4 only with a tool's own state writes, v3 with
    store calls, so older graphtapes read the rest."""
    every = [*steps, *(s for sub in subgraphs for s in sub["steps"])]
    kinds = {c.get("kind") for s in every for c in s.get("calls", ())}
    return 4 if SENT in kinds else 3 if STORE in kinds else 2


def _export_config(ex: _Exporter, config: Any, offset: int) -> dict[str, Any]:
    """What a replay forwards: configurable (no thread or checkpoint keys), recursion limit, tags, metadata, the run context, async, store."""
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
    if config.get("async") is True:
        out["async"] = True  # the run used ainvoke/astream: its replay does too
    if config.get("store") is True:
        out["store"] = True  # every store read is among the calls: a replay answers them
    bound = config.get("bound")
    if isinstance(bound, list) and all(isinstance(k, str) for k in bound):
        out["bound"] = bound  # the graph's with_config defaults: today's graph gives its own
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


def _holds(store: RunStore, run_id: str, calls: list[CallInfo], run_end: float | None) -> dict[str, int]:
    """Call id -> milliseconds a replay must hold its answer: calls a node stopped waiting for (timeouts).

    Mirrors the replay's rule: a call that outlived its task or its run is
    replayed as slow as it was (rounded up to 10 ms). One that never returned
    is held until 50 ms after its node stopped waiting (its task ended),
    rounded up to 50 ms: what the node saw, without the run's timing jitter,
    so re-recording the same behaviour writes the same number.
    """
    ends: dict[str, float] = {}
    for ns in store.namespaces(run_id):
        for s in _steps_or_refuse(store, run_id, ns, _outline(store, run_id, ns), state=False):
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


def _step_entry(ex: _Exporter, s: _Step, prev: dict[str, Any], calls: list[CallInfo], holds: dict[str, int]) -> tuple[dict, dict]:
    """One step as the fixture holds it, and the public state after it."""
    entry: dict[str, Any] = {"step": s.step}
    if s.source and s.source != "loop":
        entry["source"] = s.source
    if not s.completed:
        entry["completed"] = False
    tasks = sorted(s.tasks, key=_task_sort_key)
    per_node = Counter(t.get("node") for t in tasks)
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
        key, warm = cache_key_of(t)
        if key is not None:
            task["cache_key"] = ex.text(key)  # its name and the digest of its arguments
            if not warm:
                task["cache_warm"] = False  # a hit on what an earlier call of the run put in the cache
        if "cw" in t:
            # Not run: LangGraph applied what it wrote in an earlier run. Its path tells which of a
            # node's tasks it was (Send packets to one node), so a replay carries the same ones over.
            task["carried"] = ex.value(t["cw"])
        if "cw" in t or per_node[t.get("node")] > 1:
            # Several tasks of one node (Send packets): the path tells them apart (it holds the
            # packet's index), so twin calls of theirs get their own recorded answers.
            task["path"] = t.get("path", "")
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
        call: dict[str, Any] = {"id": ex.calls.setdefault(c.call_id, f"c{len(ex.calls) + 1}"), "kind": c.kind, "name": ex.text(c.name) if c.kind == "http" else c.name, "node": c.node, "task": ex.task(c.task_id)}
        if c.parent_call_id:
            # A model or tool call's own request, store use or state write; or a tool or model call
            # made inside another (a subagent a tool runs): a replay answering the outer one skips it.
            call["part_of"] = ex.calls.setdefault(c.parent_call_id, f"c{len(ex.calls) + 1}")
        call["inputs"] = ex.value(c.inputs)
        if c.error_type:
            call["error"] = {"type": c.error_type, "message": ex.text(c.error_message)}
            if c.traceback:
                call["error"]["traceback"] = ex.frames(c.traceback)
            if isinstance(c.output, dict) and ERROR_FIELDS in c.output:
                call["error"]["fields"] = ex.value(c.output)  # what the error carried: a replay raises it with them
        else:
            call["output"] = ex.value(c.output)
        if holds.get(c.call_id):
            call["hold_ms"] = holds[c.call_id]
        out_calls.append(call)
    if out_calls:
        entry["calls"] = out_calls
    if s.completed and s.state is not None:
        now = ex.channels(_public(s.state[0]))
        entry["state"] = _state_change(prev, now)
        prev = now
        if s.source == "update":
            # An edit made while the run waited (update_state): a replay puts this checkpoint back
            # as recorded, which needs what LangGraph decides the next tasks by.
            versions, seen = _stable_versions(s.state[1], s.state[2])
            entry["versions"], entry["versions_seen"] = dict(versions), {n: dict(v) for n, v in seen.items()}
            entry["channels"] = ex.channels({k: v for k, v in s.state[0].items() if is_internal_channel(k)})  # the triggers it holds
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
