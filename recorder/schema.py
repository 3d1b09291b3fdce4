"""The store's tables: one SQLAlchemy Core schema for SQLite and PostgreSQL.

JSON columns hold orjson text so both backends store them the same way;
state frames and blobs are bytes, compressed where it pays.
"""

from __future__ import annotations

from sqlalchemy import (
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
)

# v2: steps.writes (state keys each step's tasks wrote).
SCHEMA_VERSION = 2

metadata = MetaData()

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
    Column("name", Text, nullable=False),
    Column("graph_name", Text, nullable=False),
    Column("graph_ref", Text),
    Column("thread_id", Text),
    Column("status", String(16), nullable=False),
    Column("status_reason", String(32)),
    Column("error_type", Text),
    Column("error_message", Text),
    Column("started_at", Float, nullable=False),
    Column("ended_at", Float),
    Column("heartbeat_at", Float),
    Column("inputs", Text),
    Column("output", Text),
    Column("config", Text),
    Column("graph", Text),
    Column("versions", Text),
    Column("tags", Text),
    Column("parent_run_id", String(16)),
    Column("fork_step", Integer),
    Column("fork_edit", Text),
    Column("step_count", Integer, nullable=False, default=0),
    Column("redactions", Integer, nullable=False, default=0),
    Column("faults", Integer, nullable=False, default=0),
    Column("fault_log", Text),
    Column("owner_host", Text),
    Column("owner_pid", Integer),
    Column("durability", String(16)),
    Index("ix_runs_started", "started_at"),
    Index("ix_runs_status", "status"),
    Index("ix_runs_thread", "thread_id"),
)

steps = Table(
    "steps",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(16), nullable=False),
    Column("ns", Text, nullable=False, default=""),
    Column("seq", Integer, nullable=False),
    Column("step", Integer, nullable=False),
    Column("source", String(16)),
    Column("checkpoint_id", Text),
    Column("parent_checkpoint_id", Text),
    Column("created_at", Float, nullable=False),
    Column("duration_ms", Float),
    Column("is_key", Boolean, nullable=False),
    Column("nodes", Text, nullable=False, default=""),
    # ",key1,key2," — state keys the step's tasks wrote (reverse watch, search)
    Column("writes", Text, nullable=False, default=""),
    Column("summary", Text),
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
    Column("ns", Text, nullable=False, default=""),
    Column("step", Integer),
    Column("task_id", Text),
    Column("node", Text),
    Column("call_id", String(36), nullable=False),
    Column("parent_call_id", String(36)),
    Column("kind", String(8), nullable=False),
    Column("name", Text, nullable=False),
    Column("inputs", Text),
    Column("output", Text),
    Column("error_type", Text),
    Column("error_message", Text),
    Column("started_at", Float, nullable=False),
    Column("latency_ms", Float),
    Column("input_tokens", Integer),
    Column("output_tokens", Integer),
    Column("total_tokens", Integer),
    Column("streamed", Boolean, nullable=False, default=False),
    Index("ix_calls_run", "run_id", "ns", "step"),
    Index("ix_calls_name", "name"),
)

blobs = Table(
    "blobs",
    metadata,
    Column("hash", String(32), primary_key=True),
    Column("zipped", Boolean, nullable=False),
    Column("data", LargeBinary, nullable=False),
)
