"""Fixtures: export is deterministic and redacted, import rebuilds a run replay() accepts, bad files are refused.

Runs are recorded from real compiled graphs (the bundled demo agents, and
small graphs with an interrupt and a subgraph) into real SQLite stores.
"""

from __future__ import annotations

import json
import operator
from typing import Annotated, TypedDict

import pytest
import sqlalchemy as sa
from langgraph.managed import RemainingSteps

from graphtape.recorder import Recorder, SqlStore
from graphtape.recorder import schema as S
from graphtape.replay import replay
from graphtape.replay.normalize import Normalizer
from graphtape.replay.fixture import (
    FORMAT_VERSION,
    FixtureError,
    StepRange,
    dumps_fixture,
    export_fixture,
    import_fixture,
    parse_fixture,
    portable_graph_ref,
    read_fixture,
)
from conftest import exported, imported, load_agent
from graphtape.tui.cli import main

SECRET = "sk-live-abcdefghijklmnopqrstuvwxyz012345"


@pytest.fixture(scope="module")
def react():
    return load_agent("react_agent")


def record(db, graph, inputs, *, name="case", config=None, resume=None):
    """Record one run (resumed once with ``resume`` if it stops at an interrupt); returns its id."""
    with Recorder(db) as rec:
        app = rec.attach(graph, name=name)
        config = {"configurable": {"thread_id": f"t-{name}"}, **(config or {})}
        try:
            app.invoke(inputs, config)
            if resume is not None:
                from langgraph.types import Command

                app.invoke(Command(resume=resume), config)
        except Exception:  # noqa: BLE001 - a failed run is recorded too
            pass
        rec.flush()
        return rec.last_run_id


# -- graphs with an interrupt and a subgraph --------------------------------------------


class Ticket(TypedDict, total=False):
    question: str
    approved: bool
    log: Annotated[list[str], operator.add]


def approval_graph():
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt

    def draft(state: Ticket) -> dict:
        return {"log": [f"draft: {state['question']}"]}

    def ask(state: Ticket) -> dict:
        answer = interrupt({"question": "approve the refund?"})
        return {"approved": answer == "yes", "log": [f"human said {answer}"]}

    def finish(state: Ticket) -> dict:
        return {"log": ["refunded" if state.get("approved") else "declined"]}

    b = StateGraph(Ticket)
    b.add_node("draft", draft)
    b.add_node("ask", ask)
    b.add_node("finish", finish)
    b.add_edge(START, "draft")
    b.add_edge("draft", "ask")
    b.add_edge("ask", "finish")
    b.add_edge("finish", END)
    return b.compile(checkpointer=InMemorySaver())


def nested_graph():
    from langgraph.graph import END, START, StateGraph

    def inner_a(state: Ticket) -> dict:
        return {"log": ["inner a"]}

    def inner_b(state: Ticket) -> dict:
        return {"log": ["inner b"]}

    inner = StateGraph(Ticket)
    inner.add_node("inner_a", inner_a)
    inner.add_node("inner_b", inner_b)
    inner.add_edge(START, "inner_a")
    inner.add_edge("inner_a", "inner_b")
    inner.add_edge("inner_b", END)

    def outer(state: Ticket) -> dict:
        return {"log": ["outer"]}

    b = StateGraph(Ticket)
    b.add_node("outer", outer)
    b.add_node("child", inner.compile())
    b.add_edge(START, "outer")
    b.add_edge("outer", "child")
    b.add_edge("child", END)
    return b.compile()


# -- export ---------------------------------------------------------------------------


def test_exporting_the_same_run_twice_gives_the_same_bytes(tmp_path, react):
    db = tmp_path / "a.db"
    run_id = record(db, react.build_graph(), react.inputs_for())
    first = dumps_fixture(exported(db, run_id))
    assert dumps_fixture(exported(db, run_id)) == first
    assert first.endswith(b"\n") and b'\n "steps": [\n' in first  # one value per line: reviewable diffs


def test_two_recordings_of_the_same_behaviour_export_alike(tmp_path, react):
    # Task, call, message and checkpoint ids, timestamps and latencies all differ between the runs.
    a = record(tmp_path / "a.db", react.build_graph(), react.inputs_for())
    b = record(tmp_path / "b.db", react.build_graph(), react.inputs_for())
    assert dumps_fixture(exported(tmp_path / "a.db", a)) == dumps_fixture(exported(tmp_path / "b.db", b))


def test_a_fixture_holds_what_a_replay_needs(tmp_path, react):
    db = tmp_path / "a.db"
    fixture = exported(db, record(db, react.build_graph(), react.inputs_for()))
    assert fixture["graphtape_fixture"] == 2  # the oldest format that holds it: v3 only for store calls
    assert fixture["start"]["after_step"] == -1
    assert set(fixture["start"]) == {"after_step", "values", "versions", "versions_seen"}
    tools_step = next(s for s in fixture["steps"] if [t["node"] for t in s["tasks"]] == ["tools", "tools"])
    assert sorted(c["inputs"]["order_id"] for c in tools_step["calls"]) == ["A-1042", "B-2077"]  # the parallel calls
    assert {r["kind"] for r in tools_step["routes"]} == {"static"}
    # State per step is what changed: a growing message list is stored as the items it gained.
    assert set(tools_step["state"]) == {"append"} and len(tools_step["state"]["append"]["messages"]) == 2
    # Messages are stored once, as typed envelopes, and referred to by stable keys.
    ref = tools_step["state"]["append"]["messages"][0]["$b"]
    assert ref.startswith("msg-") and fixture["messages"][ref]["$t"] == "lc.msg" and fixture["messages"][ref]["cls"] == "ToolMessage"
    assert fixture["final_state"]["messages"][-1] == {"$b": ref.split("-")[0] + "-" + str(len(fixture["final_state"]["messages"]))}
    assert "thread_id" not in json.dumps(fixture["config"])


def test_export_redacts_what_the_recording_kept(tmp_path, react):
    db = tmp_path / "a.db"
    run_id = record(db, react.build_graph(), react.inputs_for())
    # Plant secrets the recorder never saw: in a call's inputs, and under a secret-named key.
    store = SqlStore(db)
    try:
        with store.engine.begin() as conn:
            row = conn.execute(sa.select(S.calls.c.id, S.calls.c.inputs).where(S.calls.c.run_id == run_id, S.calls.c.kind == "tool")).first()
            planted = json.loads(row.inputs) | {"note": f"use {SECRET} for ACME-4711", "password": "hunter2"}
            conn.execute(sa.update(S.calls).where(S.calls.c.id == row.id).values(inputs=json.dumps(planted)))
    finally:
        store.close()
    data = dumps_fixture(exported(db, run_id, redact_patterns=[r"ACME-\d+"])).decode()
    assert SECRET not in data and "hunter2" not in data and "ACME-4711" not in data
    fixture = json.loads(data)
    where = fixture["redacted"]["in_this_file"]
    assert any(w.endswith(".inputs.note") for w in where) and any(w.endswith(".inputs.password") for w in where)


def test_a_step_range_starts_from_the_checkpoint_before_it(tmp_path):
    reason_act = load_agent("reason_act")
    db = tmp_path / "a.db"
    run_id = record(db, reason_act.build_graph("happy"), reason_act.inputs_for("happy"))
    fixture = exported(db, run_id, steps="2:2")
    assert fixture["start"]["after_step"] == 1
    assert [s["step"] for s in fixture["steps"]] == [2]
    assert fixture["slice"] == {"to": 2, "of": 3}
    store = SqlStore(db)
    try:
        original = store.checkpoint_at(run_id, 1, typed=False)
        new = imported(db, fixture)
        rebuilt = store.checkpoint_at(new, 1, typed=False)
    finally:
        store.close()
    same = Normalizer()  # message ids are renumbered in fixtures
    assert same(rebuilt.channel_values) == same(original.channel_values)
    assert rebuilt.channel_versions == original.channel_versions and rebuilt.versions_seen == original.versions_seen


def test_bad_step_ranges_are_refused(tmp_path, react):
    db = tmp_path / "a.db"
    run_id = record(db, react.build_graph(), react.inputs_for())
    with pytest.raises(FixtureError, match="no completed step before it"):
        exported(db, run_id, steps="-1:")
    with pytest.raises(FixtureError, match="has no step 99"):
        exported(db, run_id, steps="99:")
    for text in ("x", "3:1", "1:2:3"):
        with pytest.raises(FixtureError, match="bad step range"):
            StepRange.parse(text)
    assert StepRange.parse("2:") == StepRange(2, None) and StepRange.parse(":4") == StepRange(None, 4) and StepRange.parse("3") == StepRange(3, 3)


def test_the_steps_help_offers_only_ranges_export_accepts(tmp_path, react, capsys):
    """--help once offered --steps=-1: (from the input step), which export always refuses."""
    for command in ("export", "test-gen"):
        assert main([command, "--help"]) == 0
        shown = " ".join(capsys.readouterr().out.split())
        assert "-1:" not in shown and "A comes after the run's first step (0 or later" in shown, command
    db = tmp_path / "a.db"
    run_id = record(db, react.build_graph(), react.inputs_for())
    assert main(["--db", str(db), "export", run_id, "-o", "-", "--steps", "0:"]) == 0
    assert main(["--db", str(db), "export", run_id, "-o", "-", "--steps=-1:"]) == 2
    capsys.readouterr()


def test_graph_paths_are_made_portable(tmp_path):
    assert portable_graph_ref(f"{tmp_path}/app/agent.py:graph", tmp_path) == "app/agent.py:graph"
    assert portable_graph_ref("myapp.agent:graph", tmp_path) == "myapp.agent:graph"
    assert portable_graph_ref("/elsewhere/agent.py:graph", tmp_path) == "/elsewhere/agent.py:graph"


# -- import and replay ------------------------------------------------------------------


def test_import_rebuilds_a_run_replay_accepts(tmp_path, react):
    src, dst = tmp_path / "src.db", tmp_path / "dst.db"
    run_id = record(src, react.build_graph(), react.inputs_for())
    fixture = parse_fixture(dumps_fixture(exported(src, run_id)))
    new = imported(dst, fixture)
    a, b = SqlStore(src), SqlStore(dst)
    try:
        # The starting checkpoint comes back whole: values (internal channels too), versions, versions seen.
        cp_a, cp_b = a.checkpoint_at(run_id, -1, typed=False), b.checkpoint_at(new, -1, typed=False)
        assert Normalizer()(cp_b.channel_values) == Normalizer()(cp_a.channel_values)
        assert (cp_b.channel_versions, cp_b.versions_seen) == (cp_a.channel_versions, cp_a.versions_seen)
        # What the replay compares against: steps, routes, states, calls.
        steps_a, steps_b = a.step_details(run_id), b.step_details(new)
        assert [(d.step.step, sorted(t.node for t in d.tasks)) for d in steps_a] == [(d.step.step, sorted(t.node for t in d.tasks)) for d in steps_b]
        assert [sorted(r.destinations for r in d.routes) for d in steps_a] == [sorted(r.destinations for r in d.routes) for d in steps_b]
        assert [s.summary for s in a.list_steps(run_id) if s.step >= 0] == [s.summary for s in b.list_steps(new) if s.step >= 0]
        assert [s for s, _ in a.frames(run_id)] == [s for s, _ in b.frames(new)]
        assert a.run_detail(run_id).output["messages"][-1]["content"] == b.run_detail(new).output["messages"][-1]["content"]
        def calls(store, run):
            return sorted((c.step, c.kind, c.name, json.dumps(Normalizer()(c.output), sort_keys=True)) for c in store.calls(run))

        assert calls(a, run_id) == calls(b, new)
        assert b.get_run(new).graph_ref is None  # never the file's: replaying must name its graph
    finally:
        a.close()
        b.close()
    result = replay(new, react.build_graph(), db=dst)
    assert not result.diverged, result.report()
    assert result.served == {"tool": 3, "model": 3}
    assert result.final_state["messages"][-1].content == react.FINAL_ANSWER


def test_an_imported_route_whose_router_reported_no_value_reads_decided_by(tmp_path, react):
    """A middleware hook's jump reports no return value: after import it reads "decided by", not "returned None"."""
    src, dst = tmp_path / "src.db", tmp_path / "dst.db"
    fixture = parse_fixture(dumps_fixture(exported(src, record(src, react.build_graph(), react.inputs_for()))))
    step = next(s for s in fixture["steps"] if any(r["kind"] == "conditional" for r in s.get("routes", ())))
    route = next(r for r in step["routes"] if r["kind"] == "conditional")
    del route["returned"]
    b = SqlStore(dst)
    try:
        again = b.list_steps(imported(dst, fixture))
    finally:
        b.close()
    summary = next(s.summary for s in again if s.step == step["step"])
    assert f"(decided by {route['router']})" in summary and "returned" not in summary


def test_importing_twice_finds_the_same_run(tmp_path, react):
    src = tmp_path / "src.db"
    fixture = exported(src, record(src, react.build_graph(), react.inputs_for()))
    store = SqlStore(tmp_path / "dst.db")
    try:
        first = import_fixture(store, fixture)
        second = import_fixture(store, fixture)
        assert second.run_id == first.run_id and second.already and not first.already
        assert store.count_runs() == 1
        # Counted as `runs` counts the run (its input step too), both times.
        assert first.steps == second.steps == store.get_run(first.run_id).step_count
    finally:
        store.close()


def test_a_timed_out_call_is_held_as_recorded(tmp_path):
    reason_act = load_agent("reason_act")
    db = tmp_path / "a.db"
    run_id = record(db, reason_act.build_graph("incident"), reason_act.inputs_for("incident"))
    fixture = exported(db, run_id)
    held = [c for s in fixture["steps"] for c in s.get("calls", []) if c.get("hold_ms")]
    assert [c["error"]["type"] for c in held] == ["Unfinished", "Unfinished"]
    assert all(c["hold_ms"] > reason_act.TOOL_TIMEOUT_S * 1000 for c in held)
    new = imported(tmp_path / "b.db", fixture)
    result = replay(new, reason_act.build_graph("incident"), db=tmp_path / "b.db")
    # Served instantly, the failing tool would raise before the node's timeout: a divergence.
    assert not result.diverged, result.report()


def test_an_interrupted_and_resumed_run_replays_from_its_fixture(tmp_path):
    db = tmp_path / "a.db"
    run_id = record(db, approval_graph(), {"question": "refund order 7?"}, resume="yes")
    fixture = exported(db, run_id)
    events = [(e["kind"], e["value"]) for s in fixture["steps"] for e in s.get("events", [])]
    assert ("resume", "yes") in events
    assert any(k == "interrupt" for k, _ in events)
    new = imported(tmp_path / "b.db", fixture)
    result = replay(new, approval_graph(), db=tmp_path / "b.db")
    assert not result.diverged, result.report()
    assert result.final_state["log"][-1] == "refunded"


def test_a_subgraph_is_exported_and_replayed(tmp_path):
    db = tmp_path / "a.db"
    run_id = record(db, nested_graph(), {"question": "q"})
    fixture = exported(db, run_id)
    (sub,) = fixture["subgraphs"]
    assert sub["ns"].startswith("child:t")  # task ids renumbered in namespaces too
    assert [t["node"] for s in sub["steps"] for t in s["tasks"]] == ["__start__", "inner_a", "inner_b"]
    parent_task = next(t for s in fixture["steps"] for t in s["tasks"] if t["node"] == "child")
    assert parent_task["subgraphs"] == [sub["ns"]]
    new = imported(tmp_path / "b.db", fixture)
    result = replay(new, nested_graph(), db=tmp_path / "b.db")
    assert not result.diverged, result.report()
    store = SqlStore(db)
    try:
        assert result.final_state == store.run_detail(run_id).output
    finally:
        store.close()


# -- refusals --------------------------------------------------------------------------


def _fixture_file(tmp_path, react) -> tuple[dict, object]:
    src = tmp_path / "src.db"
    fixture = exported(src, record(src, react.build_graph(), react.inputs_for()))
    return fixture, tmp_path / "case.json"


def _cli_import(tmp_path, path, capsys) -> tuple[int, str]:
    code = main(["--db", str(tmp_path / "cli.db"), "import", str(path)])
    err = capsys.readouterr().err
    return code, err


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda f: f.update(graphtape_fixture=FORMAT_VERSION + 1), f"written by a newer graphtape (fixture format v{FORMAT_VERSION + 1}; this one reads v{FORMAT_VERSION}): upgrade graphtape"),
        (lambda f: f.pop("graphtape_fixture"), "is not a graphtape fixture"),
        (lambda f: f["steps"][1]["tasks"][0].update(node=5), "steps[1].tasks[0].node: expected a string, got a whole number"),
        (lambda f: f["steps"][1].update(step=-5), "steps[1].step: step -5 does not come after step 0"),
        (lambda f: f["steps"][0]["tasks"].append(dict(f["steps"][0]["tasks"][0])), "is used twice"),
        (lambda f: f["messages"].clear(), "which is not in the fixture's messages"),
        (lambda f: f["start"].update(values={"messages": {"$t": "lc.msg", "cls": "AIMessage", "v": {"content": 3}}}), "start.values.messages: malformed recorded value"),
        (lambda f: f["outcome"].update(status="fine"), "outcome.status: 'fine' is not one of ok, error, interrupted"),
        (lambda f: f["config"].update(configurable=[1, 2]), "config.configurable: expected an object, got a list"),
        (lambda f: f["config"].update(stream="interrupt_before"), "config.stream: expected an object, got a string"),
    ],
)
def test_bad_fixtures_are_refused_in_one_line(tmp_path, react, capsys, edit, message):
    fixture, path = _fixture_file(tmp_path, react)
    edit(fixture)
    path.write_text(json.dumps(fixture))
    with pytest.raises(FixtureError) as info:
        store = SqlStore(tmp_path / "x.db")
        try:
            import_fixture(store, read_fixture(path))
        finally:
            store.close()
    assert message in str(info.value)
    code, err = _cli_import(tmp_path, path, capsys)
    assert code == 2 and message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_malformed_and_oversized_files_are_refused(tmp_path, monkeypatch, capsys):
    path = tmp_path / "bad.json"
    path.write_text('{"graphtape_fixture": 1, "name": ')
    code, err = _cli_import(tmp_path, path, capsys)
    assert code == 2 and "is not valid JSON" in err and "Traceback" not in err
    path.write_text("[" * 5000 + "]" * 5000)
    code, err = _cli_import(tmp_path, path, capsys)
    assert code == 2 and "is not valid JSON" in err
    deep: object = "x"
    for _ in range(300):
        deep = [deep]
    path.write_text(json.dumps({"graphtape_fixture": 1, "name": "n", "outcome": {"status": "ok"}, "config": {}, "inputs": deep}))
    code, err = _cli_import(tmp_path, path, capsys)
    assert code == 2 and "nested deeper than" in err
    import graphtape.replay.fixture_format as fx

    monkeypatch.setattr(fx, "MAX_FILE_BYTES", 64)
    path.write_text(json.dumps({"graphtape_fixture": 1, "pad": "x" * 100}))
    code, err = _cli_import(tmp_path, path, capsys)
    assert code == 2 and "fixtures are limited to" in err


# -- the commands ----------------------------------------------------------------------


def test_export_and_import_commands(tmp_path, react, capsys, monkeypatch):
    db = tmp_path / "a.db"
    run_id = record(db, react.build_graph(), react.inputs_for(), name="demo:react")
    monkeypatch.chdir(tmp_path)
    assert main(["--db", str(db), "export", run_id]) == 0
    out = capsys.readouterr().out
    path = tmp_path / "fixtures" / "runs" / "demo-react.json"
    assert f"wrote {path.relative_to(tmp_path)}" in out and path.is_file()
    assert main(["--db", str(db), "export", run_id, "-o", "-"]) == 0
    assert capsys.readouterr().out.encode() == path.read_bytes()
    assert main(["--db", str(tmp_path / "b.db"), "import", str(path)]) == 0
    out = capsys.readouterr().out
    assert "imported as run" in out and "graphtape replay" in out
    assert main(["--db", str(tmp_path / "b.db"), "import", str(path)]) == 0
    assert "already in the store as run" in capsys.readouterr().out
    assert main(["--db", str(db), "export", "nope"]) == 2
    assert "no run matches 'nope'" in capsys.readouterr().err


def test_export_and_test_gen_refuse_a_graph_reference_that_cannot_load(tmp_path, react, capsys, monkeypatch):
    """A reference that can never load is refused in one line before anything is written; export
    only writes a well-formed one down: the file it names is not run."""
    db = tmp_path / "a.db"
    run_id = record(db, react.build_graph(), react.inputs_for(), name="demo:react")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "agent.py").write_text("open('ran', 'w').close()\n")
    (tmp_path / "folder.py").mkdir()
    refused = {
        "garbage": "bad graph reference 'garbage'",
        "does/not/exist.py:graph": "cannot load does/not/exist.py: no such file",
        "folder.py:graph": "cannot load folder.py: it is a directory",
        "my app.agent:graph": "is not a module name",
    }
    for ref, message in refused.items():
        for argv in (["export", run_id, "-o", "out.json"], ["test-gen", run_id, "-o", "gen"]):
            assert main(["--db", str(db), *argv, "--graph", ref]) == 2, (ref, argv)
            err = capsys.readouterr().err
            assert message in err and err.count("\n") == 1, (ref, argv, err)
    assert not (tmp_path / "out.json").exists() and not (tmp_path / "gen").exists()
    assert main(["--db", str(db), "export", run_id, "-o", "out.json", "--graph", "agent.py:graph"]) == 0
    assert main(["--db", str(db), "export", run_id, "-o", "out.json", "--force", "--graph", "myapp.not_installed:graph"]) == 0
    capsys.readouterr()
    assert not (tmp_path / "ran").exists()


def test_test_gen_refuses_a_graph_that_replay_would_refuse(tmp_path, react, capsys, monkeypatch):
    """test-gen loads its --graph as replay does: a reference that names no compiled graph (not a
    graph, no such attribute or module, a module that raises or does not parse) is refused in
    one line, exit 2, and neither the fixture nor the test is written."""
    db = tmp_path / "a.db"
    run_id = record(db, react.build_graph(), react.inputs_for(), name="demo:react")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "notgraph.py").write_text("x = 42\n")
    (tmp_path / "boom.py").write_text("raise RuntimeError('import boom')\n")
    (tmp_path / "syn.py").write_text("def broken(:\n")
    (tmp_path / "tg_agentmod.py").write_text(
        "from typing import TypedDict\nfrom langgraph.graph import StateGraph\n"
        "class S(TypedDict):\n    n: int\n"
        "graph = StateGraph(S).add_node('a', lambda s: s).set_entry_point('a').compile()\n"
    )
    refused = {
        "notgraph.py:x": "notgraph.py:x is an int, not a compiled LangGraph graph",
        "tg_agentmod:nosuch": "tg_agentmod has no attribute 'nosuch'; graph-like names there: graph",
        "nosuchmod_graphtape:graph": "no module named 'nosuchmod_graphtape'",
        "boom.py:graph": "boom.py failed: RuntimeError: import boom",
        "syn.py:graph": "syn.py failed: SyntaxError",
    }
    for ref, message in refused.items():
        assert main(["--db", str(db), "test-gen", run_id, "-o", "gen", "--graph", ref]) == 2, ref
        err = capsys.readouterr().err
        assert message in err and err.startswith("graphtape: error: ") and err.count("\n") == 1, (ref, err)
        assert "Traceback" not in err
    assert not (tmp_path / "gen").exists()
    assert main(["--db", str(db), "test-gen", run_id, "-o", "gen", "--graph", "tg_agentmod:graph"]) == 0
    assert len(list((tmp_path / "gen").iterdir())) == 2
    capsys.readouterr()


def test_a_fixture_moves_between_backends(tmp_path, react, store_url):
    """Exported from SQLite, imported into each backend (PostgreSQL too), replayed there."""
    src = tmp_path / "src.db"
    fixture = exported(src, record(src, react.build_graph(), react.inputs_for()))
    store = SqlStore(store_url)
    try:
        run_id = import_fixture(store, fixture).run_id
        again = export_fixture(store, run_id, graph=fixture["graph"])  # an imported run never holds the file's graph
        assert dumps_fixture(again) == dumps_fixture(fixture)  # back out, byte for byte
        result = replay(run_id, react.build_graph(), store=store)
    finally:
        store.close()
    assert not result.diverged, result.report()


@pytest.mark.parametrize("leaf", ["x", [], {"k": 1}])
def test_a_value_nested_to_the_limit_is_read_and_one_level_more_is_refused(leaf):
    """The depth bound counts every level, an empty container's and a scalar's alike."""
    from graphtape.recorder.codec import MAX_DEPTH
    from graphtape.replay.fixture_format import FixtureError, _Shape

    def nested(levels: int) -> object:
        value = leaf
        for _ in range(levels):
            value = [value]
        return value

    levels = MAX_DEPTH if leaf == "x" or leaf == [] else MAX_DEPTH - 1  # {"k": 1} holds a level of its own
    _Shape("fixture").value(nested(levels), "inputs")
    with pytest.raises(FixtureError, match=f"nested deeper than {MAX_DEPTH} levels"):
        _Shape("fixture").value(nested(levels + 1), "inputs")


def test_export_refuses_a_fixture_no_test_could_read(tmp_path, react, capsys, monkeypatch):
    """A runaway run's fixture, over the size a test reads, is refused when it is written, not in CI."""
    import graphtape.replay.fixture as fixture_api
    import graphtape.replay.fixture_format as fx

    db = tmp_path / "a.db"
    run_id = record(db, react.build_graph(), react.inputs_for(), name="demo:react")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(fx, "MAX_FILE_BYTES", 2048)
    monkeypatch.setattr(fixture_api, "MAX_FILE_BYTES", 2048)
    assert main(["--db", str(db), "export", run_id]) == 2
    err = capsys.readouterr().err.strip()
    assert "over the 0 MB a fixture may be: check fewer steps with --steps A:B" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "fixtures").exists()
    assert main(["--db", str(db), "test-gen", run_id, "-o", "tests", "--graph", f"{react.__file__}:graph"]) == 2
    assert "a fixture may be" in capsys.readouterr().err and not (tmp_path / "tests").exists()
    # To stdout the bytes are the user's to keep elsewhere: written, with a warning.
    assert main(["--db", str(db), "export", run_id, "-o", "-"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["steps"]
    assert "a test reads at most 0 MB" in captured.err


class Budget(TypedDict, total=False):
    seen: Annotated[list, operator.add]
    remaining_steps: RemainingSteps


def _counting_down():
    """Each node writes how many steps LangGraph says are left: a run on a thread's second turn
    counts from its own input step, and so must its fixture's replay."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, StateGraph

    b = StateGraph(Budget)
    b.add_node("a", lambda s: {"seen": [s["remaining_steps"]]})
    b.add_node("b", lambda s: {"seen": [s["remaining_steps"]]})
    b.add_edge(START, "a")
    b.add_edge("a", "b")
    b.add_edge("b", END)
    return b.compile(checkpointer=InMemorySaver())


def test_a_later_turns_fixture_counts_remaining_steps_from_its_own_input(tmp_path):
    db = tmp_path / "a.db"
    config = {"configurable": {"thread_id": "t"}}
    with Recorder(db) as rec:
        graph = rec.attach(_counting_down(), name="budget")
        graph.invoke({"seen": []}, config)
        out = graph.invoke({"seen": []}, config)
        second = rec.last_run_id
    assert out["seen"][-2:] == out["seen"][:2]  # each turn counts from its own start
    store = SqlStore(db)
    try:
        fixture = export_fixture(store, second)
        assert fixture["start"]["after_step"] > -1 and fixture["start"]["source"] == "input"
        run_id = import_fixture(store, fixture).run_id
        result = replay(run_id, _counting_down(), store=store, mode="strict")
        assert not result.diverged, result.report()
    finally:
        store.close()


def test_exporting_a_long_conversation_walks_each_message_once_not_each_step(tmp_path, monkeypatch):
    """A history one message longer at each of 300 steps: each step's state is exported from
    where it grew. Walking it whole at every step cost the square of the run's length (a
    10,000-step run took two minutes); the fixture is the same, and replays."""
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.graph import END, START, MessagesState, StateGraph

    from graphtape.replay import fixture_export

    steps = 300
    b = StateGraph(MessagesState)
    b.add_node("talk", lambda s: {"messages": [AIMessage(f"turn {len(s['messages'])}")]})
    b.add_edge(START, "talk")
    b.add_conditional_edges("talk", lambda s: "talk" if len(s["messages"]) < steps else END, ["talk", END])
    db = str(tmp_path / "long.db")
    with Recorder(db) as rec:
        rec.attach(b.compile(), name="long").invoke({"messages": [HumanMessage("go")]}, {"recursion_limit": steps + 10})
        run_id = rec.last_run_id
    walked = 0
    walk = fixture_export._Exporter._walk

    def counting(self, x, depth):
        nonlocal walked
        walked += 1
        return walk(self, x, depth)

    monkeypatch.setattr(fixture_export._Exporter, "_walk", counting)
    store = SqlStore(db)
    try:
        fixture = export_fixture(store, run_id)
    finally:
        store.close()
    assert walked < 30 * steps, walked  # about ten per step; whole histories each step: ~45,000
    appended = [m for s in fixture["steps"] for m in (s.get("state") or {}).get("append", {}).get("messages", [])]
    assert len(appended) == steps - 1  # one new message per step, exported as an append
    run = imported(str(tmp_path / "again.db"), fixture)
    result = replay(run, b.compile(), db=str(tmp_path / "again.db"), mode="strict")
    assert not result.diverged and len(result.final_state["messages"]) == steps
