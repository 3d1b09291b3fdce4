"""The bytes of a stored payload or blob: orjson, zlib-compressed where that saves space.

The first byte says which. Reading refuses anything else, inflates at most
``MAX_INFLATE`` bytes per payload and charges the read's budget
(``read_guard``). Step payloads keep a route's task as an index and a task's
start as an offset; ``expand_payload`` undoes both.
"""

from __future__ import annotations

import zlib
from typing import Any

import orjson

from graphtape.recorder.errors import StoreError
from graphtape.recorder.json_cost import built_bytes
from graphtape.recorder.lone_surrogates import json_bytes
from graphtape.recorder.store.read_guard import _READ_BUDGET, ReadBudget


def squeeze(raw: bytes) -> tuple[bool, bytes]:
    """``(zipped, data)``: zlib-compressed only when that saves space.

    The compressor's window and memory are sized to the data: a step's payload is a few
    hundred bytes, and zlib's defaults (a 32 KiB window, ~256 KiB of state set up and
    cleared per call) cost it more than the compressing. A window as large as the data
    finds the same matches, and any zlib reader inflates it.
    """
    n = len(raw)
    if n > 160:
        bits = min(15, max(10, n.bit_length()))
        c = zlib.compressobj(6, zlib.DEFLATED, bits, min(8, bits - 6))
        z = c.compress(raw) + c.flush()
        if len(z) < n - 16:
            return True, z
    return False, raw


def pack(obj: Any) -> bytes:
    """orjson, compressed when that saves space; first byte says which."""
    zipped, data = squeeze(json_bytes(obj))
    return (b"z" if zipped else b"j") + data


MAX_INFLATE = 256 * 1024 * 1024


def unpack(data: bytes, *, max_size: int = MAX_INFLATE) -> Any:
    """Inverse of :func:`pack`; refuses anything else.

    A compressed payload must be one complete zlib stream that inflates to at
    most ``max_size`` bytes, so a damaged or hostile file cannot exhaust memory.
    """
    data = bytes(data)
    if not data:
        raise StoreError("empty payload in the database (file damaged?)")
    head, body = data[:1], data[1:]
    budget = _READ_BUDGET.get() or ReadBudget()
    try:
        if head == b"z":
            d = zlib.decompressobj()
            # Inflated no further than the read can still afford: a bomb stops where it would
            # overrun the budget, not after building its whole inflated size first.
            room = min(max_size, max(budget.left, 0))
            body = d.decompress(body, room + 1)
            if len(body) > room:
                if room < max_size:
                    budget.spend(len(body))  # says what refused it: the read's budget
                raise StoreError(f"a stored payload inflates beyond {max_size} bytes; refusing to read it")
            if not d.eof:
                raise StoreError("damaged payload in the database: compressed data is truncated")
            if d.unused_data:
                raise StoreError("damaged payload in the database: data after the compressed stream")
        elif head != b"j":
            raise StoreError("unknown payload encoding in the database (file damaged or not graphtape's)")
        budget.spend(built_bytes(body))  # before the parse builds it
        return orjson.loads(body)
    except (zlib.error, orjson.JSONDecodeError) as exc:
        raise StoreError(f"damaged payload in the database: {exc}") from None


def _uj(text: str | None, default: Any = None) -> Any:
    if text is None:
        return default
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return default


def _strict_json(text: str | None) -> Any:
    """A JSON column's value; damaged text raises ``ValueError`` (a read that copies values must not guess)."""
    return None if text is None else orjson.loads(text)


def merge_events(earlier: list[dict], row: list[dict]) -> list[dict]:
    """A step's events once ``row`` (the step's next stored row, expanded) is read after ``earlier``.

    A task's row lists every resume value the task has used so far (a node that asked
    twice and was resumed twice has a row with ``[a]``, then one with ``[a, b]``), so a
    task's resume events in a later row replace its earlier ones; other events add up.
    """
    resumed = {e.get("task") for e in row if e.get("kind") == "resume" and e.get("task")}
    if not resumed:
        return [*earlier, *row]
    events = [*(e for e in earlier if not (e.get("kind") == "resume" and e.get("task") in resumed)), *row]
    for task in resumed:
        # The k-th answer answers the task's k-th question: shown in the order they happened.
        mine = [e for e in events if e.get("task") == task and e.get("kind") in ("interrupt", "resume")]
        asks = [e for e in mine if e["kind"] == "interrupt"]
        answers = [e for e in mine if e["kind"] == "resume"]
        paired = [e for k in range(max(len(asks), len(answers))) for e in (asks[k : k + 1] + answers[k : k + 1])]
        first = next(i for i, e in enumerate(events) if any(e is m for m in mine))
        rest = [e for e in events if not any(e is m for m in mine)]
        events = [*rest[:first], *paired, *rest[first:]]
    return events


def expand_payload(payload: dict, created_at: float) -> dict:
    """Undo the compact forms of a step payload: task indexes and start offsets.

    Rows store a route's or event's task as its index among the step's tasks
    ("ti") and a task's start as milliseconds before the checkpoint ("dt"),
    which keeps repeated 36-character ids and full timestamps out of every row.
    """
    if not isinstance(payload, dict) or not all(isinstance(payload.get(k, []), list) for k in ("t", "r", "e")):
        raise StoreError("damaged step payload: not a step's tasks, routes and events")
    if not all(isinstance(item, dict) for k in ("t", "r", "e") for item in payload.get(k, [])):
        raise StoreError("damaged step payload: a task, route or event is not a record")
    tasks = payload.get("t", [])
    for t in tasks:
        if "dt" in t:
            dt = t.pop("dt")
            if not isinstance(dt, (int, float)) or not isinstance(created_at, (int, float)):
                raise StoreError("damaged step payload: a task's start time is not a number")
            t["t0"] = created_at - dt / 1000
    ids = [t.get("id") for t in tasks]
    for item in (*payload.get("r", []), *payload.get("e", [])):
        if "ti" in item:
            i = item.pop("ti")
            item["task"] = ids[i] if isinstance(i, int) and 0 <= i < len(ids) else None
    return payload
