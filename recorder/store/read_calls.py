"""Reading tool and model calls: a run's calls (of one step or namespace), and counts per step."""

from __future__ import annotations

import bisect
import itertools

import sqlalchemy as sa

from graphtape.recorder import schema as S
from graphtape.recorder.codec import collect_refs
from graphtape.recorder.errors import StoreError
from graphtape.recorder.records import NOT_FAILURES, PART_OF_A_CALL, CallInfo
from graphtape.recorder.store.payloads import _strict_json, _uj
from graphtape.recorder.store.read_guard import ReadBudget, _damage_is_a_store_error
from graphtape.recorder.tracebacks import valid_frames

_RUN_CALLS = sa.select(S.calls).where(S.calls.c.run_id == sa.bindparam("run_id")).order_by(S.calls.c.started_at, S.calls.c.id)


class CallReads:
    """Reads the calls table."""

    @_damage_is_a_store_error
    def calls(self, run_id: str, *, step: int | None = None, ns: str | None = None, encoded: bool = False, with_subgraphs: bool = False) -> list[CallInfo]:
        """Tool and model calls of a run, optionally of one step / namespace.

        ``encoded=True`` leaves inputs and outputs as stored (blob references
        unresolved), for copying a recording rather than showing it.
        ``with_subgraphs=True`` (with ``step``) adds the calls made in the subgraphs that step
        ran, as ``call_counts(..., with_subgraphs=True)`` counts them.
        """
        q = _RUN_CALLS  # a whole run's (replay, export, the TUI), or narrowed here
        span = self._step_span(run_id, ns or "", step) if with_subgraphs and step is not None else None
        if span is not None:
            here = ns or ""
            nested = [S.calls.c.ns != here]
            nested += [S.calls.c.started_at > span[0]] if span[0] is not None else []
            nested += [S.calls.c.started_at <= span[1]] if span[1] is not None else []
            q = q.where(sa.or_(sa.and_(S.calls.c.ns == here, S.calls.c.step == step), sa.and_(*nested)))
        else:
            if ns is not None:
                q = q.where(S.calls.c.ns == ns)
            if step is not None:
                q = q.where(S.calls.c.step == step)
        rows = self._read(q, {"run_id": run_id})
        if span is not None:
            rows = [r for r in rows if r.ns == here or r.ns.startswith(_below(here))]
        if encoded:
            trees = [(_strict_json(r.inputs), _strict_json(r.output)) for r in rows]
            stored_outputs = [o for _, o in trees]
        else:
            # One blob read for all of them, paid by this read, then each call decoded on its own:
            # a message in many calls' inputs is decoded once (the decoded blobs are kept), and
            # each call's value has the decoder's whole budget, of values and of the bytes it
            # expands to (a conversation resent to 1,000 model calls is not one value a million
            # messages long; charged to the read, a loop's calls cost the square of its length).
            encoded_calls = [[_uj(r.inputs), _uj(r.output)] for r in rows]
            stored_outputs = [c[1] for c in encoded_calls]
            self.blobs(collect_refs(encoded_calls))
            try:
                trees = [tuple(self._decode(call, False, ReadBudget().spend)) for call in encoded_calls]
            except StoreError as exc:
                raise StoreError(f"cannot decode a recorded call: {str(exc).removeprefix('cannot decode a recorded value: ')}") from None

        return [
            CallInfo(
                call_id=r.call_id,
                kind=r.kind,
                name=r.name,
                ns=r.ns,
                step=r.step,
                node=r.node,
                task_id=r.task_id,
                inputs=i,
                output=o,
                error_type=r.error_type,
                error_message=r.error_message,
                traceback=valid_frames(_uj(r.traceback)) if r.traceback else None,
                started_at=r.started_at,
                latency_ms=r.latency_ms,
                input_tokens=r.input_tokens,
                output_tokens=r.output_tokens,
                total_tokens=r.total_tokens,
                parent_call_id=r.parent_call_id,
                streamed=bool(r.streamed),
                encoded_output=stored,
            )
            for r, (i, o), stored in zip(rows, trees, stored_outputs)
        ]

    @_damage_is_a_store_error
    def call_counts(self, run_id: str, ns: str = "", *, with_subgraphs: bool = False) -> dict[int, dict[str, int]]:
        """Per step: how many tool, model, HTTP and store calls were made, and how many failed
        ("failed"; a call that stopped at an interrupt or sent a Command to the parent did not).

        An HTTP request or a store operation made inside a tool or model call is part of that
        call, not counted again. ``with_subgraphs=True`` counts too the calls made in the
        subgraphs each step ran (a supervisor's agents are subgraphs: their model and tool calls
        are the step's), each under the step that was running when it started.
        """
        failed = sa.func.sum(sa.case((sa.and_(S.calls.c.error_type.is_not(None), S.calls.c.error_type.not_in(sorted(NOT_FAILURES))), 1), else_=0))
        own = sa.or_(S.calls.c.kind.not_in(PART_OF_A_CALL), S.calls.c.parent_call_id.is_(None))
        rows = self._read(
            sa.select(S.calls.c.step, S.calls.c.kind, sa.func.count(), failed)
            .where(S.calls.c.run_id == run_id, S.calls.c.ns == ns, own)
            .group_by(S.calls.c.step, S.calls.c.kind)
        )
        out: dict[int, dict[str, int]] = {}
        for step, kind, n, bad in rows:
            counts = out.setdefault(step, {})
            counts[kind] = n
            if bad:
                counts["failed"] = counts.get("failed", 0) + int(bad)
        if with_subgraphs:
            self._count_below(run_id, ns, out)
        return out

    def _count_below(self, run_id: str, ns: str, out: dict[int, dict[str, int]]) -> None:
        """Add to ``out`` the calls of the namespaces below ``ns``, each under its step of ``ns``."""
        own = sa.or_(S.calls.c.kind.not_in(PART_OF_A_CALL), S.calls.c.parent_call_id.is_(None))
        rows = self._read(sa.select(S.calls.c.ns, S.calls.c.kind, S.calls.c.started_at, S.calls.c.error_type).where(S.calls.c.run_id == run_id, S.calls.c.ns != ns, own))
        prefix = _below(ns)
        rows = [r for r in rows if r[0].startswith(prefix)]
        if not rows:
            return  # no subgraph made a call: the steps are not read
        ends = self._step_ends(run_id, ns)
        if not ends:
            return
        steps, times = [s for s, _ in ends], list(itertools.accumulate((t for _, t in ends), max))  # in step order, as spans are
        for _ns, kind, started, error in rows:
            step = steps[min(bisect.bisect_left(times, started), len(steps) - 1)]
            counts = out.setdefault(step, {})
            counts[kind] = counts.get(kind, 0) + 1
            if error is not None and error not in NOT_FAILURES:
                counts["failed"] = counts.get("failed", 0) + 1

    _STEP_ENDS = sa.select(S.steps.c.step, sa.func.max(S.steps.c.created_at)).group_by(S.steps.c.step).order_by(S.steps.c.step)

    def _step_ends(self, run_id: str, ns: str, *, steps: tuple[int, ...] | None = None) -> list[tuple[int, float]]:
        """``(step, when its last row was written)`` for the steps of ``ns`` (or only ``steps``), in order.

        A call starts while its step runs: after the step before was written and before its
        own step is (a step interrupted, then resumed, is written again when it completes).
        """
        q = self._STEP_ENDS.where(S.steps.c.run_id == run_id, S.steps.c.ns == ns, S.steps.c.step >= 0)
        if steps is not None:
            q = q.where(S.steps.c.step.in_(steps))
        return [(int(step), float(at)) for step, at in self._read(q)]

    def _step_span(self, run_id: str, ns: str, step: int) -> tuple[float | None, float | None] | None:
        """The times the calls of ``step`` of ``ns`` may start in: after the step before it was
        written, up to its own writing (None: open; the last step's end stays open, as a run cut
        short wrote no later step). Read from that step and its neighbours' rows alone: one step
        of a long run costs what one of a short run does. None if there is no such step."""
        where = (S.steps.c.run_id == run_id, S.steps.c.ns == ns)
        before = self._read(sa.select(sa.func.max(S.steps.c.step)).where(*where, S.steps.c.step >= 0, S.steps.c.step < step))[0][0]
        later = self._read(sa.select(S.steps.c.step).where(*where, S.steps.c.step > step).limit(1))
        ends = dict(self._step_ends(run_id, ns, steps=(step,) if before is None else (before, step)))
        if step not in ends:
            return None
        return ends.get(before), ends[step] if later else None

    @_damage_is_a_store_error
    def call_totals(self, run_id: str) -> tuple[dict[str, int], int]:
        """``(calls by kind, tokens)`` over a whole run, every namespace: what ``show`` sums up.

        Counted in SQL, no value read: a runaway loop's model calls each hold the whole
        conversation, so decoding them all to count them costs the square of the loop's length.
        As in ``call_counts``, a request or store operation made inside a call is part of it.
        """
        own = sa.or_(S.calls.c.kind.not_in(PART_OF_A_CALL), S.calls.c.parent_call_id.is_(None))
        rows = self._read(
            sa.select(S.calls.c.kind, sa.func.count(), sa.func.sum(S.calls.c.total_tokens)).where(S.calls.c.run_id == run_id, own).group_by(S.calls.c.kind)
        )
        return {kind: int(n) for kind, n, _ in rows}, sum(int(tokens or 0) for _, _, tokens in rows)


def _below(ns: str) -> str:
    """What the namespaces below ``ns`` start with."""
    return f"{ns}|" if ns else ""

