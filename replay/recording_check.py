"""Whether a replay or fork got its own run written, and if not, why, in one line.

A replay records itself as a new run through a ``Recorder``, which never
fails the graph: a write the store refuses is a warning and a counted fault.
Without this check the replay would then look for a run that is not there
and say "no run matches '<its id>'". ``RecorderWarnings`` keeps what the
recorder said while the replay ran, so the report can say why.
"""

from __future__ import annotations

import logging

from graphtape.recorder.errors import RunNotFound
from graphtape.recorder.store import RunStore

_LOGGER = "graphtape"


class RecorderWarnings(logging.Filter):
    """Keeps the recorder's warnings while a replay records (they still print as usual)."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []
        logging.getLogger(_LOGGER).addFilter(self)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING and len(self.lines) < 10:
            self.lines.append(record.getMessage().removeprefix("graphtape: "))
        return True

    def stop(self) -> None:
        logging.getLogger(_LOGGER).removeFilter(self)


def not_recorded(store: RunStore, run_id: str | None, faults: int, warnings: list[str], kind: str) -> str | None:
    """Why the ``kind`` (replay or fork) run ``run_id`` is not in ``store``; None when it is (or never started)."""
    if run_id is None and not faults:
        return None  # the graph stopped before a run began: the result says why
    if run_id is not None:
        try:
            store.resolve_run(run_id)  # the exact id: one indexed read
            return None
        except RunNotFound:
            pass
    why = warnings[0] if warnings else f"{faults} store write(s) failed" if faults else f"its run {run_id} is not in the store"
    return f"could not record the {kind}: {why}"
