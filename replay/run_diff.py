"""Compare any two recorded runs: where did the one that failed go a different way from the one that worked?

``diff_runs(store, A, B)`` reads both runs through the store API, aligns their
supersteps per namespace by what ran and how it was routed (``run_align``),
and walks the aligned steps in order, naming every difference with both sides:
routes, node errors, call arguments, call results (a call its node gave up on
is a timeout), state (reported where a key starts to differ, decoded only as
it changes, with replay's ``StateTrack``), steps only one run has, and how the
runs ended. Ids, timestamps and provider metadata never count (replay's
``Normalizer``); ``ignore`` leaves state paths out, as in replay.

Runs given other inputs differ wherever the input flows (the question in a
prompt): such a difference is listed but marked ``carried`` (A's value with
the inputs' differing texts replaced by B's is B's value), so the first
difference named is the first point where the runs went different ways.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import replace
from collections.abc import Iterable, Iterator
from itertools import zip_longest
from typing import Any

from graphtape.recorder import CallInfo, GraphtapeError, RunInfo, RunStore, SqlStore, StepDetail
from graphtape.recorder.records import STORE
from graphtape.recorder.store_capture import without_times

from graphtape.replay.calls import normalize_arguments
from graphtape.replay.carry import Carry
from graphtape.replay.compare import MISSING, StateTrack, changed_returns, only_structure, packets_sent
from graphtape.replay.diff_result import RunDiff, RunDifference
from graphtape.replay.graph_shape import GraphShape, graph_changes
from graphtape.replay.nested_calls import unmade_inside
from graphtape.replay.normalize import Normalizer, ns_path
from graphtape.replay.result import ordered
from graphtape.replay.run_align import align, step_decisions, step_signature

__all__ = ["RunDiffError", "diff_runs"]

ABANDONED = "Unfinished"  # the recorder's mark on a call its node stopped waiting for
_MISSING = object()
_LAST = 1 << 30


class RunDiffError(GraphtapeError):
    """Two runs cannot be compared as asked (a bad ignore path, a namespace neither run has)."""


def diff_runs(
    run_a: str,
    run_b: str,
    *,
    store: RunStore | None = None,
    db: str | os.PathLike | None = None,
    ignore: Iterable[str] = (),
    ns: str | None = None,
) -> RunDiff:
    """Compare recorded run ``run_b`` with ``run_a`` (ids, unique prefixes or ``last~N``).

    ``ignore`` lists state paths to leave out (``messages.*.id``, ``**.timestamp``);
    ``ns`` compares only one subgraph (its path, ``child``, or a namespace
    ``graphtape show`` prints). Nothing is written: both runs are only read.
    """
    own = store is None
    store = store if store is not None else SqlStore(db, create=False)
    try:
        a, b = store.get_run(run_a), store.get_run(run_b)
        try:
            normalize = Normalizer(ignore)
        except ValueError as exc:
            raise RunDiffError(str(exc)) from None
        return _Differ(store, a, b, normalize, tuple(p for p in ignore if p)).go(ns or "")
    finally:
        if own:
            store.close()


def _later_start(store: RunStore, a: RunInfo, b: RunInfo) -> int | None:
    """The root step both runs are compared from when one went on from a checkpoint (a replay from
    step 4, a fork, ``invoke(None)``): the steps the other ran before it are not differences."""
    firsts = []
    for run in (a, b):
        steps = store.list_steps(run.id)
        if not steps:
            return None
        firsts.append(steps[0])
    later = max(firsts, key=lambda s: s.step)
    if later.step == min(s.step for s in firsts) or later.source == "input":
        return None
    return later.step


def run_labels(a: RunInfo, b: RunInfo) -> tuple[str, str]:
    """How the two runs are called in a report: their names, or their ids where the names agree."""
    if a.name != b.name:
        return a.name, b.name
    n = 8 if a.id[:8] != b.id[:8] else max(len(a.id), len(b.id))
    return f"run {a.id[:n]}", f"run {b.id[:n]}"


class _Frames:
    """A namespace's stored states, read forward to the steps asked for."""

    def __init__(self, frames: Iterator[tuple[int, dict[str, Any]]]) -> None:
        self.frames = frames
        self.held: tuple[int, dict[str, Any]] | None = None

    def at(self, step: int) -> dict[str, Any] | None:
        while True:
            if self.held is None:
                self.held = next(self.frames, None)
                if self.held is None:
                    return None
            have, values = self.held
            if have > step:
                return None  # no state stored for this step (it never completed)
            self.held = None
            if have == step:
                return values


class _Side:
    """One run's view of a namespace: its steps, their calls, its states."""

    def __init__(self, differ: _Differ, run: RunInfo, ns: str, calls: dict[tuple[str, int | None], list[CallInfo]]) -> None:
        self.run, self.ns = run, ns
        self.details: list[StepDetail] = differ.store.step_details(run.id, ns, writes=False)
        if not ns and differ.start is not None:
            self.details = [d for d in self.details if d.step.step > differ.start]  # the checkpoint itself ran nothing in the later run
        self.calls = [calls.get((ns, d.step.step), []) for d in self.details]
        self.frames = _Frames(differ.store.frames(run.id, ns))
        self.state = StateTrack(differ.store, differ.normalize)

    def signatures(self) -> list[Any]:
        return [step_signature(d, c) for d, c in zip(self.details, self.calls)]

    def decisions(self, normalize: Normalizer) -> list[Any]:
        return [step_decisions(d, c, normalize) for d, c in zip(self.details, self.calls)]


class _Differ:
    def __init__(self, store: RunStore, a: RunInfo, b: RunInfo, normalize: Normalizer, ignore: tuple[str, ...]) -> None:
        self.store, self.a, self.b = store, a, b
        self.normalize = normalize
        # Call arguments: only volatile ids are dropped, as in replay. Without ignore paths that is the
        # state's normalizer too: one memo, so a message in both a prompt and the state is walked once.
        self.arg_normalize = normalize if not ignore else Normalizer()
        self.ignore = ignore
        self.labels = run_labels(a, b)
        self.found: list[RunDifference] = []
        self.start = _later_start(store, a, b)
        self.shapes = GraphShape.from_json(store.run_graph(a.id)), GraphShape.from_json(store.run_graph(b.id))
        self.inputs = normalize(store.decode(store.encoded_inputs(a.id)[0])), normalize(store.decode(store.encoded_inputs(b.id)[0]))
        self.carry = Carry(*self.inputs)
        calls_a, calls_b = store.calls(a.id), store.calls(b.id)
        # A replay (or fork) answers a call from the recording without making the calls inside it
        # (a subagent run by a tool): those are no difference.
        unmade_a = unmade_inside(calls_a, calls_b, self.arg_normalize) if b.parent_run_id else set()
        unmade_b = unmade_inside(calls_b, calls_a, self.arg_normalize) if a.parent_run_id else set()
        if unmade_a or unmade_b:
            calls_a = [c for c in calls_a if c.call_id not in unmade_a]
            calls_b = [c for c in calls_b if c.call_id not in unmade_b]
        self.calls = _by_step(calls_a), _by_step(calls_b)
        models = sorted({c.name for c in calls_a if c.kind == "model"}), sorted({c.name for c in calls_b if c.kind == "model"})
        self.models = models
        self.same_models = models[0] == models[1]  # else the models differ run-wide: said once, not per call

    # -- the whole run -------------------------------------------------------------------
    def go(self, ns: str) -> RunDiff:
        path = ns_path(ns)
        aligned: list[tuple[int | None, int | None]] = []
        if not ns:
            self._setup()
            aligned = self._namespace("", "", (), None)
            self._ending()
        else:
            pairs = self._ns_pairs(ns)
            for q, (na, nb) in enumerate(pairs):
                if na is None or nb is None:
                    self._add("missing" if nb is None else "extra", None, None, None, f"subgraph {path} ran {sum(1 for p in pairs if p[0])} time(s) in {self.labels[0]}, {sum(1 for p in pairs if p[1])} in {self.labels[1]}", na, nb, (q,), path=path, ns_a=na or "", ns_b=nb or "")
                    continue
                got = self._namespace(na, nb, (q,), None)
                aligned = aligned or got
        changes = graph_changes(self.shapes[0].at_path(path), self.shapes[1].at_path(path), self.labels, path)
        return RunDiff(self.a, self.b, self.labels, self._ordered(), changes, aligned, path, self.ignore)

    def _ordered(self) -> list[RunDifference]:
        out = ordered(self.found)
        first = next((i for i, d in enumerate(out) if not d.carried), None)
        return [d if d.first == (i == first) else replace(d, first=(i == first)) for i, d in enumerate(out)]

    def _setup(self) -> None:
        """What the runs were given: inputs and the models they asked (premises, not where they went apart)."""
        ia, ib = self.inputs
        # A run that went on from a checkpoint was given no input: a replay or fork from the first
        # step resumed its recording's input checkpoint (its input is the recording's).
        given = [not (run.parent_run_id and inputs is None) for run, inputs in ((self.a, ia), (self.b, ib))]
        if ia != ib and self.start is None and all(given):
            keys = _differing_keys(ia, ib)
            what = "the runs were given other inputs" + (f" ({', '.join(keys)})" if keys else "")
            self._add("input", None, None, None, what, ia, ib, (-1,), carried=True)
        if not self.same_models and self.models[0] and self.models[1]:
            what = f"the runs asked other models: {', '.join(self.models[0])} in {self.labels[0]}, {', '.join(self.models[1])} in {self.labels[1]}"
            self._add("model", None, None, None, what, self.models[0], self.models[1], (-1,), carried=True)

    def _ending(self) -> None:
        a, b = self.a, self.b
        ends = (a.status, a.error_type, a.error_message), (b.status, b.error_type, b.error_message)
        if ends[0] != ends[1]:
            how = f"the run ended {b.status} in {self.labels[1]}, {a.status} in {self.labels[0]}" if a.status != b.status else "the run failed differently"
            sides = [{"status": s, "error": t, "message": m} for s, t, m in ends]
            self._add("error", None, None, None, how, sides[0], sides[1], (_LAST,))

    def _ns_pairs(self, ns: str) -> list[tuple[str | None, str | None]]:
        path = ns_path(ns)
        have_a = [n for n in self.store.namespaces(self.a.id) if n and ns_path(n) == path]
        have_b = [n for n in self.store.namespaces(self.b.id) if n and ns_path(n) == path]
        if not have_a and not have_b:
            raise RunDiffError(f"neither run has a subgraph namespace {path!r}: graphtape show RUN lists a run's subgraphs")
        if ns in have_a:
            k = have_a.index(ns)
            return [(ns, have_b[k] if k < len(have_b) else None)]
        return list(zip_longest(have_a, have_b))

    # -- one namespace -------------------------------------------------------------------
    def _namespace(self, ns_a: str, ns_b: str, prefix: tuple[int, ...], root: tuple[int | None, int | None] | None) -> list[tuple[int | None, int | None]]:
        """Align the namespace's steps and compare them pair by pair; returns the aligned step numbers."""
        sa, sb = _Side(self, self.a, ns_a, self.calls[0]), _Side(self, self.b, ns_b, self.calls[1])
        pairs = align(sa.signatures(), sb.signatures(), sa.decisions(self.arg_normalize), sb.decisions(self.arg_normalize))
        numbers = [(None if i is None else sa.details[i].step.step, None if j is None else sb.details[j].step.step) for i, j in pairs]
        status: dict[str, str] = {}  # state key -> "carried" | "real" while it differs
        gap: list[tuple[int, int | None, int | None]] = []
        for p, (i, j) in enumerate(pairs):
            if i is None or j is None:
                gap.append((p, i, j))
                continue
            self._gap(gap, sa, sb, prefix, root)
            gap = []
            where = root if root is not None else numbers[p]
            self._pair(sa, sb, i, j, (*prefix, p), where, status)
        self._gap(gap, sa, sb, prefix, root)
        return numbers

    def _gap(self, gap: list[tuple[int, int | None, int | None]], sa: _Side, sb: _Side, prefix: tuple[int, ...], root: tuple[int | None, int | None] | None) -> None:
        """Steps only one run has, told as one difference per side."""
        if not gap:
            return
        for side, index, kind in ((sa, 1, "missing"), (sb, 2, "extra")):
            steps = [side.details[g[index]] for g in gap if g[index] is not None]
            if not steps:
                continue
            first, last = steps[0].step.step, steps[-1].step.step
            span = f"step {first}" if first == last else f"steps {first}-{last}"
            has, lacks = (self.labels[0], self.labels[1]) if kind == "missing" else (self.labels[1], self.labels[0])
            what = f"{has} ran {len(steps)} step{'s' if len(steps) != 1 else ''} here that {lacks} did not ({span}: {_nodes_path(steps)}{_trouble(side, gap, index)})"
            told = [_step_told(d) for d in steps]
            where = root if root is not None else ((first, None) if kind == "missing" else (None, first))
            self._add(kind, first if kind == "missing" else None, first if kind == "extra" else None, None, what,
                      told if kind == "missing" else None, told if kind == "extra" else None, (*prefix, gap[0][0], 1), ns_a=sa.ns, ns_b=sb.ns, root=where)

    # -- one pair of aligned steps -----------------------------------------------------------
    def _pair(self, sa: _Side, sb: _Side, i: int, j: int, at: tuple[int, ...], root: tuple[int | None, int | None], status: dict[str, str]) -> None:
        da, db = sa.details[i], sb.details[j]
        steps = (da.step.step, db.step.step)
        add = lambda kind, node, what, x, y, carried=False: self._add(kind, steps[0], steps[1], node, what, x, y, (*at, 1), ns_a=sa.ns, ns_b=sb.ns, root=root, carried=carried)  # noqa: E731
        self._routes(da, db, add)
        self._errors(da, db, add)
        self._calls(sa.calls[i], sb.calls[j], da, db, add)
        self._states(sa, sb, da, db, add, status)
        self._subgraphs(da, db, at, root, sa.ns, sb.ns)

    def _routes(self, da: StepDetail, db: StepDetail, add: Any) -> None:
        nodes_a, nodes_b = Counter(t.node for t in da.tasks), Counter(t.node for t in db.tasks)
        if nodes_a != nodes_b:
            ran_a, ran_b = sorted(nodes_a.elements()), sorted(nodes_b.elements())
            add("route", None, f"other nodes ran: {', '.join(ran_a) or 'none'} in {self.labels[0]}, {', '.join(ran_b) or 'none'} in {self.labels[1]}", ran_a, ran_b)
            return
        ra, rb = self._route_map(da), self._route_map(db)
        for source in sorted(ra.keys() | rb.keys()):
            x, y = ra.get(source, []), rb.get(source, [])
            if x == y or only_structure(source, [r["kind"] for r in x], [r["kind"] for r in y], da, db):
                continue
            sent_a, sent_b = packets_sent(x), packets_sent(y)
            dests_a, dests_b = sorted(sent_a), sorted(sent_b)
            routers = ", ".join(sorted({str(r["router"]) for r in x + y if r.get("router")}))
            how = f" ({routers})" if routers else ""
            if dests_a != dests_b:
                went_a, went_b = (_went(d, detail) for d, detail in ((dests_a, da), (dests_b, db)))
                what = f"{source} {went_a} in {self.labels[0]}, {went_b} in {self.labels[1]}{how}"
                add("route", source, what, x, y)
            elif sent_a != sent_b:
                changed = sorted(n for n in dests_a if sent_a[n] != sent_b[n])
                told_a, told_b = (", ".join(f"{sent[n]}× {n}" for n in changed) for sent in (sent_a, sent_b))
                add("route", source, f"{source} sent {told_a} in {self.labels[0]}, {told_b} in {self.labels[1]}{how}", x, y, self.carry.explains(x, y))
            else:
                add("route", source, f"{source}'s router{how} returned other values (same destinations)", x, y, self.carry.explains(x, y))

    def _route_map(self, detail: StepDetail) -> dict[str, list[dict]]:
        out: dict[str, list[dict]] = {}
        for r in detail.routes:
            out.setdefault(r.source, []).append({"kind": r.kind, "router": r.router, "returned": self.normalize(r.returned), "destinations": sorted(r.destinations), "sends": [self.normalize(s) for s in r.sends]})
        for routes in out.values():
            routes.sort(key=repr)
        return out

    def _errors(self, da: StepDetail, db: StepDetail, add: Any) -> None:
        errs_a = sorted((t.node, t.error_type or "", t.error_message or "") for t in da.tasks if t.error_type)
        errs_b = sorted((t.node, t.error_type or "", t.error_message or "") for t in db.tasks if t.error_type)
        if errs_a != errs_b:
            node = (errs_b or errs_a)[0][0]
            if errs_b and not errs_a:
                what = f"{node} failed in {self.labels[1]} ({errs_b[0][1]}: {errs_b[0][2]}), not in {self.labels[0]}"
            elif errs_a and not errs_b:
                what = f"{node} failed in {self.labels[0]} ({errs_a[0][1]}: {errs_a[0][2]}), not in {self.labels[1]}"
            else:
                what = "a node failed differently"
            add("error", node, what, [list(e) for e in errs_a], [list(e) for e in errs_b], self.carry.explains(errs_a, errs_b))
        # An interrupt asks a person; the resume value is their answer: told like a call and its result.
        for kind, asked in (("interrupt", "interrupted with another value"), ("resume", "was answered differently at its interrupt")):
            va = sorted(([e.node or "", self.normalize(e.value)] for e in da.events if e.kind == kind), key=repr)
            vb = sorted(([e.node or "", self.normalize(e.value)] for e in db.events if e.kind == kind), key=repr)
            if va == vb:
                continue
            node = next((n for n, _ in [*vb, *va] if n), None)
            if bool(va) != bool(vb):
                has = self.labels[0] if va else self.labels[1]
                what = f"{node or 'a node'} {'stopped at an interrupt' if kind == 'interrupt' else 'was resumed'} in {has} only"
                add("route" if kind == "interrupt" else "call", node, what, va, vb)
            else:
                add("arguments" if kind == "interrupt" else "call", node, f"{node or 'a node'} {asked}", va, vb, self.carry.explains(va, vb))

    def _calls(self, calls_a: list[CallInfo], calls_b: list[CallInfo], da: StepDetail, db: StepDetail, add: Any) -> None:
        """Calls of one aligned step, paired by who made them (kind, tool, node), then by what they were asked."""
        groups: dict[tuple, tuple[list, list]] = {}
        for side, calls in ((0, calls_a), (1, calls_b)):
            for c in calls:
                args = normalize_arguments(c.kind, c.inputs, self.arg_normalize)
                name = c.name if c.kind != "model" or self.same_models else "model"
                groups.setdefault((c.kind, name, c.node or ""), ([], []))[side].append((c, args))
        ends = _task_ends(da), _task_ends(db)
        for (kind, name, node), (xs, ys) in sorted(groups.items()):
            for x, y in _pair_calls(xs, ys, self.carry):
                label = f"{kind} {name!r}" if kind != "model" or self.same_models else "model call"
                if x is None or y is None:
                    c, args = x or y
                    kind_of = "missing" if y is None else "extra"
                    has, lacks = (self.labels[0], self.labels[1]) if y is None else (self.labels[1], self.labels[0])
                    add(kind_of, node or None, f"{label} was made in {has}, not in {lacks}", args if y is None else None, args if x is None else None)
                    continue
                (ca, args_a), (cb, args_b) = x, y
                carried = False
                if args_a != args_b:
                    carried = self.carry.explains(args_a, args_b)
                    add("arguments", node or None, f"{label} was called with other arguments", args_a, args_b, carried)
                    if not carried:
                        continue  # what it answered follows from what it was asked
                gave_up = _gave_up(ca, ends[0]), _gave_up(cb, ends[1])
                out_a, out_b = self._outcome(ca, ends[0], gave_up[0]), self._outcome(cb, ends[1], gave_up[1])
                if out_a != out_b:
                    add("call", node or None, self._call_what(label, ca, cb, out_a, out_b, gave_up), out_a, out_b, self.carry.explains(out_a, out_b))

    def _outcome(self, call: CallInfo, ends: dict[str, tuple[float, float]], gave_up: bool) -> Any:
        """What the node got from the call: its output or error, or a timeout (what came later it never saw)."""
        if gave_up:
            out: dict[str, Any] = {"timed out": "its node stopped waiting for it"}
            end = ends.get(call.task_id or "")
            if end is not None and call.started_at is not None:
                waited, ran = end[0] - call.started_at, end[1]
                if 0 <= waited <= ran + 0.001:  # clocks that disagree (an imported run) tell nothing
                    out["waited_ms"] = round(waited * 1000)
            return out
        if call.error_type:
            return {"error": call.error_type, "message": call.error_message}
        return self.normalize(without_times(call.output) if call.kind == STORE else call.output)

    def _call_what(self, label: str, ca: CallInfo, cb: CallInfo, out_a: Any, out_b: Any, gave_up: tuple[bool, bool]) -> str:
        la, lb = self.labels
        for this, other, lthis, lother, out, mine, theirs in ((cb, ca, lb, la, out_b, gave_up[1], gave_up[0]), (ca, cb, la, lb, out_a, gave_up[0], gave_up[1])):
            if mine and not theirs:
                waited = f" after {out['waited_ms']} ms" if isinstance(out, dict) and "waited_ms" in out else ""
                answered = "failed" if other.error_type else "answered"
                return f"{label} timed out in {lthis} (its node stopped waiting{waited}); it {answered} in {lother}"
        for this, other, lthis, lother in ((cb, ca, lb, la), (ca, cb, la, lb)):
            if this.error_type and not other.error_type:
                return f"{label} failed in {lthis} ({this.error_type}: {this.error_message}); it answered in {lother}"
        if ca.error_type and cb.error_type:
            return f"{label} failed differently"
        return f"{label} answered differently"

    def _states(self, sa: _Side, sb: _Side, da: StepDetail, db: StepDetail, add: Any, status: dict[str, str]) -> None:
        va, vb = sa.frames.at(da.step.step), sb.frames.at(db.step.step)
        if va is None or vb is None:
            return  # a step that never completed stored no state
        changed = sa.state.advance(va) | sb.state.advance(vb)
        writers = {t.node for t in da.tasks} | {t.node for t in db.tasks}
        node = next(iter(writers)) if len(writers) == 1 else None
        returns_told = False
        for key in sorted(changed):
            if sa.state.same(sb.state, key):
                status.pop(key, None)
                continue
            x, y = sa.state.value(key), sb.state.value(key)
            x, y = (None if x is MISSING else x), (None if y is MISSING else y)
            now = "carried" if self.carry.explains(x, y, key) else "real"
            before = status.get(key)
            status[key] = now if before != "real" else "real"
            if before == now or before == "real":
                continue  # the same difference going on: told where it began
            if not returns_told:
                returns_told = True
                self._task_returns(sa, sb, da, db, add)
            add("state", node, f"state key {key!r} differs", x, y, now == "carried")

    def _task_returns(self, sa: _Side, sb: _Side, da: StepDetail, db: StepDetail, add: Any) -> None:
        """The ``@task`` results of a step whose state differs that differ, each named by its task
        (told before the state): a task writes no state key, what it returns reaches the state
        through the entrypoint that awaited it, so the change would read as the entrypoint's."""
        try:  # the steps were read without their writes (most steps never need them)
            da, db = self.store.step_detail(sa.run.id, da.step.step, sa.ns), self.store.step_detail(sb.run.id, db.step.step, sb.ns)
        except Exception:  # noqa: BLE001 - naming the task is a nicety; the state difference is told anyway
            return
        for node, was, now in changed_returns(da, db, self.normalize):
            add("state", node, f"task {node!r} returned something else", was, now, self.carry.explains(was, now))

    def _subgraphs(self, da: StepDetail, db: StepDetail, at: tuple[int, ...], root: tuple[int | None, int | None], ns_a: str, ns_b: str) -> None:
        """Subgraphs entered in this step, paired by their path, compared inside it (told before the step's own differences)."""
        kids_a, kids_b = _children(da, ns_a), _children(db, ns_b)
        for q, path in enumerate(sorted(kids_a.keys() | kids_b.keys())):
            for r, (na, nb) in enumerate(zip_longest(kids_a.get(path, []), kids_b.get(path, []))):
                if na is None or nb is None:
                    continue  # the node that entered it ran in one run only: told as a route difference
                self._namespace(na, nb, (*at, 0, q, r), root)

    # -- recording a difference ---------------------------------------------------------------
    def _add(self, kind: str, step: int | None, step_b: int | None, node: str | None, what: str, a: Any, b: Any, order: tuple[int, ...], *,
             ns_a: str = "", ns_b: str = "", root: tuple[int | None, int | None] = (None, None), carried: bool = False, path: str | None = None) -> None:
        self.found.append(
            RunDifference(kind, step, node, what, a, b, path if path is not None else ns_path(ns_a or ns_b), order=order,
                          step_b=step_b, ns_a=ns_a, ns_b=ns_b, root=root, carried=carried, labels=self.labels)
        )


def _by_step(calls: list[CallInfo]) -> dict[tuple[str, int | None], list[CallInfo]]:
    out: dict[tuple[str, int | None], list[CallInfo]] = {}
    for c in calls:
        out.setdefault((c.ns, c.step), []).append(c)
    return out


def _pair_calls(xs: list, ys: list, carry: Carry) -> list[tuple[Any, Any]]:
    """Calls asked the same thing pair first (parallel calls run in any order), the rest in order."""
    left, out = list(ys), []
    rest_x = []
    for x in xs:
        k = next((k for k, y in enumerate(left) if y[1] == x[1]), None)
        if k is None:
            k = next((k for k, y in enumerate(left) if carry.explains(x[1], y[1])), None)
        if k is None:
            rest_x.append(x)
        else:
            out.append((x, left.pop(k)))
    out.extend(zip_longest(rest_x, left))
    return out


def _gave_up(call: CallInfo, ends: dict[str, tuple[float, float]]) -> bool:
    """Whether the call's node stopped waiting for it (a timeout): it never returned, or returned after its node ended.

    Which of the two the recording holds depends on whether the run ended
    before the late call did; either way the node never saw the result.
    """
    if call.error_type == ABANDONED:
        return True
    end = ends.get(call.task_id or "")
    if end is None or call.started_at is None or call.latency_ms is None:
        return False
    task_end, ran = end
    if not task_end - ran - 0.001 <= call.started_at <= task_end:
        return False  # the call did not start inside its task: the clocks disagree (an imported run), they tell nothing
    return call.started_at + call.latency_ms / 1000 > task_end + 0.001


def _task_ends(detail: StepDetail) -> dict[str, tuple[float, float]]:
    """Task id -> (when it ended, how long it ran), in seconds."""
    return {t.task_id: (t.started_at + t.duration_ms / 1000, t.duration_ms / 1000) for t in detail.tasks if t.started_at is not None and t.duration_ms is not None}


def _children(detail: StepDetail, ns: str) -> dict[str, list[str]]:
    """The subgraph namespaces directly under ``ns`` entered by this step's tasks, by path."""
    depth = ns.count("|") + 1 if ns else 0
    out: dict[str, list[str]] = {}
    for t in detail.tasks:
        for sub in t.subgraph_ns:
            if sub.count("|") == depth:
                out.setdefault(ns_path(sub), []).append(sub)
    return out


def _differing_keys(a: Any, b: Any) -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        return sorted(str(k) for k in a.keys() | b.keys() if a.get(k, _MISSING) != b.get(k, _MISSING))
    return []


def _trouble(side: _Side, gap: list[tuple[int, int | None, int | None]], index: int) -> str:
    """What went wrong in steps only one run has (a retried call failing, say), for their one line."""
    told = []
    for g in gap:
        k = g[index]
        if k is None:
            continue
        step = side.details[k].step.step
        ends = _task_ends(side.details[k])
        for c in side.calls[k]:
            if _gave_up(c, ends):
                told.append(f"{c.kind} {c.name!r} timed out at step {step}")
            elif c.error_type:
                told.append(f"{c.kind} {c.name!r} failed at step {step} ({c.error_type})")
        told.extend(f"{t.node} failed at step {step} ({t.error_type})" for t in side.details[k].tasks if t.error_type)
    if not told:
        return ""
    return "; " + "; ".join(told[:3]) + (f"; {len(told) - 3} more" if len(told) > 3 else "")


def _went(dests: list[str], detail: StepDetail) -> str:
    if dests:
        return f"went to {', '.join(dests)}"
    if detail.step.pending and detail.step.has_interrupt:
        return "stopped at an interrupt"
    if any(t.error_type for t in detail.tasks):
        return "failed"
    return "went nowhere"


def _nodes_path(steps: list[StepDetail]) -> str:
    shown = [",".join(t.node for t in d.tasks) or "—" for d in steps[:6]]
    return " → ".join(shown) + (" → …" if len(steps) > 6 else "")


def _step_told(detail: StepDetail) -> dict[str, Any]:
    return {"step": detail.step.step, "nodes": [t.node for t in detail.tasks], "route": detail.step.summary}
