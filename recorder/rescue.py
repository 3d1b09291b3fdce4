"""Rows the store never took, saved to a SQLite file of their own instead of dropped at close.

A store that cannot be opened at all (a PostgreSQL database or role that does not exist, a
password it refuses, a server down until the program ends) leaves every run recorded in the
meantime waiting in memory. When the recorder closes and the store still refuses them, the runs
whose every row is still waiting (their run row included, so nothing of them is in the store) are
written to ``graphtape-rescued-<time>-<pid>.db`` in ``$GRAPHTAPE_RESCUE_DIR``, else the working
folder, else the temp folder: ``graphtape --db`` opens it like any store.

A run the store holds part of (a disk that filled mid-run, a file made read-only, a server
restarted for good) is not split into two runs: its rows left are no run on their own (their
states are deltas on steps the store holds, their blobs may be there). The store is asked once
more for that run's own rows alone, with the blobs they use (:func:`blobs_used`): far less than
everything kept, so a disk with a little room left may take them. Failing that, those rows go to
the same rescue file, apart: its steps, calls and blobs in its tables (no run row: listing the
file shows only whole runs), the run and call updates under the ``rescued_rows`` key of its
``graphtape_meta``, with the store they belong to. ``graphtape --db STORE import-rescue FILE``
(:func:`import_rescue`) puts them, and any whole runs, into the store once it takes writes again;
importing twice adds nothing twice. The run's last update alone (its status, and the fault that
says where the rest is: :func:`describe_rows`) is offered to the store too, so that it does not
read as killed meanwhile.

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

import orjson

from graphtape.recorder.codec import BLOB_REF, collect_refs
from graphtape.recorder.store import Batch
from graphtape.recorder.store.payloads import unpack

_REF = f'"{BLOB_REF}"'
_RUNS_NAMED = 5  # runs a line about lost rows names one by one

# What a PostgreSQL server says when it answered and will go on refusing, and what opening a
# SQLite file says when its place cannot hold one (under a file, a folder it may not write, a
# read-only mount): waiting out the close's 10 s will not change it (lower-cased).
_REFUSALS = (
    "does not exist", "password authentication failed", "no pg_hba.conf entry", "is not installed", "role \"",
    "is not a folder", "permission denied", "read-only file system",
)


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


def blobs_used(batch: Batch, pool: dict[str, tuple[bool, bytes]]) -> dict[str, tuple[bool, bytes]]:
    """The blobs of ``pool`` that the rows of ``batch`` reference, directly or through other blobs
    (those not in ``pool`` were written before)."""
    refs: set[str] = set()
    for row in batch.steps:
        collect_refs(unpack(row["payload"]), refs)
    rows = [*batch.runs_new, *batch.calls, *(fields for _, fields in batch.runs_update), *(fields for _, fields in batch.calls_update)]
    for row in rows:
        for value in row.values():
            if isinstance(value, str) and _REF in value:
                try:
                    collect_refs(orjson.loads(value), refs)
                except orjson.JSONDecodeError:
                    pass
    used: dict[str, tuple[bool, bytes]] = {}
    frontier = [h for h in refs if h in pool]
    while frontier:
        h = frontier.pop()
        if h in used:
            continue
        zipped, data = used[h] = pool[h]
        if zipped or _REF.encode() in data:
            frontier.extend(r for r in collect_refs(unpack((b"z" if zipped else b"j") + data)) if r in pool and r not in used)
    return used


def describe_rows(batch: Batch) -> str:
    """Which runs' rows ``batch`` holds, and what of each: ``run 41d3…: steps 5-6, 2 calls, its end``."""
    runs: dict[str, dict[str, Any]] = {}

    def of(run_id: str) -> dict[str, Any]:
        return runs.setdefault(run_id, {"steps": set(), "sub": 0, "calls": 0, "end": False})

    whole = {row["id"] for row in batch.runs_new}
    for run_id in whole:
        of(run_id)
    for row in batch.steps:
        if row.get("ns"):
            of(row["run_id"])["sub"] += 1
        else:
            of(row["run_id"])["steps"].add(row["step"])
    for row in batch.calls:
        of(row["run_id"])["calls"] += 1
    for run_id, fields in batch.runs_update:
        of(run_id)["end"] |= "status" in fields  # else a heartbeat: "its progress"
    parts = []
    shown = sorted(runs.items())
    if len(shown) > _RUNS_NAMED:
        shown, more = shown[:_RUNS_NAMED], len(shown) - _RUNS_NAMED
    else:
        more = 0
    for run_id, got in shown:
        if run_id in whole:
            parts.append(f"run {run_id}: all of it")
            continue
        what = []
        if got["steps"]:
            what.append(("step " if len(got["steps"]) == 1 else "steps ") + _ranges(sorted(got["steps"])))
        if got["sub"]:
            what.append(f"{got['sub']} subgraph step{'s' * (got['sub'] != 1)}")
        if got["calls"]:
            what.append(f"{got['calls']} call{'s' * (got['calls'] != 1)}")
        if got["end"]:
            what.append("its end")
        parts.append(f"run {run_id}: " + (", ".join(what) or "its progress"))
    if more:
        parts.append(f"{more} more run{'s' * (more != 1)}")
    if batch.calls_update:
        n = len(batch.calls_update)
        parts.append(f"{n} late call result{'s' * (n != 1)}")
    return "; ".join(parts)


def _ranges(numbers: list[int]) -> str:
    """``[1, 2, 3, 5]`` as ``1-3, 5``."""
    out = []
    start = prev = numbers[0]
    for n in [*numbers[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ", ".join(out)


def _split(items: list[Any], belongs: Callable[[Any], bool]) -> tuple[list[Any], list[Any]]:
    """``(items that belong, the others)``, each in order."""
    inside: list[Any] = []
    outside: list[Any] = []
    for item in items:
        (inside if belongs(item) else outside).append(item)
    return inside, outside


_MAX_UPDATES_TEXT = 256 * 2**20  # what an import reads of that key at most


def rescue(batch: Batch, *, rest: Batch | None = None, pool: dict[str, tuple[bool, bytes]] | None = None, target: str = "") -> Path | None:
    """Write ``batch`` (whole runs) and ``rest`` (rows of runs store ``target`` holds part of, with
    the blobs of ``pool`` they use) to a new SQLite store; its path, or ``None`` if no folder takes it."""
    from graphtape.recorder.store.rescue_file import note_rescued_rows
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
            if batch:
                store.write(batch)
            if rest:
                store.write(Batch(steps=rest.steps, calls=rest.calls, blobs=blobs_used(rest, pool or {})))
                note = {"for": target, "runs": sorted(rest.run_ids()), "runs_update": rest.runs_update, "calls_update": rest.calls_update}
                note_rescued_rows(store, orjson.dumps(note).decode())
            return path
        except Exception:  # noqa: BLE001 - nothing half-written is left behind
            pass
        finally:
            store.close()
        for leftover in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            leftover.unlink(missing_ok=True)
    return None


class RescueImport:
    """What ``import_rescue`` put into the store."""

    def __init__(self, whole: list[str], completed: list[str], steps: int, calls: int, target: str, unplaced: str = "") -> None:
        self.whole = whole  # runs the rescue file held whole, added (or already there)
        self.completed = completed  # runs the store held part of, given the rest
        self.steps = steps
        self.calls = calls
        self.target = target  # the store the rescued rows were recorded for, as it may be shown
        self.unplaced = unplaced  # why some rows were left out: the runs they belong to are not in this store


def import_rescue(store: Any, path: str | os.PathLike) -> RescueImport:
    """Put a rescue file's rows into ``store``: its whole runs, and the rows left of runs ``store``
    holds part of. The rest of a run ``store`` does not hold is left out (``unplaced`` says so,
    naming the store it belongs to; ``StoreError`` if nothing else is there to import). Rows
    ``store`` holds already are left out, so importing twice adds nothing twice."""
    from graphtape.recorder.errors import StoreError
    from graphtape.recorder.store.rescue_file import read_rescue_file

    text, runs, steps, calls, blobs = read_rescue_file(path)
    note = _rescued_rows(text, path)
    whole = [row["id"] for row in runs]
    partial = [r for r in note["runs"] if r not in set(whole)]
    missing = {r for r in partial if not store.has_run(r)}
    where = f" (they were recorded into {note['for']})" if note["for"] else ""
    unplaced = ""
    if missing:
        first = sorted(missing)[0]
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        unplaced = f"{path} holds the rest of run {first}{more}, which this store does not hold{where}: import it into that store (pass --db)"
        if not whole and len(missing) == len(partial):
            raise StoreError(unplaced)
    keep = lambda run_id: run_id not in missing  # noqa: E731
    left_calls = {row["call_id"] for row in calls if not keep(row["run_id"])}
    batch = Batch(
        runs_new=runs,
        steps=[row for row in steps if keep(row["run_id"])],
        calls=[row for row in calls if keep(row["run_id"])],
        blobs=blobs,
        runs_update=[u for u in _fields(note["runs_update"], "runs", "id") if keep(u[0])],
        calls_update=[u for u in _fields(note["calls_update"], "calls", "call_id") if u[0] not in left_calls],
    )
    store.write(batch, again=True)
    return RescueImport(whole, [r for r in partial if r not in missing], len(batch.steps), len(batch.calls), note["for"], unplaced)


def _rescued_rows(text: str | None, path: str | os.PathLike) -> dict[str, Any]:
    """The ``rescued_rows`` note of a rescue file (none: a file of whole runs), checked for shape."""
    from graphtape.recorder.errors import StoreError

    empty: dict[str, Any] = {"for": "", "runs": [], "runs_update": [], "calls_update": []}
    if text is None:
        return empty
    bad = StoreError(f"{path} is not a rescue file as graphtape writes it (its rescued_rows note is damaged)")
    if len(text) > _MAX_UPDATES_TEXT:
        raise bad
    try:
        note = orjson.loads(text)
    except orjson.JSONDecodeError:
        raise bad from None
    if not isinstance(note, dict):
        raise bad
    out = {**empty, **{k: note[k] for k in empty if k in note}}
    if not isinstance(out["for"], str) or not isinstance(out["runs"], list) or not all(isinstance(r, str) for r in out["runs"]):
        raise bad
    for key in ("runs_update", "calls_update"):
        items = out[key]
        if not isinstance(items, list) or not all(isinstance(i, list) and len(i) == 2 and isinstance(i[0], str) and isinstance(i[1], dict) for i in items):
            raise bad
    return out


def _fields(items: list[list[Any]], table: str, key: str) -> list[tuple[str, dict]]:
    """Updates read from a rescue file: only the table's own columns (never its key), with plain values."""
    from graphtape.recorder.store.rescue_file import columns

    names = columns(table) - {key}
    plain = (str, int, float, bool, type(None))
    out = [(row_id, {k: v for k, v in fields.items() if k in names and isinstance(v, plain)}) for row_id, fields in items]
    return [(row_id, fields) for row_id, fields in out if fields]
