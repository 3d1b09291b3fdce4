"""Which rows of a run the store will not hold, so that the run ends ``incomplete``, not ``ok``.

A store that stopped taking writes part-way through a run (a full disk, a read-only file, a
server that refused for good) leaves the run's first steps in the store and its last ones lost,
or saved to a rescue file at close. The run's end still reaches the store (the rows it left are
small), and a reader shown ``ok`` would take the run as whole: ``runs`` would list it beside
the others, a replay would report the missing steps as divergences, an export would make a
fixture of half a run. So the writer notes here each step and call of a run that it dropped or
set aside, and every end it writes for that run says ``status="incomplete"``, with what is
missing in ``status_reason`` (``"8 steps not written"``); how the run ended stays in its other
fields (an error's type and message), and which steps, and where they went, in its fault log.

Rows put back later (``graphtape import-rescue``) carry the run's end as it was before: the
run reads as it ended once it is whole again.
"""

from __future__ import annotations

import threading

from graphtape.recorder.store import Batch

INCOMPLETE = "incomplete"
_REASON_MAX = 32  # the width of the runs table's status_reason column


class UnwrittenRows:
    """Counts, per run, the steps and calls the store will not get from this writer."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_run: dict[str, list[int]] = {}  # run id -> [steps, calls]

    def note(self, batch: Batch) -> None:
        """``batch``'s steps and calls will not be in the store (dropped, or saved elsewhere)."""
        with self._lock:
            for row in batch.steps:
                self._by_run.setdefault(row["run_id"], [0, 0])[0] += 1
            for row in batch.calls:
                self._by_run.setdefault(row["run_id"], [0, 0])[1] += 1

    def mark(self, batch: Batch) -> None:
        """Make every end of a run in ``batch`` whose rows were noted say it is incomplete (in place;
        a status of ``running``, a resume starting, is left as it is)."""
        if not self._by_run:
            return
        with self._lock:
            for run_id, fields in batch.runs_update:
                counts = self._by_run.get(run_id)
                if counts is not None and fields.get("status") not in (None, "running"):
                    fields["status"] = INCOMPLETE
                    fields["status_reason"] = reason(*counts)

    def __contains__(self, run_id: object) -> bool:
        return run_id in self._by_run


def reason(steps: int, calls: int) -> str:
    """``"8 steps not written"``, ``"8 steps, 2 calls not written"``, within the column's width."""
    parts = [f"{n} {what}{'s' * (n != 1)}" for n, what in ((steps, "step"), (calls, "call")) if n]
    text = f"{', '.join(parts) or 'rows'} not written"
    return text if len(text) <= _REASON_MAX else "rows not written"


def last_before_gap(steps: list[int] | set[int], start: int | None = None) -> int | None:
    """Of an incomplete run's stored steps, the last one before the first step missing (at or
    after ``start``): what a replay or a fixture can stand on. None when no step is stored."""
    done = sorted(steps)
    return next((a for a, b in zip(done, done[1:]) if b != a + 1 and (start is None or a >= start)), done[-1] if done else None)
