"""The SQL of a rescue file (``recorder.rescue``): the rows of partly stored runs noted in it, and
every row read back out of it for an import."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from graphtape.recorder import schema as S
from graphtape.recorder.store.rescue_hint import RESCUED_ROWS


def note_rescued_rows(store: Any, text: str) -> None:
    """Keep ``text`` (the rows' updates, JSON) in the rescue file ``store``."""
    with store.engine.begin() as conn:
        conn.execute(S.meta.insert().values(key=RESCUED_ROWS, value=text))


def read_rescue_file(path: str | os.PathLike) -> tuple[str | None, list[dict], list[dict], list[dict], dict[str, tuple[bool, bytes]]]:
    """``(note, runs, steps, calls, blobs)`` of a rescue file, opened read-only: rows as the store
    writes them (``Batch``), steps in the order they were written."""
    from graphtape.recorder.store.sql_store import open_store

    source = open_store(Path(path), read_only=True)
    try:
        with source.engine.connect() as conn:
            note = conn.execute(sa.select(S.meta.c.value).where(S.meta.c.key == RESCUED_ROWS)).scalar()
            runs = [dict(row._mapping) for row in conn.execute(sa.select(S.runs))]
            step_cols = [c for c in S.steps.c if c.name != "id"]
            steps = [dict(row._mapping) for row in conn.execute(sa.select(*step_cols).order_by(S.steps.c.id))]
            calls = [dict(row._mapping) for row in conn.execute(sa.select(S.calls))]
            blobs = {row.hash: (bool(row.zipped), bytes(row.data)) for row in conn.execute(sa.select(S.blobs.c.hash, S.blobs.c.zipped, S.blobs.c.data))}
    finally:
        source.close()
    return note, runs, steps, calls, blobs


def columns(table: str) -> frozenset[str]:
    """The column names of ``table`` (``runs`` or ``calls``): what an update read from a file may set."""
    return frozenset(c.name for c in S.metadata.tables[table].c)

