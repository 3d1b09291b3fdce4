"""The store's tables: one SQLAlchemy Core schema for SQLite and PostgreSQL.

JSON columns hold orjson text so both backends store them the same way;
state frames and blobs are bytes, compressed where it pays.

``run_facets`` indexes what a run is filtered by but stores only as lists
(its tags, the nodes that ran, the tools it called). Triggers fill it as
rows arrive, so every writer (the recorder, imports, bulk loads) keeps it
right without knowing it exists, and deleting a run clears its facets.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy import (
    DDL,
    Boolean,
    Column,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
    event,
)

# Any text in a text column: the mapping lives in store.column_text, free of SQLAlchemy.
from graphtape.recorder.sqlite_triggers import SQLITE_TRIGGERS
from graphtape.recorder.store.column_text import from_column, needs_escape, to_column  # noqa: F401

# v2: steps.writes (state keys each step's tasks wrote).
# v3: run_facets and its triggers; runs indexed for newest-first listing by status, name and errors.
# v4: calls.traceback (the frames of a failed call's error) and ix_calls_failed.
# v5: values may hold long message histories as shared blocks ({"$t": "cat"}, recorder.history_blocks);
#     the tables are v4's.
# v6: values may hold very long strings as shared chunks ({"$t": "scat"}, recorder.string_chunks);
#     the tables are v4's.
SCHEMA_VERSION = 6
# Versions ``migrate`` upgrades in place.
MIGRATES_FROM = frozenset({2, 3, 4, 5})
# Versions whose data this graphtape reads as it is: only the version number differs. A store at one
# of them is read as it is, and raised to SCHEMA_VERSION when opened to record into (create=True), so an
# older graphtape never meets values it cannot read.
UPGRADES_ON_OPEN = frozenset({4, 5})

metadata = MetaData()

class AnyText(TypeDecorator):
    """``Text`` that stores any Python string losslessly (NUL, lone surrogates) on SQLite and PostgreSQL."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Any) -> Any:
        return to_column(value) if isinstance(value, str) else value

    def process_result_value(self, value: Any, dialect: Any) -> Any:
        return from_column(value) if isinstance(value, str) else value


meta = Table(
    "graphtape_meta",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

runs = Table(
    "runs",
    metadata,
    Column("id", String(16), primary_key=True),
    Column("name", AnyText, nullable=False),
    Column("graph_name", AnyText, nullable=False),
    Column("graph_ref", AnyText),
    Column("thread_id", AnyText),
    Column("status", String(16), nullable=False),
    Column("status_reason", String(32)),
    Column("error_type", AnyText),
    Column("error_message", AnyText),
    Column("started_at", Float, nullable=False),
    Column("ended_at", Float),
    Column("heartbeat_at", Float),
    Column("inputs", AnyText),
    Column("output", AnyText),
    Column("config", AnyText),
    Column("graph", AnyText),
    Column("versions", AnyText),
    Column("tags", AnyText),
    Column("parent_run_id", String(16)),
    Column("fork_step", Integer),
    Column("fork_edit", AnyText),
    Column("step_count", Integer, nullable=False, default=0),
    Column("redactions", Integer, nullable=False, default=0),
    Column("faults", Integer, nullable=False, default=0),
    Column("fault_log", AnyText),
    Column("owner_host", AnyText),
    Column("owner_pid", Integer),
    Column("durability", String(16)),
    # Every listing is newest first with the id breaking ties: each index ends in (started_at, id).
    Index("ix_runs_started", "started_at", "id"),
    Index("ix_runs_status", "status", "started_at", "id"),
    Index("ix_runs_name", "name", "started_at", "id"),
    Index("ix_runs_thread", "thread_id"),
)
# Only failed runs carry an error: filtering by error text reads this small index, not every run.
_has_error = sa.text("error_message IS NOT NULL")
Index("ix_runs_errors", runs.c.started_at, runs.c.id, sqlite_where=_has_error, postgresql_where=_has_error)

steps = Table(
    "steps",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(16), nullable=False),
    Column("ns", AnyText, nullable=False, default=""),
    Column("seq", Integer, nullable=False),
    Column("step", Integer, nullable=False),
    Column("source", String(16)),
    Column("checkpoint_id", AnyText),
    Column("parent_checkpoint_id", AnyText),
    Column("created_at", Float, nullable=False),
    Column("duration_ms", Float),
    Column("is_key", Boolean, nullable=False),
    Column("nodes", AnyText, nullable=False, default=""),
    # ",key1,key2," — state keys the step's tasks wrote (reverse watch, search)
    Column("writes", AnyText, nullable=False, default=""),
    Column("summary", AnyText),
    Column("flags", Integer, nullable=False, default=0),
    # zlib/orjson: {"s": state frame (key or delta), "t": tasks, "r": routes, "e": events}
    Column("payload", LargeBinary, nullable=False),
    Index("ix_steps_run", "run_id", "ns", "seq"),
    Index("ix_steps_step", "run_id", "ns", "step"),
)

calls = Table(
    "calls",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(16), nullable=False),
    Column("ns", AnyText, nullable=False, default=""),
    Column("step", Integer),
    Column("task_id", AnyText),
    Column("node", AnyText),
    Column("call_id", String(36), nullable=False),
    Column("parent_call_id", String(36)),
    Column("kind", String(8), nullable=False),
    Column("name", AnyText, nullable=False),
    Column("inputs", AnyText),
    Column("output", AnyText),
    Column("error_type", AnyText),
    Column("error_message", AnyText),
    Column("traceback", AnyText),  # JSON frames [file, line, function, source] of a failed call
    Column("started_at", Float, nullable=False),
    Column("latency_ms", Float),
    Column("input_tokens", Integer),
    Column("output_tokens", Integer),
    Column("total_tokens", Integer),
    Column("streamed", Boolean, nullable=False, default=False),
    Index("ix_calls_run", "run_id", "ns", "step"),
    Index("ix_calls_name", "name"),
)
# Failed and abandoned calls only: `runs --error/--search` find them without reading every call.
_call_failed = sa.text("error_type IS NOT NULL")
Index("ix_calls_failed", calls.c.run_id, sqlite_where=_call_failed, postgresql_where=_call_failed)

blobs = Table(
    "blobs",
    metadata,
    Column("hash", String(32), primary_key=True),
    Column("zipped", Boolean, nullable=False),
    Column("data", LargeBinary, nullable=False),
)

run_facets = Table(
    "run_facets",
    metadata,
    # "tag", "node" (a node that ran) or "tool" (a tool that was called)
    Column("kind", String(8), primary_key=True),
    Column("value", AnyText, primary_key=True),
    Column("run_id", String(16), primary_key=True),
    Index("ix_run_facets_run", "run_id"),
)

FACET_KINDS = ("tag", "node", "tool")

# -- triggers that keep run_facets -----------------------------------------------
_PG_TRIGGERS = [
    """CREATE OR REPLACE FUNCTION gt_runs_facets() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'DELETE' THEN
            DELETE FROM run_facets WHERE run_id = OLD.id;
            RETURN OLD;
        END IF;
        IF TG_OP = 'UPDATE' THEN
            DELETE FROM run_facets WHERE run_id = NEW.id AND kind = 'tag';
        END IF;
        IF NEW.tags IS NOT NULL AND left(ltrim(NEW.tags), 1) = '[' THEN
            BEGIN
                INSERT INTO run_facets (kind, value, run_id)
                SELECT DISTINCT 'tag', t.value #>> '{}', NEW.id FROM jsonb_array_elements(NEW.tags::jsonb) AS t(value)
                WHERE jsonb_typeof(t.value) = 'string'
                ON CONFLICT DO NOTHING;
            EXCEPTION WHEN invalid_text_representation OR untranslatable_character THEN
                NULL;  -- tags that are not JSON (or hold a NUL jsonb refuses) are not indexed; the run is still written
            END;
        END IF;
        RETURN NEW;
    END $$""",
    """CREATE OR REPLACE FUNCTION gt_steps_facets() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF NEW.nodes <> '' THEN
            INSERT INTO run_facets (kind, value, run_id)
            SELECT DISTINCT 'node', n, NEW.run_id FROM unnest(string_to_array(NEW.nodes, ',')) AS n WHERE n <> ''
            ON CONFLICT DO NOTHING;
        END IF;
        RETURN NEW;
    END $$""",
    """CREATE OR REPLACE FUNCTION gt_calls_facets() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF NEW.kind = 'tool' THEN
            INSERT INTO run_facets (kind, value, run_id) VALUES ('tool', NEW.name, NEW.run_id) ON CONFLICT DO NOTHING;
        END IF;
        RETURN NEW;
    END $$""",
    "DROP TRIGGER IF EXISTS gt_runs_facets ON runs",
    "CREATE TRIGGER gt_runs_facets AFTER INSERT OR DELETE OR UPDATE OF tags ON runs FOR EACH ROW EXECUTE FUNCTION gt_runs_facets()",
    "DROP TRIGGER IF EXISTS gt_steps_facets ON steps",
    "CREATE TRIGGER gt_steps_facets AFTER INSERT ON steps FOR EACH ROW EXECUTE FUNCTION gt_steps_facets()",
    "DROP TRIGGER IF EXISTS gt_calls_facets ON calls",
    "CREATE TRIGGER gt_calls_facets AFTER INSERT ON calls FOR EACH ROW EXECUTE FUNCTION gt_calls_facets()",
]


def pg_runs_trigger_sql() -> str:
    """The PostgreSQL function that indexes a run's tags (replaced in stores made before it took NUL)."""
    return _PG_TRIGGERS[0]


def install_triggers(conn: Any) -> None:
    """Create (or replace) the triggers that fill ``run_facets``; idempotent."""
    statements = SQLITE_TRIGGERS if conn.dialect.name == "sqlite" else _PG_TRIGGERS
    for sql in statements:
        conn.exec_driver_sql(sql)


for _sql in SQLITE_TRIGGERS:
    event.listen(metadata, "after_create", DDL(_sql).execute_if(dialect="sqlite"))
for _sql in _PG_TRIGGERS:
    event.listen(metadata, "after_create", DDL(_sql.replace("%", "%%")).execute_if(dialect="postgresql"))


# -- migration ----------------------------------------------------------------------


def stored_version(conn: Any) -> int | None:
    """The schema version written in ``graphtape_meta`` (None when there is none)."""
    if not sa.inspect(conn).has_table("graphtape_meta"):
        return None
    row = conn.execute(sa.select(meta.c.value).where(meta.c.key == "schema_version")).first()
    try:
        return None if row is None else int(row[0])
    except ValueError:
        return None


def migrate(conn: Any) -> tuple[int, int]:
    """Upgrade a graphtape database to ``SCHEMA_VERSION`` in the caller's transaction.

    Returns ``(from, to)``. v2 -> v3 adds ``run_facets`` (filled from the
    runs, steps and calls already stored), its triggers and the new indexes;
    v3 -> v4 adds ``calls.traceback`` and ``ix_calls_failed``; v4 -> v5 and v5 -> v6 change only
    the version (values written from v5 on may hold history blocks, from v6 on string chunks). Raises ``ValueError`` with a sentence
    for a version it cannot upgrade.
    """
    version = stored_version(conn)
    if version is None:
        raise ValueError("not a graphtape database (no schema version)")
    if version == SCHEMA_VERSION:
        return version, version
    if version > SCHEMA_VERSION:
        raise ValueError(f"schema v{version} is newer than this graphtape (v{SCHEMA_VERSION}): upgrade graphtape instead")
    if version not in MIGRATES_FROM:
        raise ValueError(f"schema v{version} cannot be upgraded in place (only v{', v'.join(map(str, sorted(MIGRATES_FROM)))}): re-record the runs")
    if version == 2:
        _v2_to_v3(conn)
    if "traceback" not in {c["name"] for c in sa.inspect(conn).get_columns("calls")}:
        conn.exec_driver_sql("ALTER TABLE calls ADD COLUMN traceback TEXT")
    if "ix_calls_failed" not in {ix["name"] for ix in sa.inspect(conn).get_indexes("calls")}:
        next(ix for ix in calls.indexes if ix.name == "ix_calls_failed").create(conn)
    conn.execute(sa.update(meta).where(meta.c.key == "schema_version").values(value=str(SCHEMA_VERSION)))
    return version, SCHEMA_VERSION


def _v2_to_v3(conn: Any) -> None:
    insp = sa.inspect(conn)
    existing = {ix["name"] for ix in insp.get_indexes("runs")}
    for name in ("ix_runs_started", "ix_runs_status"):
        if name in existing:
            conn.exec_driver_sql(f"DROP INDEX {name}")
    for ix in runs.indexes:
        if ix.name not in existing or ix.name in ("ix_runs_started", "ix_runs_status"):
            ix.create(conn)
    run_facets.create(conn, checkfirst=True)
    install_triggers(conn)
    _backfill_facets(conn)


def _backfill_facets(conn: Any) -> None:
    import orjson

    rows: set[tuple[str, str, str]] = set()
    for run_id, tags in conn.execute(sa.select(runs.c.id, runs.c.tags).where(runs.c.tags.is_not(None))):
        try:
            values = orjson.loads(tags)
        except orjson.JSONDecodeError:
            continue
        if isinstance(values, list):
            rows.update(("tag", v, run_id) for v in values if isinstance(v, str))
    for run_id, nodes in conn.execute(sa.select(steps.c.run_id, steps.c.nodes).where(steps.c.nodes != "").distinct()):
        rows.update(("node", n, run_id) for n in nodes.split(",") if n)
    for run_id, name in conn.execute(sa.select(calls.c.run_id, calls.c.name).where(calls.c.kind == "tool").distinct()):
        rows.add(("tool", name, run_id))
    conn.execute(sa.delete(run_facets))
    batch = [{"kind": k, "value": v, "run_id": r} for k, v, r in sorted(rows)]
    for i in range(0, len(batch), 5000):
        conn.execute(sa.insert(run_facets), batch[i : i + 5000])
