"""What ``runs`` and ``show`` report, read from the store as plain JSON-ready data.

The text renderer and ``--json`` print the same dicts, so the two never drift.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, fields
from typing import TYPE_CHECKING, Any

from graphtape.recorder import RunInfo, StepDetail, StepInfo
from graphtape.recorder.errors import StepNotFound
from graphtape.recorder.records import FLAG_RESUME, RouteInfo
from graphtape.tui.render import node_waits

if TYPE_CHECKING:  # the store protocol loads SQLAlchemy: `graphtape runs` on a SQLite file does without
    from graphtape.recorder import RunStore

__all__ = ["ROOT", "run_dict", "run_view", "run_view_stream", "runs_view", "step_view"]

ROOT = ""
"""The root graph's namespace; subgraph steps live in their own."""


def run_dict(run: RunInfo) -> dict[str, Any]:
    """A run's list-level fields plus its duration in seconds."""
    return {**run.to_dict(), "duration_s": run.duration_s}


def runs_view(store: RunStore, *, status: str | None = None, text: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
    """Runs, newest first, filtered like ``graphtape runs``."""
    return [run_dict(r) for r in store.list_runs(status=status, text=text, limit=limit)]


def _named_ns(store: RunStore, run_id: str, ns: str) -> str:
    """``ns`` as stored: a subgraph path without task ids (``child``) names its one namespace."""
    if ns == ROOT:
        return ns
    from graphtape.replay.normalize import namespaces_named

    same = namespaces_named(store.namespaces(run_id), ns)
    if len(same) > 1:
        raise StepNotFound(f"run {run_id} ran subgraph {ns!r} {len(same)} times: name one by its namespace ({', '.join(map(repr, same))})")
    return same[0] if same else ns


def _check_ns(store: RunStore, run_id: str, ns: str) -> list[str]:
    namespaces = store.namespaces(run_id)
    if ns != ROOT and ns not in namespaces:
        known = ", ".join(repr(n) if n else "'' (root)" for n in namespaces) or "none"
        raise StepNotFound(f"run {run_id} has no namespace {ns!r}; it has: {known}")
    return namespaces


def _fields(record: Any) -> dict[str, Any]:
    """A record's fields as a dict, its values as they are: ``asdict`` deep-copied every value,
    most of ``show RUN``'s time on a run of 10,000 steps. The values are not changed."""
    return {f.name: getattr(record, f.name) for f in fields(record)}


def _step_dict(info: StepInfo, rows: list[StepInfo] | None = None) -> dict[str, Any]:
    """A step's fields; ``rows`` are all its recorded rows (an interrupted step resumed later has two)."""
    rows = rows or [info]
    summaries = [r.summary for r in rows if r.summary]
    return {
        **_fields(info),
        "summary": summaries[-1] if summaries else "",
        "rows": len(rows),
        "error": any(r.has_error for r in rows),
        "interrupt": any(r.has_interrupt for r in rows),
        "resumed": any(r.flags & FLAG_RESUME for r in rows) or len(rows) > 1,
        "pending": all(r.pending for r in rows),
    }


def _detail_dict(detail: StepDetail, routes: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "tasks": [_fields(t) for t in detail.tasks],
        "routes": [_fields(r) for r in detail.routes] if routes is None else routes,
        "events": [_fields(e) for e in detail.events],
        "next": list(detail.next),
    }


def _route_summary(store: RunStore, route: RouteInfo, run_id: str, step: int) -> dict[str, Any]:
    """A route as the run view gives it: where it went and why, its returned value and Send
    args (read still encoded) decoded only when they hold no stored blob.

    A ``Send`` of ``create_react_agent`` carries the whole conversation: every step's in full
    made a long loop's view the square of its length. ``show RUN --step N`` shows them whole.
    """
    from graphtape.recorder.codec import collect_refs  # not loaded for `graphtape runs`

    from graphtape.recorder.terminal_text import command_line

    elsewhere = f"(recorded messages or long text: {command_line('graphtape', 'show', run_id[:8], '--step', step)} shows it)"

    def shown(value: Any) -> Any:
        if value is None or type(value) in (str, int, float, bool):  # what most routers return: nothing to decode
            return value
        return elsewhere if collect_refs(value) else store.decode(value)

    sends = [{**s, "arg": shown(s.get("arg"))} if isinstance(s, dict) else shown(s) for s in route.sends]
    return {**_fields(route), "returned": shown(route.returned), "sends": sends}


def _returned(state: Any, graph: dict[str, Any]) -> Any:
    """What the run returned: its last state, cut to the keys of the graph's output schema."""
    keys = graph.get("output") if isinstance(graph, dict) else None
    if isinstance(state, dict) and isinstance(keys, list):
        return {k: v for k, v in state.items() if k in keys}
    return state


def run_view(store: RunStore, ref: str, ns: str = ROOT) -> dict[str, Any]:
    """A run's header and every superstep of one namespace, with its tasks, routes and call counts."""
    head, steps = run_view_stream(store, ref, ns)
    return {**head, "steps": list(steps)}


def run_view_stream(store: RunStore, ref: str, ns: str = ROOT) -> tuple[dict[str, Any], Iterator[dict[str, Any]]]:
    """``run_view`` with its steps still to read: the header (every key but ``steps``), and the
    steps one by one, read a page at a time while the store stays open (``show --json``
    writes a run of 10,000 steps as it reads it)."""
    detail = store.run_detail(ref)
    run = detail.run
    ns = _named_ns(store, run.id, ns)
    namespaces = _check_ns(store, run.id, ns)
    counts = store.call_counts(run.id, ns, with_subgraphs=True)  # a step's calls include its subgraphs'
    totals, tokens = store.call_totals(run.id)  # counted, not decoded: a long loop's prompts are not shown
    head = {
        "run": run_dict(run),
        "inputs": detail.inputs,
        "output": _returned(detail.output, detail.graph),
        "config": detail.config,
        "versions": detail.versions,
        "graph": detail.graph,
        "fork_edit": detail.fork_edit,
        "fault_log": detail.fault_log,
        "ns": ns,
        "namespaces": {n: len({step for _, step, _ in store.step_row_marks(run.id, n)}) for n in namespaces},  # steps counted, not listed
        "call_totals": totals,
        "total_tokens": tokens,
    }
    # The steps' values cut to what a listing shows: a 3 MB text rewritten at every step is read as a line each.
    steps = (
        {**_step_dict(s.step), "calls": counts.get(s.step.step, {}), **_detail_dict(s, [_route_summary(store, r, run.id, s.step.step) for r in s.routes])}
        for s in store.iter_step_previews(run.id, ns)
    )
    return head, steps


def step_view(store: RunStore, ref: str, step: int, ns: str = ROOT) -> dict[str, Any]:
    """One superstep in full: tasks, routes, events, calls, next nodes and the state after it."""
    run = store.get_run(ref)
    ns = _named_ns(store, run.id, ns)
    try:
        detail = store.step_detail(run.id, step, ns)
    except StepNotFound:
        _check_ns(store, run.id, ns)  # an unknown namespace says which there are
        raise
    # This step's rows and the run's bounds only: a step of a long run reads that step, not the run.
    bounds = store.step_range(run.id, ns)
    calls = [{k: v for k, v in asdict(c).items() if k != "encoded_output"} for c in store.calls(run.id, step=step, ns=ns, with_subgraphs=True)]  # as stored: the decoded output says it
    waits = node_waits(calls, detail.tasks)
    for call in calls:
        if call["call_id"] in waits:
            call["waited_ms"] = round(waits[call["call_id"]], 1)  # its node gave up on it (a timeout)
    return {
        "run": run_dict(run),
        "ns": ns,
        "step": _step_dict(detail.step, [store.step_info(run.id, step, ns)]),
        "first_step": bounds[0] if bounds else None,
        "last_step": bounds[1] if bounds else None,
        **_detail_dict(detail),
        "calls": calls,
        "state": store.state_at(run.id, step, ns),
    }
