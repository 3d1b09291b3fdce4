"""Runs the store never took, saved to a SQLite file of their own instead of dropped at close.

A store that cannot be opened at all (a PostgreSQL database or role that does not exist, a
password it refuses, a server down until the program ends) leaves every run recorded in the
meantime waiting in memory. When the recorder closes and the store still refuses them, the runs
whose every row is still waiting (their run row included, so nothing of them is in the store) are
written to ``graphtape-rescued-<time>-<pid>.db`` in ``$GRAPHTAPE_RESCUE_DIR``, else the working
folder, else the temp folder: ``graphtape --db`` opens it like any store. Rows of runs the store
holds part of stay counted as lost: half a run in each place would read as two broken runs.

A server that answered and refused (the database or role does not exist, the password is wrong)
will not change its mind within the close's wait: :func:`refused_for_good` tells the writer not
to wait for it.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from graphtape.recorder.store import Batch

# What a PostgreSQL server says when it answered and will go on refusing (lower-cased).
_REFUSALS = ("does not exist", "password authentication failed", "no pg_hba.conf entry", "is not installed", "role \"")


def refused_for_good(exc: BaseException | None) -> bool:
    """Whether opening the store failed on an answer that waiting will not change."""
    text = str(exc or "").lower()
    return any(r in text for r in _REFUSALS)


def whole_runs(batch: Batch) -> tuple[Batch, Batch]:
    """``(rescuable, rest)``: the rows of runs whose run row is in ``batch``, and the others."""
    ids = {row["id"] for row in batch.runs_new}
    calls = {row["call_id"] for row in batch.calls if row["run_id"] in ids}
    whole, rest = Batch(runs_new=list(batch.runs_new), blobs=dict(batch.blobs)), Batch()
    whole.runs_update, rest.runs_update = _split(batch.runs_update, lambda u: u[0] in ids)
    whole.steps, rest.steps = _split(batch.steps, lambda row: row["run_id"] in ids)
    whole.calls, rest.calls = _split(batch.calls, lambda row: row["run_id"] in ids)
    whole.calls_update, rest.calls_update = _split(batch.calls_update, lambda u: u[0] in calls)
    return whole, rest


def _split(items: list[Any], belongs: Callable[[Any], bool]) -> tuple[list[Any], list[Any]]:
    """``(items that belong, the others)``, each in order."""
    inside: list[Any] = []
    outside: list[Any] = []
    for item in items:
        (inside if belongs(item) else outside).append(item)
    return inside, outside


def rescue(batch: Batch) -> Path | None:
    """Write ``batch`` (whole runs) to a new SQLite store; its path, or ``None`` if no folder takes it."""
    from graphtape.recorder.store.sql_store import open_for_writing

    name = f"graphtape-rescued-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.db"
    chosen = os.environ.get("GRAPHTAPE_RESCUE_DIR")
    for folder in [*([Path(chosen)] if chosen else []), Path.cwd(), Path(tempfile.gettempdir())]:
        path = folder / name
        try:
            store = open_for_writing(path)
        except Exception:  # noqa: BLE001 - this folder will not do: the next one
            continue
        try:
            store.write(batch)
            return path
        except Exception:  # noqa: BLE001 - nothing half-written is left behind
            pass
        finally:
            store.close()
        for leftover in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            leftover.unlink(missing_ok=True)
    return None
