"""Reading supersteps: a namespace's steps in order, one step's tasks, routes and events, or all of them at once.

A step can have several rows (interrupted then resumed, or writes that
arrived after it was stored); readers see one step with their contents merged.
The state after a step is read by ``read_state``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import sqlalchemy as sa

from graphtape.recorder import schema as S
from graphtape.recorder.channel_writes import is_stored
from graphtape.recorder.codec import collect_refs
from graphtape.recorder.errors import StepNotFound
from graphtape.recorder.records import FLAG_PENDING, EventInfo, RouteInfo, StepDetail, StepInfo, StepRow, TaskInfo
from graphtape.recorder.store.listing import _escape_like
from graphtape.recorder.store.payloads import expand_payload, merge_events, unpack
from graphtape.recorder.store.previews import clip_trees
from graphtape.recorder.store.read_guard import _damage_is_a_store_error, read_budget
from graphtape.recorder.tracebacks import valid_frames

# Reads made for every step list and detail, built once (see ``_read``).
_c = S.steps.c
_RUN, _NS = sa.bindparam("run_id"), sa.bindparam("ns")
_NAMESPACES = sa.select(_c.ns, sa.func.min(_c.id)).where(_c.run_id == _RUN).group_by(_c.ns).order_by(sa.func.min(_c.id))
_STEP_LIST = (
    sa.select(_c.seq, _c.step, _c.source, _c.checkpoint_id, _c.parent_checkpoint_id, _c.created_at, _c.duration_ms, _c.nodes, _c.summary, _c.flags)
    .where(_c.run_id == _RUN, _c.ns == _NS)
    .order_by(_c.seq)
)
_ONE_STEP_LIST = _STEP_LIST.where(_c.step == sa.bindparam("step"))
# Each bound alone, so that both are one index lookup (SQLite optimizes a lone min or max).
_STEP_RANGE = sa.select(
    sa.select(sa.func.min(_c.step)).where(_c.run_id == _RUN, _c.ns == _NS).scalar_subquery(),
    sa.select(sa.func.max(_c.step)).where(_c.run_id == _RUN, _c.ns == _NS).scalar_subquery(),
)
# A step's completed row if it has one, else its latest.
_STEP_ROW = sa.select(S.steps).where(_c.run_id == _RUN, _c.ns == _NS, _c.step == sa.bindparam("step")).order_by(_c.flags.op("&")(FLAG_PENDING), _c.seq.desc()).limit(1)
_DETAIL_ROWS = sa.select(_c.step, _c.seq, _c.nodes, _c.payload, _c.created_at).where(_c.run_id == _RUN, _c.ns == _NS).order_by(_c.seq)
_DETAIL_ROWS_AFTER = _DETAIL_ROWS.where(_c.step > sa.bindparam("after"))
_STEP_LIST_OF = _STEP_LIST.where(_c.step.in_(sa.bindparam("steps", expanding=True)))
_DETAIL_ROWS_OF = _DETAIL_ROWS.where(_c.step.in_(sa.bindparam("steps", expanding=True)))
_ROWS_FIRST = (
    sa.select(_c.seq, _c.step, _c.source, _c.checkpoint_id, _c.created_at, _c.is_key, _c.flags, _c.payload)
    .where(_c.run_id == _RUN, _c.ns == _NS)
    .order_by(_c.seq)
    .limit(sa.bindparam("page"))
)
_ROWS_AFTER = _ROWS_FIRST.where(_c.seq > sa.bindparam("after"))
_ROW_MARKS = sa.select(_c.seq, _c.step, _c.flags).where(_c.run_id == _RUN, _c.ns == _NS).order_by(_c.seq)


class StepReads:
    """Reads the rows of supersteps and merges them into ``StepInfo`` and ``StepDetail``."""

    _STEP_COLS = [c for c in S.steps.c if c.name not in ("payload", "id", "is_key")]

    def _step_info(self, r: Any) -> StepInfo:
        return StepInfo(
            run_id=r.run_id,
            ns=r.ns,
            seq=r.seq,
            step=r.step,
            source=r.source,
            checkpoint_id=r.checkpoint_id,
            parent_checkpoint_id=r.parent_checkpoint_id,
            created_at=r.created_at,
            duration_ms=r.duration_ms,
            nodes=[n for n in r.nodes.split(",") if n],
            summary=r.summary or "",
            flags=r.flags or 0,
        )

    @_damage_is_a_store_error
    def namespaces(self, run_id: str) -> list[str]:
        """Namespaces with steps in this run: "" is the root graph."""
        return [r[0] for r in self._read(_NAMESPACES, {"run_id": run_id})]

    @_damage_is_a_store_error
    def list_steps(self, run_id: str, ns: str = "") -> list[StepInfo]:
        """Supersteps of a namespace in order, one entry per step (cheap: no payloads).

        A step can have several rows (interrupted then resumed, or writes that
        arrived late); they are shown as one step carrying all their flags, at
        the place of its completed row, as ``step_detail`` merges their contents.
        """
        return self._merged_steps(run_id, ns, self._read(_STEP_LIST, {"run_id": run_id, "ns": ns}))

    @_damage_is_a_store_error
    def step_info(self, run_id: str, step: int, ns: str = "") -> StepInfo:
        """One step as ``list_steps`` lists it (its rows merged), reading that step's rows only:
        showing one step of a long run costs that step, not the run."""
        found = self._merged_steps(run_id, ns, self._read(_ONE_STEP_LIST, {"run_id": run_id, "ns": ns, "step": step}))
        if not found:
            where = f" in namespace {ns!r}" if ns else ""
            raise StepNotFound(f"run {run_id} has no step {step}{where}")
        return found[0]

    @_damage_is_a_store_error
    def step_range(self, run_id: str, ns: str = "") -> tuple[int, int] | None:
        """``(first, last)`` step number of a namespace, or None without steps (two index lookups)."""
        first, last = self._read(_STEP_RANGE, {"run_id": run_id, "ns": ns})[0]
        return None if first is None else (int(first), int(last))

    def _merged_steps(self, run_id: str, ns: str, rows: Sequence[Any]) -> list[StepInfo]:
        """``_STEP_LIST`` rows, a step's rows merged into one ``StepInfo`` (see ``list_steps``)."""
        merged: dict[int, StepInfo] = {}
        node_lists: dict[str, list[str]] = {}  # a run repeats a few node sets thousands of times
        for seq, step, source, cid, parent_cid, created_at, duration_ms, nodes, summary, flags in rows:
            names = node_lists.get(nodes)
            if names is None:
                names = node_lists[nodes] = [n for n in nodes.split(",") if n]
            info = StepInfo(run_id, ns, seq, step, source, cid, parent_cid, created_at, duration_ms, list(names), summary or "", flags or 0)
            prev = merged.pop(step, None)
            if prev is not None:
                flags = prev.flags | info.flags
                if not (prev.pending and info.pending):
                    flags &= ~FLAG_PENDING
                keep = info if prev.pending and not info.pending else prev
                summary = keep.summary or (info.summary if keep is prev else prev.summary)
                info = dataclasses.replace(keep, flags=flags, summary=summary, nodes=keep.nodes or prev.nodes or info.nodes)
                if keep is prev:
                    merged[info.step] = info  # the completed row keeps its place
                    continue
            merged[info.step] = info
        return sorted(merged.values(), key=lambda s: s.seq)

    @_damage_is_a_store_error
    def steps_writing(self, run_id: str, key: str, ns: str = "") -> list[int]:
        """Step numbers whose tasks wrote to state key ``key`` (for the reverse watch)."""
        like = "%," + _escape_like(key) + ",%"
        rows = self._read(
            sa.select(S.steps.c.step)
            .where(S.steps.c.run_id == run_id, S.steps.c.ns == ns, S.steps.c.writes.like(like, escape="\\"))
            .order_by(S.steps.c.seq)
        )
        return [r.step for r in rows]

    def max_seq(self, run_id: str) -> int:
        """The last row number of a run (a resumed run continues after it)."""
        rows = self._read(sa.select(sa.func.max(S.steps.c.seq)).where(S.steps.c.run_id == run_id))
        return int(rows[0][0] or 0)

    @_damage_is_a_store_error
    def checkpoint_steps(self, run_id: str) -> dict[str, int]:
        """Checkpoint id -> step number for a run (to continue it on resume)."""
        rows = self._read(sa.select(S.steps.c.checkpoint_id, S.steps.c.step).where(S.steps.c.run_id == run_id, S.steps.c.checkpoint_id.is_not(None)))
        return {r.checkpoint_id: r.step for r in rows}

    def _step_row(self, run_id: str, step: int, ns: str) -> Any:
        """The row that stands for a step: its completed row if it has one, else its latest."""
        rows = self._read(_STEP_ROW, {"run_id": run_id, "ns": ns, "step": step})
        if not rows:
            where = f" in namespace {ns!r}" if ns else ""
            # The range, as replay's --from gives it: the step asked for is usually past the end.
            low, high = self._read(sa.select(sa.func.min(S.steps.c.step), sa.func.max(S.steps.c.step)).where(S.steps.c.run_id == run_id, S.steps.c.ns == ns))[0]
            steps = f"steps {low}..{high}" if low is not None else "no steps recorded"
            raise StepNotFound(f"run {run_id} has no step {step}{where} ({steps})")
        return rows[0]

    @_damage_is_a_store_error
    def step_detail(self, run_id: str, step: int, ns: str = "", *, typed: bool = False) -> StepDetail:
        """Tasks, routes, events and next nodes of one superstep.

        A step that was interrupted and later resumed has two rows (the pending
        one and the completed one); they are merged so the step tells its whole
        story: the interrupt, the resume value, and what the node then did.
        """
        row = self._step_row(run_id, step, ns)
        rows = self._read(
            sa.select(S.steps.c.seq, S.steps.c.payload, S.steps.c.created_at)
            .where(S.steps.c.run_id == run_id, S.steps.c.ns == ns, S.steps.c.step == step)
            .order_by(S.steps.c.seq)
        )
        following = self._read(
            sa.select(S.steps.c.step)
            .where(S.steps.c.run_id == run_id, S.steps.c.ns == ns, S.steps.c.seq > row.seq, S.steps.c.step > row.step)
            .order_by(S.steps.c.seq)
            .limit(1)
        )
        nxt: list[str] = []
        if following:
            # Every row of the next step: a task's writes can arrive after its step was stored.
            for r in self._read(
                sa.select(S.steps.c.nodes).where(S.steps.c.run_id == run_id, S.steps.c.ns == ns, S.steps.c.step == following[0].step).order_by(S.steps.c.seq)
            ):
                nxt.extend(n for n in r.nodes.split(",") if n)
        payloads = [expand_payload(unpack(r.payload), r.created_at) for r in rows]
        return self._detail(self._step_info(row), payloads, list(dict.fromkeys(nxt)), typed)

    def _detail(
        self, info: StepInfo, payloads: Sequence[dict], nxt: list[str], typed: bool = False, writes: bool = True, encoded_routes: bool = False, decoded: bool = False
    ) -> StepDetail:
        """Merge the expanded payloads of one step's rows (in seq order) into its StepDetail
        (``decoded``: their tasks' and events' values are decoded already)."""
        dec = _as_stored if decoded else self._typed_decoder if typed else self._plain_decoder
        route_dec = _as_stored if encoded_routes else dec
        tasks_by_id: dict[str, TaskInfo] = {}
        routes_by_task: dict[Any, list[dict]] = {}
        raw_events: list[dict] = []
        for payload in payloads:
            for t in payload.get("t", []):
                tasks_by_id[t["id"]] = TaskInfo(
                    task_id=t["id"],
                    node=t["node"],
                    path=t.get("path", ""),
                    writes=dec(t.get("w", {})) if writes else {},
                    error_type=t.get("et"),
                    error_message=t.get("em"),
                    interrupts=dec(t.get("i", [])),
                    started_at=t.get("t0"),
                    duration_ms=t.get("ms"),
                    cached=bool(t.get("c")),
                    cache_key=(ck := cache_key_of(t))[0],
                    cache_warm=ck[1],
                    subgraph_ns=t.get("sub", []),
                    traceback=valid_frames(t.get("tb")),
                    attempts=[a for a in t.get("att", []) if isinstance(a, dict)] if isinstance(t.get("att"), list) else [],
                    carried=_carried(dec(t["cw"])) if writes and "cw" in t else None,
                )
            by_task: dict[Any, list[dict]] = {}
            for d in payload.get("r", []):
                by_task.setdefault(d.get("task"), []).append(d)
            routes_by_task.update(by_task)  # a task's routes come from its latest row
            raw_events = merge_events(raw_events, payload.get("e", []))
        events = [EventInfo(kind=e["kind"], value=dec(e.get("v")), task_id=e.get("task"), node=e.get("node")) for e in raw_events]
        routes = [
            RouteInfo(
                source=d["src"],
                kind=d["kind"],
                destinations=d.get("dest", []),
                router=d.get("router"),
                returned=route_dec(d.get("ret")),
                sends=route_dec(d.get("sends", [])),
                task_id=d.get("task"),
            )
            for task_routes in routes_by_task.values()
            for d in task_routes
        ]
        return StepDetail(step=info, tasks=list(tasks_by_id.values()), routes=routes, events=events, next=nxt)

    @_damage_is_a_store_error
    def step_details(
        self, run_id: str, ns: str = "", *, after: int | None = None, typed: bool = False, writes: bool = True, encoded_routes: bool = False
    ) -> list[StepDetail]:
        """Every step of a namespace in order, in one read (replay compares whole runs).

        ``typed=True`` rebuilds written values as live objects (messages...), for
        resuming; ``writes=False`` leaves the tasks' updates out (not decoded);
        ``encoded_routes=True`` leaves routes' returned values and Send packets as
        stored, their blobs unread (a ``Send`` carries the whole state: a comparer
        reads and decodes only what differs).
        """
        infos = [i for i in self.list_steps(run_id, ns) if after is None or i.step > after]
        by_step, nodes_by_step = _grouped(self._read(_DETAIL_ROWS if after is None else _DETAIL_ROWS_AFTER, {"run_id": run_id, "ns": ns, "after": after}))
        refs: set[str] = set()
        for payload in (p for payloads in by_step.values() for p in payloads):
            collect_refs([payload.get("t") if writes else None, None if encoded_routes else payload.get("r"), payload.get("e")], refs)
        self.blobs(refs)  # one read for the whole namespace; the steps below decode from the cache
        return [self._detail(info, by_step.get(info.step, []), _next_nodes(infos, i, nodes_by_step), typed, writes, encoded_routes) for i, info in enumerate(infos)]

    @_damage_is_a_store_error
    def step_previews(self, run_id: str, ns: str = "") -> list[StepDetail]:
        """Every step of a namespace as a listing shows it: ``step_details`` with each task's
        update, interrupts and each event's value cut to a preview (``previews``), and routes
        as stored (``encoded_routes``).

        The cut is made before decoding, so only the blobs a preview keeps are read: a run
        that rewrote a 3 MB text at each of 250 steps lists in the kilobytes it shows, not in
        the 750 MB its updates hold (``step_detail`` reads one step's in full).
        """
        return list(self.iter_step_previews(run_id, ns))

    @_damage_is_a_store_error
    def iter_step_previews(self, run_id: str, ns: str = "", *, page: int = 400) -> Iterator[StepDetail]:
        """``step_previews`` read ``page`` steps at a time: ``show --json`` of a run of 10,000
        steps writes each page as it is read, holding the step numbers and a page, not the run.

        Each page is one read of its steps' rows and a few of blobs, and a read of its own budget."""
        order = listed_order(self.step_row_marks(run_id, ns))
        for lo in range(0, len(order), page):
            hi = min(lo + page, len(order))
            with read_budget():
                details = self._previews(run_id, ns, order[lo:hi], order[hi] if hi < len(order) else None)
            yield from details

    def _previews(self, run_id: str, ns: str, steps: list[int], following: int | None) -> list[StepDetail]:
        """Steps ``steps`` (listed in this order) as previews; ``following`` is the step listed after them (its nodes are their last's next)."""
        params = {"run_id": run_id, "ns": ns, "steps": steps if following is None else [*steps, following]}
        infos = self._merged_steps(run_id, ns, self._read(_STEP_LIST_OF, params))
        by_step, nodes_by_step = _grouped(self._read(_DETAIL_ROWS_OF, params))
        infos = [i for i in infos if i.step != following]  # listed in the order of the whole: a run's page is a slice of it
        slots: list[tuple[dict, str]] = []  # every value shown, as (holder, key): cut together, a level of blobs per read
        for info in infos:
            for payload in by_step.get(info.step, ()):
                slots += [(t, k) for t in payload.get("t", []) for k in ("w", "i", "cw") if k in t]
                slots += [(e, "v") for e in payload.get("e", []) if "v" in e]
        # Decoded a thousand at a time: a call per value cost a run of 10,000 steps seconds of
        # set-up, and one call for all would meet the decoder's bound on values per call.
        cut = clip_trees([h[k] for h, k in slots], self._stored_blobs)
        for i in range(0, len(cut), 1000):
            for (holder, key), value in zip(slots[i : i + 1000], self.decode(cut[i : i + 1000])):
                holder[key] = value
        nexts = [i.step for i in infos[1:]] + [following]
        return [
            self._detail(info, by_step.get(info.step, []), list(nodes_by_step.get(nxt, ())) if nxt is not None else [], encoded_routes=True, decoded=True)
            for info, nxt in zip(infos, nexts)
        ]

    @_damage_is_a_store_error
    def step_rows(self, run_id: str, ns: str = "") -> list[StepRow]:
        """Every stored row of a namespace's supersteps in order: payloads unpacked, values still encoded.

        For readers that copy a recording rather than show it (fixture export):
        rows are not merged and blob references stay unresolved.
        """
        return list(self.iter_step_rows(run_id, ns))

    @_damage_is_a_store_error
    def iter_step_rows(self, run_id: str, ns: str = "", *, page: int = 256) -> Iterator[StepRow]:
        """``step_rows`` read ``page`` rows at a time: a reader that copies a long run row by row
        (fixture export) holds a page of it, not the run (10,000 rows unpacked: about 100 MB)."""
        after = None
        while True:
            params = {"run_id": run_id, "ns": ns, "page": page}
            rows = self._read(_ROWS_FIRST, params) if after is None else self._read(_ROWS_AFTER, {**params, "after": after})
            for r in rows:
                yield StepRow(r.seq, r.step, r.source, r.checkpoint_id, r.created_at, bool(r.is_key), r.flags or 0, expand_payload(unpack(r.payload), r.created_at))
            if len(rows) < page:
                return
            after = rows[-1].seq

    @_damage_is_a_store_error
    def step_row_marks(self, run_id: str, ns: str = "") -> list[tuple[int, int, bool]]:
        """``(seq, step, pending)`` of every stored row of a namespace in order, payloads unread:
        where each step's rows are, so a reader of ``iter_step_rows`` knows when a step is whole."""
        return [_mark(r.seq, r.step, r.flags or 0) for r in self._read(_ROW_MARKS, {"run_id": run_id, "ns": ns})]


def _as_stored(tree: Any) -> Any:
    return tree


def _carried(value: Any) -> list[Any] | None:
    """A task's carried writes as stored, or None when they are not a list of writes (damaged)."""
    return value if is_stored(value) else None


def cache_key_of(t: dict) -> tuple[str | None, bool]:
    """A stored task's cache ``(key, warm)`` (kept as ``[key, warm]``), or ``(None, True)``."""
    ck = t.get("ck")
    if isinstance(ck, list) and len(ck) == 2 and isinstance(ck[0], str) and isinstance(ck[1], bool):
        return ck[0], ck[1]
    return None, True


def _grouped(rows: Iterable[Any]) -> tuple[dict[int, list[dict]], dict[int, dict[str, None]]]:
    """Detail rows (in seq order) as each step's expanded payloads, and each step's nodes from
    every row of it (as ``step_detail``'s next reads them)."""
    by_step: dict[int, list[dict]] = {}
    nodes_by_step: dict[int, dict[str, None]] = {}
    for r in rows:
        by_step.setdefault(r.step, []).append(expand_payload(unpack(r.payload), r.created_at))
        nodes_by_step.setdefault(r.step, {}).update(dict.fromkeys(n for n in (r.nodes or "").split(",") if n))
    return by_step, nodes_by_step


def _mark(seq: Any, step: Any, flags: Any) -> tuple[int, int, bool]:
    """A row's ``(seq, step, pending)``, its columns checked as ``StepInfo`` checks them (a damaged store)."""
    for name, value in (("seq", seq), ("step", step), ("flags", flags)):
        if type(value) is not int:
            raise ValueError(f"StepInfo.{name} holds a {type(value).__name__}")
    return seq, step, bool(flags & FLAG_PENDING)


def listed_order(marks: Iterable[tuple[int, int, bool]]) -> list[int]:
    """Step numbers in the order ``list_steps`` lists them, from ``step_row_marks``: a step is
    listed at its first row, or at its first completed row once it has one."""
    place: dict[int, int] = {}
    completed: set[int] = set()
    for seq, step, pending in marks:
        if step not in place or (not pending and step not in completed):
            place[step] = seq
        if not pending:
            completed.add(step)
    return sorted(place, key=place.__getitem__)


def _next_nodes(infos: Sequence[StepInfo], i: int, nodes_by_step: dict[int, dict[str, None]]) -> list[str]:
    """The nodes the step after ``infos[i]`` ran (none after the last)."""
    return list(nodes_by_step.get(infos[i + 1].step, ())) if i + 1 < len(infos) else []
