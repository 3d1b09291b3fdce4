"""Looking after a store: runs whose recorder died, deleting a run, sizes and stats, and migrating an old schema."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError

from graphtape.recorder import schema as S
from graphtape.recorder.errors import ReadOnlyStore, StoreError
from graphtape.recorder.store.urls import shown_url
from graphtape.recorder.store.connection import _one_line, _sqlite_path, check_url, missing_driver
from graphtape.recorder.store.read_only import is_read_only_error, read_only_message
from graphtape.recorder.store.sqlite_files import sqlite_cannot_write

STALE_HEARTBEAT_S = 600.0
# Asked at every run looked up, built once (see ``_read``).
_RUNNING = sa.select(S.runs.c.id, S.runs.c.owner_host, S.runs.c.owner_pid, S.runs.c.heartbeat_at).where(S.runs.c.status == "running")


class Upkeep:
    """Marks dead runs, deletes a run, and reports what the store holds."""

    def mark_dead_runs(self) -> int:
        """Mark runs whose recording process is gone as interrupted (killed).

        On this host a run is dead when its owner pid is gone. A run recorded
        on another host is dead when neither its heartbeat nor its latest
        step is newer than ``STALE_HEARTBEAT_S``. A dead run ends at its last
        sign of life. A store that may only be read is not changed: the runs
        found dead there are shown as killed all the same (``_dead_unmarked``).
        """
        host = socket.gethostname()
        rows = self._read(_RUNNING)
        now = time.time()
        dead, foreign = [], []
        for r in rows:
            if r.owner_host == host and r.owner_pid is not None:
                if r.owner_pid != os.getpid() and not _pid_alive(r.owner_pid):
                    dead.append(r)
            elif r.heartbeat_at is not None and now - r.heartbeat_at > STALE_HEARTBEAT_S:
                foreign.append(r)
        if not dead and not foreign:
            return 0
        last_step = {
            run_id: t
            for run_id, t in self._read(
                sa.select(S.steps.c.run_id, sa.func.max(S.steps.c.created_at))
                .where(S.steps.c.run_id.in_([r.id for r in dead + foreign]))
                .group_by(S.steps.c.run_id)
            )
        }
        ended: dict[str, float | None] = {}
        for r in dead + foreign:
            signs = [t for t in (r.heartbeat_at, last_step.get(r.id)) if t is not None]
            seen = max(signs) if signs else None
            if r in foreign and seen is not None and now - seen <= STALE_HEARTBEAT_S:
                continue  # its steps are still arriving: alive
            ended[r.id] = seen
        if not ended:
            return 0
        if not self.read_only:
            try:
                with self.engine.begin() as conn:
                    for run_id, seen in ended.items():
                        conn.execute(
                            sa.update(S.runs)
                            .where(S.runs.c.id == run_id, S.runs.c.status == "running")
                            .values(status="interrupted", status_reason="killed", ended_at=seen)
                        )
                return len(ended)
            except SQLAlchemyError:
                pass  # could not write after all: shown as killed below, not stored
        self.__dict__.setdefault("_dead_unmarked", {}).update(ended)
        return len(ended)

    def _count_unmarked_dead(self, by_status: dict[str, int]) -> None:
        """Runs found dead in a store that may only be read are counted as shown: interrupted, not running."""
        dead = self._unmarked_dead()
        if not dead or not by_status.get("running"):
            return
        n = int(self._read(sa.select(sa.func.count()).select_from(S.runs).where(S.runs.c.id.in_(dead), S.runs.c.status == "running"))[0][0])
        by_status["running"] -= n
        by_status["interrupted"] = by_status.get("interrupted", 0) + n
        if not by_status["running"]:
            del by_status["running"]

    def delete_run(self, run_id: str) -> None:
        """Remove a run and its steps and calls (blobs are shared and kept)."""
        with self.engine.begin() as conn:
            conn.execute(sa.delete(S.steps).where(S.steps.c.run_id == run_id))
            conn.execute(sa.delete(S.calls).where(S.calls.c.run_id == run_id))
            conn.execute(sa.delete(S.runs).where(S.runs.c.id == run_id))

    def size_report(self) -> dict[str, int]:
        """Row counts per table (and file size for SQLite)."""
        out = {}
        for t in (S.runs, S.steps, S.calls, S.blobs):
            out[t.name] = int(self._read(sa.select(sa.func.count()).select_from(t))[0][0])
        path = _sqlite_path(self.url)
        if path is not None:
            out["bytes"] = sum(p.stat().st_size for p in (path, Path(str(path) + "-wal")) if p.exists())
        return out

    def stats(self) -> dict[str, Any]:
        """Rows and bytes per table, runs by status (dead runs found first, as ``runs`` finds them), and the database's size on disk.

        Bytes per table include its indexes: SQLite's ``dbstat`` where the
        build has it, PostgreSQL's ``pg_total_relation_size``; None when the
        backend cannot tell.
        """
        self.mark_dead_runs()
        tables = [S.runs, S.steps, S.calls, S.blobs, S.run_facets]
        out: dict[str, Any] = {"backend": self.engine.dialect.name, "url": self._safe_url(), "schema_version": S.SCHEMA_VERSION}
        sizes: dict[str, int | None] = {t.name: None for t in tables}
        try:
            with self.engine.connect() as conn:
                if self.is_sqlite:
                    try:
                        rows = conn.exec_driver_sql(
                            "SELECT m.tbl_name, SUM(d.pgsize) FROM dbstat d JOIN sqlite_master m ON m.name = d.name GROUP BY m.tbl_name"
                        ).all()
                        for name, size in rows:
                            if name in sizes:
                                sizes[name] = int(size)
                    except SQLAlchemyError:
                        pass  # SQLite built without dbstat: sizes stay unknown
                else:
                    for t in tables:
                        sizes[t.name] = int(conn.execute(sa.text("SELECT pg_total_relation_size(to_regclass(:t))"), {"t": t.name}).scalar_one() or 0)
                    out["database_bytes"] = int(conn.execute(sa.text("SELECT pg_database_size(current_database())")).scalar_one())
                counts = {t.name: int(conn.execute(sa.select(sa.func.count()).select_from(t)).scalar_one()) for t in tables}
                by_status = {st: int(n) for st, n in conn.execute(sa.select(S.runs.c.status, sa.func.count()).group_by(S.runs.c.status))}
                span = conn.execute(sa.select(sa.func.min(S.runs.c.started_at), sa.func.max(S.runs.c.started_at))).one()
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot read {self._safe_url()}: {_one_line(exc)}") from None
        out["tables"] = {name: {"rows": counts[name], "bytes": sizes[name]} for name in counts}
        self._count_unmarked_dead(by_status)  # after mark_dead_runs, above: as ``runs`` counts them
        out["runs_by_status"] = dict(sorted(by_status.items()))
        out["oldest_run_at"], out["newest_run_at"] = span[0], span[1]
        path = _sqlite_path(self.url)
        if path is not None:
            out["database_bytes"] = sum(p.stat().st_size for p in (path, Path(str(path) + "-wal")) if p.exists())
        known = [v for v in sizes.values() if v is not None]
        out["bytes"] = sum(known) if known else None
        return out


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def migrate_store(db: str | os.PathLike | None = None) -> tuple[str, int, int]:
    """Upgrade the schema of the store at ``db`` in place, in one transaction: ``(where, version before, after)``.

    A function, not a ``SqlStore`` method: a store opens only at the schema
    version this graphtape reads, and this is what brings an older one there.
    """
    url = check_url(db)  # a backend graphtape does not use, or a directory, is said as every command says it
    path = _sqlite_path(url)
    if path is not None and not path.is_file():
        raise StoreError(f"no database at {path} (nothing to migrate)")
    label = str(path) if path is not None else shown_url(url)  # never the password (also ?password=)
    if path is not None and sqlite_cannot_write(path):
        raise ReadOnlyStore(read_only_message(label, "migrate upgrades its schema in place"))
    try:
        engine = sa.create_engine(url)
    except ModuleNotFoundError as exc:
        raise missing_driver(url, exc) from None
    try:
        with engine.begin() as conn:
            before, after = S.migrate(conn)
    except ValueError as exc:
        raise StoreError(f"cannot migrate {label}: {exc}") from None
    except SQLAlchemyError as exc:
        if is_read_only_error(exc):
            raise ReadOnlyStore(read_only_message(label, "migrate upgrades its schema in place")) from None
        raise StoreError(f"cannot migrate {label}: {_one_line(exc)}") from None
    finally:
        engine.dispose()
    return label, before, after
