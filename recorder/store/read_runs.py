"""Reading runs: one run by id, unique prefix or ``last~N``, and its details (inputs, output, config, fault log).

A run's ``step_count`` is read here and nowhere else: the number of supersteps
stored for it in the root graph (distinct step numbers, the input step and a
step that never completed included), which is what ``show`` and the TUI list.
It is counted from the steps, never taken from the run row: a killed run never
wrote its last count, and a run that continues a thread or a fork does not start
at step -1, so "last step + 1" is not how many steps it has.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from graphtape.recorder import schema as S
from graphtape.recorder.errors import AmbiguousRun, RunNotFound
from graphtape.recorder.graph_info import VALUE_CHANNELS
from graphtape.recorder.lone_surrogates import has_lone_surrogate
from graphtape.recorder.terminal_text import one_line
from graphtape.recorder.records import RunDetail, RunInfo
from graphtape.recorder.store.listing import _escape_like, may_be_an_id
from graphtape.recorder.store.payloads import _strict_json, _uj
from graphtape.recorder.store.read_guard import _damage_is_a_store_error
from graphtape.recorder.store.read_steps import listed_order

MAX_INT = 2**63 - 1  # the store's integer columns (and so step numbers, offsets, limits) stop here

_STEP_COUNTS = (
    sa.select(S.steps.c.run_id, sa.func.count(sa.distinct(S.steps.c.step)))
    .where(S.steps.c.run_id.in_(sa.bindparam("run_ids", expanding=True)), S.steps.c.ns == "")
    .group_by(S.steps.c.run_id)
)


class RunReads:
    """Finds a run and reads it whole."""

    def _run_info(self, r: Any, step_count: int) -> RunInfo:
        # A run found dead in a store that may only be read (see ``mark_dead_runs``): killed, though not stored as such.
        dead = r.status == "running" and r.id in self.__dict__.get("_dead_unmarked", {})
        return RunInfo(
            id=r.id,
            name=r.name,
            graph_name=r.graph_name,
            status="interrupted" if dead else r.status,
            started_at=r.started_at,
            ended_at=self._dead_unmarked[r.id] if dead else r.ended_at,
            step_count=step_count,
            thread_id=r.thread_id,
            status_reason="killed" if dead else r.status_reason,
            error_type=r.error_type,
            error_message=r.error_message,
            graph_ref=r.graph_ref,
            tags=_uj(r.tags, []),
            parent_run_id=r.parent_run_id,
            fork_step=r.fork_step,
            redactions=r.redactions or 0,
            faults=r.faults or 0,
            durability=r.durability,
        )

    def _run_infos(self, rows: list[Any]) -> list[RunInfo]:
        """``RunInfo`` for run rows, each with its step count (one grouped read per 500 runs)."""
        counts = self.step_counts([r.id for r in rows])
        return [self._run_info(r, counts.get(r.id, 0)) for r in rows]

    @_damage_is_a_store_error
    def step_counts(self, run_ids: list[str]) -> dict[str, int]:
        """How many supersteps each run has stored in its root graph (see the module's docstring)."""
        out: dict[str, int] = {}
        ids = list(dict.fromkeys(run_ids))
        for i in range(0, len(ids), 500):
            out.update((run_id, int(n)) for run_id, n in self._read(_STEP_COUNTS, {"run_ids": ids[i : i + 500]}))
        return out

    # Newest first; the id breaks ties so every backend lists (and counts ``last~N``) alike.
    _NEWEST_FIRST = (S.runs.c.started_at.desc(), S.runs.c.id.desc())

    _RUN_COLS = [
        c
        for c in S.runs.c
        if c.name not in ("inputs", "output", "config", "graph", "versions", "fork_edit", "fault_log", "step_count")
    ]

    # Reads made for every run looked up, built once (see ``_read``).
    _ID_IS = sa.select(S.runs.c.id).where(S.runs.c.id == sa.bindparam("run_id"))
    _RUN_ROW = sa.select(*_RUN_COLS).where(S.runs.c.id == sa.bindparam("run_id"))
    _WHOLE_RUN_ROW = sa.select(S.runs).where(S.runs.c.id == sa.bindparam("run_id"))

    def _close_name(self, ref: str) -> str:
        """``; did you mean 'weather'?`` for a run name mistyped (read on the failure path only;
        the names come through their index, at most a few thousand of them)."""
        import difflib

        names = [r.name for r in self._read(sa.select(S.runs.c.name).distinct().limit(5000)) if isinstance(r.name, str)]
        close = difflib.get_close_matches(ref, names, n=1, cutoff=0.75)
        return f"; did you mean {one_line(close[0])!r}?" if close else ""

    def _recorded_count(self) -> int:
        """Runs ``last~N`` counts: recorded ones, not replays and forks."""
        return int(self._read(sa.select(sa.func.count()).select_from(S.runs).where(S.runs.c.parent_run_id.is_(None)))[0][0])

    @_damage_is_a_store_error
    def resolve_run(self, ref: str) -> str:
        """A full run id from an id, a unique prefix, ``last``, ``last~N`` or a run's name (its newest recorded run).

        Prefixes match case-sensitively on every backend, and an exact id wins
        even when it is also the prefix of other ids; a name is tried only when
        no id starts with it. ``last`` and names count recorded
        runs only: replays and forks (runs with a parent) are reached by id.
        """
        ref = (ref or "").strip()
        if not ref:
            raise RunNotFound("no run given")
        if ref == "last" or ref.startswith("last~"):
            back = 0
            if ref != "last":
                text = ref[5:]
                if not (text.isascii() and text.isdigit()):
                    raise RunNotFound(f"bad run alias {ref!r}: use last or last~N with N a whole number")
                back = int(text)
                if back > MAX_INT:
                    raise RunNotFound(f"{ref!r} goes back further than the {self._recorded_count()} recorded run(s)")
            rows = self._read(sa.select(S.runs.c.id).where(S.runs.c.parent_run_id.is_(None)).order_by(*self._NEWEST_FIRST).offset(back).limit(1))
            if not rows and not back:  # only derived runs: the newest of those
                rows = self._read(sa.select(S.runs.c.id).order_by(*self._NEWEST_FIRST).limit(1))
            if not rows:
                if back:
                    raise RunNotFound(f"{ref!r} goes back further than the {self._recorded_count()} recorded run(s)")
                from graphtape.recorder.store.rescue_hint import rescue_hint

                raise RunNotFound(rescue_hint(self.engine, self._safe_url()) or f"the store {self._safe_url()} has no runs yet: record one first (graphtape demo, or run the graph a Recorder's attach returns: graph = rec.attach(graph); the graph passed in is not recorded)")
            return rows[0].id
        # Text no id can be (not UTF-8: a byte a non-UTF-8 terminal passed) may still be a name.
        by_id = may_be_an_id(ref)
        if by_id and self._read(self._ID_IS, {"run_id": ref}):
            return ref
        rows = by_id and self._read(
            sa.select(S.runs.c.id)
            .where(
                S.runs.c.id.like(_escape_like(ref) + "%", escape="\\"),
                sa.func.substr(S.runs.c.id, 1, len(ref)) == ref,  # SQLite's LIKE ignores case
            )
            .order_by(S.runs.c.id)
            .limit(4)
        )
        if not rows:
            # A name means its newest recorded run, as ``last`` does: replays and forks keep their
            # source's name, and are named only when no recorded run has it.
            named = sa.select(S.runs.c.id).where(S.runs.c.name == ref)
            rows = self._read(named.where(S.runs.c.parent_run_id.is_(None)).order_by(*self._NEWEST_FIRST).limit(1))
            rows = rows or self._read(named.order_by(*self._NEWEST_FIRST).limit(1))
            if rows:
                return rows[0].id
            # Which store was searched: a run recorded elsewhere (another --db, Recorder("x.db")) is the usual cause.
            hint = "; it is not UTF-8 text: was it typed in another encoding?" if has_lone_surrogate(ref) else self._close_name(ref)
            raise RunNotFound(f"no run matches {ref!r} in {self._safe_url()} (graphtape runs lists them{hint})")
        if len(rows) > 1:
            shown = ", ".join(r.id for r in rows[:3]) + (", ..." if len(rows) > 3 else "")
            raise AmbiguousRun(f"{ref!r} matches several runs ({shown}): give more characters")
        return rows[0].id

    @_damage_is_a_store_error
    def has_run(self, run_id: str) -> bool:
        """Whether a run with exactly this id is stored: one read (``resolve_run`` tries prefixes and names too)."""
        return may_be_an_id(run_id) and bool(self._read(self._ID_IS, {"run_id": run_id}))

    @_damage_is_a_store_error
    def get_run(self, ref: str) -> RunInfo:
        return self._found_run(ref, self._RUN_ROW)[1]

    def _found_run(self, ref: str, row_by_id: Any) -> tuple[Any, RunInfo]:
        """The run ``ref`` names: its row (as ``row_by_id`` reads it: the listing's columns or more) and its ``RunInfo``."""
        run_id = self.resolve_run(ref)
        self.mark_dead_runs()
        rows = self._read(row_by_id, {"run_id": run_id})
        if not rows:
            raise RunNotFound(f"no run {run_id}")
        return rows[0], self._run_infos(rows)[0]

    @_damage_is_a_store_error
    def run_detail(self, ref: str, *, typed: bool = False, output: bool = True) -> RunDetail:
        """A run with its inputs, output, config, graph and fault log; ``typed`` rebuilds
        allow-listed types (messages, documents, registered classes) in the output.
        ``output=False`` leaves the output out (None): it is the final state, read step by step."""
        r, run = self._found_run(ref, self._WHOLE_RUN_ROW)  # the whole row holds the listing's columns too: one read
        dec = self._plain_decoder
        final = self._final_output(run.id, r.output, typed) if output else None
        return RunDetail(
            run=run,
            inputs=dec(_uj(r.inputs)),
            output=final,
            config=dec(_uj(r.config)),
            graph=_uj(r.graph, {}),
            versions=_versions(_uj(r.versions, {})),
            fork_edit=dec(_uj(r.fork_edit)),
            fault_log=_uj(r.fault_log, []),
        )

    def _final_output(self, run_id: str, stored: str | None, typed: bool) -> Any:
        output = (self._typed_decoder if typed else self._plain_decoder)(_uj(stored))
        if output is None:
            # Not stored twice: a run's output is its state after its last completed step.
            marks = self.step_row_marks(run_id)  # where the steps are, not the steps: a long run's list is megabytes
            completed = {step for _, step, pending in marks if not pending}
            done = [step for step in listed_order(marks) if step in completed]
            if done:
                output = self.state_at(run_id, done[-1], typed=typed)
                if output and output.keys() <= VALUE_CHANNELS:
                    # No named state channels (a functional-API entrypoint, a StateGraph of one
                    # root value): the output is the value itself, as LangGraph returns it.
                    output = output["__root__"] if "__root__" in output else output.get("__end__")
        return output

    @_damage_is_a_store_error
    def latest_run_for_thread(self, thread_id: str, graph_name: str, *, excluding: str | None = None) -> RunInfo | None:
        """The thread's newest run of the graph (other than ``excluding``, a run just started on it)."""
        query = sa.select(*self._RUN_COLS).where(S.runs.c.thread_id == thread_id, S.runs.c.graph_name == graph_name)
        if excluding is not None:
            query = query.where(S.runs.c.id != excluding)
        rows = self._read(query.order_by(*self._NEWEST_FIRST).limit(1))
        return self._run_infos(rows)[0] if rows else None

    @_damage_is_a_store_error
    def run_graph(self, run_id: str) -> dict[str, Any]:
        """The graph structure recorded with a run (nodes, edges, routers, subgraphs), read alone.

        ``run_detail`` has it too, with the run's output, which for a long run
        means rebuilding its last state: a diff or a graph view needs only this.
        ``{}`` when the run was recorded without one (imported checkpoints).
        """
        rows = self._read(sa.select(S.runs.c.graph).where(S.runs.c.id == run_id))
        if not rows:
            raise RunNotFound(f"no run {run_id}")
        graph = _uj(rows[0].graph, {})
        return graph if isinstance(graph, dict) else {}

    @_damage_is_a_store_error
    def encoded_inputs(self, run_id: str) -> tuple[Any, Any]:
        """A run's ``(inputs, config)`` as stored: encoded, blob references unresolved (to copy, not to show)."""
        rows = self._read(sa.select(S.runs.c.inputs, S.runs.c.config).where(S.runs.c.id == run_id))
        if not rows:
            raise RunNotFound(f"no run {run_id}")
        return _strict_json(rows[0].inputs), _strict_json(rows[0].config)


def _versions(found: Any) -> dict[str, str]:
    """The package versions a run was recorded with, as text (a hand-edited store may hold anything there)."""
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}
