"""Garbage collection: delete runs that ended before an age, then the blobs no remaining run reaches.

Blobs are shared between runs, so what stays is computed from every
remaining run's inputs, output, config, steps and calls (and the blobs
inside blobs). Deleting holds writers off, and what was recorded meanwhile
is scanned again under that lock, so no row is left pointing at nothing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError

from graphtape.recorder import schema as S
from graphtape.recorder.codec import collect_refs
from graphtape.recorder.errors import StoreError
from graphtape.recorder.store.connection import _one_line
from graphtape.recorder.store.payloads import _uj, unpack


class GarbageCollection:
    """Deletes old runs and unreachable blobs."""

    def gc(
        self,
        older_than_s: float,
        *,
        keep_failed: bool = False,
        dry_run: bool = False,
        now: float | None = None,
        progress: Progress | None = None,
    ) -> GcReport:
        """Delete runs that ended more than ``older_than_s`` seconds ago, then unreferenced blobs.

        A run still recording (status running with a live owner) is never
        touched, nor is the parent of a fork that stays. Blobs are shared
        between runs, so a blob goes only when no remaining run's inputs,
        output, config, steps or calls reach it (directly or through another
        blob). ``dry_run`` reports the same figures and deletes nothing.
        """
        progress = progress or _no_progress
        now = time.time() if now is None else now
        self.mark_dead_runs()
        r = S.runs.c
        last_seen = sa.func.coalesce(r.ended_at, r.heartbeat_at, r.started_at)
        q = sa.select(r.id).where(r.status != "running", last_seen < now - older_than_s)
        if keep_failed:
            q = q.where(r.status != "error")
        doomed = {row.id for row in self._read(q)}
        running = int(self._read(sa.select(sa.func.count()).select_from(S.runs).where(r.status == "running"))[0][0])
        # A fork reads its parent's recording: parents of remaining runs stay (transitively).
        # Walked up from each kept fork once: a chain of 100,000 forks listed in the wrong order
        # made passing over the list until nothing changed take one pass per link.
        parent_of = {row.id: row.parent_run_id for row in self._read(sa.select(r.id, r.parent_run_id).where(r.parent_run_id.is_not(None)))}
        kept_parents: set[str] = set()
        todo = [rid for rid in parent_of if rid not in doomed]
        while todo:
            parent = parent_of.get(todo.pop())
            if parent is not None and parent in doomed:
                doomed.discard(parent)
                kept_parents.add(parent)
                todo.append(parent)
        ids = sorted(doomed)
        steps = calls = 0
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            steps += int(self._read(sa.select(sa.func.count()).select_from(S.steps).where(S.steps.c.run_id.in_(chunk)))[0][0])
            calls += int(self._read(sa.select(sa.func.count()).select_from(S.calls).where(S.calls.c.run_id.in_(chunk)))[0][0])
        if not dry_run:
            for i in range(0, len(ids), 500):
                chunk = ids[i : i + 500]
                try:
                    with self.engine.begin() as conn:
                        conn.execute(sa.delete(S.steps).where(S.steps.c.run_id.in_(chunk)))
                        conn.execute(sa.delete(S.calls).where(S.calls.c.run_id.in_(chunk)))
                        conn.execute(sa.delete(S.runs).where(S.runs.c.id.in_(chunk)))
                except SQLAlchemyError as exc:
                    raise StoreError(f"cannot delete runs from {self._safe_url()}: {_one_line(exc)}") from None
                progress("deleting runs", min(i + 500, len(ids)), len(ids))
        orphan_steps, orphan_calls = self._orphans(dry_run)
        steps += orphan_steps
        calls += orphan_calls
        unused, unused_bytes = self._unreferenced_blobs(set() if not dry_run else doomed, progress)
        if not dry_run and unused:
            unused, unused_bytes = self._delete_blobs(unused, now, progress)
        return GcReport(
            runs=len(ids),
            steps=steps,
            calls=calls,
            blobs=len(unused),
            blob_bytes=unused_bytes,
            kept_running=running,
            kept_fork_parents=len(kept_parents),
            dry_run=dry_run,
            run_ids=ids,
            orphans=orphan_steps + orphan_calls,
        )

    def _orphans(self, dry_run: bool) -> tuple[int, int]:
        """Count (and unless ``dry_run`` delete) steps and calls whose run row is missing.

        The recorder writes a run's row before or with its steps, so none should
        exist; a store written by an older graphtape through a fault may hold some.
        """
        known = sa.select(S.runs.c.id)
        st, ca, fa = S.steps.c, S.calls.c, S.run_facets.c
        steps = int(self._read(sa.select(sa.func.count()).select_from(S.steps).where(st.run_id.not_in(known)))[0][0])
        calls = int(self._read(sa.select(sa.func.count()).select_from(S.calls).where(ca.run_id.not_in(known)))[0][0])
        if not dry_run and (steps or calls):
            try:
                with self.engine.begin() as conn:
                    conn.execute(sa.delete(S.steps).where(st.run_id.not_in(known)))
                    conn.execute(sa.delete(S.calls).where(ca.run_id.not_in(known)))
                    conn.execute(sa.delete(S.run_facets).where(fa.run_id.not_in(known)))
            except SQLAlchemyError as exc:
                raise StoreError(f"cannot delete orphan rows from {self._safe_url()}: {_one_line(exc)}") from None
        return steps, calls

    def _refs_of_runs(self, conn: Any, where_runs: Any | None, skip: set[str], progress: Progress, label: str) -> set[str]:
        """Blob hashes referenced by runs (all, or those matching ``where_runs``), skipping run ids in ``skip``."""
        refs: set[str] = set()
        r, st, ca = S.runs.c, S.steps.c, S.calls.c
        run_q = sa.select(r.id, r.inputs, r.output, r.config, r.fork_edit)
        if where_runs is not None:
            run_q = run_q.where(where_runs)
        run_ids = []
        for row in conn.execute(run_q):
            if row.id in skip:
                continue
            run_ids.append(row.id)
            for text in (row.inputs, row.output, row.config, row.fork_edit):
                if text and '"$b"' in text:
                    collect_refs(_uj(text), refs)
        scoped = where_runs is not None
        total = int(conn.execute(sa.select(sa.func.count()).select_from(S.steps)).scalar_one()) if not scoped else None
        done = 0
        chunks = [run_ids[i : i + 500] for i in range(0, len(run_ids), 500)] if scoped else [None]
        for chunk in chunks:
            sq = sa.select(st.run_id, st.payload)
            cq = sa.select(ca.run_id, ca.inputs, ca.output)
            if chunk is not None:
                sq, cq = sq.where(st.run_id.in_(chunk)), cq.where(ca.run_id.in_(chunk))
            for row in conn.execute(sq.execution_options(yield_per=2000)):
                done += 1
                if row.run_id not in skip:
                    collect_refs(unpack(row.payload), refs)
                if total and done % 5000 == 0:
                    progress(label, done, total)
            for row in conn.execute(cq.execution_options(yield_per=2000)):
                if row.run_id in skip:
                    continue
                for text in (row.inputs, row.output):
                    if text and '"$b"' in text:
                        collect_refs(_uj(text), refs)
        if total:
            progress(label, total, total)
        return refs

    def _blob_closure(self, conn: Any, refs: set[str]) -> set[str]:
        """``refs`` and every blob reachable from them (a message blob holds its long strings as blobs).

        Followed a level at a time by hash while that takes few statements; past
        ``CLOSURE_LOOKUPS`` of them (a chain of blobs thousands deep, or references to
        millions of blobs: each level cost a statement per 500 hashes) the rest is
        followed through one pass over the blobs table.
        """
        seen = set(refs)
        frontier = list(refs)
        lookups = 0
        while frontier:
            if lookups + -(-len(frontier) // 500) > CLOSURE_LOOKUPS:
                return self._closure_by_scan(conn, seen, frontier)
            nxt: list[str] = []
            for i in range(0, len(frontier), 500):
                chunk = frontier[i : i + 500]
                lookups += 1
                for row in conn.execute(sa.select(S.blobs.c.zipped, S.blobs.c.data).where(S.blobs.c.hash.in_(chunk))):
                    for h in _blob_refs(row.zipped, row.data):
                        if h not in seen:
                            seen.add(h)
                            nxt.append(h)
            frontier = nxt
        return seen

    def _closure_by_scan(self, conn: Any, seen: set[str], frontier: list[str]) -> set[str]:
        """``seen`` and every blob reachable from ``frontier``, read in one pass over the blobs
        table: the references each blob holds, then followed in memory."""
        holds: dict[str, set[str]] = {}
        for row in conn.execute(sa.select(S.blobs.c.hash, S.blobs.c.zipped, S.blobs.c.data).execution_options(yield_per=2000)):
            found = _blob_refs(row.zipped, row.data)
            if found:
                holds[row.hash] = found
        while frontier:
            for h in holds.get(frontier.pop(), ()):
                if h not in seen:
                    seen.add(h)
                    frontier.append(h)
        return seen

    def _unreferenced_blobs(self, skip: set[str], progress: Progress) -> tuple[set[str], int]:
        """Blobs no run outside ``skip`` reaches, and their stored size."""
        try:
            with self.engine.connect() as conn:
                live = self._blob_closure(conn, self._refs_of_runs(conn, None, skip, progress, "scanning references"))
                unused: set[str] = set()
                size = 0
                for row in conn.execute(sa.select(S.blobs.c.hash, sa.func.length(S.blobs.c.data)).execution_options(yield_per=5000)):
                    if row[0] not in live:
                        unused.add(row[0])
                        size += int(row[1] or 0)
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot read {self._safe_url()}: {_one_line(exc)}") from None
        return unused, size

    def _delete_blobs(self, unused: set[str], started: float, progress: Progress) -> tuple[set[str], int]:
        """Delete ``unused`` blobs, sparing any a run written meanwhile has come to reference.

        Writers are held off while this runs (SQLite's write lock; a lock on
        the blobs table in PostgreSQL), and the runs that were recording or
        have ended since the scan began are scanned again under that lock.
        """
        r = S.runs.c
        recent = sa.or_(r.status == "running", r.started_at >= started - 60, sa.func.coalesce(r.ended_at, r.heartbeat_at, r.started_at) >= started - 60)
        try:
            with self.engine.begin() as conn:
                if self.is_sqlite:
                    conn.execute(sa.delete(S.blobs).where(sa.false()))  # takes the write lock now
                else:
                    conn.exec_driver_sql("LOCK TABLE blobs IN SHARE ROW EXCLUSIVE MODE")
                unused = unused - self._blob_closure(conn, self._refs_of_runs(conn, recent, set(), _no_progress, ""))
                size = 0
                doomed = sorted(unused)
                for i in range(0, len(doomed), 500):
                    chunk = doomed[i : i + 500]
                    size += int(conn.execute(sa.select(sa.func.coalesce(sa.func.sum(sa.func.length(S.blobs.c.data)), 0)).where(S.blobs.c.hash.in_(chunk))).scalar_one())
                    conn.execute(sa.delete(S.blobs).where(S.blobs.c.hash.in_(chunk)))
                    progress("deleting blobs", min(i + 500, len(doomed)), len(doomed))
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot delete blobs from {self._safe_url()}: {_one_line(exc)}") from None
        with self._blob_lock:
            for h in unused:
                self._blob_cache.pop(h, None)
        self._known_blobs.difference_update(unused)
        return unused, size


CLOSURE_LOOKUPS = 64  # statements that follow blob references by hash before one pass over the table does the rest


def _blob_refs(zipped: Any, data: Any) -> set[str]:
    """The blobs a stored blob refers to (none for most: a plain blob without ``"$b"`` is not parsed)."""
    data = bytes(data)
    if not zipped and b'"$b"' not in data:
        return set()
    return collect_refs(unpack(b"z" + data if zipped else b"j" + data))


class Progress(Protocol):
    """Told how far a long operation has come: ``(phase, done, total or None)``."""

    def __call__(self, phase: str, done: int, total: int | None) -> None: ...


def _no_progress(_phase: str, _done: int, _total: int | None) -> None:
    pass


@dataclass(frozen=True, slots=True)
class GcReport:
    """What ``SqlStore.gc`` deleted (or, with ``dry_run``, would delete)."""

    runs: int
    steps: int
    calls: int
    blobs: int
    blob_bytes: int
    kept_running: int
    kept_fork_parents: int
    dry_run: bool
    run_ids: list[str] = field(default_factory=list)
    orphans: int = 0  # steps and calls (counted in ``steps`` and ``calls`` too) whose run row was missing
