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
9. the TUI opens the run.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
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
    """Run a case as a user would; its result, or the exception it ended with."""
    from langgraph.types import Command

    try:
        if case.is_async:
            return asyncio.run(graph.ainvoke(case.inputs, config))
        out = graph.invoke(case.inputs, config)
        if case.repeat:
            out = graph.invoke(case.inputs, config)
        if case.resume is not None:
            out = graph.invoke(Command(resume=case.resume), config)
        return out
    except Exception as exc:  # noqa: BLE001 - a run that fails is a case too
        return exc


def _comparable(value: Any) -> Any:
    """A result without the ids every run draws afresh."""
    from graphtape.recorder.codec import to_plain
    from graphtape.replay.normalize import Normalizer

    if isinstance(value, BaseException):
        return f"{type(value).__name__}: {value}"
    return Normalizer()(to_plain(value))


@pytest.fixture(scope="module")
def recorded(corpus, tmp_path_factory):
    """Each case recorded once into one store: {name: (run_id, result, bare result)}."""
    graphs, _server = corpus
    from graphtape import Recorder

    db = tmp_path_factory.mktemp("conformance") / "corpus.db"
    runs: dict[str, tuple[str, Any, Any]] = {}
    rec = Recorder(str(db), durability="sync")
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
    _run(copy, case, {**case.config, "configurable": {**case.config.get("configurable", {}), "thread_id": thread}})
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
    if case.repeat:  # the same input twice on one thread: LangGraph's history holds both runs
        theirs = {k: [s for s in v if s <= max(ours.get(k, [0]))] for k, v in theirs.items()}
    assert {k: sorted(set(v)) for k, v in ours.items()} == {k: sorted(set(v)) for k, v in theirs.items() if k in ours or not k}


@pytest.mark.parametrize("name", NAMES)
def test_route_decisions_are_there_with_their_kind_and_router(corpus, recorded, name):
    graphs, _ = corpus
    from graphtape import open_store

    db, runs = recorded
    run_id = runs[name][0]
    store = open_store(db)
    try:
        run = store.get_run(run_id)
        routes = [(ns, d.step, r) for ns in store.namespaces(run_id) for d in store.step_details(run_id, ns) for r in d.routes]
        root = store.step_details(run_id, "")
    finally:
        store.close()
    kinds = {"conditional", "send", "command", "static", "parent-command"}
    for ns, step, r in routes:
        assert r.kind in kinds and r.destinations, (ns, step.step, r)
        if r.kind in ("conditional",):
            assert r.router, (ns, step.step, r)  # a conditional route names the function that decided it
    named = {r.router for _, _, r in routes if r.router}
    assert graphs.CASES[name].routers <= named, named
    if run.status == "ok" and name not in ("functional", "functional_interrupt"):
        # A run that ended normally shows where it ended: a route to END at the root.
        assert any("__end__" in r.destinations for r in (route for d in root for route in d.routes)), name


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
        assert c.output is not None or c.error_type, c
        assert (c.ns, c.step) in steps, f"{c.name} is filed under a step that does not exist: {c.ns!r} {c.step}"
    expected = {"supervisor": 11, "swarm": 5, "middleware_agent": 3, "functional": 2, "injected_tools": 5, "openai_stream": 3, "openai_tools": 4}
    # ChatOpenAI's own request to the (fake) provider is recorded as part of its model call, not as a call of its own.
    own = [c for c in calls if not (c.kind == "http" and c.parent_call_id)]
    if name in expected:
        assert len(own) == expected[name], [c.name for c in own]
    if name.startswith("openai"):
        models = sorted(c.call_id for c in calls if c.kind == "model")
        assert models and sorted(c.parent_call_id for c in calls if c.kind == "http") == models  # one request each


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
            out[run.name] = [d.render().splitlines()[0] for d in result.divergences]
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
    finally:
        store.close()
    assert not result.diverged, result.report()


def _edit_for(state: dict[str, Any]) -> dict[str, Any]:
    """An edit every corpus graph takes: a scalar key changed, a list of numbers grown, or a message added."""
    from langchain_core.messages import HumanMessage

    for key, value in state.items():
        if isinstance(value, (int, str)) and not isinstance(value, bool) and key not in ("remaining_steps",):
            return {key: value + 1 if isinstance(value, int) else f"{value} (edited)"}
    if "messages" in state:
        return {"messages": [HumanMessage("an edit from the fork")]}
    for key, value in state.items():
        if isinstance(value, list) and value and all(isinstance(v, int) for v in value):
            return {key: [*value, value[-1] + 1]}
    return {}


@pytest.mark.parametrize("name", NAMES)
def test_a_fork_with_an_edit_runs_and_shows_the_edit(corpus, recorded, name):
    graphs, _ = corpus
    from graphtape import fork, open_store

    db, runs = recorded
    store = open_store(db)
    try:
        run_id = runs[name][0]
        done = [s.step for s in store.list_steps(run_id) if s.checkpoint_id and s.step >= 0]
        at = done[0]
        edit = _edit_for(store.state_at(run_id, at))
        if name.startswith("functional"):
            # An entrypoint keeps no state channels: forking it is refused in one line, before anything runs.
            from graphtape.replay import ReplayError

            with pytest.raises(ReplayError, match="keeps no state to edit"):
                fork(run_id, getattr(graphs, name), at, {"x": 1}, store=store)
            return
        if not edit:
            pytest.fail(f"{name}: no state key to edit at step {at}")
        result = fork(run_id, getattr(graphs, name), at, edit, store=store, mode="strict")
        first = store.list_steps(result.run_id)[0]
        state = store.state_at(result.run_id, first.step)
        detail = store.run_detail(result.run_id)
    finally:
        store.close()
    assert detail.fork_edit["update"] == json.loads(json.dumps(edit, default=lambda m: {"content": m.content, "type": m.type})) or "messages" in edit
    key, value = next(iter(edit.items()))
    if key == "items":  # a list with an add reducer would add; these corpus lists replace
        assert state[key] == value
    elif key == "messages":
        assert any(m.get("content") == "an edit from the fork" for m in state["messages"])
    else:
        assert state[key] == value
    assert first.step == at  # the fork's steps carry the original's numbers


MARKER_TEST = '''
import pytest

GRAPHS = {graphs!r}


@pytest.mark.graphtape({fixture!r}, graph=GRAPHS + ":{name}")
def test_{name}(graphtape_replay):
    graphtape_replay()
'''


def test_exported_fixtures_pass_under_the_marker_and_test_gen_tests_pass(corpus, recorded, tmp_path):
    graphs, _ = corpus
    from graphtape.tui.cli import main

    db, runs = recorded
    project = tmp_path / "project"
    (project / "fixtures").mkdir(parents=True)
    for name, (run_id, _result, _bare) in runs.items():
        fixture = project / "fixtures" / f"{name}.json"
        assert main(["--db", db, "export", run_id, "-o", str(fixture)]) == 0
        (project / f"test_marker_{name}.py").write_text(MARKER_TEST.format(graphs=str(GRAPHS), fixture=str(fixture), name=name))
        assert main(["--db", db, "test-gen", run_id, "--graph", f"{GRAPHS}:{name}", "-o", str(project / "generated"), "--name", f"gen-{name}"]) == 0
    env = {k: v for k, v in os.environ.items() if k not in ("GRAPHTAPE_FAKE_OPENAI", "CI")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", str(project)], cwd=project, capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert f"{2 * len(runs)} passed" in proc.stdout


CHANGED = {
    # graph name -> (the router whose decision changes, what it returns now)
    "pydantic_state": ("route_ticket", "reply"),
    "injected_tools": ("tools_or_end", "__end__"),
    "runaway": ("keep_going", "__end__"),
}

CHANGED_TEST = '''
import sys

import pytest

sys.path.insert(0, {here!r})
import graphs as G  # noqa: E402

G.{router}.__code__ = (lambda state: {returns!r}).__code__  # today's code routes differently


@pytest.mark.graphtape({fixture!r}, graph=G.{name})
def test_{name}(graphtape_replay):
    graphtape_replay()
'''


@pytest.mark.parametrize("name", sorted(CHANGED))
def test_a_changed_routing_fails_the_fixture_naming_the_route(corpus, recorded, tmp_path, name):
    from graphtape.tui.cli import main

    db, runs = recorded
    project = tmp_path / "project"
    project.mkdir()
    fixture = project / f"{name}.json"
    assert main(["--db", db, "export", runs[name][0], "-o", str(fixture)]) == 0
    router, returns = CHANGED[name]
    (project / f"test_{name}.py").write_text(CHANGED_TEST.format(here=str(HERE), router=router, returns=returns, fixture=str(fixture), name=name))
    env = {k: v for k, v in os.environ.items() if k not in ("GRAPHTAPE_FAKE_OPENAI", "CI")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(project)], cwd=project, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 1 and "1 failed" in proc.stdout, proc.stdout[-3000:]
    assert "route divergence" in proc.stdout and router in proc.stdout, proc.stdout[-3000:]


async def test_the_tui_opens_every_run(recorded):
    from graphtape.tui.app import build_app
    from graphtape.tui.screens.run import RunScreen

    db, runs = recorded
    for name, (run_id, _result, _bare) in runs.items():
        app = build_app(db, run_id)
        async with app.run_test(size=(120, 34)) as pilot:
            for _ in range(60):
                await pilot.pause(0.05)
                screen = app.screen
                if isinstance(screen, RunScreen) and screen.payload is not None:
                    break
            screen = app.screen
            assert isinstance(screen, RunScreen) and screen.steps and screen.payload is not None, name
            assert not screen.has_class("step-failed"), name
