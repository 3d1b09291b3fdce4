"""Whether a replay or fork got its own run written, and if not, why, in one line.

A replay records itself as a new run through a ``Recorder``, which never
fails the graph: a write the store refuses is a warning and a counted fault.
Without this check the replay would then look for a run that is not there
and say "no run matches '<its id>'". ``RecorderWarnings`` takes what the
replay's recorder would have warned while the replay ran, so the report can
say why in its one line; a replay that was recorded anyway passes them on.
"""

from __future__ import annotations

import logging

from graphtape.recorder.errors import RunNotFound
from graphtape.recorder.store import RunStore

_log = logging.getLogger("graphtape")


class RecorderWarnings:
    """The warnings of a replay's recorder (its ``warnings_to``), held back until the replay knows
    whether it was recorded: if not, the first one is the reason in the replay's error."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, message: str) -> None:
        if len(self.lines) < 10:
            self.lines.append(message)

    def pass_on(self) -> None:
        """Warn them after all, as the recorder would have: the replay was recorded, with faults."""
        for line in self.lines:
            _log.warning("graphtape: %s", line)


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
