"""Compare a replayed run with its recording, superstep by superstep, from the store.

Both runs are read the way every reader reads them (the store API). State is
compared as stored first: only keys whose stored value changed in a step are
compared, equal stored values need no decoding, a list is compared item by
item and only items stored differently are decoded, so a long run costs time
in proportion to what differs, not to its length.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from graphtape.recorder import CallInfo, RouteInfo, RunStore, StepDetail
from graphtape.recorder.codec import BLOB_REF, MAX_DEPTH, MAX_VALUES, collect_refs
from graphtape.recorder.history_blocks import is_cat
from graphtape.recorder.terminal_text import one_line
from graphtape.recorder.tracebacks import frame_text, raised_at

from graphtape.replay.calls import answered_tool_call, normalize_arguments
from graphtape.replay.divergence_order import order_key
from graphtape.replay.modes import ReplayMode
from graphtape.replay.normalize import Normalizer, ns_path
from graphtape.replay.result import Divergence

_MISSING = object()
TASK_RETURN = "__return__"  # what a functional-API @task returned, as its task's write
_HEADLINE_CUT = 80  # characters of a value a headline shows (the diff below it shows the whole)
MISSING = _MISSING  # what ``StateTrack.value`` gives for a key the state does not hold


@dataclass(frozen=True, slots=True)
class Side:
    """One run's side of a comparison: which namespace, after which step."""

    run_id: str
    ns: str
    after: int | None


class StateTrack:
    """A run's state in one namespace: encoded as stored, decoded only where asked.

    Two runs' stored values are compared encoded first (equal bytes are equal
    values, and a list is compared item by item), so a long run decodes only
    the values that differ, plus what a reported divergence shows.
    """

    def __init__(self, store: RunStore, normalize: Normalizer) -> None:
        self.store = store
        self.normalize = normalize
        self.enc: dict[str, Any] = {}
        self.dec: dict[str, Any] = {}
        self._dec_of: dict[str, Any] = {}  # key -> the encoded value ``dec[key]`` was decoded from
        self._same_items: set[tuple[str, int, str, str]] = set()  # list items found equal to the other run's

    def advance(self, values: dict[str, Any]) -> set[str]:
        """Move to the next step's stored values; returns the keys whose value changed."""
        changed = set()
        for key in self.enc.keys() | values.keys():
            new, old = values.get(key, _MISSING), self.enc.get(key, _MISSING)
            if new is old or (new is not _MISSING and old is not _MISSING and new == old):
                continue
            changed.add(key)
            if new is _MISSING:
                self.enc.pop(key, None)
            else:
                self.enc[key] = new
        return changed

    def value(self, key: str) -> Any:
        """The key's value decoded and normalized (a list that grew decodes only its new items)."""
        enc = self.enc.get(key, _MISSING)
        if enc is _MISSING:
            return _MISSING
        was = self._dec_of.get(key, _MISSING)
        if was is enc:
            return self.dec[key]
        if isinstance(enc, list) and isinstance(was, list) and len(enc) >= len(was) and enc[: len(was)] == was:
            tail = self.store.decode(enc[len(was) :])
            base = self.dec[key]
            self.dec[key] = [*base, *(self.normalize(v, (key, str(len(base) + i))) for i, v in enumerate(tail))]
        else:
            self.dec[key] = self.normalize(self.store.decode(enc), (key,))
        self._dec_of[key] = enc
        return self.dec[key]

    def item(self, key: str, i: int) -> Any:
        """Item ``i`` of the key's stored list, decoded and normalized as ``value`` would have it."""
        return self.normalize(self.store.decode(self.enc[key][i]), (key, str(i)))

    def same(self, other: StateTrack, key: str) -> bool:
        """Whether the key holds the same value here and in ``other`` (after normalizing)."""
        a, b = self.enc.get(key, _MISSING), other.enc.get(key, _MISSING)
        if a is _MISSING or b is _MISSING:
            return a is b
        if a == b:
            return True
        if type(a) is list and type(b) is list and len(a) == len(b):
            return all(x == y or self._same_item(other, key, i, x, y) for i, (x, y) in enumerate(zip(a, b)))
        return self.value(key) == other.value(key)

    def _same_item(self, other: StateTrack, key: str, i: int, x: Any, y: Any) -> bool:
        # A list that grows (messages) holds the same stored items step after step, each
        # stored differently in the two runs (their ids differ): decode each pair once.
        rx, ry = _blob_ref(x), _blob_ref(y)
        pair = (key, i, rx, ry) if rx is not None and ry is not None else None
        if pair is not None and pair in self._same_items:
            return True
        equal = self.item(key, i) == other.item(key, i)
        if equal and pair is not None:
            self._same_items.add(pair)
        return equal


def _frames_after(store: RunStore, side: Side) -> tuple[dict[str, Any] | None, Iterator[tuple[int, dict[str, Any]]]]:
    """The state stored at ``side.after`` (the baseline) and an iterator over the steps after it."""
    frames = store.frames(side.run_id, side.ns)
    base: dict[str, Any] | None = None
    for step, values in frames:
        if side.after is None or step > side.after:
            def rest(first=(step, values)) -> Iterator[tuple[int, dict[str, Any]]]:
                yield first
                yield from frames
            return base, rest()
        base = values
    return base, iter(())


class RunComparison:
    """Collects the divergences between a recording and its replay."""

    def __init__(
        self,
        store: RunStore,
        normalize: Normalizer,
        mode: ReplayMode,
        *,
        order: dict[str, int] | None = None,
        arg_normalize: Normalizer | None = None,
        read_details: Callable[[str, str], list[StepDetail]] | None = None,  # routes as stored (encoded_routes=True)
        roots: dict[str, dict[int, int]] | None = None,
    ) -> None:
        self.store = store
        # Every step of (run, namespace) without the tasks' writes: the replay has read the
        # recording's already, so they are not read twice.
        self.read_details = read_details or (lambda run_id, ns: store.step_details(run_id, ns, writes=False, encoded_routes=True))
        self.normalize = normalize
        self.arg_normalize = arg_normalize or Normalizer()
        self.mode = mode
        self.order = order or {}  # namespace -> the parent's step that entered it (to order divergences)
        # A subgraph with memory of its own keeps one namespace for every run of its node: there
        # each step's root step is its own (namespace -> {step: root step}).
        self.roots = roots or {}
        self.found: list[Divergence] = []
        self._same_blobs: dict[tuple[str, str], bool] = {}  # (recorded blob, replayed blob) -> equal once normalized
        self._lists: dict[str, list] = {}  # a history block's blob -> its items, blocks joined (see _as_list)
        self._trees: dict[str, Any] = {}  # blob -> its tree as read (None: not in the store)

    def _add(self, d: Divergence, rec_ns: str, *, before_stop: bool = False, last: bool = False) -> None:
        root = self.roots.get(rec_ns, {}).get(d.step) if rec_ns and d.step is not None else None
        order = order_key(rec_ns, d.step, self.order, root)  # inside a parent's step, its subgraphs' first
        # Something that happened before the call that stopped the replay in its step goes before it.
        if last:  # a consequence: after whatever else its step did otherwise
            order = (*order, _LAST)
        self.found.append(replace(d, order=(*order, -1) if before_stop else order))

    # -- one namespace ---------------------------------------------------------------
    def namespace(self, rec: Side, rep: Side, rec_calls: list[CallInfo], rep_calls: list[CallInfo]) -> None:
        """Compare the steps of one namespace after ``rec.after`` / ``rep.after``."""
        offset = (rep.after or 0) - (rec.after or 0) if rec.after is not None and rep.after is not None else 0
        rec_details = {d.step.step: d for d in self.read_details(rec.run_id, rec.ns) if rec.after is None or d.step.step > rec.after}
        rep_details = {d.step.step: d for d in self.read_details(rep.run_id, rep.ns) if rep.after is None or d.step.step > rep.after}
        self._read_unshared_routes(rec_details.values(), rep_details.values())
        # Where graphtape stopped the replay (a call it could not answer): later steps are not the graph's doing.
        cut = min((s - offset for s, d in rep_details.items() if any(t.error_type == "ReplayMiss" for t in d.tasks)), default=None)
        ns_label = ns_path(rec.ns)
        add = lambda d: self._add(d, rec.ns)  # noqa: E731
        last_rec = max(rec_details, default=None)
        for step in sorted(rec_details):
            if cut is not None and step >= cut:
                break
            d_rec, d_rep = rec_details[step], rep_details.get(step + offset)
            if d_rep is None:
                add(Divergence("missing", step, None, f"the replay has no step {step + offset}; the recording goes on to step {last_rec}", _step_summary(d_rec), None, ns_label))
                break
            self._step(step, d_rec, d_rep, add, ns_label, lambda d: self._add(d, rec.ns, last=True))
        extra = sorted(s for s in rep_details if s - offset not in rec_details and (last_rec is None or s - offset > last_rec))
        if extra and cut is None:
            first = rep_details[extra[0]]
            add(Divergence("extra", extra[0] - offset, None, f"the replay ran {len(extra)} step(s) the recording does not have", None, _step_summary(first), ns_label))
        self._states(rec, rep, offset, cut, add, ns_label)
        if cut is not None and cut in rec_details and cut + offset in rep_details:
            # A @task that returned something else in the step a call stopped (the functional API
            # runs a whole turn in one step): the next call was handed what it returned.
            self._task_returns(rec, rep, cut, cut + offset, lambda d: self._add(d, rec.ns, before_stop=True), ns_label)
        # Calls before the starting step were made by the recording only: not part of the comparison.
        rec_calls = [c for c in rec_calls if rec.after is None or (c.step is not None and c.step > rec.after)]
        rep_calls = [c for c in rep_calls if rep.after is None or (c.step is not None and c.step > rep.after)]
        rec_paths, rep_paths = (_TaskPaths(lambda side=side: self.read_details(side.run_id, side.ns)) for side in (rec, rep))
        self._calls(rec_calls, rep_calls, offset, cut, add, ns_label, rec_paths=rec_paths, rep_paths=rep_paths)

    def _step(self, step: int, rec: StepDetail, rep: StepDetail, add: Callable[[Divergence], None], ns: str, add_last: Callable[[Divergence], None] | None = None) -> None:
        nodes_rec, nodes_rep = Counter(t.node for t in rec.tasks), Counter(t.node for t in rep.tasks)
        if nodes_rec != nodes_rep:
            add(Divergence("route", step, None, "other nodes ran in this step", sorted(nodes_rec.elements()), sorted(nodes_rep.elements()), ns))
            return
        by_source_rec, by_source_rep = _by_source(rec), _by_source(rep)
        for source in sorted(by_source_rec.keys() | by_source_rep.keys()):
            stored_a, stored_b = by_source_rec.get(source, []), by_source_rep.get(source, [])
            if self._same_stored_routes(stored_a, stored_b) or only_structure(source, [r.kind for r in stored_a], [r.kind for r in stored_b], rec, rep):
                continue
            a, b = self._routes(stored_a), self._routes(stored_b)
            # Equal in order is equal (the usual case); only otherwise is the order set aside, by
            # serializing each route (a Send carries the whole state: costly, every step).
            if a != b and sorted(map(_key, a)) != sorted(map(_key, b)):
                add(Divergence("route", step, source, _route_what(a, b), a, b, ns))
        errs_rec = sorted((t.node, t.error_type or "", t.error_message or "") for t in rec.tasks if t.error_type)
        errs_rep = sorted((t.node, t.error_type or "", t.error_message or "") for t in rep.tasks if t.error_type)
        if errs_rec != errs_rep:
            node = (errs_rec or errs_rep)[0][0]
            add(Divergence("error", step, node, _error_what(errs_rec, errs_rep, rep), [list(e) for e in errs_rec], [list(e) for e in errs_rep], ns))
        self._questions(step, rec, rep, add_last or add, ns)

    def _questions(self, step: int, rec: StepDetail, rep: StepDetail, add: Callable[[Divergence], None], ns: str) -> None:
        """What each node asked a person (its interrupts' values): asked otherwise is a divergence
        like a call made with other arguments, though the recorded answer still goes on."""
        asked_rec, asked_rep = self._asked(rec), self._asked(rep)
        if not asked_rec or not asked_rep or asked_rec == asked_rep:
            return  # asked in one run only: the nodes that ran, or the state, say where it went
        node = next((n for (n, a), b in zip(asked_rec, asked_rep) if [n, a] != b and n), None) or asked_rec[0][0] or None
        add(Divergence("arguments", step, node, f"{node or 'a node'} asked a person something else (its interrupt)", asked_rec, asked_rep, ns))

    def _asked(self, detail: StepDetail) -> list[list[Any]]:
        """Each distinct ``[node, question]`` of a step: a step interrupted and then resumed
        holds a question again where its node asked it again on the resume. A subgraph's
        question, which its parent's step shows too, is compared in the subgraph's own steps."""
        relayed = {t.task_id for t in detail.tasks if t.subgraph_ns} | {t.node for t in detail.tasks if t.subgraph_ns}
        seen: dict[str, list[Any]] = {}
        for e in detail.events:
            if e.kind == "interrupt" and e.task_id not in relayed and (e.task_id is not None or e.node not in relayed):
                item = [e.node or "", self.normalize(e.value)]
                seen.setdefault(_key(item), item)
        return [seen[k] for k in sorted(seen)]

    def _read_unshared_routes(self, rec: Iterable[StepDetail], rep: Iterable[StepDetail]) -> None:
        """Read at once the route blobs only one side holds: the only ones a comparison may decode.

        Routes come as stored (a Send carries the whole state); a blob both runs share
        is equal by its hash and never read.
        """
        mine = collect_refs([[r.returned, r.sends] for d in rec for r in d.routes])
        theirs = collect_refs([[r.returned, r.sends] for d in rep for r in d.routes])
        unshared = mine ^ theirs
        if unshared:
            self.store.blobs(unshared)

    def _same_stored_routes(self, a: list[RouteInfo], b: list[RouteInfo]) -> bool:
        """Routes equal as stored, blob by blob: no decoding unless a blob pair is new.

        Only a yes is final: stored differently may still be equal once decoded
        and normalized, which the caller then checks.
        """
        if not self.normalize.path_free or len(a) != len(b):
            return False
        same = self._same_stored
        return all(
            x.kind == y.kind
            and x.router == y.router
            and sorted(x.destinations) == sorted(y.destinations)
            and same(x.returned, y.returned)
            and same(x.sends, y.sends)
            for x, y in zip(a, b)
        )

    def _same_stored(self, a: Any, b: Any) -> bool:
        if a == b:
            return True
        ta, tb = type(a), type(b)
        if ta is list and tb is list:
            return len(a) == len(b) and all(x == y or self._same_stored(x, y) for x, y in zip(a, b))
        if ta is not dict or tb is not dict:
            if ta is list or tb is list:
                # One side stores a history as blocks, the other as a plain list (a fixture's
                # import, another store's cuts): compared as the lists of messages they stand for.
                la, lb = self._as_list(a), self._as_list(b)
                return la is not None and lb is not None and self._same_items(la, lb)
            return False
        ra, rb = _blob_ref(a), _blob_ref(b)
        if ra is not None and rb is not None:
            pair = (ra, rb)
            known = self._same_blobs.get(pair)
            if known is None:
                known = self._same_blobs[pair] = self._same_blob_pair(ra, rb)
            return known
        if ra is not None or rb is not None:
            # A reference against a value read in place (a history's block holds its messages
            # resolved, see ``_as_list``): the blob's tree is that very value when they are equal.
            tree = self._tree(ra if ra is not None else rb)
            other = b if ra is not None else a
            return tree is other or (tree is not None and _blob_ref(tree) is None and self._same_stored(tree, other))
        return a.keys() == b.keys() and all(self._same_stored(a[k], b[k]) for k in a)

    def _same_items(self, a: list, b: list) -> bool:
        """Two stored lists, one of them read from a history's blocks (its items resolved): each
        reference is taken as its blob's tree, so equal items are the same object, compared at C speed."""
        if len(a) != len(b):
            return False
        if [self._as_read(x) for x in a] == [self._as_read(x) for x in b]:
            return True
        return all(x == y or self._same_stored(x, y) for x, y in zip(a, b))

    def _as_read(self, item: Any) -> Any:
        """A blob reference's tree as the store reads it (the reference itself if the store lacks it)."""
        ref = _blob_ref(item)
        if ref is None:
            return item
        tree = self._tree(ref)
        return item if tree is None else tree

    def _tree(self, ref: str) -> Any:
        tree = self._trees.get(ref, _MISSING)
        if tree is _MISSING:
            tree = self._trees[ref] = self.store.blobs([ref]).get(ref)
        return tree

    def _same_blob_pair(self, ra: str, rb: str) -> bool:
        # Two long histories stored as blocks (a Send's state, one message longer each step)
        # are compared block by block: the blocks both share with last step's are known pairs.
        ta, tb = self._tree(ra), self._tree(rb)
        if is_cat(ta) and is_cat(tb) and self._same_stored(ta, tb):
            return True
        if is_cat(ta) or is_cat(tb):
            # Cut differently (blocks against a list stored whole, or other block sizes): the items.
            la, lb = self._as_list({BLOB_REF: ra}), self._as_list({BLOB_REF: rb})
            if la is not None and lb is not None:
                return self._same_items(la, lb)
        return self.normalize(self.store.decode({BLOB_REF: ra})) == self.normalize(self.store.decode({BLOB_REF: rb}))

    def _as_list(self, stored: Any, depth: int = 0) -> list | None:
        """The items a stored list stands for, still encoded: a list as it is, a history's blocks
        joined (each block's items kept once, so a long run keeps what its blocks hold, not a
        copy per step). None where it is not a list, or is damaged (nested too deeply, or
        expanding past the decoder's bound): the caller then decodes and compares."""
        if type(stored) is list:
            return stored
        ref = _blob_ref(stored)
        if ref is None or depth > MAX_DEPTH:
            return None
        hit = self._lists.get(ref)
        if hit is not None:
            return hit
        tree = self._tree(ref)
        if type(tree) is list:
            items = tree
        elif is_cat(tree) and type(tree.get("v")) is list:
            items = []
            for part in tree["v"]:
                got = self._as_list(part, depth + 1)
                if got is None or len(items) + len(got) > MAX_VALUES:
                    return None
                items += got
        else:
            return None
        if depth:  # a block, shared by every longer history: kept (a history's top is each step's own)
            self._lists[ref] = items
        return items

    def _routes(self, routes: list[RouteInfo]) -> list[dict]:
        """Routes as compared and reported: decoded from their stored form and normalized."""
        return [
            {
                "kind": r.kind,
                "router": r.router,
                "returned": self.normalize(self.store.decode(r.returned)),
                "destinations": sorted(r.destinations),
                "sends": [self.normalize(s) for s in self.store.decode(r.sends)],
            }
            for r in routes
        ]

    def _states(self, rec: Side, rep: Side, offset: int, cut: int | None, add: Callable[[Divergence], None], ns: str) -> None:
        rec_track, rep_track = StateTrack(self.store, self.normalize), StateTrack(self.store, self.normalize)
        rec_base, rec_frames = _frames_after(self.store, rec)
        rep_base, rep_frames = _frames_after(self.store, rep)
        rec_track.advance(rec_base or {})
        rep_track.advance(rep_base or {})
        rep_by_step: dict[int, dict] = {}
        rep_iter = iter(rep_frames)
        diverged: set[str] = set()
        returns_checked: set[int] = set()
        for step, values in rec_frames:
            if cut is not None and step >= cut:
                return
            want = step + offset
            while want not in rep_by_step:
                nxt = next(rep_iter, None)
                if nxt is None:
                    return  # the replay ended: reported as a missing step
                if nxt[0] > want:
                    rep_by_step[nxt[0]] = nxt[1]
                    break
                rep_by_step[nxt[0]] = nxt[1]
            rep_values = rep_by_step.pop(want, None)
            if rep_values is None:
                return
            changed = rec_track.advance(values) | rep_track.advance(rep_values)
            for key in sorted(changed):
                if rec_track.same(rep_track, key):
                    diverged.discard(key)
                    continue
                if key in diverged:
                    continue  # still the same divergence: reported where it began
                diverged.add(key)
                if step not in returns_checked:
                    returns_checked.add(step)
                    self._task_returns(rec, rep, step, want, add, ns)
                node = self._writer(rec, rep, step, want, key)
                add(Divergence("state", step, node, f"state key {key!r} differs", _value(rec_track.value(key)), _value(rep_track.value(key)), ns))

    def _task_returns(self, rec: Side, rep: Side, step: int, want: int, add: Callable[[Divergence], None], ns: str) -> None:
        """The ``@task`` results of a step whose state diverged that differ, each named by its task.

        A functional-API task writes no state key: what it returns reaches the state through the
        entrypoint (or node) that awaited it. Without this, a changed tool answer inside a task
        would be told as the entrypoint's divergence, not the task's that made the call.
        """
        try:
            a, b = self.store.step_detail(rec.run_id, step, rec.ns), self.store.step_detail(rep.run_id, want, rep.ns)
        except Exception:  # noqa: BLE001 - naming the task is a nicety; the state divergence is reported anyway
            return
        for node, was, now in changed_returns(a, b, self.normalize):
            add(Divergence("state", step, node, f"task {node!r} returned something else", was, now, ns))

    def _writer(self, rec: Side, rep: Side, step: int, want: int, key: str) -> str | None:
        """The node that wrote ``key`` otherwise in the step: of several writers (parallel nodes,
        ``Send`` packets), the one whose write differs, not merely the first."""
        try:
            a = self.store.step_detail(rec.run_id, step, rec.ns)
        except Exception:  # noqa: BLE001 - naming the node is a nicety
            return None
        writers = [t for t in a.tasks if key in (t.writes or {})]
        if len(writers) > 1:
            try:
                b = self.store.step_detail(rep.run_id, want, rep.ns)
            except Exception:  # noqa: BLE001
                b = None
            if b is not None:
                differs = differing_writer(writers, b, key, self.normalize)
                if differs is not None:
                    return differs
        return writers[0].node if writers else None

    def _calls(
        self,
        rec_calls: list[CallInfo],
        rep_calls: list[CallInfo],
        offset: int,
        cut: int | None,
        add: Callable[[Divergence], None],
        ns: str,
        *,
        rec_paths: Callable[[str | None], str | None] = lambda _: None,
        rep_paths: Callable[[str | None], str | None] = lambda _: None,
    ) -> None:
        """Calls the recording did not answer (live ones) are compared after the fact.

        A caller's calls in one step (a tool node's parallel calls, ``Send`` packets to a model)
        finish in any order: each replayed call is paired with the recorded one asked the same
        thing, as a strict replay would answer it (ties by tool-call id, then task path); only
        calls no such pairing explains are reported as called with other arguments.
        """
        live = [k for k in ("tool", "model") if not self.mode.answers(k)]
        if not live:
            return
        groups: dict[tuple, tuple[list[CallInfo], list[CallInfo]]] = {}
        for c in rec_calls:
            if c.kind in live and (cut is None or (c.step or 0) < cut):
                groups.setdefault((c.step, c.kind, c.name, ns_path(c.ns), c.node), ([], []))[0].append(c)
        for c in rep_calls:
            if c.kind in live:
                groups.setdefault(((c.step or 0) - offset, c.kind, c.name, ns_path(c.ns), c.node), ([], []))[1].append(c)
        args = lambda c: normalize_arguments(c.kind, c.inputs, self.arg_normalize)  # noqa: E731
        for (step, kind, name, _path, node), (a, b) in sorted(groups.items(), key=lambda kv: (kv[0][0] or 0, kv[0][1:])):
            for x, y in _pair_calls(a, b, args, rec_paths, rep_paths):
                if y is None:
                    add(Divergence("missing", step, node, f"recorded {kind} call {name!r} was not made", args(x), None, ns))
                    continue
                if x is None:
                    add(Divergence("extra", step, node, f"{kind} call {name!r} was not in the recording", None, args(y), ns))
                    continue
                args_x, args_y = args(x), args(y)
                if args_x != args_y:
                    add(Divergence("arguments", step, node, f"{kind} {name!r} was called with other arguments", args_x, args_y, ns))
                    continue
                if "Unfinished" in (x.error_type, y.error_type):
                    continue  # its node stopped waiting for it: what it returned later changed nothing
                out_x, out_y = _outcome(x, self.normalize), _outcome(y, self.normalize)
                if out_x != out_y:
                    add(Divergence("call", step, node, f"{kind} {name!r} returned something else", out_x, out_y, ns))


class _TaskPaths:
    """Task id -> its task's path in one run's namespace, read only when first asked."""

    def __init__(self, read: Callable[[], Iterable[StepDetail]]) -> None:
        self._read = read
        self._paths: dict[str, str] | None = None

    def __call__(self, task_id: str | None) -> str | None:
        if self._paths is None:
            self._paths = {t.task_id: t.path for d in self._read() for t in d.tasks}
        return self._paths.get(task_id or "")


def _pair_calls(
    a: list[CallInfo],
    b: list[CallInfo],
    args: Callable[[CallInfo], Any],
    rec_paths: Callable[[str | None], str | None],
    rep_paths: Callable[[str | None], str | None],
) -> list[tuple[CallInfo | None, CallInfo | None]]:
    """One caller's recorded and replayed calls of a step, paired (``None``: no partner).

    Calls asked the same thing pair first, whatever order they finished in; of several
    alike, the one answering the same tool call, else made by the task of the same path
    (a ``Send``'s holds its index), else the first. What is left pairs by task path, then
    tool-call id, then in order: those are the calls made with other arguments.
    """
    if len(a) == 1 and len(b) == 1:
        return [(a[0], b[0])]
    left = list(b)
    left_args = [args(y) for y in left]
    pairs: list[tuple[CallInfo | None, CallInfo | None]] = []
    rest: list[CallInfo] = []
    for x in a:
        ax = args(x)
        same = [k for k, ay in enumerate(left_args) if ay == ax]
        if not same:
            rest.append(x)
            continue
        k = same[0]
        if len(same) > 1:
            tid, path = answered_tool_call(x), rec_paths(x.task_id)
            by_id = next((j for j in same if tid is not None and answered_tool_call(left[j]) == tid), None)
            k = by_id if by_id is not None else next((j for j in same if path is not None and rep_paths(left[j].task_id) == path), k)
        pairs.append((x, left.pop(k)))
        left_args.pop(k)
    for key in (lambda c, paths: paths(c.task_id), lambda c, _: answered_tool_call(c)):
        if not rest or not left:
            break
        unmatched = []
        for x in rest:
            kx = key(x, rec_paths)
            k = next((j for j, y in enumerate(left) if kx is not None and key(y, rep_paths) == kx), None)
            if k is None:
                unmatched.append(x)
            else:
                pairs.append((x, left.pop(k)))
        rest = unmatched
    pairs.extend(zip(rest, left))
    pairs.extend((x, None) for x in rest[len(left) :])
    pairs.extend((None, y) for y in left[len(rest) :])
    at = {id(x): i for i, x in enumerate(a)}
    return sorted(pairs, key=lambda p: at[id(p[0])] if p[0] is not None else len(a))  # reported in the recording's order


def _outcome(call: CallInfo, normalize: Normalizer) -> Any:
    if call.error_type == "GraphInterrupt":
        # A call that asked a person: its message quotes the interrupt's id, drawn afresh each
        # run from the task's; what it asked is compared with its step's questions.
        return {"error": call.error_type}
    if call.error_type:
        return {"error": call.error_type, "message": call.error_message}
    return normalize(call.output)


def _error_what(errs_rec: list[tuple[str, str, str]], errs_rep: list[tuple[str, str, str]], rep: StepDetail) -> str:
    """What changed in a step's errors, said as what happened: a node that raises now and did not
    (with where it raised, the first thing to look at), or one that no longer raises."""
    if not errs_rec and len(errs_rep) == 1:
        node, kind, message = errs_rep[0]
        frames = next((t.traceback for t in rep.tasks if t.node == node and t.error_type and t.traceback), None)
        where = f" at {frame_text(raised_at(frames))}" if frames else ""
        return f"node {node!r} raised {kind}: {_short(message)}{where} (it did not in the recording)"
    if not errs_rep and len(errs_rec) == 1:
        node, kind, message = errs_rec[0]
        return f"node {node!r} no longer raises {kind}: {_short(message)} (it did in the recording)"
    return "a node failed differently"


def _short(text: str, limit: int = 200) -> str:
    line = one_line(text)
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _by_source(detail: StepDetail) -> dict[str, list[RouteInfo]]:
    out: dict[str, list[RouteInfo]] = {}
    for r in detail.routes:
        out.setdefault(r.source, []).append(r)
    return out


def changed_returns(a: StepDetail, b: StepDetail, normalize: Normalizer) -> list[tuple[str, Any, Any]]:
    """``(task, returned in a, returned in b)`` for each functional-API ``@task`` of step ``a``
    whose result differs in step ``b`` (paired by node and path, in turn; a task ``b`` did not
    run is told by the step's nodes, not here)."""
    theirs: dict[tuple[str, str], list[Any]] = {}
    for t in b.tasks:
        if TASK_RETURN in (t.writes or {}):
            theirs.setdefault((t.node, t.path or ""), []).append(t)
    out = []
    for t in a.tasks:
        others = theirs.get((t.node, t.path or "")) if TASK_RETURN in (t.writes or {}) else None
        if not others:
            continue
        was, now = normalize(t.writes[TASK_RETURN]), normalize(others.pop(0).writes[TASK_RETURN])
        if was != now:
            out.append((t.node, was, now))
    return out


def differing_writer(writers: list[Any], b: StepDetail, key: str, normalize: Normalizer) -> str | None:
    """The first of ``writers`` (a step's tasks that wrote ``key``) whose write differs from its
    counterpart's in step ``b`` (paired by node and path, in turn), or that ``b`` did not run."""
    theirs: dict[tuple[str, str], list[Any]] = {}
    for t in b.tasks:
        theirs.setdefault((t.node, t.path or ""), []).append(t)
    for t in writers:
        others = theirs.get((t.node, t.path or ""))
        if not others:
            return t.node
        other = others.pop(0)
        if key not in (other.writes or {}) or normalize(t.writes[key]) != normalize(other.writes[key]):
            return t.node
    return None


def only_structure(source: str, kinds_a: list[str], kinds_b: list[str], a: StepDetail, b: StepDetail) -> bool:
    """One run holds static edges out of ``source`` (the kinds of its routes from there) and the
    other no route at all, though its ``source`` ended as well (no error, no interrupt).

    A static edge decides nothing: where the run went shows in the next step's nodes, which are
    compared. A recording made before graphtape stored an edge from several nodes
    (``add_edge(["a", "b"], "c")``) holds no route there; a run recorded today does.
    """
    if kinds_a and kinds_b:
        return False
    kinds, quiet = (kinds_a, b) if kinds_a else (kinds_b, a)
    return all(k == "static" for k in kinds) and all(not t.error_type and not t.interrupts for t in quiet.tasks if t.node == source)


def _blob_ref(item: Any) -> str | None:
    """The blob an encoded item points to (``{"$b": hash}``), if it is just that."""
    if type(item) is dict and len(item) == 1:
        ref = item.get("$b")
        return ref if type(ref) is str else None
    return None


def _value(v: Any) -> Any:
    return None if v is _MISSING else v


_LAST = 1 << 20  # sorts after every other divergence of its step


def _key(route: dict) -> str:
    return json.dumps(route, sort_keys=True, default=str)


def packets_sent(routes: list[dict]) -> Counter[str]:
    """How many times routes went to each node: a ``Send`` is one destination per packet."""
    return Counter(d for r in routes for d in r["destinations"])


def _route_what(a: list[dict], b: list[dict]) -> str:
    routers = sorted({r.get("router") for r in a + b if r.get("router")})
    how = f" ({', '.join(routers)})" if routers else ""
    went_a, went_b = packets_sent(a), packets_sent(b)
    if went_a.keys() != went_b.keys():
        return f"route{how} went to {', '.join(sorted(went_b)) or 'nowhere'} instead of {', '.join(sorted(went_a)) or 'nowhere'}"
    if went_a != went_b:
        return f"route{how} {_packet_counts(went_a, went_b)}"
    ra, rb = [r.get("returned") for r in a], [r.get("returned") for r in b]
    if ra != rb:
        shown_b, shown_a = _cut_apart(json.dumps(rb, default=str), json.dumps(ra, default=str))
        return f"router{how} returned {shown_b} instead of {shown_a} (same destinations)"
    if [r.get("router") for r in a] != [r.get("router") for r in b]:
        return f"route decided by {', '.join(str(r.get('router')) for r in b)} instead of {', '.join(str(r.get('router')) for r in a)}"
    return f"route{how} sent other packets (Send payloads differ)"


def _packet_counts(was: Counter[str], now: Counter[str]) -> str:
    """How many packets went to each node whose count changed: ``sent 2× work instead of 3×``."""
    changed = sorted(n for n in was.keys() | now.keys() if was[n] != now[n])
    return "sent " + ", ".join(f"{now[n]}× {n} instead of {was[n]}×" for n in changed)


def _cut_apart(a: str, b: str, width: int = _HEADLINE_CUT) -> tuple[str, str]:
    """``a`` and ``b`` each cut to about ``width`` characters so that where they differ shows: past
    a long shared beginning both start a little before the first difference ("…" marks a cut)."""
    if len(a) <= width and len(b) <= width:
        return a, b
    same = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    start = max(0, same - width // 4) if same >= width - width // 4 else 0

    def cut(text: str) -> str:
        part = text[start : start + width]
        return ("…" if start else "") + part + ("…" if start + width < len(text) else "")

    return cut(a), cut(b)


def _step_summary(detail: StepDetail | None) -> Any:
    if detail is None:
        return None
    return {"step": detail.step.step, "nodes": [t.node for t in detail.tasks], "summary": detail.step.summary}
