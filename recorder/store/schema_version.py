"""The schema gate: a new store gets graphtape's tables, an existing one opens only at the version this graphtape reads.

An older version that ``graphtape migrate`` upgrades says so; a newer one
asks for a newer graphtape; a database with tables named like graphtape's
but no version is refused as another program's. Any number of processes may
create the same new store at once: creation runs under a lock (SQLite's write
lock taken up front, PostgreSQL's advisory lock), looks again once it holds
it, and creates the tables and the version row in one transaction, so no one
ever sees the tables without the version.
"""

from __future__ import annotations

import shlex
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.pool import NullPool

from graphtape.recorder import schema as S
from graphtape.recorder.errors import SchemaVersionError, StoreError
from graphtape.recorder.store.compiled_cache import SQLITE_COMPILED, dialect_key
from graphtape.recorder.store.connection import _on_sqlite_connect, _one_line, _sqlite_path
from graphtape.recorder.store.read_only import is_read_only_error
from graphtape.recorder.store.sqlite_shape import shape_problem


class SchemaGate:
    """Creates the schema in a new store, or checks the version of an existing one, when a store opens."""

    def _check_schema(self, create: bool) -> None:
        try:
            if self.is_sqlite:
                with self.engine.connect() as conn:
                    problem = shape_problem(lambda sql: conn.exec_driver_sql(sql).fetchall())
                if problem is not None:
                    raise StoreError(f"{self._safe_url()} is not a store as graphtape makes it ({problem}): refusing to read it")
            insp = sa.inspect(self.engine)
            tables = set(insp.get_table_names())
        except (SQLAlchemyError, DBAPIError) as exc:
            raise StoreError(f"{self._safe_url()} is not a readable graphtape database: {_one_line(exc)}") from None
        if S.meta.name not in tables:
            if tables & {"runs", "steps", "calls", "blobs"}:
                raise SchemaVersionError(
                    f"{self._safe_url()} has tables named like graphtape's (runs, steps, ...) but no graphtape_meta schema version: "
                    "it is another program's database, or a damaged one; point graphtape at a different file"
                )
            others = sorted(t for t in tables if not t.startswith("sqlite_"))
            if create and self.is_sqlite and not others and any(marks := self._program_marks()):
                raise SchemaVersionError(f"{self._safe_url()} is another program's SQLite database (application_id {marks[0]}, user_version {marks[1]}): record into a file of graphtape's own")
            if create and self.is_sqlite and others:
                # A SQLite file is one program's: graphtape's tables (and its WAL mode) are not
                # added to another's (a LangGraph SqliteSaver's checkpoints.db, an app's data).
                listed = ", ".join(others[:5]) + (", ..." if len(others) > 5 else "")
                raise SchemaVersionError(f"{self._safe_url()} is another program's SQLite database (its tables: {listed}): record into a file of graphtape's own")
            if not create:
                if not tables and _empty_wal_file(getattr(self, "url", "")):
                    raise StoreError(
                        f"{self._safe_url()} holds no tables yet, in WAL mode: a copy of a store taken while it was written "
                        "keeps them in its -wal file; copy the -wal and -shm files beside it, or point graphtape at the original"
                    )
                if not self.is_sqlite:
                    # A server's database takes graphtape's tables beside others: it is empty of runs, not another's.
                    raise StoreError(f"no graphtape runs in {self._safe_url()} yet (no graphtape_meta table): record a run into it first, or pass --db (db= in Python)")
                raise StoreError(f"{self._safe_url()} is not a graphtape database (no graphtape_meta table): point graphtape at a different file")
            try:
                self._create_schema()
            except SQLAlchemyError as exc:
                if not self._version_ok_after_race():
                    raise StoreError(f"cannot create the graphtape schema in {self._safe_url()}: {_one_line(exc)}") from None
                return
        self._version_ok_after_race(strict=True, create=create)

    def _program_marks(self) -> tuple[int, int]:
        """A SQLite file's ``application_id`` and ``user_version``: another program stamped it as
        its own if either is set, even before it has a table (graphtape sets neither)."""
        with self.engine.connect() as conn:
            return (conn.exec_driver_sql("PRAGMA application_id").scalar() or 0, conn.exec_driver_sql("PRAGMA user_version").scalar() or 0)

    def _create_schema(self) -> None:
        """Create the tables and the version row, once, whoever else is creating them at the same time."""
        if self.is_sqlite:
            # A transaction that takes SQLite's write lock at BEGIN (pysqlite would otherwise commit
            # each CREATE on its own, and another process could see tables with no version yet).
            engine = sa.create_engine(self.url, connect_args={"check_same_thread": False, "timeout": 30}, poolclass=NullPool, execution_options={"compiled_cache": SQLITE_COMPILED})
            event.listen(engine, "connect", _autocommit_then_pragmas)
            event.listen(engine, "begin", lambda conn: conn.exec_driver_sql("BEGIN IMMEDIATE"))
        else:
            engine = self.engine
        try:
            with engine.begin() as conn:
                if not self.is_sqlite:
                    conn.execute(sa.text("SELECT pg_advisory_xact_lock(hashtext('graphtape schema ' || coalesce(current_schema(), '')))"))
                if not sa.inspect(conn).has_table(S.meta.name):
                    _create_tables(conn)
                    conn.execute(sa.insert(S.meta).values(key="schema_version", value=str(S.SCHEMA_VERSION)))
        finally:
            if engine is not self.engine:
                engine.dispose()

    def _version_ok_after_race(self, strict: bool = False, create: bool = False) -> bool:
        try:
            with self.engine.connect() as conn:
                row = conn.execute(sa.select(S.meta.c.value).where(S.meta.c.key == "schema_version")).first()
        except SQLAlchemyError:
            if strict:
                raise StoreError(f"{self._safe_url()}: cannot read the schema version (database damaged?)") from None
            return False
        if row is None:
            if strict:
                raise SchemaVersionError(f"{self._safe_url()} has no graphtape schema version: damaged or not a graphtape database")
            return False
        try:
            version = int(row[0])
        except ValueError:
            raise SchemaVersionError(f"{self._safe_url()} has an unknown schema version {row[0]!r:.40}: damaged, or not a graphtape database; point --db at a store graphtape wrote") from None
        if version > S.SCHEMA_VERSION:
            raise SchemaVersionError(
                f"{self._safe_url()} was written by a newer graphtape (schema v{version}; this one reads v{S.SCHEMA_VERSION}): upgrade graphtape to open it"
            )
        if version in S.UPGRADES_ON_OPEN:
            if create and self._read_only is not True:
                self._raise_version(version)
        elif version < S.SCHEMA_VERSION and version in S.MIGRATES_FROM:
            raise SchemaVersionError(
                f"{self._safe_url()} uses schema v{version}; this graphtape reads v{S.SCHEMA_VERSION}: run `{self._migrate_command()}` to upgrade it in place"
            )
        elif version < S.SCHEMA_VERSION:
            raise SchemaVersionError(f"{self._safe_url()} uses old schema v{version}; this graphtape reads v{S.SCHEMA_VERSION}: re-record, or open it with the graphtape that wrote it")
        if not self.is_sqlite:
            self._refresh_pg_tag_trigger()
        return True

    def _migrate_command(self) -> str:
        """The command that upgrades this store, naming it: a bare `graphtape migrate` would upgrade
        ./graphtape.db (or $GRAPHTAPE_DB), not the store the user opened with --db."""
        return f"graphtape --db {shlex.quote(self._safe_url())} migrate"

    def _raise_version(self, version: int) -> None:
        """Mark a store whose data this graphtape reads as it is (``UPGRADES_ON_OPEN``) as this version's,
        before recording into it writes values an older graphtape could not read."""
        try:
            with self.engine.begin() as conn:
                conn.execute(
                    sa.update(S.meta).where(S.meta.c.key == "schema_version", S.meta.c.value == str(version)).values(value=str(S.SCHEMA_VERSION))
                )
        except SQLAlchemyError as exc:
            if is_read_only_error(exc):
                return  # read as it is: nothing will be recorded into it
            raise StoreError(f"cannot upgrade {self._safe_url()} from schema v{version} to v{S.SCHEMA_VERSION}: {_one_line(exc)}") from None

    def _refresh_pg_tag_trigger(self) -> None:
        """A store made before the tag index took NUL: its trigger would refuse such a run's row; replace it.

        One query on open; the replacement runs once per store, under the schema lock.
        A role that may not replace functions keeps the old one (runs with a NUL tag then
        wait for the store like any refused row)."""
        check = sa.text("SELECT prosrc FROM pg_proc WHERE proname = 'gt_runs_facets' AND pronamespace = to_regnamespace(current_schema())::oid")
        try:
            with self.engine.begin() as conn:
                src = conn.execute(check).scalar()
                if src is None or "untranslatable_character" in src:
                    return
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(hashtext('graphtape schema ' || coalesce(current_schema(), '')))"))
                src = conn.execute(check).scalar()
                if src is not None and "untranslatable_character" not in src:
                    conn.exec_driver_sql(S.pg_runs_trigger_sql())
        except SQLAlchemyError:
            pass


def _create_tables(conn: Any) -> None:
    """Every table, index and trigger of a new store, in one transaction already begun."""
    if conn.dialect.name != "sqlite":
        S.metadata.create_all(conn)
        return
    for sql in _sqlite_ddl(conn.dialect):
        conn.exec_driver_sql(sql)


# SQLAlchemy compiles the schema's DDL anew for each store it creates (DDL is not in its statement
# cache): 22 statements, a third of the CPU a new SQLite store took. Every SQLite store is created
# with the same statements, so they are compiled once per process (per dialect, as compiled_cache keys).
_SQLITE_DDL: dict[Any, list[str]] = {}


def _sqlite_ddl(dialect: Any) -> list[str]:
    """The statements ``create_all`` runs on an empty SQLite database, as text."""
    key = dialect_key(dialect)
    ddl = _SQLITE_DDL.get(key)
    if ddl is None:
        elements: list[Any] = []
        mock = sa.create_mock_engine("sqlite://", lambda element, *args, **kw: elements.append(element))
        S.metadata.create_all(mock, checkfirst=False)
        ddl = _SQLITE_DDL[key] = [str(e.compile(dialect=dialect)).strip() for e in elements]
    return ddl


def _autocommit_then_pragmas(dbapi_conn: Any, record: Any) -> None:
    dbapi_conn.isolation_level = None  # transactions are begun by hand (BEGIN IMMEDIATE)
    _on_sqlite_connect(dbapi_conn, record)


def _empty_wal_file(url: Any) -> bool:
    """Whether ``url`` is a SQLite file in WAL mode (its header's read and write versions are 2):
    one with no tables then had them in a -wal file that did not come along."""
    path = _sqlite_path(str(url)) if url else None
    if path is None:
        return False
    try:
        with open(path, "rb") as f:
            head = f.read(20)
    except OSError:
        return False
    return len(head) == 20 and head.startswith(b"SQLite format 3\x00") and head[18] == 2 and head[19] == 2
