"""What a rescue file that holds no run of its own is, said where a reader expected runs.

``recorder.rescue`` saves the rows a store never took of a run it holds part of to a rescue file,
with no run row: listing that file, or showing its last run, said "no runs yet: record some", as
if the rows the recorder saved there were not there.
"""

from __future__ import annotations

from typing import Any

import orjson
import sqlalchemy as sa

from graphtape.recorder import schema as S
from graphtape.recorder.terminal_text import command_line, one_line, printable

RESCUED_ROWS = "rescued_rows"  # graphtape_meta key: the updates of partly stored runs, as JSON
_NOTE_MAX = 16 * 2**20  # what a listing reads of the note to say what the file is


def rescue_hint(engine: Any, where: str) -> str | None:
    """What a rescue file holding no run of its own is, and the command that puts its rows back
    (``None`` for any other store). The note is recorded data: the store it names is shown
    printable, and quoted in the command."""
    try:
        with engine.connect() as conn:
            text = conn.execute(sa.select(S.meta.c.value).where(S.meta.c.key == RESCUED_ROWS)).scalar()
    except Exception:  # noqa: BLE001 - not a rescue file, or not readable as one: no hint
        return None
    if not isinstance(text, str) or len(text) > _NOTE_MAX:
        return None
    try:
        note = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(note, dict):
        return None
    target = note.get("for") if isinstance(note.get("for"), str) else ""
    runs = note.get("runs") if isinstance(note.get("runs"), list) else []
    what = f"the rest of {len(runs)} run{'s' * (len(runs) != 1)}"
    if not target:
        return f"{where} is a rescue file holding {what}: put it back with graphtape --db STORE import-rescue {command_line(where)}"
    shown = one_line(printable(target))
    return f"{where} is a rescue file holding {what} recorded into {shown}: put it back with {one_line(printable(command_line('graphtape', '--db', target, 'import-rescue', where)))}"
