"""Importing a regression fixture into a store: a run that ``replay()`` resumes and compares against, and the TUI opens.

The fixture (checked by ``fixture_format``) becomes the rows of one run, its
steps and its calls, written with ``RunStore.add_run`` in one transaction.
Values are stored as the recorder stores them: a long message history that a
fixture holds as one list is cut into the recorder's shared blocks, so a
replay's stored values match the fixture's run as stored.
Every value is checked to decode before anything is written. The run id
comes from the fixture's content, so importing the same file twice leaves
one run. Nothing the file names is imported or executed: its graph
reference is reported, never stored as the run's.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from graphtape.recorder.codec import BLOB_REF, ENVELOPE, MAX_DEPTH, DecodeError, Decoder, blob_hash
from graphtape.recorder.frames import FrameState
from graphtape.recorder.graph_info import is_internal_channel
from graphtape.recorder.history_blocks import BLOCK_AT, HistoryBlocks
from graphtape.recorder.records import FLAG_CARRIED, FLAG_ERROR, FLAG_INTERRUPT, FLAG_PENDING, FLAG_RESUME
from graphtape.recorder.store import Batch, RunStore, pack, squeeze
from graphtape.replay.fixture_format import FIXTURE_TAG, FORMAT_KEY, MAX_STEP_NUMBER, SLICE_TAG, FixtureError

# The checkpoint an imported fixture resumes from. LangGraph derives the next
# task ids from it, so a fixed id makes replays of a fixture name their tasks alike.
START_CHECKPOINT_ID = "00000000-0000-6000-8000-000000000000"


def _edited_checkpoint_id(ns: str, step: int) -> str:
    """A stand-in id for an edited step's checkpoint (the fixture keeps none): fixed per step, after the start's."""
    return str(uuid.uuid5(uuid.UUID(START_CHECKPOINT_ID), f"{ns}|{step}"))
KEYFRAME_EVERY = 64


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
        self.messages = {h for h, tree in self.trees.items() if type(tree) is dict and tree.get(ENVELOPE) == "lc.msg"}
        self.blocks = HistoryBlocks(self._put)
        self.typed = Decoder(self.trees, typed=True)
        self.plain = Decoder(self.trees, typed=False)

    def _put(self, data: bytes) -> str:
        h = blob_hash(data)
        if h not in self.blobs:
            self.blobs[h] = squeeze(data)
            self.trees[h] = orjson.loads(data)
        return h

    def value(self, tree: Any, where: str, *, typed: bool = True, channel: bool = False) -> Any:
        """The tree with message keys replaced by blob hashes; checked to decode (as live objects).

        ``channel``: the value of a state channel, whose own list the recorder stores item by
        item (a frame appends to it); a history anywhere else is stored as blocks, as recorded.
        """
        out = self._rehash(tree, where, 0, channel)
        try:
            (self.typed if typed else self.plain).decode(out)
        except DecodeError as exc:
            raise FixtureError(f"{self.label}: {where}: {exc}") from None
        except RecursionError:
            raise FixtureError(f"{self.label}: {where}: a value is nested too deeply") from None
        return out

    def _rehash(self, x: Any, where: str, depth: int, plain_list: bool = False) -> Any:
        if depth > MAX_DEPTH:
            raise FixtureError(f"{self.label}: {where}: a value is nested deeper than {MAX_DEPTH} levels")
        t = type(x)
        if t is list:
            items = [self._rehash(i, where, depth + 1) for i in x]
            if not plain_list and len(items) >= BLOCK_AT and all(type(i) is dict and i.get(BLOB_REF) in self.messages for i in items):
                return self.blocks.encode(items)  # as the recorder stores a history of messages
            return items
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
        values = {k: self.value(v, f"start.values.{k}", typed=True, channel=True) for k, v in start["values"].items()}
        state = FrameState()
        key = {"v": values, "cv": dict(start["versions"]), "vs": {n: dict(s) for n, s in start["versions_seen"].items()}}
        state.apply(key, True)
        seq += 1
        source = "input" if start["after_step"] < 0 or start.get("source") == "input" else "loop"
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
                checkpoint_id = None
                if completed:
                    frame = self._frame(fs, s.get("state") or {}, f"{w}.state")
                    since_key += 1
                    if "versions" in s:  # a step edited with update_state: a checkpoint a replay puts back
                        held = {k: self.value(v, f"{w}.channels.{k}", typed=True, channel=True) for k, v in (s.get("channels") or {}).items() if is_internal_channel(k)}
                        fs.values = {**{k: v for k, v in fs.values.items() if not is_internal_channel(k)}, **held}
                        fs.versions, fs.seen = dict(s["versions"]), {n: dict(v) for n, v in s["versions_seen"].items()}
                        checkpoint_id = _edited_checkpoint_id(ns, s["step"])
                        first_frame = False
                    if not first_frame or since_key >= KEYFRAME_EVERY:
                        frame = {"v": dict(fs.values), "cv": dict(fs.versions), "vs": {n: dict(v) for n, v in fs.seen.items()}}
                        is_key, first_frame, since_key = True, True, 0
                    payload["s"] = frame
                else:
                    flags |= FLAG_PENDING
                created = now + seq * 0.001
                rows.append(self._row(ns, seq, s["step"], s.get("source") or "loop", checkpoint_id, created, is_key, flags, payload, nodes, writes, summary))
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
            "tags": _json([FIXTURE_TAG, *([f"{SLICE_TAG}{f['slice']['of']}"] if isinstance(f.get("slice"), dict) else [])]),
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
            row: dict[str, Any] = {"id": t["id"], "node": t["node"], "path": t.get("path", "")}
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
                flags |= FLAG_INTERRUPT
            if t.get("attempts"):
                row["att"] = [{"n": a.get("n"), "et": (a.get("error") or {}).get("type"), "em": (a.get("error") or {}).get("message")} for a in t["attempts"]]
            if t.get("cached"):
                row["c"] = True
            if isinstance(t.get("cache_key"), str):
                row["ck"] = [t["cache_key"], t.get("cache_warm") is not False]
            if t.get("carried") is not None:
                row["cw"] = self.value(t["carried"], f"{tw}.carried", typed=True)
                flags |= FLAG_CARRIED
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
            if e["kind"] in ("resume", "update"):  # as the recorder flags them: what the caller gave the step
                flags |= FLAG_RESUME
            events.append(d)
        summary = _summary(routes, tasks)  # a route without "ret" was decided by a router that reports none
        nodes = ",".join(dict.fromkeys(t["node"] for t in tasks))
        writes = "," + ",".join(keys) + "," if keys else ""
        return {"t": tasks, "r": routes, "e": events}, flags, nodes, writes, summary

    def _frame(self, fs: FrameState, change: dict, where: str) -> dict:
        """Apply a step's state change to ``fs``; returns it as a stored delta frame."""
        set_ = {k: self.value(v, f"{where}.set.{k}", typed=True, channel=True) for k, v in (change.get("set") or {}).items()}
        lists = {}
        for k, items in (change.get("append") or {}).items():
            base = fs.values.get(k)
            if not isinstance(base, list):
                raise FixtureError(f"{self.label}: {where}.append.{k}: appends to {k!r}, which is not a list in the state before this step")
            lists[k] = {"k": len(base), "a": self.value(items, f"{where}.append.{k}", typed=True, channel=True)}
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
            "parent_call_id": f"{self.run_id}-{c['part_of']}"[:36] if c.get("part_of") else None,
            "kind": c["kind"],
            "name": c["name"],
            "inputs": _json(self.value(c.get("inputs"), f"{where}.inputs")),
            "output": _json(self.value(err["fields"] if isinstance(err.get("fields"), dict) else c.get("output"), f"{where}.output")),
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
    n_calls = sum(len(s.get("calls") or []) for s in fixture["steps"])
    if store.has_run(run_id):
        written = False
    else:
        batch, _steps, n_calls = _Importer(fixture, run_id, label).batch()
        written = store.add_run(batch)
    # Counted as `runs` and `show` count the run (its input step too), not as the file lists them.
    steps = store.step_counts([run_id]).get(run_id, len(fixture["steps"]))
    return ImportedFixture(run_id, fixture["name"], fixture.get("graph"), steps, n_calls, already=not written)
