"""``list_runs`` of a SQLite store through the standard library's ``sqlite3``, opened read-only.

``graphtape runs`` is a whole process: importing SQLAlchemy costs it more than
the listing itself. For a plain SQLite file this module answers ``list_runs``
with the same SQL (the same filters, order and rows as ``listing``) on a
``mode=ro`` connection, so the file is never written. Anything it does not
handle the way the full store would is handed to the full store instead:
another backend, a URL with options, a missing or unreadable file, another
schema version (whose error or migration hint the full store gives), and a
store with a run still marked running (the full store decides whether its
process died and marks it, which is a write).
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson

from graphtape.recorder.records import RunInfo
from graphtape.recorder.store.column_text import ESCAPE, from_column, needs_escape, to_column
from graphtape.recorder.store.sqlite_files import TEXT_FACTORY, read_only_uri, sqlite_cannot_write
from graphtape.recorder.store.sqlite_shape import shape_problem

# The schemas this reader understands; a test holds them equal to ``schema.SCHEMA_VERSION`` and
# ``schema.UPGRADES_ON_OPEN`` (importing the schema would import SQLAlchemy, which this module avoids).
SCHEMA_VERSION = 6
READS_AS_IS = frozenset({4, 5})
DEFAULT_DB = "graphtape.db"  # as ``connection.DEFAULT_DB`` / ``ENV_DB`` (the test holds them equal)
ENV_DB = "GRAPHTAPE_DB"
FACET_WALK = 2000  # as ``RunListing.FACET_WALK``

# The columns ``RunListing`` selects, in its order.
_COLS = (
    "id, name, graph_name, graph_ref, thread_id, status, status_reason, error_type, error_message, started_at, "
    "ended_at, heartbeat_at, tags, parent_run_id, fork_step, step_count, redactions, faults, owner_host, owner_pid, durability"
)
_ABANDONED_WORDS = ("abandoned", "timeout", "timed out", "time out", "gave up", "unfinished")  # as listing.ABANDONED_WORDS


def sqlite_file(db: str | os.PathLike | None) -> Path | None:
    """The SQLite file ``db`` names (as ``resolve_url`` reads it), or None for anything else."""
    if db is None:
        db = os.environ.get(ENV_DB) or DEFAULT_DB
    db = os.fspath(db)
    if "://" not in db:
        return Path(db).expanduser().resolve()
    if db.startswith("sqlite:///") and "?" not in db:
        path = db[len("sqlite:///") :]
        return Path(path) if path and path != ":memory:" and not path.startswith("file:") else None
    return None


class ListingStore:
    """The store as ``graphtape runs`` uses it: ``list_runs``, ``url`` and ``close``.

    ``list_runs`` reads a SQLite file directly where it can; every other call,
    and every listing it cannot answer itself, goes to the full store (opened
    on first need, SQLAlchemy and all).
    """

    def __init__(self, db: str | os.PathLike | None) -> None:
        self._db = db
        self._path = sqlite_file(db)
        self._full: Any = None
        try:
            is_file = self._path is not None and self._path.is_file()
        except OSError:  # a name too long to look up: the full store says so in one line
            is_file = False
        if not is_file:
            self._open_full()  # its errors (a missing file, a bad URL) are the ones users know

    @property
    def url(self) -> str:
        return self._full.url if self._full is not None else "sqlite:///" + str(self._path)

    def _open_full(self) -> Any:
        if self._full is None:
            from graphtape.recorder.store.sql_store import open_store

            self._full = open_store(self._db, create=False)
        return self._full

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._open_full(), name)

    def close(self) -> None:
        if self._full is not None:
            self._full.close()

    def list_runs(self, **filters: Any) -> list[RunInfo]:
        """``RunStore.list_runs``: the same runs, in the same order, with the same fields."""
        if self._full is None:
            rows = _list_read_only(self._path, **filters)
            if rows is not None:
                return rows
        return self._open_full().list_runs(**filters)


def open_listing(db: str | os.PathLike | None = None) -> ListingStore:
    """The store for listing runs: SQLite files read without SQLAlchemy (see the module docstring)."""
    return ListingStore(db)


def _list_read_only(path: Path, **filters: Any) -> list[RunInfo] | None:
    """The listing, or None when the full store must answer (see the module docstring)."""
    try:
        # A store this process may not write is read the way the full store reads it (nothing
        # created beside it); otherwise ``mode=ro`` reads alongside any writer.
        uri = read_only_uri(path) if sqlite_cannot_write(path) else f"file:{quote(str(path))}?mode=ro"
        conn = sqlite3.connect(uri, uri=True, timeout=10)
        conn.text_factory = TEXT_FACTORY  # (text that is not UTF-8 reads with U+FFFD, as the full store reads it)
    except sqlite3.Error:
        return None
    try:
        if shape_problem(lambda sql: conn.execute(sql).fetchall()) is not None:
            return None  # the full store refuses it in one line
        version = conn.execute("SELECT value FROM graphtape_meta WHERE key = 'schema_version'").fetchone()
        if version is None or version[0] not in {str(v) for v in (SCHEMA_VERSION, *READS_AS_IS)}:
            return None
        if conn.execute("SELECT 1 FROM runs WHERE status = 'running' LIMIT 1").fetchone() is not None:
            return None  # maybe a dead run to mark: the full store's job
        sql, params = _query(conn, **filters)
        rows = conn.execute(sql, params).fetchall()
        counts = _step_counts(conn, [r[0] for r in rows])
        return [_run_info(r, counts.get(r[0], 0)) for r in rows]
    except (sqlite3.Error, orjson.JSONDecodeError, ValueError, TypeError):
        return None
    finally:
        conn.close()


def _query(
    conn: sqlite3.Connection,
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
) -> tuple[str, list[Any]]:
    """The SQL ``RunListing.list_runs`` runs on SQLite for these filters, with its parameters."""
    where: list[str] = []
    params: list[Any] = []
    if status:
        where.append("runs.status = ?")
        params.append(status)
    # Text columns hold any string through an escape (store.column_text): what is compared with
    # them is escaped as AnyText escapes it.
    if name:
        if name.endswith("*"):
            low = to_column(name[:-1])  # as listing.name_prefix_range
            where.append("runs.name >= ? AND runs.name < ? AND substr(runs.name, 1, ?) = ?")
            params += [low, low + ESCAPE + ESCAPE, len(low), low]
        else:
            where.append("runs.name = ?")
            params.append(to_column(name))
    for kind, value in (("tag", tag), ("tool", tool), ("node", node)):
        if not value:
            continue
        value = to_column(value)
        shared = limit and conn.execute("SELECT count(*) FROM run_facets WHERE kind = ? AND value = ?", (kind, value)).fetchone()[0] > FACET_WALK
        if shared:
            where.append("EXISTS (SELECT * FROM run_facets WHERE run_facets.kind = ? AND run_facets.value = ? AND run_facets.run_id = runs.id)")
        else:
            where.append("runs.id IN (SELECT run_facets.run_id FROM run_facets WHERE run_facets.kind = ? AND run_facets.value = ?)")
        params += [kind, value]
    if error:
        like = to_column(f"%{_escape_like(error)}%")
        calls, calls_params = _calls_matching(error, names=False)
        where.append(
            "runs.id IN (SELECT runs.id FROM runs WHERE runs.error_message IS NOT NULL AND "
            f"({_ilike('runs.error_message')} OR {_ilike('runs.error_type')}) UNION {calls})"
        )
        params += [like, like, *calls_params]
    if text:
        like = to_column(f"%{_escape_like(text)}%")
        calls, calls_params = _calls_matching(text, names=True)
        columns = ("runs.name", "runs.graph_name", "runs.error_message", "runs.tags")
        by_id = [_ilike("runs.id")] if not needs_escape(text) else []  # as listing.may_be_an_id
        where.append("(" + " OR ".join([*map(_ilike, columns), *by_id, f"runs.id IN ({calls})"]) + ")")
        params += [like] * len(columns) + [f"{_escape_like(text)}%"] * len(by_id) + calls_params
    sql = f"SELECT {_COLS} FROM runs" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY runs.started_at DESC, runs.id DESC"
    if limit is not None or offset:
        sql += " LIMIT ? OFFSET ?"
        params += [-1 if limit is None else limit, offset]
    return sql, params


def _ilike(column: str) -> str:
    return f"lower({column}) LIKE lower(?) ESCAPE '\\'"


def _calls_matching(text: str, *, names: bool) -> tuple[str, list[Any]]:
    """As ``listing._calls_matching``: runs with a failed or abandoned call like ``text`` (or, with ``names``, a call named like it)."""
    like = to_column(f"%{_escape_like(text)}%")
    found = [f"calls.error_type IS NOT NULL AND ({_ilike('calls.error_type')} OR {_ilike('calls.error_message')})"]
    params: list[Any] = [like, like]
    if any(text.lower() in word for word in _ABANDONED_WORDS):
        found.append("calls.error_type = ?")
        params.append("Unfinished")
    if names:
        found.append(_ilike("calls.name"))
        params.append(like)
    return "SELECT calls.run_id FROM calls WHERE " + " OR ".join(found), params


def _escape_like(s: str) -> str:
    return s.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _tags(text: str | None) -> Any:
    if text is None:
        return []
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return []


def _step_counts(conn: sqlite3.Connection, run_ids: list[str]) -> dict[str, int]:
    """As ``RunReads.step_counts``: distinct root supersteps stored per run."""
    out: dict[str, int] = {}
    for i in range(0, len(run_ids), 500):
        chunk = run_ids[i : i + 500]
        marks = ", ".join("?" * len(chunk))
        q = f"SELECT run_id, count(DISTINCT step) FROM steps WHERE run_id IN ({marks}) AND ns = '' GROUP BY run_id"
        out.update(conn.execute(q, chunk).fetchall())
    return out


def _run_info(r: tuple, step_count: int) -> RunInfo:
    """As ``RunReads._run_info``."""
    (id_, name, graph_name, graph_ref, thread_id, status, status_reason, error_type, error_message, started_at,
     ended_at, _heartbeat, tags, parent_run_id, fork_step, _stored_count, redactions, faults, _host, _pid, durability) = r  # fmt: skip
    # Text columns hold any string through an escape (store.column_text): undone here as AnyText does.
    name, graph_name, graph_ref, thread_id, error_type, error_message, tags = map(from_column, (name, graph_name, graph_ref, thread_id, error_type, error_message, tags))
    return RunInfo(
        id=id_,
        name=name,
        graph_name=graph_name,
        status=status,
        started_at=started_at,
        ended_at=ended_at,
        step_count=step_count,
        thread_id=thread_id,
        status_reason=status_reason,
        error_type=error_type,
        error_message=error_message,
        graph_ref=graph_ref,
        tags=_tags(tags),
        parent_run_id=parent_run_id,
        fork_step=fork_step,
        redactions=redactions or 0,
        faults=faults or 0,
        durability=durability,
    )
