"""Every graph of the corpus (``graphs.py``) through every check, as issue 12 lists them.

Each graph is recorded once (module fixture); the checks share that recording:

1. recording leaves the result unchanged (a bare run gives the same);
2. superstep numbers per namespace equal LangGraph's own checkpoints of the same run;
3. every route decision is there with its kind, and the routers that decided are named;
4. tool and model calls are captured with inputs and outputs (or errors);
5. strict replay of the unchanged graph is clean, three times, in fresh processes (with no
   server to call: a call that went out would fail);
6. replay from a middle step is clean;
7. a fork with an edit runs and the edit shows in the fork's state;
8. an exported fixture passes under the pytest marker, and test-gen's test passes; with the
   routing changed, the marker fails naming the route;
9. the TUI opens the run;
10. run as LangGraph's server runs it (a copy of the recorded graph per request, with a saver and
    store lent), it records what the attached graph records, and replays clean with the graph as
    exported.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
import os
import re
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
TASK_ID_IN_NS = re.compile(r"[A-Za-z_][\w.-]*:[0-9a-f]{8}-[0-9a-f]{4}-")  # "supervisor:<task id>"
ROOT = HERE.parents[1]
GRAPHS = HERE / "graphs.py"


@pytest.fixture(scope="module")
def corpus():
    """The graphs module, imported with the fake OpenAI server up (its URL is read at import)."""
    from conformance.fake_openai import FakeOpenAI

    server = FakeOpenAI().start()
    os.environ["GRAPHTAPE_FAKE_OPENAI"] = server.url
    sys.modules.pop("conformance.graphs", None)
    from conformance import graphs

    yield graphs, server
    server.stop()
    os.environ.pop("GRAPHTAPE_FAKE_OPENAI", None)


def _run(graph: Any, case: Any, config: dict[str, Any]) -> Any:
    """Run a case as a user would; its result (the chunks, for a streamed case), or the exception it ended with."""
    from langgraph.types import Command

    kwargs = {"context": case.context} if case.context is not None else {}
    if case.durability is not None:
        kwargs["durability"] = case.durability

    def once(payload: Any) -> Any:
        if case.stream_mode is not None:
            if case.is_async:

                async def chunks() -> list[Any]:
                    return [c async for c in graph.astream(payload, config, stream_mode=case.stream_mode, **kwargs)]

                return asyncio.run(chunks())
            return list(graph.stream(payload, config, stream_mode=case.stream_mode, **kwargs))
        if case.is_async:
            return asyncio.run(graph.ainvoke(payload, config, **kwargs))
        return graph.invoke(payload, config, **kwargs)

    try:
        try:
            out = once(copy.deepcopy(case.inputs))  # LangGraph gives input messages ids in place: each run gets its own
        except Exception as exc:  # noqa: BLE001
            if not case.go_on:
                raise
            out = exc  # it goes on after the error, with invoke(None)
        if case.repeat:
            out = once(copy.deepcopy(case.inputs))
        if case.resume is not None:
            out = once(Command(resume=case.resume, update=case.resume_update) if case.resume_update is not None else Command(resume=case.resume))
        for value in case.resumes:
            out = once(Command(resume=value))
        while case.answer_each is not None and isinstance(out, dict) and out.get("__interrupt__"):
            out = once(Command(resume={i.id: case.answer_each for i in out["__interrupt__"]}))
        if case.go_on:
            if case.edit is not None:
                graph.update_state(config, case.edit)
            out = once(None)
        return out
    except Exception as exc:  # noqa: BLE001 - a run that fails is a case too
        return exc


def _comparable(value: Any) -> Any:
    """A result without the ids every run draws afresh (a streamed message chunk: its text and node)."""
    from graphtape.recorder.codec import to_plain
    from graphtape.replay.normalize import Normalizer

    if isinstance(value, BaseException):
        return f"{type(value).__name__}: {value}"
    if isinstance(value, list) and value and all(isinstance(c, tuple) and len(c) == 2 and isinstance(c[0], str) for c in value):
        return [_chunk(c) for c in value]
    return Normalizer()(to_plain(value))


def _chunk(chunk: tuple[Any, Any]) -> Any:
    """One ``(mode, data)`` chunk of a multi-mode stream as comparable data."""
    mode, data = chunk
    if mode == "messages":
        message, metadata = data
        return mode, str(message.content), metadata.get("langgraph_node")
    return mode, _comparable(data)


@pytest.fixture(scope="module")
def recorded(corpus, tmp_path_factory):
    """Each case recorded once into one store: {name: (run_id, result, bare result)}."""
    graphs, _server = corpus
    from graphtape import Recorder

    db = tmp_path_factory.mktemp("conformance") / "corpus.db"
    runs: dict[str, tuple[str, Any, Any]] = {}
    rec = Recorder(str(db))  # the default durability: values are encoded later, on the writer thread
    for name, case in graphs.CASES.items():
        graph = getattr(graphs, name)
        config = {**case.config, "configurable": {**case.config.get("configurable", {}), "thread_id": f"rec-{name}"}}
        app = rec.attach(graph, name=name, graph_ref=f"{GRAPHS}:{name}")
        result = _run(app, case, dict(config))
        bare = _run(graph, case, {**config, "configurable": {**config["configurable"], "thread_id": f"bare-{name}"}})
        runs[name] = (rec.last_run_id, result, bare)
    rec.close()
    return str(db), runs


NAMES = [
    "supervisor", "swarm", "middleware_agent", "functional", "functional_interrupt", "pydantic_state", "parent_command", "sub_send",
    "sub_interrupt", "injected_tools", "retry", "cached", "own_saver", "runaway", "raising", "openai_stream", "openai_tools",
    "react_structured", "tool_errors", "tool_interrupt", "agent_hitl", "agent_limits", "nested_routers", "sub_in_node", "map_reduce",
    "streamed", "custom_stream", "context_store", "io_schema", "task_retry", "goto_send", "deferred", "supervisor_full", "swarm3",
    "agent_in_node", "two_questions", "task_interrupts", "send_to_subgraph", "async_middleware_agent", "breakpoint_continue",
    "edited_continue", "exit_durability", "remembering_subgraph", "image_prompt", "retried_fanout", "cached_subgraph", "cached_task",
    "edited_approval", "returning_user",
]


def test_the_corpus_is_the_cases(corpus):
    graphs, _ = corpus
    assert NAMES == list(graphs.CASES)


@pytest.mark.parametrize("name", NAMES)
def test_recording_leaves_the_result_unchanged(recorded, name):
    _db, runs = recorded
    _run_id, result, bare = runs[name]
    assert _comparable(result) == _comparable(bare)


@pytest.mark.parametrize("name", NAMES)
def test_steps_per_namespace_are_langgraphs_own(corpus, recorded, name):
    graphs, _ = corpus
    from langgraph.checkpoint.memory import InMemorySaver

    from graphtape import open_store
    from graphtape.recorder.session import ns_names

    db, runs = recorded
    case = graphs.CASES[name]
    graph = getattr(graphs, name)
    own = graph.checkpointer if graph.checkpointer not in (None, False, True) else None
    saver = own or InMemorySaver()
    copy = graph if own else graph.copy(update={"checkpointer": saver})
    thread = f"history-{name}"
    config = {**case.config, "configurable": {**case.config.get("configurable", {}), "thread_id": thread}}
    stood = None
    if case.go_on:  # the run checked goes on from where the thread stood: its first step is that checkpoint
        _run(copy, dataclasses.replace(case, go_on=False), config)
        if case.edit is not None:
            copy.update_state(config, case.edit)
        stood = saver.get_tuple(config).metadata["step"]
        copy.invoke(None, config)
    else:  # LangGraph's own history of every step (durability "exit" keeps only the last, graphtape all)
        _run(copy, dataclasses.replace(case, durability=None), config)
    theirs: dict[str, list[int]] = {}
    for cp in saver.list({"configurable": {"thread_id": thread}}):
        ns = cp.config["configurable"].get("checkpoint_ns", "")
        theirs.setdefault(ns_names(ns), []).append(cp.metadata["step"])
    store = open_store(db)
    try:
        run_id = runs[name][0]
        ours: dict[str, list[int]] = {}
        for ns in store.namespaces(run_id):
            ours.setdefault(ns_names(ns), []).extend(s.step for s in store.list_steps(run_id, ns) if s.checkpoint_id)
    finally:
        store.close()
    if case.repeat:  # the same input twice on one thread: LangGraph's history holds both runs (numbered on, or anew)
        theirs = {k: [s for s in v if min(ours.get(k, [0])) <= s <= max(ours.get(k, [0]))] for k, v in theirs.items()}
    if stood is not None:
        theirs = {k: [s for s in v if s >= stood] for k, v in theirs.items()}
    assert {k: sorted(set(v)) for k, v in ours.items()} == {k: sorted(set(v)) for k, v in theirs.items() if k in ours or not k}


def _shape(graph: Any, path: str) -> dict[str, Any] | None:
    """What LangGraph's own builder says about the (sub)graph at namespace path ``path``: static
    edges, each node's routers by the name a route must show, deferred nodes, declared ends."""
    from graphtape.recorder.session import ns_names

    if path:
        graph = next((sub for name, sub in graph.get_subgraphs(recurse=True) if ns_names(name) == path), None)
    builder = getattr(graph, "builder", None)
    if builder is None or not hasattr(builder, "branches"):
        return None  # a functional-API entrypoint: no edges, its one node ends the run
    edges = set(builder.edges) | {(s, d) for srcs, d in builder.waiting_edges for s in srcs}
    routers: dict[str, set[str]] = {}
    for src, branches in builder.branches.items():
        for name, spec in branches.items():
            func = getattr(spec.path, "func", None) or getattr(spec.path, "afunc", None)
            # langchain's middleware edge only reads the jump_to its hook wrote: the hook decided
            jump = "_add_middleware_edge.<locals>" in getattr(func, "__qualname__", "")
            routers.setdefault(src, set()).add(src if jump else getattr(func, "__name__", name))
    ends = {n: set(spec.ends or ()) for n, spec in builder.nodes.items()}
    deferred = {n for n, spec in builder.nodes.items() if getattr(spec, "defer", False)}
    return {"edges": edges, "routers": routers, "ends": ends, "deferred": deferred, "joins": {d for _, d in builder.waiting_edges}}


@pytest.mark.parametrize("name", NAMES)
def test_route_decisions_are_there_with_their_kind_and_router(corpus, recorded, name):
    """Against LangGraph's own builder of each (sub)graph: a route that a static edge does not
    explain names the router of its source that decided it (in subgraphs, on START, in
    middleware); every node a step ran was sent there by the step before; every namespace
    that finished shows its way out (to END, or a Command.PARENT handoff)."""
    graphs, _ = corpus
    from graphtape import open_store
    from graphtape.recorder.session import ns_names

    db, runs = recorded
    run_id = runs[name][0]
    graph = getattr(graphs, name)
    store = open_store(db)
    try:
        run = store.get_run(run_id)
        details = {ns: store.step_details(run_id, ns) for ns in store.namespaces(run_id)}
    finally:
        store.close()
    kinds = {"conditional", "send", "command", "static", "parent-command"}
    named: set[str] = set()
    for ns, steps in details.items():
        shape = _shape(graph, ns_names(ns))
        where = ns_names(ns) or "root"
        for d in steps:
            for r in d.routes:
                at = (where, d.step.step, r.source, r.kind, r.router, r.destinations)
                assert r.kind in kinds and r.destinations, at
                if r.router:
                    named.add(r.router)
                if r.kind == "conditional":
                    assert r.router, at  # a conditional route names the function that decided it
                assert not TASK_ID_IN_NS.search(json.dumps(r.returned, default=str)), (at, r.returned)  # no per-run task ids
            per_task = [(r.task_id, dest) for r in d.routes for dest in set(r.destinations)]
            assert len(per_task) == len(set(per_task)), (where, d.step.step, "a route shown twice", [(r.source, r.kind, r.destinations) for r in d.routes])
            for r in d.routes:
                if shape is None:
                    continue
                at = (where, d.step.step, r.source, r.kind, r.router, r.destinations)
                deciders = shape["routers"].get(r.source, set())
                if r.kind in ("conditional", "send") and deciders:
                    assert r.router in deciders, (at, deciders)
                if r.kind == "static":
                    for dest in r.destinations:
                        # A static route is a static edge, or the end of a node with no way on /
                        # one whose declared ends hold END; never a decision a router made.
                        explained = (r.source, dest) in shape["edges"] or (dest == "__end__" and (not deciders or "__end__" in shape["ends"].get(r.source, ())))
                        assert explained, (at, "a router decided this, the recording says static")
        if shape is None:
            continue
        done = [d for d in steps if d.step.checkpoint_id and d.tasks]
        for before, after in zip(done, done[1:]):
            if after.step.step != before.step.step + 1:
                continue
            sent = {dest for r in before.routes for dest in r.destinations}
            waited = {dest for d in done if d.step.step <= before.step.step for r in d.routes for dest in r.destinations}
            for t in after.tasks:
                if t.node in shape["deferred"] or t.node in shape["joins"]:
                    assert t.node in waited, (where, after.step.step, t.node)
                else:
                    assert t.node in sent, (where, after.step.step, t.node, "ran, but no route of the step before went there")
        ran = [d for d in steps if d.tasks]
        if ran and run.status == "ok":
            last = ran[-1]  # a handoff's step has no checkpoint: the Command.PARENT left the subgraph
            out = {r.kind for r in last.routes if "__end__" in r.destinations} | {r.kind for r in last.routes if r.kind == "parent-command"}
            assert out, (where, last.step.step, "finished, but no route shows the way out", [(r.source, r.kind, r.destinations) for r in last.routes])
    assert graphs.CASES[name].routers <= named, named


@pytest.mark.parametrize("name", NAMES)
def test_calls_are_captured_with_inputs_and_outputs(corpus, recorded, name):
    from graphtape import open_store

    db, runs = recorded
    store = open_store(db)
    try:
        calls = store.calls(runs[name][0])
        steps = {(ns, s.step) for ns in store.namespaces(runs[name][0]) for s in store.list_steps(runs[name][0], ns)}
    finally:
        store.close()
    for c in calls:
        assert c.inputs is not None, c  # a handoff tool is asked nothing but its injected state: {}
        # A store's write answers nothing, and a get of a key not there answers None.
        assert c.output is not None or c.error_type or (c.kind == "store" and c.name in ("put", "delete", "get")), c
        assert (c.ns, c.step) in steps, f"{c.name} is filed under a step that does not exist: {c.ns!r} {c.step}"
    expected = {"supervisor": 11, "swarm": 5, "middleware_agent": 3, "functional": 2, "injected_tools": 5, "openai_stream": 3, "openai_tools": 4}
    # ChatOpenAI's own request to the (fake) provider is recorded as part of its model call, not as a call of its own;
    # so is the memory a tool writes through InjectedStore.
    own = [c for c in calls if not (c.kind in ("http", "store") and c.parent_call_id)]
    if name in ("injected_tools", "context_store", "returning_user"):
        assert any(c.kind == "store" for c in calls), [c.name for c in calls]
    if name in expected:
        assert len(own) == expected[name], [c.name for c in own]
    if name.startswith("openai"):
        models = sorted(c.call_id for c in calls if c.kind == "model")
        assert models and sorted(c.parent_call_id for c in calls if c.kind == "http") == models  # one request each


@pytest.mark.parametrize("name", NAMES)
def test_inputs_are_stored_as_passed(corpus, recorded, name):
    """The run's input is what the caller passed, before LangGraph gave its messages ids in place."""
    graphs, _ = corpus
    from graphtape import open_store
    from graphtape.recorder.codec import to_plain

    db, runs = recorded
    store = open_store(db)
    try:
        stored = store.run_detail(runs[name][0]).inputs
        first = store.list_steps(runs[name][0])[0]
        input_step = store.state_at(runs[name][0], first.step, internal=True).get("__start__")
    finally:
        store.close()
    case = graphs.CASES[name]
    if case.go_on:  # invoke(None): no input; the run starts at the checkpoint it goes on from
        assert stored is None and first.source == ("update" if case.edit is not None else "loop"), (stored, first.source)
        return
    passed = to_plain(case.inputs)
    assert stored == passed
    assert first.source == "input" and input_step == passed  # the input step too (its values are encoded later)


ENTRYPOINT_TASKS = {"functional": {"fetch", "summarize"}, "functional_interrupt": {"fetch", "approve"}, "task_retry": {"flaky_fetch"}}


@pytest.mark.parametrize("name", sorted(ENTRYPOINT_TASKS))
def test_functional_api_tasks_are_first_class(corpus, recorded, name, capsys):
    """@task calls are tasks of their step: named, with their result and their calls; ``show --step``
    lists them; the run's output is what the entrypoint returned; an interrupt inside a task is one event."""
    from graphtape import open_store
    from graphtape.tui.cli import main

    db, runs = recorded
    run_id, result, _bare = runs[name]
    store = open_store(db)
    try:
        details = store.step_details(run_id)
        calls = store.calls(run_id)
        output = store.run_detail(run_id).output
    finally:
        store.close()
    tasks = [(d.step.step, t) for d in details for t in d.tasks]
    assert all(t.node != "?" for _, t in tasks), [t.node for _, t in tasks]
    assert ENTRYPOINT_TASKS[name] <= {t.node for _, t in tasks}
    for step, t in tasks:
        if t.node in ENTRYPOINT_TASKS[name]:
            assert "__return__" in t.writes, (t.node, t.writes)  # a task's result shows as its update
    by_task = {(step, t.task_id): t.node for step, t in tasks}
    for c in calls:
        assert c.ns == "" and by_task.get((c.step, c.task_id)) == c.node, (c.name, c.ns, c.step, c.node)
    assert output == _comparable(result) and output, output
    for step in sorted({c.step for c in calls}):
        assert main(["--db", db, "show", run_id, "--step", str(step)]) == 0
        shown = capsys.readouterr().out
        for c in calls:
            if c.step == step:
                assert c.name in shown and f"in node {c.node}" in shown, shown
        for s, t in tasks:
            if s == step:
                assert f"  {t.node}  " in shown, shown
    events = [e for d in details for e in d.events]
    if name == "functional_interrupt":
        assert [(e.kind, e.node) for e in events] == [("interrupt", "approve"), ("resume", "approve")]


def _route_shape(route: dict) -> dict:
    return {k: v for k, v in route.items() if k not in ("returned", "sends")}


def _shown_or_pointed(shown: Any, value: Any, step: int) -> bool:
    """``shown`` is ``value``, or (for a value too big for the run view) a pointer to its step."""
    if shown == value:
        return True
    if isinstance(shown, list) and isinstance(value, list) and len(shown) == len(value):
        return all(_shown_or_pointed(a, b, step) for a, b in zip(shown, value))
    if isinstance(shown, dict) and isinstance(value, dict) and shown.keys() == value.keys():
        return all(_shown_or_pointed(shown[k], value[k], step) for k in shown)
    return isinstance(shown, str) and f"--step {step} shows it" in shown


def _previewed(shown: Any, value: Any) -> bool:
    """``shown`` is ``value``, or its preview (``recorder.store.previews``): a long string cut with a
    note of what was left out, a long list or mapping cut to its ends around a mark counting the
    rest, a part too deep or past the preview's size as "…"."""
    from graphtape.recorder.store.previews import CUT, PREVIEW_CHARS, is_more_mark

    if shown == value or shown == CUT:
        return True
    if isinstance(shown, str) and isinstance(value, str):
        return len(value) > PREVIEW_CHARS and shown.startswith(value[:PREVIEW_CHARS] + "… [") and shown.endswith(" more chars]")
    if isinstance(shown, list) and isinstance(value, list):
        marks = [i for i, x in enumerate(shown) if is_more_mark(x)]
        if not marks:
            return len(shown) == len(value) and all(map(_previewed, shown, value))
        (at,) = marks
        head, tail = shown[:at], shown[at + 1 :]
        return (
            at + shown[at]["items"] + len(tail) == len(value)
            and all(map(_previewed, head, value[:at]))
            and all(map(_previewed, tail, value[len(value) - len(tail) :]))
        )
    if isinstance(shown, dict) and isinstance(value, dict):
        more = shown.get("…") if is_more_mark(shown.get("…")) else None
        keys = [k for k in shown if not (more is not None and k == "…")]
        counted = len(keys) + more["items"] == len(value) if more is not None else shown.keys() == value.keys()
        return counted and all(k in value and _previewed(shown[k], value[k]) for k in keys)
    return False


def _task_previewed(shown: dict, task: dict) -> bool:
    """A task as the run view lists it: its fields as read alone, its values previewed."""
    values = ("writes", "interrupts", "carried")
    return {k: v for k, v in shown.items() if k not in values} == {k: v for k, v in task.items() if k not in values} and all(
        _previewed(shown[k], task[k]) for k in values
    )


def test_show_reads_every_step_at_once_as_it_reads_each_step(recorded):
    """``show RUN`` reads a namespace's steps in one query: what it shows of each step (tasks,
    routes, events, the nodes that ran next) is what reading that step alone shows, for every
    corpus run and namespace (interrupted and resumed steps, subgraphs, Send fan-outs)."""
    from dataclasses import asdict

    from graphtape import open_store
    from graphtape.tui.views import run_view

    db, runs = recorded
    store = open_store(db)
    try:
        compared = previewed = 0
        for name, (run_id, *_rest) in runs.items():
            for ns in store.namespaces(run_id):
                shown = run_view(store, run_id, ns)["steps"]
                assert [s["step"] for s in shown] == [s.step for s in store.list_steps(run_id, ns)], (name, ns)
                for s in shown:
                    alone = store.step_detail(run_id, s["step"], ns)
                    # Values are previews (a listing reads what it shows): each is the value, or it cut.
                    assert s["next"] == list(alone.next), (name, ns, s["step"])
                    tasks, events = [asdict(t) for t in alone.tasks], [asdict(e) for e in alone.events]
                    assert len(s["tasks"]) == len(tasks) and all(map(_task_previewed, s["tasks"], tasks)), (name, ns, s["step"])
                    assert [{**e, "value": None} for e in s["events"]] == [{**e, "value": None} for e in events], (name, ns, s["step"])
                    assert all(_previewed(a["value"], b["value"]) for a, b in zip(s["events"], events)), (name, ns, s["step"])
                    previewed += any(t != u for t, u in zip(s["tasks"], tasks))
                    # A route's returned value and Send args are shown whole, or (holding recorded
                    # messages or long text) as a pointer to the step that shows them.
                    routes = [asdict(r) for r in alone.routes]
                    assert [_route_shape(r) for r in s["routes"]] == [_route_shape(r) for r in routes], (name, ns, s["step"])
                    for shown_route, route in zip(s["routes"], routes):
                        for key in ("returned", "sends"):
                            assert _shown_or_pointed(shown_route[key], route[key], s["step"]), (name, ns, s["step"], key)
                    compared += 1
        assert compared > 100 and previewed > 0
    finally:
        store.close()


def test_parallel_subgraphs_are_compared_each_with_its_own(recorded):
    """Two Send packets enter one subgraph node on two threads, in either order: each replayed
    subgraph is paired with the recorded one its packet entered (not by which got there first),
    so replaying never reports the two swapped."""
    from graphtape import open_store, replay
    from conformance import graphs

    db, runs = recorded
    store = open_store(db)
    try:
        run_id = runs["send_to_subgraph"][0]
        assert len([n for n in store.namespaces(run_id) if n]) == 2
        reports = [replay(run_id, graphs.send_to_subgraph, store=store) for _ in range(20)]
        assert [r.report() for r in reports if r.diverged] == []
    finally:
        store.close()


def test_a_call_stopped_at_an_interrupt_is_not_counted_as_failed(recorded):
    """A tool that asked a person (interrupt) keeps its stop's type, so a replay stops it the same
    way, but the step's call counts (show, the TUI's timeline) do not call it failed."""
    from graphtape import open_store

    db, runs = recorded
    store = open_store(db)
    try:
        run_id = runs["tool_interrupt"][0]
        stopped = [c for c in store.calls(run_id) if c.error_type == "GraphInterrupt"]
        counts = store.call_counts(run_id)
    finally:
        store.close()
    assert stopped and all(c.kind == "tool" for c in stopped)
    assert sum(c.get("tool", 0) for c in counts.values()) >= 2 and not any("failed" in c for c in counts.values()), counts


def test_a_retried_node_keeps_every_attempt(recorded):
    """RetryPolicy: the node (or @task) succeeded on its second attempt; the first one is kept
    with its number, error and duration, the task's outcome is its last attempt's."""
    from graphtape import open_store

    db, runs = recorded
    store = open_store(db)
    try:
        for name, node, message in (("retry", "flaky", "upstream reset the connection"), ("task_retry", "flaky_fetch", "the order service reset the connection")):
            task = next(t for d in store.step_details(runs[name][0]) for t in d.tasks if t.node == node)
            assert task.error_type is None and task.writes, (name, task)
            assert [(a["n"], a["et"], a["em"]) for a in task.attempts] == [(1, "ConnectionError", message)], task.attempts
            assert all(isinstance(a["ms"], (int, float)) and a["ms"] >= 0 for a in task.attempts)
            assert store.get_run(runs[name][0]).status == "ok"
    finally:
        store.close()


def test_a_recorded_cache_hit_replays_as_a_hit(corpus, recorded):
    """The second run of ``cached`` was served from LangGraph's cache: neither the node nor its router
    ran. Its route is the router's (not static), and a replay serves it from the cache again, even
    with the graph's own cache empty; the first run (a miss) runs the node, even with a warm cache."""
    graphs, _ = corpus
    from graphtape import open_store, replay

    db, runs = recorded
    store = open_store(db)
    try:
        hit_run = runs["cached"][0]
        miss_run = next(r.id for r in store.list_runs() if r.name == "cached" and r.parent_run_id is None and r.id != hit_run)
        hit = store.step_detail(hit_run, 1)
        assert [(t.node, t.cached) for t in hit.tasks] == [("expensive", True)]
        assert [(r.kind, r.router, r.destinations) for r in hit.routes] == [("conditional", "big_or_small", ["big"])]
        assert "from LangGraph's cache" in hit.step.summary
        graphs.cached.cache.clear()  # a fresh process's cache
        before = graphs.expensive_runs["n"]
        again = replay(hit_run, graphs.cached, store=store)
        assert not again.diverged, again.report()
        assert graphs.expensive_runs["n"] == before  # served from the cache, not run
        assert [(t.node, t.cached) for t in store.step_detail(again.run_id, 1).tasks] == [("expensive", True)]
        graphs.cached.invoke({"n": 21})  # warm the graph's own cache
        before = graphs.expensive_runs["n"]
        first = replay(miss_run, graphs.cached, store=store)
        assert not first.diverged, first.report()
        assert graphs.expensive_runs["n"] == before + 1  # the recording ran it: so does the replay
        assert [(t.node, t.cached) for t in store.step_detail(first.run_id, 1).tasks] == [("expensive", False)]
    finally:
        store.close()


def test_a_cache_hit_inside_a_subgraph_with_its_own_cache_replays_as_a_hit(corpus, recorded):
    """A subgraph node compiled with a cache of its own (the root has none): the hit inside it is
    served from the recording, with the subgraph's cache empty; the miss runs, with it warm."""
    graphs, _ = corpus
    from graphtape import open_store, replay

    db, runs = recorded
    sub_cache = graphs.cached_subgraph.nodes["pricing"].bound.cache
    store = open_store(db)
    try:
        hit_run = runs["cached_subgraph"][0]
        miss_run = next(r.id for r in store.list_runs() if r.name == "cached_subgraph" and r.parent_run_id is None and r.id != hit_run)

        def quote_tasks(run_id: str) -> list[tuple[str, bool]]:
            (ns,) = [n for n in store.namespaces(run_id) if n]
            return [(t.node, t.cached) for d in store.step_details(run_id, ns) for t in d.tasks if t.node != "__start__"]

        assert quote_tasks(hit_run) == [("quote", True)] and quote_tasks(miss_run) == [("quote", False)]
        sub_cache.clear()  # a fresh process's cache
        before = graphs.quotes_run["n"]
        again = replay(hit_run, graphs.cached_subgraph, store=store)
        assert not again.diverged, again.report()
        assert graphs.quotes_run["n"] == before and quote_tasks(again.run_id) == [("quote", True)]
        graphs.cached_subgraph.invoke({"item": "apple", "total": 0})  # warm the subgraph's own cache
        before = graphs.quotes_run["n"]
        first = replay(miss_run, graphs.cached_subgraph, store=store)
        assert not first.diverged, first.report()
        assert graphs.quotes_run["n"] == before + 1 and quote_tasks(first.run_id) == [("quote", False)]
    finally:
        store.close()


def test_a_cached_functional_task_replays_hit_as_hit_and_miss_as_miss(corpus, recorded):
    """A functional-API ``@task`` with a cache policy: the hit (no code ran, no callback) is recorded
    under the task's name, a replay serves it from the recording with the cache empty, and the
    miss runs the task (its model call answered from the recording) with the cache warm."""
    graphs, _ = corpus
    from graphtape import open_store, replay

    db, runs = recorded
    store = open_store(db)
    try:
        hit_run = runs["cached_task"][0]
        miss_run = next(r.id for r in store.list_runs() if r.name == "cached_task" and r.parent_run_id is None and r.id != hit_run)

        def tasks(run_id: str) -> list[tuple[str, bool]]:
            return sorted((t.node, t.cached) for d in store.step_details(run_id) for t in d.tasks)

        assert tasks(hit_run) == [("cached_task", False), ("draft", True), ("polish", False)]
        assert tasks(miss_run) == [("cached_task", False), ("draft", False), ("polish", False)]
        graphs.cached_task.cache.clear()  # a fresh process's cache
        before = graphs.drafts_run["n"]
        again = replay(hit_run, graphs.cached_task, store=store, mode="strict")
        assert not again.diverged, again.report()
        assert graphs.drafts_run["n"] == before and tasks(again.run_id) == tasks(hit_run)
        graphs.cached_task.invoke("tides")  # warm the graph's own cache
        before = graphs.drafts_run["n"]
        first = replay(miss_run, graphs.cached_task, store=store, mode="strict")
        assert not first.diverged, first.report()
        assert graphs.drafts_run["n"] == before + 1 and tasks(first.run_id) == tasks(miss_run)
    finally:
        store.close()


REPLAY_ALL = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, {tests!r})
    from conformance import graphs
    from graphtape import open_store, replay
    store = open_store({db!r})
    out = {{}}
    for run in store.list_runs():
        if run.parent_run_id is None:
            result = replay(run.id, getattr(graphs, run.name), store=store)
            out.setdefault(run.name, []).extend(d.render().splitlines()[0] for d in result.divergences)  # every run of a case
    store.close()
    print(json.dumps(out))
    """
)


def test_strict_replay_is_clean_three_times_in_fresh_processes(recorded, tmp_path):
    db, runs = recorded
    # Copies of the store, one per process; the server is not passed: a call that went out would fail.
    env = {k: v for k, v in os.environ.items() if k not in ("GRAPHTAPE_FAKE_OPENAI", "PYTHONHASHSEED")}
    env["PYTHONHASHSEED"] = "random"

    def one(i: int) -> dict[str, list[str]]:
        copy = tmp_path / f"copy{i}.db"
        copy.write_bytes(Path(db).read_bytes())
        code = REPLAY_ALL.format(tests=str(HERE.parent), db=str(copy))
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])

    with ThreadPoolExecutor(3) as pool:
        verdicts = list(pool.map(one, range(3)))
    for verdict in verdicts:
        assert set(verdict) == set(runs)
        assert {k: v for k, v in verdict.items() if v} == {}


class _PerRequest:
    """What LangGraph's server does with each request: a fresh copy of the exported graph, the
    same saver and store lent to it (``update_state`` between runs included)."""

    def __init__(self, app: Any, lent: dict[str, Any]) -> None:
        self._app, self._lent = app, lent

    def __getattr__(self, name: str) -> Any:
        return getattr(self._app.copy(update=self._lent), name)


@pytest.fixture(scope="module")
def served(corpus, tmp_path_factory):
    """Each case recorded again as the server runs it: {name: (run_id, result)} in a store of its own."""
    graphs, _server = corpus
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.store.memory import InMemoryStore

    from graphtape import Recorder

    db = tmp_path_factory.mktemp("served") / "served.db"
    runs: dict[str, tuple[str, Any]] = {}
    rec = Recorder(str(db))
    for name, case in graphs.CASES.items():
        graph = getattr(graphs, name)
        # A graph without memory, lent a saver, would mean something else in two cases: a run made
        # twice on one thread (repeat) becomes one conversation, and "exit" durability saves only
        # the last checkpoint. Those get none, as they were attached.
        remembers = isinstance(graph.checkpointer, BaseCheckpointSaver)
        lent: dict[str, Any] = {"checkpointer": InMemorySaver() if remembers or not (case.repeat or case.durability == "exit") else None}
        if graph.store is not None:
            lent["store"] = InMemoryStore()
        app = rec.attach(graph, name=name, graph_ref=f"{GRAPHS}:{name}")
        config = {**case.config, "configurable": {**case.config.get("configurable", {}), "thread_id": f"served-{name}"}}
        result = _run(_PerRequest(app, lent), case, dict(config))
        runs[name] = (rec.last_run_id, result)
    rec.close()
    return str(db), runs


def _recorded_shape(db: str, run_id: str) -> tuple[list[Any], list[Any]]:
    from graphtape import open_store

    store = open_store(db)
    try:
        steps = [(s.step, s.nodes, s.summary) for s in store.list_steps(run_id)]
        calls = sorted(((c.kind, c.name, c.step, c.node, c.error_type) for c in store.calls(run_id)), key=repr)  # parallel tasks: in any order
        return steps, calls
    finally:
        store.close()


@pytest.mark.parametrize("name", NAMES)
def test_a_served_copy_records_what_the_attached_graph_records(recorded, served, name):
    db, runs = recorded
    served_db, served_runs = served
    run_id, result, _bare = runs[name]
    served_id, served_result = served_runs[name]
    assert _comparable(served_result) == _comparable(result)
    assert _recorded_shape(served_db, served_id) == _recorded_shape(db, run_id)


def test_served_runs_replay_clean_with_the_exported_graph(corpus, served):
    graphs, _ = corpus
    from graphtape import replay
    from graphtape.replay import ReplayError

    db, runs = served
    found = {}
    for name, (run_id, _result) in runs.items():
        try:
            result = replay(run_id, getattr(graphs, name), db=db)  # the graph as exported: no saver or store lent
        except ReplayError as exc:
            found[name] = [str(exc)]
            continue
        if result.divergences:
            found[name] = [d.render().splitlines()[0] for d in result.divergences]
    assert found == {}


@pytest.mark.parametrize("name", NAMES)
def test_replay_from_a_middle_step_is_clean(corpus, recorded, name):
    graphs, _ = corpus
    from graphtape import open_store, replay

    db, runs = recorded
    store = open_store(db)
    try:
        steps = [s.step for s in store.list_steps(runs[name][0]) if s.checkpoint_id]
        middle = steps[len(steps) // 2]
        result = replay(runs[name][0], getattr(graphs, name), from_step=middle, store=store)
        recorded_limit = store.run_detail(runs[name][0]).config.get("recursion_limit")
        replayed_limit = store.run_detail(result.run_id).config.get("recursion_limit")
    finally:
        store.close()
    assert not result.diverged, result.report()
    # Only the root loop is given a lower limit (to end where the recording did): the replay's
    # graph, and its record, see the recorded one.
    from langgraph._internal._config import DEFAULT_RECURSION_LIMIT  # LangGraph's, for a run given none

    assert replayed_limit == (recorded_limit if recorded_limit is not None else DEFAULT_RECURSION_LIMIT)


def _edit_for(state: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """An edit every corpus graph takes (a scalar key changed, a message added, a list grown),
    and what the fork's state must then hold under that key."""
    from langchain_core.messages import HumanMessage

    for key, value in state.items():
        if isinstance(value, (int, str)) and not isinstance(value, bool) and key not in ("remaining_steps",):
            new = value + 1 if isinstance(value, int) else f"{value} (edited)"
            return {key: new}, lambda got, new=new: got == new
    if "messages" in state:
        return {"messages": [HumanMessage("an edit from the fork")]}, lambda got: any(m.get("content") == "an edit from the fork" for m in got)
    for key, value in state.items():
        if isinstance(value, list) and value and all(isinstance(v, (int, str)) for v in value):
            item = value[-1] + 1 if isinstance(value[-1], int) else "edited"
            # replaced, or added to by the channel's reducer: the new item is there either way
            return {key: [*value, item]}, lambda got, item=item: isinstance(got, list) and got[-1] == item
    return {}, None


def _is_entrypoint(graph: Any) -> bool:
    """A functional-API entrypoint: no builder, no state channels of its own."""
    return getattr(graph, "builder", None) is None


@pytest.mark.parametrize("name", NAMES)
def test_a_fork_with_an_edit_runs_and_shows_the_edit(corpus, recorded, name):
    graphs, _ = corpus
    from graphtape import fork, open_store

    db, runs = recorded
    graph = getattr(graphs, name)
    store = open_store(db)
    try:
        run_id = runs[name][0]
        done = [s.step for s in store.list_steps(run_id) if s.checkpoint_id and s.step >= 0]
        at = done[(len(done) - 1) // 2]  # a middle step: what ran before it is kept, what follows runs again
        if _is_entrypoint(graph):
            # An entrypoint keeps no state channels: forking it is refused in one line, before anything runs.
            from graphtape.replay import ReplayError

            with pytest.raises(ReplayError, match="keeps no state to edit"):
                fork(run_id, graph, at, {"x": 1}, store=store)
            return
        edit, holds = _edit_for(store.state_at(run_id, at))
        if not edit:
            pytest.fail(f"{name}: no state key to edit at step {at}")
        ran = list(dict.fromkeys(t.node for t in store.step_detail(run_id, at).tasks))
        as_node = None
        if len(ran) > 1:
            # LangGraph cannot tell which of them an edit comes from: the user is asked, by name.
            from graphtape.replay import ReplayError

            with pytest.raises(ReplayError, match=f"{ran[0]}, {ran[1]}.* all ran in it; say which node"):
                fork(run_id, graph, at, edit, store=store, mode="strict")
            as_node = ran[-1]
        result = fork(run_id, graph, at, edit, store=store, mode="strict", as_node=as_node)
        first = store.list_steps(result.run_id)[0]
        state = store.state_at(result.run_id, first.step)
        detail = store.run_detail(result.run_id)
        forked = store.get_run(result.run_id)
    finally:
        store.close()
    assert forked.status in ("ok", "error", "interrupted") and forked.parent_run_id == run_id, forked
    if "messages" not in edit:
        assert detail.fork_edit["update"] == json.loads(json.dumps(edit))
    key = next(iter(edit))
    assert holds(state[key]), (key, state[key])
    assert first.step == at  # the fork's steps carry the original's numbers


MARKER_TEST = '''
import pytest

GRAPHS = {graphs!r}


@pytest.mark.graphtape({fixture!r}, graph=GRAPHS + ":{name}")
def test_{name}(graphtape_replay):
    graphtape_replay()
'''


# Runs a fixture cannot carry: a subgraph with memory of its own from earlier runs of the thread.
NO_FIXTURE = {"remembering_subgraph": "remembers earlier runs of its thread"}


def test_exported_fixtures_pass_under_the_marker_and_test_gen_tests_pass(corpus, recorded, tmp_path, capsys):
    graphs, _ = corpus
    from graphtape.tui.cli import main

    """Each run as a whole fixture, as a fixture that starts at a middle step (``export --steps M:``),
    and as test-gen's file: all pass under the marker in one pytest process."""
    from graphtape import open_store

    db, runs = recorded
    project = tmp_path / "project"
    (project / "fixtures").mkdir(parents=True)
    store = open_store(db)
    try:
        middles = {}
        for name, (run_id, _r, _b) in runs.items():
            done = [s.step for s in store.list_steps(run_id) if s.checkpoint_id]
            if len(done) >= 3:
                middles[name] = done[len(done) // 2]  # a completed step before it to start from
    finally:
        store.close()
    for name, (run_id, _result, _bare) in runs.items():
        fixture = project / "fixtures" / f"{name}.json"
        if name in NO_FIXTURE:  # refused in one line, rather than a fixture that cannot replay
            for argv in (["export", run_id, "-o", str(fixture)], ["test-gen", run_id, "--graph", f"{GRAPHS}:{name}", "-o", str(project / "generated")]):
                assert main(["--db", db, *argv]) == 2
                assert NO_FIXTURE[name] in capsys.readouterr().err
            assert not fixture.exists() and not list(project.glob(f"**/*{name}*"))
            continue
        assert main(["--db", db, "export", run_id, "-o", str(fixture)]) == 0
        (project / f"test_marker_{name}.py").write_text(MARKER_TEST.format(graphs=str(GRAPHS), fixture=str(fixture), name=name))
        if name in middles:
            # LangGraph counts the recursion limit from where a run starts: a later start must not
            # change what its subgraphs see (remaining_steps) nor where a runaway run ends.
            later = project / "fixtures" / f"{name}_from_{middles[name]}.json"
            assert main(["--db", db, "export", run_id, "-o", str(later), "--steps", f"{middles[name]}:"]) == 0
            (project / f"test_later_{name}.py").write_text(MARKER_TEST.format(graphs=str(GRAPHS), fixture=str(later), name=name))
        assert main(["--db", db, "test-gen", run_id, "--graph", f"{GRAPHS}:{name}", "-o", str(project / "generated"), "--name", f"gen-{name}"]) == 0
    env = {k: v for k, v in os.environ.items() if k not in ("GRAPHTAPE_FAKE_OPENAI", "CI")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:warnings", str(project)], cwd=project, capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stdout[-6000:]
    exported = [n for n in runs if n not in NO_FIXTURE]
    assert f"{2 * len(exported) + len([n for n in middles if n in exported])} passed" in proc.stdout


CHANGED = {
    # graph name -> (the function changed, its new body, the router the failure must name)
    "pydantic_state": ("route_ticket", "lambda state: 'reply'", "route_ticket"),
    "injected_tools": ("tools_or_end", "lambda state: '__end__'", "tools_or_end"),
    "runaway": ("keep_going", "lambda state: '__end__'", "keep_going"),
    # in a subgraph two levels down, in a subgraph run inside a node, a Send fan-out inside a subgraph
    "nested_routers": ("pick_handler", "lambda state: 'small'", "pick_handler"),
    "sub_in_node": ("price_band", "lambda state: 'full'", "price_band"),
    "sub_send": ("fan_out", "lambda state: [Send('square', {'items': [x]}) for x in state['items'][:1]]", "fan_out"),
    "map_reduce": ("continue_to_jokes", "lambda state: [Send('joke', {'subject': s}) for s in state['subjects'][1:]]", "continue_to_jokes"),
    # a router reading the Runtime context; one past a node that takes another input schema
    "context_store": ("by_tier", "lambda state, runtime=None: '__end__'", "by_tier"),
    "io_schema": ("draft_ok", "lambda state: 'finish'", "draft_ok"),
    # agent middleware: the hook's rule changes, the route it decides (via jump_to) goes elsewhere
    "middleware_agent": ("is_forbidden", "lambda messages: True", "stop_when_forbidden.before_model"),
}

CHANGED_HEAD = '''
import sys

import pytest

sys.path.insert(0, {here!r})
import docs_shapes as D  # noqa: E402
import graphs as G  # noqa: E402


def changed(func, new):
    """Today's code: ``func`` behaves as ``new`` for the test's duration."""
    old, func.__code__ = func.__code__, new.__code__
    return old
'''

CHANGED_ONE = '''

@pytest.mark.graphtape({fixture!r}, graph=G.{name})
def test_{name}(graphtape_replay):
    old = changed({owner}.{func}, {body})
    try:
        graphtape_replay()
    finally:
        {owner}.{func}.__code__ = old
'''


def test_a_changed_routing_fails_the_fixture_naming_the_route(corpus, recorded, tmp_path):
    """Each fixture fails, under the marker, when today's code routes differently: the failure is
    a route divergence naming the router (in subgraphs, Send fan-outs, middleware). One pytest
    process runs them all."""
    graphs, _ = corpus
    from graphtape.tui.cli import main

    db, runs = recorded
    project = tmp_path / "project"
    project.mkdir()
    source = CHANGED_HEAD.format(here=str(HERE))
    for name, (func, body, _router) in CHANGED.items():
        fixture = project / f"{name}.json"
        assert main(["--db", db, "export", runs[name][0], "-o", str(fixture)]) == 0
        owner = "G" if func in vars(graphs) else "D"  # defined in graphs.py, or in docs_shapes.py
        source += CHANGED_ONE.format(fixture=str(fixture), name=name, func=func, body=body, owner=owner)
    (project / "test_changed.py").write_text(source)
    env = {k: v for k, v in os.environ.items() if k not in ("GRAPHTAPE_FAKE_OPENAI", "CI")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:warnings", "-p", "no:randomly", str(project)], cwd=project, capture_output=True, text=True, timeout=600, env=env)
    assert f"{len(CHANGED)} failed" in proc.stdout, proc.stdout[-4000:]
    sections = re.split(r"^_{3,} test_(\w+) _{3,}$", proc.stdout, flags=re.M)
    failures = dict(zip(sections[1::2], sections[2::2]))
    for name, (_func, _body, router) in CHANGED.items():
        text = failures.get(name, "")
        # The route is named among the divergences (a hook's changed jump_to, its cause, comes first).
        named = [line for line in text.splitlines() if "route divergence" in line and f"({router})" in line]
        assert named, (name, text[-2000:])


async def _settle(app: Any, pilot: Any) -> None:
    """Wait until the run screen shows the step its cursor is on."""
    for _ in range(100):
        await pilot.pause(0.03)
        screen = app.screen
        payload = getattr(screen, "payload", None)
        if payload is not None and payload.index == screen.index and not any(w.is_running for w in app.workers):
            return


async def test_the_tui_opens_every_run(recorded):
    """Every run opens; at each root step that ran tasks the screen lists them by name (functional-API
    tasks too) and shows exactly the calls the store holds for that step, those made in the
    subgraphs its tasks ran included (a subgraph's namespace names the task that ran it; one
    compiled with ``checkpointer=True`` keeps one namespace for all its runs, so its calls may
    show under any step that ran it)."""
    from graphtape import open_store
    from graphtape.tui.app import build_app
    from graphtape.tui.screens.run import RunScreen
    from graphtape.tui.widgets.panels import CallsPanel
    from graphtape.tui.widgets.timeline import Timeline

    db, runs = recorded
    store = open_store(db)
    try:
        expected = {name: _calls_by_root_step(store, run_id) for name, (run_id, _r, _b) in runs.items()}
    finally:
        store.close()
    for name, (run_id, _result, _bare) in runs.items():
        app = build_app(db, run_id)
        async with app.run_test(size=(120, 34)) as pilot:
            await _settle(app, pilot)
            screen = app.screen
            assert isinstance(screen, RunScreen) and screen.steps and screen.payload is not None, name
            assert not screen.has_class("step-failed"), name
            by_step, persistent = expected[name]
            for index, step in enumerate(screen.steps):
                if step.step not in by_step:
                    continue
                screen.query_one(Timeline).cursor = index
                await _settle(app, pilot)
                payload = screen.payload
                assert payload is not None and payload.step.step == step.step, (name, step.step)
                assert "?" not in [t.node for t in payload.detail.tasks], (name, step.step)
                shown = sorted(c.call_id for c in payload.calls)
                assert set(by_step[step.step]) <= set(shown) and set(shown) - set(by_step[step.step]) <= persistent, (name, step.step)
                listed = screen.query_one(CallsPanel).query_one("#call-list")
                assert listed.option_count == len(shown) and "No tool or model calls" not in str(listed.get_option_at_index(0).prompt), (name, step.step)


def _calls_by_root_step(store: Any, run_id: str) -> tuple[dict[int, list[str]], set[str]]:
    """Call ids per root step, a subgraph's calls under the step whose task its namespace names;
    and the ids of calls made in subgraphs with memory of their own (no task in the namespace)."""
    task_step = {t.task_id: d.step.step for d in store.step_details(run_id, "") for t in d.tasks}
    by_step: dict[int, list[str]] = {}
    persistent: set[str] = set()
    for c in store.calls(run_id):
        if c.ns == "":
            by_step.setdefault(c.step, []).append(c.call_id)
            continue
        task = c.ns.split("|")[0].partition(":")[2]
        if task in task_step:
            by_step.setdefault(task_step[task], []).append(c.call_id)
        else:
            persistent.add(c.call_id)
    return by_step, persistent


LONG_HISTORY = 40  # earlier messages put before a case's own: its prompts and packets are stored as history blocks


def _with_history(inputs: Any) -> Any:
    from langchain_core.messages import AIMessage, HumanMessage

    earlier = [(HumanMessage if i % 2 == 0 else AIMessage)(content=f"earlier turn {i}", id=f"earlier-{i}") for i in range(LONG_HISTORY)]
    return {**inputs, "messages": [*earlier, *inputs["messages"]]}


# The cases whose input is a message list (a test holds this to the corpus).
HISTORY_NAMES = [
    "agent_hitl", "agent_limits", "injected_tools", "middleware_agent", "openai_stream", "openai_tools", "react_structured",
    "streamed", "supervisor", "supervisor_full", "swarm", "swarm3", "tool_errors", "tool_interrupt", "async_middleware_agent",
    "image_prompt",
]


@pytest.fixture(scope="module")
def recorded_long(corpus, tmp_path_factory):
    """The message-taking cases recorded once more, each after a 40-message history."""
    graphs, _server = corpus
    from graphtape import Recorder

    db = tmp_path_factory.mktemp("conformance-long") / "long.db"
    runs: dict[str, str] = {}
    rec = Recorder(str(db))
    for name in HISTORY_NAMES:
        case = dataclasses.replace(graphs.CASES[name], inputs=_with_history(graphs.CASES[name].inputs))
        config = {**case.config, "configurable": {**case.config.get("configurable", {}), "thread_id": f"long-{name}"}}
        _run(rec.attach(getattr(graphs, name), name=name, graph_ref=f"{GRAPHS}:{name}"), case, dict(config))
        runs[name] = rec.last_run_id
    rec.close()
    return str(db), runs


def test_long_histories_are_stored_as_blocks(corpus, recorded_long):
    import sqlite3

    graphs, _ = corpus
    takes_messages = {n for n, c in graphs.CASES.items() if isinstance(c.inputs, dict) and isinstance(c.inputs.get("messages"), list)}
    assert set(HISTORY_NAMES) == takes_messages
    db, runs = recorded_long
    conn = sqlite3.connect(db)
    try:
        hashes = [h for (h,) in conn.execute("SELECT hash FROM blobs")]
    finally:
        conn.close()
    from graphtape import open_store
    from graphtape.recorder.history_blocks import is_cat

    store = open_store(db)
    try:
        tops = [h for h, tree in store.blobs(hashes).items() if is_cat(tree)]
    finally:
        store.close()
    assert len(tops) >= len(runs)  # each run's prompts at least


@pytest.mark.parametrize("name", HISTORY_NAMES)
def test_strict_replay_after_a_long_history_is_clean(corpus, recorded_long, name):
    graphs, _ = corpus
    from graphtape import open_store, replay

    db, runs = recorded_long
    store = open_store(db)
    try:
        result = replay(runs[name], getattr(graphs, name), store=store)
    finally:
        store.close()
    assert not result.diverged, result.report()
