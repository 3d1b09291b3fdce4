"""Reading the state at a step: its keyframe and the deltas after it, and LangGraph's checkpoint built from them.

A step's state is stored as a keyframe or as a delta against the step before
(``recorder.frames``), so any step costs one keyframe and a bounded number
of deltas. The last few keyframes read stay parsed; long lists can come back
deferred, decoded where they are read.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa

from graphtape.recorder import schema as S
from graphtape.recorder.codec import BLOB_REF
from graphtape.recorder.deferred import DEFER_AT, DeferredList
from graphtape.recorder.errors import StepNotFound
from graphtape.recorder.frames import FrameState
from graphtape.recorder.graph_info import is_internal_channel
from graphtape.recorder.records import FLAG_PENDING, Checkpoint
from graphtape.recorder.store.payloads import unpack
from graphtape.recorder.store.read_guard import _damage_is_a_store_error

# Reads made for every state shown or compared, built once (see ``_read``).
_c = S.steps.c
_RUN, _NS, _SEQ = sa.bindparam("run_id"), sa.bindparam("ns"), sa.bindparam("seq")
_COMPLETED = _c.flags.op("&")(FLAG_PENDING) == 0
_FRAMES = sa.select(_c.step, _c.is_key, _c.payload).where(_c.run_id == _RUN, _c.ns == _NS, _COMPLETED).order_by(_c.seq)
_KEYFRAME_SEQ = sa.select(sa.func.max(_c.seq)).where(_c.run_id == _RUN, _c.ns == _NS, _c.seq <= _SEQ, _c.is_key.is_(True))
_FRAME_ROWS = sa.select(_c.seq, _c.is_key, _c.payload).where(_c.run_id == _RUN, _c.ns == _NS, _c.seq <= _SEQ, _COMPLETED).order_by(_c.seq)
_FRAME_ROWS_FROM_KEY = _FRAME_ROWS.where(_c.seq >= sa.bindparam("start"))
_FRAME_ROWS_AFTER_KEY = _FRAME_ROWS.where(_c.seq > sa.bindparam("start"))

KEYFRAMES_KEPT = 4  # parsed keyframes kept for state reads (stepping reuses one for many steps)
SHARED_REFS = 200_000  # blob references kept shared between deferred state reads (then started afresh)


class StateReads:
    """Rebuilds encoded state from stored frames, and decodes it."""

    def _init_state_cache(self) -> None:
        self._keyframes: OrderedDict[tuple[str, str, int], dict] = OrderedDict()  # parsed, by (run, ns, seq)
        self._shared_refs: dict[str, dict] = {}  # one reference object per blob, for deferred lists

    @_damage_is_a_store_error
    def frames(self, run_id: str, ns: str = "") -> Iterator[tuple[int, dict[str, Any]]]:
        """``(step, encoded state)`` after each completed step, in order, in one pass.

        The values are still encoded (blob references unresolved), so a reader
        comparing two runs decodes only what changed; ``decode`` resolves them.
        Internal channels (branches, tasks) are left out.
        """
        state = FrameState()
        last: tuple[int, dict] | None = None
        for r in self._read(_FRAMES, {"run_id": run_id, "ns": ns}):
            frame = unpack(r.payload).get("s")
            if frame is not None:
                state.apply(frame, bool(r.is_key))
            current = (r.step, {k: v for k, v in state.values.items() if not is_internal_channel(k)})
            if last is not None and last[0] != r.step:
                yield last
            last = current
        if last is not None:
            yield last

    def _frame_rows(self, run_id: str, target: Any, ns: str, *, after_key: bool = False) -> tuple[int, list[Any]]:
        """``(keyframe seq, rows)``: the stored frames ``target``'s state is rebuilt from.

        The rows are its keyframe, then the deltas after it (only the deltas
        with ``after_key``, for a reader holding that keyframe already).
        """
        params = {"run_id": run_id, "ns": ns, "seq": target.seq}
        key = self._read(_KEYFRAME_SEQ, params)
        start = key[0][0] if key and key[0][0] is not None else 0
        return start, self._read(_FRAME_ROWS_AFTER_KEY if after_key else _FRAME_ROWS_FROM_KEY, {**params, "start": start})

    def _state_row(self, run_id: str, step: int, ns: str) -> tuple[Any, Any]:
        """``(row of step, row whose state it shows)``: a pending step shows the state before it."""
        target = self._step_row(run_id, step, ns)
        if not target.flags & FLAG_PENDING:
            return target, target
        prev = self._read(
            sa.select(S.steps.c.seq)
            .where(S.steps.c.run_id == run_id, S.steps.c.ns == ns, S.steps.c.step < target.step, S.steps.c.flags.op("&")(FLAG_PENDING) == 0)
            .order_by(S.steps.c.seq.desc())
            .limit(1)
        )
        return target, (prev[0] if prev else None)

    def _frame_state(self, run_id: str, step: int, ns: str) -> tuple[Any, FrameState]:
        """The step's row and its encoded state, rebuilt from a keyframe and the deltas after it.

        The last few keyframes read are kept parsed: stepping through a run
        reads the same keyframe for many steps in a row, and a long history's
        keyframe is most of the work (and, as 11,000 short-lived objects per
        read, what made Python's full garbage collections frequent).
        """
        target, source = self._state_row(run_id, step, ns)
        state = FrameState(in_place=True)
        if source is None:
            return target, state
        cached = self._cached_keyframe(run_id, ns, source)
        start, rows = self._frame_rows(run_id, source, ns, after_key=cached is not None)
        if cached is not None and cached[0] == start:
            state.apply(cached[1], True)
        elif cached is not None:
            start, rows = self._frame_rows(run_id, source, ns)  # a keyframe was written since: read it
        for r in rows:
            frame = unpack(r.payload).get("s")
            if frame is None:
                continue
            state.apply(frame, bool(r.is_key))
            if r.is_key and r.seq == start:
                self._keep_keyframe(run_id, ns, start, frame)
        return target, state

    def _cached_keyframe(self, run_id: str, ns: str, source: Any) -> tuple[int, dict] | None:
        """The latest kept keyframe of this namespace at or before ``source``: ``(seq, frame)``."""
        with self._blob_lock:
            best = None
            for (r, n, seq), frame in self._keyframes.items():
                if r == run_id and n == ns and seq <= source.seq and (best is None or seq > best[0]):
                    best = (seq, frame)
            return best

    def _keep_keyframe(self, run_id: str, ns: str, seq: int, frame: dict) -> None:
        # Its lists point at the shared blob references: a kept keyframe costs its lists, not 11,000 dicts.
        frame = {**frame, "v": {ch: self._share_refs(v) if type(v) is list else v for ch, v in frame.get("v", {}).items()}}
        with self._blob_lock:
            self._keyframes[(run_id, ns, seq)] = frame
            self._keyframes.move_to_end((run_id, ns, seq))
            while len(self._keyframes) > KEYFRAMES_KEPT:
                self._keyframes.popitem(last=False)

    @_damage_is_a_store_error
    def state_reads(self, run_id: str, step: int, ns: str = "") -> int:
        """How many stored frames ``state_at`` reads for this step: one keyframe plus its deltas.

        Bounded by ``frames.MAX_CHAIN`` however long the run is; shown by
        diagnostics and pinned by the contract tests.
        """
        _, source = self._state_row(run_id, step, ns)
        return 0 if source is None else len(self._frame_rows(run_id, source, ns)[1])

    @_damage_is_a_store_error
    def state_at(self, run_id: str, step: int, ns: str = "", *, typed: bool = False, internal: bool = False, deferred: bool = False) -> dict[str, Any]:
        """The full graph state after ``step`` (random access: one keyframe plus deltas).

        ``deferred=True`` leaves each long top-level list (``DEFER_AT`` items or
        more) as a :class:`DeferredList` that decodes items when they are first
        read: a viewer showing a few messages of a long history pays for those.
        """
        _, fs = self._frame_state(run_id, step, ns)
        values = fs.values if internal else {k: v for k, v in fs.values.items() if not is_internal_channel(k)}
        if not deferred or typed:
            return self.decode(values, typed=typed)
        long = {k: self._share_refs(v) for k, v in values.items() if type(v) is list and len(v) >= DEFER_AT}
        decoded = self.decode({k: v for k, v in values.items() if k not in long})
        return {k: DeferredList(long[k], self.decode) if k in long else decoded[k] for k in values}

    def _share_refs(self, items: list) -> list:
        """``items`` with each blob reference replaced by one object shared by every state read.

        Neighbouring states hold the same 11,000 references: shared, a cached
        state costs a list of pointers instead of 11,000 small dicts, and
        comparing two states' items finds most of them identical at once.
        """
        shared = self._shared_refs
        if len(shared) > SHARED_REFS:
            shared.clear()  # only a saving: references made before still work
        return [
            shared.setdefault(ref, i) if type(i) is dict and len(i) == 1 and type(ref := i.get(BLOB_REF)) is str else i
            for i in items
        ]

    @_damage_is_a_store_error
    def checkpoint_at(self, run_id: str, step: int, ns: str = "", *, typed: bool = True) -> Checkpoint:
        """The recorded checkpoint in LangGraph's shape, so a graph can resume from it."""
        row, fs = self._frame_state(run_id, step, ns)
        if row.checkpoint_id is None:
            raise StepNotFound(
                f"step {step} of run {run_id} has no checkpoint to resume from: it never completed, "
                "or the run was imported from a fixture, which keeps only its starting checkpoint"
            )
        return Checkpoint(
            checkpoint_id=row.checkpoint_id,
            parent_checkpoint_id=row.parent_checkpoint_id,
            ns=ns,
            step=row.step,
            source=row.source,
            channel_values=self.decode(fs.values, typed=typed),
            channel_versions=dict(fs.versions),
            versions_seen={k: dict(v) for k, v in fs.seen.items()},
        )
