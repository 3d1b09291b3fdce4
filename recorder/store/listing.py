"""Listing runs: newest first, filtered by status, name, tag, node, tool, error or text, each filter an index lookup.

Tags, the nodes that ran and the tools called live in ``run_facets`` (kept
by triggers). On SQLite, a facet most runs share is tested run by run while
walking the newest runs instead (``FACET_WALK``): 50 matches come at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from graphtape.recorder import schema as S
from graphtape.recorder.records import RunInfo
from graphtape.recorder.store.column_text import ESCAPE, needs_escape, to_column
from graphtape.recorder.store.read_guard import _damage_is_a_store_error


class RunListing:
    """Lists and counts runs by the filters of ``graphtape runs``."""

    @_damage_is_a_store_error
    def list_runs(
        self,
        *,
        status: str | None = None,
        text: str | None = None,
        limit: int | None = None,
        offset: int = 0,
        name: str | None = None,
        tag: str | None = None,
        tool: str | None = None,
        node: str | None = None,
        error: str | None = None,
    ) -> list[RunInfo]:
        """Runs, newest first, filtered by every criterion given (see ``_run_filters``)."""
        self.mark_dead_runs()
        q = sa.select(*self._RUN_COLS).order_by(*self._NEWEST_FIRST)
        walk = self._facets_to_walk(limit, tag=tag, tool=tool, node=node)
        dead = self._unmarked_dead()
        q = q.where(*self._run_filters(status=status, text=text, name=name, tag=tag, tool=tool, node=node, error=error, walk=walk, dead=dead))
        if limit is not None:
            q = q.limit(limit)
        if offset:
            q = q.offset(offset)
        return self._run_infos(self._read(q))

    @_damage_is_a_store_error
    def count_runs(self, **filters: Any) -> int:
        """How many runs match ``filters`` (the keyword filters of ``list_runs``; none counts all)."""
        self.mark_dead_runs()
        q = sa.select(sa.func.count()).select_from(S.runs).where(*self._run_filters(**filters, dead=self._unmarked_dead()))
        return int(self._read(q)[0][0])

    def _unmarked_dead(self) -> list[str]:
        """Runs found dead that a read-only store still holds as running: shown, and filtered, as killed."""
        return list(self.__dict__.get("_dead_unmarked", {}))

    # A facet shared by more runs than this is checked run by run, newest first (see _facets_to_walk).
    FACET_WALK = 2000

    def _facets_to_walk(self, limit: int | None, **facets: str | None) -> set[str]:
        """Facet filters to test per run while walking runs newest first, instead of collecting their runs.

        Collecting then sorting is fast for a facet few runs share; for one
        most runs share (env:prod, a node every run has), SQLite would sort
        tens of thousands of runs to show 50, while walking the newest runs
        finds 50 matches almost at once. PostgreSQL's planner makes this
        choice itself.
        """
        if not self.is_sqlite or not limit:
            return set()
        f = S.run_facets.c
        walk = set()
        for kind, value in facets.items():
            if value:
                n = self._read(sa.select(sa.func.count()).select_from(S.run_facets).where(f.kind == kind, f.value == value))[0][0]
                if n > self.FACET_WALK:
                    walk.add(kind)
        return walk

    @staticmethod
    def _run_filters(
        *,
        walk: set[str] | frozenset[str] = frozenset(),
        status: str | None = None,
        text: str | None = None,
        name: str | None = None,
        tag: str | None = None,
        tool: str | None = None,
        node: str | None = None,
        error: str | None = None,
        dead: Sequence[str] = (),
    ) -> list[Any]:
        """WHERE clauses for the run filters, each one an index lookup:

        ``status``, ``name`` (exact, or a prefix with a trailing ``*``),
        ``tag``/``tool``/``node`` (exact, through ``run_facets``) and ``error``
        (case-insensitive text in a failed run's error type or message).
        ``text`` searches name, graph, error and tags and reads every run.
        """
        where: list[Any] = []
        r = S.runs.c
        if status and dead and status in ("running", "interrupted"):
            # Runs stored as running but found dead (a read-only store could not mark them) count as interrupted.
            where.append(sa.and_(r.status == "running", r.id.not_in(dead)) if status == "running" else sa.or_(r.status == status, r.id.in_(dead)))
        elif status:
            where.append(r.status == status)
        if name:
            if name.endswith("*"):
                # The range lets both backends walk ix_runs_name; substr keeps the match exact in any
                # collation. Both compare the prefix as the column holds it (``column_text``).
                low, high = name_prefix_range(name[:-1])
                where += [r.name >= _as_stored(low), r.name < _as_stored(high), sa.func.substr(r.name, 1, len(low)) == _as_stored(low)]
            else:
                where.append(r.name == name)
        f = S.run_facets.c
        for kind, value in (("tag", tag), ("tool", tool), ("node", node)):
            if value and kind in walk:
                where.append(sa.exists().where(f.kind == kind, f.value == value, f.run_id == r.id))
            elif value:
                where.append(r.id.in_(sa.select(f.run_id).where(f.kind == kind, f.value == value)))
        if error:
            like = f"%{_escape_like(error)}%"
            # Two small indexes (failed runs, failed calls) unioned: never a walk over every run.
            failed_runs = sa.select(r.id).where(r.error_message.is_not(None), sa.or_(r.error_message.ilike(like, escape="\\"), r.error_type.ilike(like, escape="\\")))
            where.append(r.id.in_(sa.union(failed_runs, _calls_matching(error, names=False))))
        if text:
            like = f"%{_escape_like(text)}%"
            where.append(
                sa.or_(
                    r.name.ilike(like, escape="\\"),
                    r.graph_name.ilike(like, escape="\\"),
                    r.error_message.ilike(like, escape="\\"),
                    r.tags.ilike(like, escape="\\"),
                    # No id holds a character the columns escape: such text (not UTF-8) is no prefix of one.
                    r.id.ilike(f"{_escape_like(text)}%", escape="\\") if may_be_an_id(text) else sa.false(),
                    r.id.in_(_calls_matching(text, names=True)),
                )
            )
        return where


# An abandoned call (its node stopped waiting: a timeout) is found by the words people search for it.
ABANDONED_WORDS = ("abandoned", "timeout", "timed out", "time out", "gave up", "unfinished")


def _calls_matching(text: str, *, names: bool) -> Any:
    """Runs with a call that failed or was abandoned matching ``text`` (and, with ``names``, a call named like it)."""
    c = S.calls.c
    like = f"%{_escape_like(text)}%"
    found = [sa.and_(c.error_type.is_not(None), sa.or_(c.error_type.ilike(like, escape="\\"), c.error_message.ilike(like, escape="\\")))]
    if any(text.lower() in word for word in ABANDONED_WORDS):
        found.append(c.error_type == "Unfinished")
    if names:
        found.append(c.name.ilike(like, escape="\\"))
    return sa.select(c.run_id).where(sa.or_(*found))


def may_be_an_id(text: str) -> bool:
    """Whether ``text`` could be a run id or a prefix of one. Ids are plain text; text with a
    character no text column holds as it is (a lone surrogate: an argument that was not UTF-8,
    NUL) is no id, and is not asked for as one (the driver would fail to send it)."""
    return not needs_escape(text)


def name_prefix_range(prefix: str) -> tuple[str, str]:
    """``(low, high)``: the names stored with ``prefix`` at their start lie in ``[low, high)``, as
    the name column holds them (``column_text``: an escaped character is ``ESCAPE`` and hex
    digits, never two ``ESCAPE`` in a row, so ``low`` and two of them bounds every one)."""
    low = to_column(prefix)
    return low, low + ESCAPE + ESCAPE


def _as_stored(text: str) -> Any:
    """``text`` as it is sent: already what the column holds, not escaped again."""
    return sa.type_coerce(text, sa.Text)


def _escape_like(s: str) -> str:
    return s.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
