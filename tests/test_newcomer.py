"""What a newcomer meets first, checked end to end: the demo's store, search, tracebacks,
export, graph references and one-line errors (issue 15)."""

from __future__ import annotations

import json
import operator
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Annotated, TypedDict

import pytest
from conftest import bump_graph
from langgraph.graph.message import add_messages

from graphtape.recorder import Recorder, StoreError, open_store
from graphtape.tui.cli import main
from graphtape.tui.demo import record_demo

GRAPHTAPE = Path(sys.executable).with_name("graphtape")


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    db = str(tmp_path_factory.mktemp("newcomer") / "demo.db")
    _, runs = record_demo(db)
    return db, {d.scenario: d.run.id for d in runs}


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_second_demo_replaces_the_first_runs(demo, tmp_path):
    db, first = demo
    copy = tmp_path / "again.db"
    copy.write_bytes(Path(db).read_bytes())
    _, again = record_demo(str(copy))
    store = open_store(copy)
    try:
        names = sorted(r.name for r in store.list_runs())
    finally:
        store.close()
    assert names == sorted({f"demo:{s}" for s in first}) and len(names) == len(first)
    assert set(d.run.id for d in again).isdisjoint(first.values())


@pytest.mark.parametrize("flag, words", [("--search", ["timeout", "timed out", "abandoned", "lookup_order_status"]), ("--error", ["timeout", "abandoned"])])
def test_the_readme_search_examples_find_the_incident(demo, capsys, flag, words):
    db, ids = demo
    for word in words:
        code, out, _ = run_cli(capsys, "--db", db, "runs", flag, word, "--json")
        assert code == 0
        found = {r["id"] for r in json.loads(out)}
        assert ids["incident"] in found, (flag, word)
        assert ids["happy"] not in found or word == "lookup_order_status", (flag, word)
    code, out, _ = run_cli(capsys, "--db", db, "runs", flag, "no-such-thing-anywhere")
    assert code == 0 and out.strip() == "no runs match"


def test_every_command_takes_the_name_the_runs_list_shows(demo, tmp_path, capsys):
    """``graphtape runs`` shows names like demo:incident; show, export and diff take them as they take ids."""
    db, ids = demo
    code, out, _ = run_cli(capsys, "--db", db, "show", "demo:incident", "--json")
    assert code == 0 and json.loads(out)["run"]["id"] == ids["incident"]
    code, out, _ = run_cli(capsys, "--db", db, "export", "demo:happy", "-o", str(tmp_path / "happy.json"))
    assert code == 0 and f"from run {ids['happy']}" in out
    assert run_cli(capsys, "--db", db, "diff", "demo:happy", "demo:happy")[0] == 0
    code, _, err = run_cli(capsys, "--db", db, "show", "demo:nothing")
    assert code == 2 and "no run matches 'demo:nothing'" in err


def test_a_timed_out_call_says_its_node_gave_up(demo, capsys):
    db, ids = demo
    code, out, _ = run_cli(capsys, "--db", db, "show", ids["incident"], "--step", "2")
    assert code == 0
    assert "abandoned its node stopped waiting after" in out and "ms and went on" in out
    assert "Unfinished" not in out


TRACEBACK_AGENT = textwrap.dedent(
    '''
    from typing import TypedDict

    from langchain_core.tools import tool
    from langgraph.graph import END, START, StateGraph


    @tool
    def charge(amount: int) -> str:
        """Charge a card."""
        token = "sk-live-abcdefghijklmnopqrstuvwx0123456789"; raise ValueError("card declined")


    class S(TypedDict, total=False):
        amount: int
        note: str


    def pay(state):
        try:
            charge.invoke({"amount": state["amount"]})
        except ValueError:
            pass
        return {"note": "tried"}


    def settle(state):
        raise RuntimeError("ledger is locked")


    b = StateGraph(S)
    b.add_node("pay", pay)
    b.add_node("settle", settle)
    b.add_edge(START, "pay")
    b.add_edge("pay", "settle")
    b.add_edge("settle", END)
    graph = b.compile()
    '''
)


@pytest.fixture
def failing_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "payments.py").write_text(TRACEBACK_AGENT)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    module = importlib.import_module("payments")
    db = str(tmp_path / "runs.db")
    with Recorder(db) as rec:
        with pytest.raises(RuntimeError):
            rec.attach(module.graph, graph_ref="payments:graph").invoke({"amount": 3})
        run_id = rec.last_run_id
    sys.modules.pop("payments", None)
    return tmp_path, db, run_id


def _line_of(text: str) -> int:
    return next(i for i, line in enumerate(TRACEBACK_AGENT.splitlines(), 1) if text in line)


def test_node_and_tool_errors_keep_their_traceback_everywhere(failing_run, capsys):
    tmp, db, run_id = failing_run
    tool_line, node_line = _line_of('raise ValueError("card declined")'), _line_of('raise RuntimeError("ledger is locked")')
    store = open_store(db)
    try:
        call = next(c for c in store.calls(run_id) if c.name == "charge")
        failed = next(t for s in store.list_steps(run_id) for t in store.step_detail(run_id, s.step).tasks if t.error_type)
    finally:
        store.close()
    assert call.traceback[-1][:3] == ["payments.py", tool_line, "charge"] and "[REDACTED]" in call.traceback[-1][3]
    assert failed.traceback[-1][:3] == ["payments.py", node_line, "settle"]
    assert all("sk-live" not in str(f) for f in call.traceback + failed.traceback)

    # A tool's error text is searched too, though the run failed with another error.
    for flag in ("--search", "--error"):
        code, out, _ = run_cli(capsys, "--db", db, "runs", flag, "card declined", "--json")
        assert code == 0 and [r["id"] for r in json.loads(out)] == [run_id], flag

    code, out, _ = run_cli(capsys, "--db", db, "show", run_id)
    assert code == 0 and f'at        payments.py:{node_line} in settle: raise RuntimeError("ledger is locked")' in out
    code, out, _ = run_cli(capsys, "--db", db, "show", run_id, "--step", "1")
    assert f'File "payments.py", line {tool_line}, in charge' in out
    code, out, _ = run_cli(capsys, "--db", db, "show", run_id, "--step", "2")
    assert f'File "payments.py", line {node_line}, in settle' in out

    fixture_path = tmp / "fx.json"
    assert run_cli(capsys, "--db", db, "export", run_id, "-o", str(fixture_path))[0] == 0
    fixture = json.loads(fixture_path.read_text())
    frames = [t["error"]["traceback"] for s in fixture["steps"] for t in s["tasks"] if t.get("error")]
    assert frames and frames[0][-1][:3] == ["payments.py", node_line, "settle"]
    # The frames survive an import: the imported run shows them too.
    other = str(tmp / "other.db")
    assert run_cli(capsys, "--db", other, "import", str(fixture_path))[0] == 0
    code, out, _ = run_cli(capsys, "--db", other, "show", "last")
    assert f"payments.py:{node_line} in settle" in out


def test_export_never_replaces_a_fixture_without_force(demo, tmp_path, capsys):
    db, ids = demo
    target = tmp_path / "incident.json"
    assert run_cli(capsys, "--db", db, "export", ids["incident"], "-o", str(target))[0] == 0
    assert target.stat().st_mode & 0o777 == 0o600
    target.write_text("my edited fixture")
    code, _, err = run_cli(capsys, "--db", db, "export", ids["incident"], "-o", str(target))
    assert code == 2 and err.count("\n") == 1 and "exists: pass --force" in err
    assert target.read_text() == "my edited fixture"
    assert run_cli(capsys, "--db", db, "export", ids["incident"], "-o", str(target), "--force")[0] == 0
    assert json.loads(target.read_text())["graphtape_fixture"]
    # -o naming a folder: said at once, with or without --force (not "exists", then "Is a directory").
    for force in ([], ["--force"]):
        code, _, err = run_cli(capsys, "--db", db, "export", ids["incident"], "-o", str(tmp_path), *force)
        assert code == 2 and err.count("\n") == 1 and "is a folder: give the fixture's file path" in err, err


def test_a_graph_built_at_import_time_is_found_again_by_replay(tmp_path):
    (tmp_path / "shop.py").write_text(
        textwrap.dedent(
            """
            from typing import TypedDict
            from langgraph.graph import END, START, StateGraph
            from graphtape import Recorder

            class S(TypedDict):
                n: int

            b = StateGraph(S)
            b.add_node("bump", lambda s: {"n": s["n"] + 1})
            b.add_edge(START, "bump")
            b.add_edge("bump", END)
            recorder = Recorder("runs.db")
            checkout = recorder.attach(b.compile())

            if __name__ == "__main__":
                checkout.invoke({"n": 1})
                recorder.close()
            """
        )
    )
    env = {k: v for k, v in os.environ.items() if k != "GRAPHTAPE_DB"}
    # Run as a script, imported, and loaded from its file under a name it cannot be imported by
    # (as LangGraph's server loads a graph that langgraph.json names): the last is replayed below.
    load = "import importlib.util as u, sys\ndef load():\n    s = u.spec_from_file_location('__shop', 'shop.py'); m = sys.modules['__shop'] = u.module_from_spec(s); s.loader.exec_module(m); return m\n"
    served = load + "m = load(); m.checkout.invoke({'n': 3}); m.recorder.close()"
    # The server loads the file once per graph langgraph.json names in it, each time under the same
    # name: the first load's graph runs when the name holds the last load.
    served_twice = load + "m = load(); again = load(); m.checkout.invoke({'n': 4}); m.recorder.close(); again.recorder.close()"
    for argv in (["shop.py"], ["-c", "import shop; shop.checkout.invoke({'n': 2}); shop.recorder.close()"], ["-c", served_twice], ["-c", served]):
        proc = subprocess.run([sys.executable, *argv], cwd=tmp_path, capture_output=True, text=True, timeout=120, env={**env, "PYTHONPATH": str(tmp_path)})
        assert proc.returncode == 0, proc.stderr
    store = open_store(tmp_path / "runs.db")
    try:
        runs = store.list_runs()
    finally:
        store.close()
    assert sorted(r.graph_ref for r in runs) == ["shop.py:checkout"] * 3 + ["shop:checkout"]
    assert {r.graph_name for r in runs} == {"shop:checkout"} and {r.name for r in runs} == {"shop:checkout"}
    proc = subprocess.run(
        [str(GRAPHTAPE), "--db", "runs.db", "replay", "last", "--trust-recorded-graph"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, env={**env, "PYTHONPATH": str(tmp_path)},
    )
    assert proc.returncode == 0 and "matches the recording" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.parametrize(
    "url, words",
    [
        ("mysql://u:hunter2@localhost/x", "graphtape stores runs in SQLite"),
        ("postgresql+asyncpg://u:hunter2@localhost/x", "driver 'asyncpg' is not installed"),
    ],
)
def test_a_store_url_graphtape_cannot_use_is_one_line_without_the_password(capsys, url, words):
    code, out, err = run_cli(capsys, "--db", url, "runs")
    assert code == 2 and out == "" and err.count("\n") == 1 and words in err
    assert "hunter2" not in err and "***" in err


@pytest.mark.parametrize("path", [r"C:\Users\me\graphtape.db", "C:/Users/me/graphtape.db", r"runs\graphtape.db"])
def test_a_windows_path_on_this_system_is_one_line_and_creates_nothing(tmp_path, monkeypatch, capsys, path):
    """Taken as it is, such a path names one file in the working folder with backslashes in its name."""
    monkeypatch.chdir(tmp_path)
    for argv in (["--db", path, "runs"], ["--db", path, "demo", "--no-tui", "--scenario", "happy"]):
        code, out, err = run_cli(capsys, *argv)
        assert code == 2 and err.count("\n") == 1 and "a Windows path" in err, err
    with pytest.raises(StoreError, match="a Windows path"):
        Recorder(path)
    assert list(tmp_path.iterdir()) == []


def test_an_empty_postgresql_database_says_to_record_a_run_first(pg_url, capsys):
    """A database graphtape never wrote to is empty of runs, not another program's file."""
    for command in ("runs", "stats"):
        code, out, err = run_cli(capsys, "--db", pg_url, command)
        assert code == 2 and out == "" and err.count("\n") == 1, (command, err)
        assert err.startswith("graphtape: error: no graphtape runs in postgresql+psycopg://") and "record a run into it first" in err, err
        assert "file" not in err, err


@pytest.mark.parametrize("value", ["", "  "])
def test_an_empty_db_value_is_named_as_such_and_creates_nothing(tmp_path, monkeypatch, capsys, value):
    """An empty --db is not the working folder ("cannot open database <cwd>: it is a directory")."""
    monkeypatch.chdir(tmp_path)
    for argv in (["--db", value, "runs"], ["runs", "--db", value], ["--db", value, "demo", "--no-tui", "--scenario", "happy"]):
        code, out, err = run_cli(capsys, *argv)
        assert code == 2 and out == "" and err.count("\n") == 1, (argv, err)
        assert "argument --db: the value is empty" in err and "directory" not in err, (argv, err)
    with pytest.raises(StoreError, match="no database given: the path or URL is empty"):
        Recorder(value)
    assert list(tmp_path.iterdir()) == []


def test_replay_refuses_an_override_no_recorded_call_answers_to(demo, tmp_path, monkeypatch, capsys):
    """As --mock-node names a node the graph has, --override names a tool or model the run called:
    a misspelt name would replace nothing, and the replay would pass without the function."""
    db, ids = demo
    copy = tmp_path / "copy.db"
    copy.write_bytes(Path(db).read_bytes())  # replays add runs: the module's store stays as recorded
    (tmp_path / "answers.py").write_text("def canned(*args, **kwargs):\n    return 'canned'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = f"{Path(__file__).resolve().parents[1] / 'fixtures' / 'agents' / 'reason_act.py'}:graph_happy"
    replay = ["--db", str(copy), "replay", ids["happy"], "--graph", graph]
    code, out, err = run_cli(capsys, *replay, "--override", "lookup_order_statsu=answers:canned")
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith("graphtape: error: cannot override 'lookup_order_statsu': no recorded tool or model call has that name; the run's tools: lookup_order_status"), err
    for name in ("lookup_order_status", "model", "ScriptedChatModel"):  # the names a recorded call answers to
        code, _, err = run_cli(capsys, *replay, "--override", f"{name}=answers:canned")
        assert code in (0, 1) and "cannot override" not in err, (name, err)


@pytest.mark.parametrize(
    "url, words",
    [
        ("sqlite:////dev/null/x.db", "/dev/null is not a folder"),
        ("postgresql+psycopg://postgres@127.0.0.1:1/test", "cannot open postgresql+psycopg://postgres@127.0.0.1:1/test"),
    ],
)
def test_demo_into_a_store_it_cannot_reach_is_one_line(tmp_path, url, words):
    """The demo stops before recording with its own line, not the recorder's warning and then the same line again."""
    proc = subprocess.run([str(GRAPHTAPE), "--db", url, "demo", "--no-tui", "--scenario", "happy"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout + proc.stderr
    assert proc.stderr.startswith("graphtape: error: ") and proc.stderr.count("\n") == 1 and words in proc.stderr, proc.stderr


def test_recorded_text_never_drives_the_terminal(tmp_path, capsys):
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    class S(TypedDict):
        n: int

    b = StateGraph(S)
    b.add_node("bump", lambda s: {"n": s["n"] + 1})
    b.add_edge(START, "bump")
    b.add_edge("bump", END)
    db = str(tmp_path / "runs.db")
    hostile = "run\x1b]52;c;ZWNobyBwd25lZA==\x07\x1b[2J\u202eevil\u200fad\u200bmin\u2028\ufeff"
    with Recorder(db) as rec:
        rec.attach(b.compile(), name=hostile, tags=["t\x1b[31m"]).invoke({"n": 1})
    for argv in (["runs"], ["show", "last"], ["runs", "--json"]):
        code, out, err = run_cli(capsys, "--db", db, *argv)
        assert code == 0
        assert "\x1b" not in out + err and "\x07" not in out and "\u202e" not in out, argv
        if argv[-1] != "--json":  # JSON escapes what it must; a terminal shows the rest
            assert not any(c in out for c in "\u200f\u200b\u2028\ufeff"), argv


# -- fork: the edit, the input, Command routes, step numbers (item 6) ---------------------------


@pytest.fixture(scope="module")
def cmd_run(tmp_path_factory):
    import replay_graphs as G

    folder = tmp_path_factory.mktemp("fork")
    (folder / "router_agent.py").write_text("from replay_graphs import cmd_graph\n\ngraph = cmd_graph(threshold=5)\n")
    db = str(folder / "runs.db")
    with Recorder(db) as rec:
        rec.attach(G.cmd_graph(threshold=5), name="router", graph_ref=f"{folder / 'router_agent.py'}:graph").invoke({"x": 9})
        run_id = rec.last_run_id
    return db, run_id


def test_a_fork_after_a_command_goto_goes_where_the_recording_went(cmd_run):
    import replay_graphs as G

    from graphtape import fork

    db, run_id = cmd_run
    result = fork(run_id, G.cmd_graph(threshold=5), 1, {"x": 1}, db=db)  # step 1: router said goto big
    assert result.error is None and result.notes == []
    assert result.final_state == {"x": 1, "path": ["router", "big"]}
    store = open_store(db)
    try:
        steps = store.list_steps(result.run_id)
        assert [(s.step, s.nodes) for s in steps] == [(1, []), (2, ["big"])]  # the original's numbers
        assert store.get_run(result.run_id).step_count == len(steps) == 2  # the fork's own steps
        assert store.get_run(run_id).step_count == len(store.list_steps(run_id)) == 4
    finally:
        store.close()


class Plan(TypedDict, total=False):
    items: list
    tag: str
    results: Annotated[list, operator.add]


def _sending_plan():
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Command, Send

    b = StateGraph(Plan)
    b.add_node("plan", lambda s: Command(update={"tag": "planned"}, goto=[Send("work", {"item": i}) for i in s["items"]]))
    b.add_node("work", lambda arg: {"results": [arg["item"].upper()]})
    b.add_edge(START, "plan")
    b.add_edge("work", END)
    return b.compile()


def test_a_fork_after_a_command_that_sent_packets_sends_them_again_and_says_so(tmp_path):
    """``Command(goto=[Send(...), Send(...)])``: the fork follows it with the recorded packets
    (worked out before the edit, which the note says) instead of stopping after the edit."""
    from graphtape import fork

    db = str(tmp_path / "runs.db")
    with Recorder(db) as rec:
        rec.attach(_sending_plan()).invoke({"items": ["a", "b"]})
        run_id = rec.last_run_id
    result = fork(run_id, _sending_plan(), 1, {"tag": "edited"}, db=db)
    assert result.error is None and result.final_state == {"items": ["a", "b"], "tag": "edited", "results": ["A", "B"]}
    assert len(result.notes) == 1 and "sends them as recorded" in result.notes[0]


def test_a_fork_that_cannot_follow_the_recorded_goto_says_why(cmd_run):
    import replay_graphs as G

    from graphtape import fork

    db, run_id = cmd_run
    result = fork(run_id, G.cmd_graph(threshold=5), 1, {"x": 1}, as_node="big", db=db)
    assert result.notes and "routed with Command(goto=...) (router → big)" in result.notes[0] and "applied as 'big'" in result.notes[0]
    assert f"\nnote: {result.notes[0]}" in result.report()
    assert result.to_dict()["notes"] == result.notes


def test_a_fork_shows_its_edit_and_that_it_resumed_rather_than_took_input(cmd_run, capsys):
    db, run_id = cmd_run
    code, _, err = run_cli(capsys, "--db", db, "fork", run_id, "--trust-recorded-graph", "--at", "0", "--set", "x=2")
    assert code == 0, err
    fork_id = err.split("fork recorded as run ")[1].split()[0]
    code, out, _ = run_cli(capsys, "--db", db, "show", fork_id)
    assert code == 0
    assert f"forked    from {run_id} at step 0" in out and "edit      fork (strict): x=2" in out
    assert f"input     none: it resumed run {run_id[:8]} after step 0, with the edit applied" in out


def test_a_fork_at_the_input_step_keeps_the_rest_of_the_input(tmp_path, capsys):
    db = str(tmp_path / "demo.db")
    _, runs = record_demo(db, "happy")
    run_id = runs[0].run.id
    code, out, err = run_cli(capsys, "--db", db, "fork", run_id, "--trust-recorded-graph", "--at", "-1", "--set", "retries=5", "--mode", "strict")
    assert code == 0, err
    fork_id = err.split("fork recorded as run ")[1].split()[0]
    store = open_store(db)
    try:
        recorded_input = store.run_detail(run_id).inputs
        first = store.state_at(fork_id, 0)
    finally:
        store.close()
    assert recorded_input["input"] and first["input"] == recorded_input["input"] and first["retries"] == 5


# -- a timeout told as what happened, also when the call came back late (item 3) -----------------

LATE_AGENT = textwrap.dedent(
    '''
    import concurrent.futures
    import contextvars
    import time
    from typing import TypedDict

    from langchain_core.tools import tool
    from langgraph.graph import END, START, StateGraph


    @tool
    def slow_status(order_id: str) -> str:
        """A status service that answers late."""
        time.sleep(0.3)
        return "shipped"


    class S(TypedDict, total=False):
        order_id: str
        status: str


    def ask(state, config):
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        future = pool.submit(contextvars.copy_context().run, slow_status.invoke, {"order_id": state["order_id"]}, config)
        pool.shutdown(wait=False)
        try:
            return {"status": future.result(timeout=0.05)}
        except concurrent.futures.TimeoutError:
            return {"status": "unknown"}


    b = StateGraph(S)
    b.add_node("ask", ask)
    b.add_edge(START, "ask")
    b.add_edge("ask", END)
    graph = b.compile()
    '''
)


def test_a_call_that_returns_after_its_node_gave_up_is_still_told_as_a_timeout(tmp_path, capsys, monkeypatch):
    import time

    (tmp_path / "late_agent.py").write_text(LATE_AGENT)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    module = importlib.import_module("late_agent")
    db = str(tmp_path / "runs.db")
    with Recorder(db) as rec:
        rec.attach(module.graph).invoke({"order_id": "A-1"})
        time.sleep(0.5)  # the recorder is still open when the call comes back
        rec.flush()
    sys.modules.pop("late_agent", None)
    store = open_store(db)
    try:
        (call,) = store.calls(store.resolve_run("last"))
    finally:
        store.close()
    assert call.error_type is None and call.latency_ms >= 250  # it returned, long after its node moved on
    code, out, _ = run_cli(capsys, "--db", db, "show", "last", "--step", "1")
    assert code == 0
    assert "abandoned its node stopped waiting after" in out and "the call returned after" in out and "too late to count" in out
    assert '"shipped"' in out and "came too late" in out


# -- the runs table at 80 columns (item 12) ----------------------------------------------------------


def test_the_runs_table_fits_an_80_column_terminal_with_usable_ids(demo, capsys, monkeypatch):
    db, ids = demo
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run_cli(capsys, "--db", db, "runs")
    assert code == 0
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80
    shown = [line.split()[0] for line in lines[1:]]
    assert all(len(s) >= 8 for s in shown)
    for prefix in shown:  # every id shown opens its run
        assert run_cli(capsys, "--db", db, "show", prefix)[0] == 0
    monkeypatch.setenv("COLUMNS", "120")
    code, out, _ = run_cli(capsys, "--db", db, "runs")
    assert ids["incident"] in out and "REDACTIONS" in out  # with room, the full table


# -- where the graph came from (item 8) ----------------------------------------------------------------


def test_a_script_attaching_an_imported_graph_records_the_module_not_the_script(tmp_path):
    (tmp_path / "agent.py").write_text(
        textwrap.dedent(
            """
            from typing import TypedDict
            from langgraph.graph import END, START, StateGraph

            class S(TypedDict):
                n: int

            b = StateGraph(S)
            b.add_node("bump", lambda s: {"n": s["n"] + 1})
            b.add_edge(START, "bump")
            b.add_edge("bump", END)
            graph = b.compile()
            """
        )
    )
    # The script is not guarded by __main__: loading it again would record another run.
    (tmp_path / "run_it.py").write_text(
        textwrap.dedent(
            """
            from graphtape import Recorder
            import agent
            import tabnanny  # a library imported after the agent holds the graph too: never its reference
            tabnanny.graph = agent.graph

            with Recorder("runs.db") as rec:
                for g in (agent.graph,):
                    rec.attach(g).invoke({"n": 1})
            """
        )
    )
    env = {k: v for k, v in os.environ.items() if k != "GRAPHTAPE_DB"}
    proc = subprocess.run([sys.executable, "run_it.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120, env={**env, "PYTHONPATH": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    store = open_store(tmp_path / "runs.db")
    try:
        (run,) = store.list_runs()
    finally:
        store.close()
    assert run.graph_ref == "agent:graph" and run.name == "agent:graph"


def test_frames_name_no_path_of_the_recording_machine(tmp_path, monkeypatch):
    """Installed packages, Python's own modules and the project's files all have short names."""
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    @tool
    def refund(order_id: str) -> str:
        """Refund an order."""
        raise ConnectionError("payments API unreachable")

    b = StateGraph(MessagesState)
    b.add_node("agent", lambda s: {"messages": [AIMessage("refunding", tool_calls=[{"name": "refund", "args": {"order_id": "A1"}, "id": "c1"}])]})
    b.add_node("tools", ToolNode([refund], handle_tool_errors=False))  # runs the tool in a thread pool
    b.add_edge(START, "agent")
    b.add_edge("agent", "tools")
    b.add_edge("tools", END)
    db = str(tmp_path / "runs.db")
    monkeypatch.chdir(Path(__file__).parent)
    with Recorder(db) as rec:
        with pytest.raises(ConnectionError):
            rec.attach(b.compile()).invoke({"messages": [("user", "refund A1")]})
        run_id = rec.last_run_id
    store = open_store(db)
    try:
        steps = store.list_steps(run_id)
        failed = [t for s in steps for t in store.step_detail(run_id, s.step).tasks if t.error_type]
        calls = store.calls(run_id)
    finally:
        store.close()
    frames = failed[0].traceback + calls[0].traceback
    files = [f[0] for f in frames]
    assert any(f.startswith("stdlib/concurrent/futures/") for f in files)
    assert "test_newcomer.py" in files and not any(f.startswith("/") for f in files)


def test_recording_into_another_programs_sqlite_file_is_refused_in_one_line(tmp_path, capsys):
    """Recorder("checkpoints.db") beside a LangGraph SqliteSaver, or an app's own data file:
    graphtape adds none of its tables (nor its WAL mode) to it, and says so."""
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    from graphtape.recorder.errors import SchemaVersionError

    path = tmp_path / "checkpoints.db"
    conn = sqlite3.connect(str(path), check_same_thread=False)
    SqliteSaver(conn).setup()
    before = sorted(r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
    mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    conn.close()
    with pytest.raises(SchemaVersionError, match="is another program's SQLite database \\(its tables: checkpoints, .*\\): record into a file of graphtape's own"):
        Recorder(path)
    assert main(["--db", str(path), "demo", "--no-tui"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "another program's SQLite database" in err
    conn = sqlite3.connect(str(path))
    try:
        assert sorted(r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")) == before
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == mode
    finally:
        conn.close()


def test_a_sqlite_file_another_program_stamped_as_its_own_is_refused_even_with_no_table(tmp_path):
    import sqlite3

    from graphtape.recorder.errors import SchemaVersionError

    path = tmp_path / "app.db"
    conn = sqlite3.connect(str(path))
    conn.execute("PRAGMA application_id = 1234")
    conn.execute("PRAGMA user_version = 7")
    conn.commit()
    conn.close()
    with pytest.raises(SchemaVersionError, match="another program's SQLite database \\(application_id 1234, user_version 7\\)"):
        Recorder(path)
    conn = sqlite3.connect(str(path))
    try:
        assert conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # left in its own mode
    finally:
        conn.close()


def test_an_apps_sqlite_file_keeps_its_journal_mode_when_recording_into_it_is_refused(tmp_path):
    import sqlite3

    from graphtape.recorder.errors import SchemaVersionError

    path = tmp_path / "app.db"
    with sqlite3.connect(str(path)) as conn:
        conn.execute("CREATE TABLE users (name TEXT)")
    conn.close()
    with pytest.raises(SchemaVersionError, match="its tables: users"):
        Recorder(path)
    conn = sqlite3.connect(str(path))
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    finally:
        conn.close()


class _Counter(TypedDict):
    n: int


def test_a_single_tag_given_as_text_is_one_tag(tmp_path, capsys):
    from langgraph.graph import START, StateGraph

    db = str(tmp_path / "tags.db")
    b = StateGraph(_Counter)
    b.add_node("bump", lambda s: {"n": s["n"] + 1})
    b.add_edge(START, "bump")
    with Recorder(db) as rec:
        rec.attach(b.compile(), name="tagged", tags="prod").invoke({"n": 0})
    code, out, err = run_cli(capsys, "--db", db, "runs", "--tag", "prod")
    assert code == 0 and "tagged" in out, out + err


# -- replays and forks in the runs table (round 2, item 1) -----------------------------------------------


@pytest.fixture(scope="module")
def derived(demo, tmp_path_factory):
    """A copy of the demo store with a replay and a fork of the incident, newest of all."""
    db = tmp_path_factory.mktemp("derived") / "derived.db"
    db.write_bytes(Path(demo[0]).read_bytes())
    incident = demo[1]["incident"]
    assert main(["--db", str(db), "replay", incident, "--trust-recorded-graph"]) == 0
    assert main(["--db", str(db), "fork", incident, "--trust-recorded-graph", "--at", "1", "--set", "retries=5", "--mode", "strict"]) in (0, 1)
    return str(db), incident


def test_the_runs_table_marks_replays_and_forks_and_last_is_the_newest_recorded_run(demo, derived, capsys, monkeypatch):
    db, incident = derived
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = run_cli(capsys, "--db", db, "runs")
    lines = out.splitlines()
    assert code == 0 and "FROM" in lines[0].split()
    assert f"fork of {incident[:8]}" in lines[1] and f"replay of {incident[:8]}" in lines[2]  # newest first: fork, then replay
    assert sum(" of " in line for line in lines) == 2  # recorded runs carry no mark
    monkeypatch.setenv("COLUMNS", "80")  # narrow: the source's id gives way, the kind stays
    code, out, _ = run_cli(capsys, "--db", db, "runs")
    lines = out.splitlines()
    assert code == 0 and max(len(line) for line in lines) <= 80 and "KIND" in lines[0].split()
    assert "fork" in lines[1].split() and "replay" in lines[2].split() and "replay" not in lines[3].split()
    assert "demo:incident" in lines[1]  # the name still whole
    code, out, _ = run_cli(capsys, "--db", db, "show", "last", "--json")
    assert code == 0 and json.loads(out)["run"]["id"] == incident  # the top unmarked row, not the fork above it
    code, out, _ = run_cli(capsys, "--db", db, "show", "--help")
    assert "newest recorded run: replays and forks are skipped" in " ".join(out.split())
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = run_cli(capsys, "--db", demo[0], "runs")  # no replay or fork listed: no column for them
    assert code == 0 and not {"FROM", "KIND"} & set(out.splitlines()[0].split())


# -- a run not found names the store searched (round 2, item 2) --------------------------------------------


def _bump_builder():
    from langgraph.graph import END, START, StateGraph

    class S(TypedDict):
        n: int

    b = StateGraph(S)
    b.add_node("bump", lambda s: {"n": s["n"] + 1})
    b.add_edge(START, "bump")
    b.add_edge("bump", END)
    return b


def test_a_run_not_found_names_the_store_it_searched(tmp_path, capsys, monkeypatch):
    from graphtape import replay

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GRAPHTAPE_DB", raising=False)
    with Recorder("graphtape.db") as rec:  # the default store holds a run, not the one asked for
        rec.attach(_bump_builder().compile(), name="other").invoke({"n": 0})
    with Recorder("elsewhere.db") as rec:
        rec.attach(_bump_builder().compile(), name="mine").invoke({"n": 0})
        run_id = rec.last_run_id
    default = str(tmp_path / "graphtape.db")
    with pytest.raises(Exception) as caught:
        replay(run_id, _bump_builder().compile())  # no db=: it reads ./graphtape.db
    said = str(caught.value)
    assert type(caught.value).__name__ == "RunNotFound"
    assert f"no run matches {run_id!r} in {default}" in said and "db=" in said
    code, _, err = run_cli(capsys, "--db", "elsewhere.db", "show", "nope")
    assert code == 2 and f"no run matches 'nope' in {tmp_path / 'elsewhere.db'}" in err


def test_a_run_not_found_in_postgresql_names_the_url_without_its_password(pg_url, capsys):
    with Recorder(pg_url) as rec:
        rec.attach(_bump_builder().compile(), name="pg").invoke({"n": 0})
    scheme, rest = pg_url.split("://", 1)
    secret = "Sekr3t-notfound-4d1e"
    url = f"{scheme}://{rest.split('@', 1)[0].split(':', 1)[0]}:{secret}@{rest.split('@', 1)[1]}"
    code, _, err = run_cli(capsys, "--db", url, "show", "nope")
    assert code == 2 and "no run matches 'nope' in postgresql+psycopg://" in err
    assert ":***@" in err and secret not in err


# -- small CLI hints (round 2, item 5) --------------------------------------------------------------------


def test_a_step_out_of_range_gives_the_run_s_steps(demo, capsys):
    db, ids = demo
    code, out, _ = run_cli(capsys, "--db", db, "show", ids["happy"], "--json")
    steps = [s["step"] for s in json.loads(out)["steps"]]
    code, _, err = run_cli(capsys, "--db", db, "show", ids["happy"], "--step", "99")
    assert code == 2 and err.count("\n") == 1
    assert f"has no step 99 (steps {min(steps)}..{max(steps)})" in err


@pytest.mark.parametrize(("ref", "meant"), [("myapp/agent.py", "myapp/agent.py:graph"), ("myapp.agent", "myapp.agent:graph"), ("myapp/agent.py:", "myapp/agent.py:graph")])
def test_a_graph_reference_without_its_attribute_suggests_graph(demo, capsys, ref, meant):
    db, ids = demo
    code, _, err = run_cli(capsys, "--db", db, "replay", ids["happy"], "--graph", ref)
    assert code == 2 and err.count("\n") == 1 and f"did you mean {meant!r}?" in err, err


@pytest.mark.parametrize("ref", [r"myapp\agent.py:graph", r"C:\work\myapp\agent.py:graph", r"myapp\agent.py"])
def test_a_windows_path_given_to_graph_gets_the_hint_db_gets(demo, capsys, ref):
    db, ids = demo
    code, _, err = run_cli(capsys, "--db", db, "replay", ids["happy"], "--graph", ref)
    assert code == 2 and err.count("\n") == 1 and "a Windows path, and on this system paths use '/'" in err, err


STEPLESS_GRAPH = '''
from typing import TypedDict

from langgraph.graph import END, START, StateGraph


class S(TypedDict):
    n: int


builder = StateGraph(S)
builder.add_node("bump", lambda s: {"n": s["n"] + 1})
builder.add_edge(START, "bump")
builder.add_edge("bump", END)
graph = builder.compile()
'''


@pytest.mark.parametrize(
    ("argv", "what"),
    [
        (["replay", "RUN", "--graph", "agent.py:graph"], "replay"),
        (["fork", "RUN", "--graph", "agent.py:graph", "--at", "-1", "--set", "n=1"], "fork"),
        (["export", "RUN", "-o", "f.json"], "export"),
        (["test-gen", "RUN", "--graph", "agent.py:graph", "--name", "t"], "export"),
    ],
)
def test_a_run_that_recorded_no_steps_says_why_not_just_that_it_has_none(tmp_path, monkeypatch, capsys, argv, what):
    # LangGraph refused the input before its first superstep: the run is stored, with its error.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "agent.py").write_text(STEPLESS_GRAPH)
    from graphtape.replay.loading import load_graph

    graph = load_graph("agent.py:graph")
    db = str(tmp_path / "runs.db")
    with Recorder(db) as rec:
        with pytest.raises(Exception, match="no input"):
            rec.attach(graph, name="stepless", graph_ref="agent.py:graph").invoke(None)
        rec.flush()
        run_id = rec.last_run_id
    code, out, err = run_cli(capsys, "--db", db, *[run_id if a == "RUN" else a for a in argv])
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert f"run {run_id} recorded no steps (it failed before its first: EmptyInputError: " in err
    assert f"there is nothing to {what}; graphtape show {run_id} shows what it was given" in err
    assert not (tmp_path / "f.json").exists()


@pytest.mark.parametrize("where", ["a sibling folder, the store named by --db", "a subfolder of the project"])
def test_a_graph_module_not_importable_from_here_names_the_folder_that_holds_it(tmp_path, monkeypatch, capsys, where):
    from graphtape.replay.loading import load_graph

    project = tmp_path / "project"
    (project / "gt_hint_app").mkdir(parents=True)
    (project / "gt_hint_app" / "__init__.py").write_text("")
    (project / "gt_hint_app" / "agent.py").write_text(STEPLESS_GRAPH)
    (project / "notes").mkdir()
    (tmp_path / "elsewhere").mkdir()
    db = project / "graphtape.db"
    with Recorder(str(db)) as rec:
        rec.attach(load_graph(str(project / "gt_hint_app" / "agent.py") + ":graph"), graph_ref="gt_hint_app.agent:graph").invoke({"n": 1})
    monkeypatch.setattr(sys, "path", list(sys.path))  # the successful import below puts the project on it
    monkeypatch.chdir(tmp_path / "elsewhere" if where.startswith("a sibling") else project / "notes")
    code, out, err = run_cli(capsys, "--db", str(db), "replay", "last", "--trust-recorded-graph")
    assert code == 2 and err.count("\n") == 1, err
    assert f"no module named 'gt_hint_app.agent': gt_hint_app/agent.py is in {project}, not under {Path.cwd()}: run from {project}, or set PYTHONPATH={project}" in err
    # Done as it says, the replay runs.
    monkeypatch.chdir(project)
    try:
        code, out, err = run_cli(capsys, "--db", str(db), "replay", "last", "--trust-recorded-graph")
        assert code == 0 and "matches the recording" in out, err
    finally:
        for name in ("gt_hint_app", "gt_hint_app.agent"):
            sys.modules.pop(name, None)


def test_a_graph_module_found_nowhere_keeps_the_general_advice(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, "--db", str(tmp_path / "x.db"), "demo", "--no-tui", "--scenario", "happy")
    assert code == 0, err
    code, out, err = run_cli(capsys, "--db", str(tmp_path / "x.db"), "replay", "last", "--graph", "gt_nowhere_app.agent:graph")
    assert code == 2 and err == "graphtape: error: no module named 'gt_nowhere_app.agent': check PYTHONPATH, or give a path/to/file.py:attr\n"


def test_the_re_record_command_test_gen_writes_runs_from_where_test_gen_ran(demo, tmp_path, monkeypatch, capsys):
    db, ids = demo
    agent = Path(__file__).resolve().parents[1] / "fixtures" / "agents" / "reason_act.py"
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, "--db", db, "test-gen", ids["incident"], "--graph", f"{agent}:graph_incident", "--name", "incident")
    assert code == 0, err
    source = (tmp_path / "fixtures" / "runs" / "test_incident.py").read_text()
    command = next(line.strip() for line in source.splitlines() if "--graphtape-record=rewrite" in line)
    # The file it names is there from the folder test-gen ran in (a bare file name was not).
    assert command == "pytest --graphtape-record=rewrite fixtures/runs/test_incident.py"
    assert (tmp_path / command.split()[-1]).is_file()
    assert "from the folder\n`graphtape test-gen` ran in" in source


def test_a_tool_message_without_a_name_is_shown_as_a_tool_message_not_a_question_mark(tmp_path, capsys):
    # A node that runs a tool itself builds ToolMessage(content, tool_call_id=...): no name.
    from langchain_core.messages import AIMessage, ToolMessage
    from langgraph.graph import END, START, StateGraph

    class S(TypedDict):
        messages: Annotated[list, add_messages]

    builder = StateGraph(S)
    builder.add_node("ask", lambda s: {"messages": [AIMessage("", tool_calls=[{"name": "weather", "args": {}, "id": "c1"}])]})
    builder.add_node("tools", lambda s: {"messages": [ToolMessage("sunny", tool_call_id="c1")]})
    builder.add_edge(START, "ask")
    builder.add_edge("ask", "tools")
    builder.add_edge("tools", END)
    db = str(tmp_path / "runs.db")
    with Recorder(db) as rec:
        rec.attach(builder.compile(), name="nameless").invoke({"messages": []})
    code, out, err = run_cli(capsys, "--db", db, "show", "last")
    assert code == 0, err
    assert "      tool: sunny" in out and "tool ?" not in out


def test_a_postgresql_store_that_does_not_open_says_what_to_try(pg_server, capsys):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]  # nothing listens there once the socket closes
    host_port = pg_server.split("@", 1)[1].split("/", 1)[0]
    base = pg_server.split("?", 1)[0]
    cases = [
        (base.rsplit("/", 1)[0] + "/gt_no_such_db", 'database "gt_no_such_db" does not exist: create it first (createdb gt_no_such_db)'),
        (base.replace(host_port, f"127.0.0.1:{closed}"), "Connection refused: no server answers at that host and port: start PostgreSQL, or fix the host and port in the URL"),
        (base.replace(host_port, "gt-no-such-host.invalid:5432"), ": check the host name in the URL"),
    ]
    for url, says in cases:
        code, out, err = run_cli(capsys, "--db", url, "runs")
        assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err, err
        assert says in err, err


@pytest.mark.parametrize(
    ("source", "says"),
    [
        ("import gt_not_installed_pkg\n", "ModuleNotFoundError: No module named 'gt_not_installed_pkg' (raised at gt_raising_app/agent.py line 1); is gt_not_installed_pkg installed in the Python graphtape runs on ("),
        ("x = 1\nraise RuntimeError('boom')\n", "RuntimeError: boom (raised at gt_raising_app/agent.py line 2)"),
    ],
)
def test_a_graph_module_that_raises_names_the_line_and_a_missing_dependency_the_python(tmp_path, monkeypatch, capsys, source, says):
    (tmp_path / "gt_raising_app").mkdir()
    (tmp_path / "gt_raising_app" / "__init__.py").write_text("")
    (tmp_path / "gt_raising_app" / "agent.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    code, out, err = run_cli(capsys, "--db", str(tmp_path / "x.db"), "demo", "--no-tui", "--scenario", "happy")
    assert code == 0, err
    for ref, loaded in (("gt_raising_app.agent:graph", "importing gt_raising_app.agent failed: "), ("gt_raising_app/agent.py:graph", "failed: ")):
        code, out, err = run_cli(capsys, "--db", str(tmp_path / "x.db"), "replay", "last", "--graph", ref)
        assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
        assert loaded + says in err, err
    sys.modules.pop("gt_raising_app", None)


def test_replay_given_a_graph_reference_string_says_to_load_it(tmp_path):
    from graphtape import replay
    from graphtape.replay.runner import ReplayError

    with pytest.raises(ReplayError, match=r"needs the compiled graph itself, not the reference 'myapp.agent:graph': load it first \(.*load_graph\('myapp.agent:graph'\)\)"):
        replay("last", "myapp.agent:graph", db=str(tmp_path / "x.db"))


def test_a_garbled_format_version_says_what_to_do(demo, tmp_path, capsys):
    import sqlite3

    from graphtape.replay.fixture_format import FORMAT_VERSION

    db, ids = demo
    assert main(["--db", db, "export", ids["happy"], "-o", str(tmp_path / "f.json")]) == 0
    doc = json.loads((tmp_path / "f.json").read_text())
    doc["graphtape_fixture"] = "x"
    (tmp_path / "f.json").write_text(json.dumps(doc))
    capsys.readouterr()
    code, out, err = run_cli(capsys, "--db", str(tmp_path / "new.db"), "import", str(tmp_path / "f.json"))
    assert code == 2 and err.count("\n") == 1 and err.endswith(f"has an unreadable fixture format version 'x' (a whole number, like {FORMAT_VERSION}): a damaged or hand-edited fixture? re-export it\n"), err
    garbled = tmp_path / "garbled.db"
    assert main(["--db", str(garbled), "demo", "--no-tui", "--scenario", "happy"]) == 0
    with sqlite3.connect(garbled) as conn:
        conn.execute("update graphtape_meta set value = 'abc' where key = 'schema_version'")
    capsys.readouterr()
    code, out, err = run_cli(capsys, "--db", str(garbled), "runs")
    assert code == 2 and err.count("\n") == 1 and err.endswith("has an unknown schema version 'abc': damaged, or not a graphtape database; point --db at a store graphtape wrote\n"), err


def test_a_folder_given_as_the_store_names_a_file_in_it(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    for argv in (["--db", "runs", "runs"], ["--db", "runs", "demo", "--no-tui", "--scenario", "happy"]):
        code, out, err = run_cli(capsys, *argv)
        assert code == 2 and err.count("\n") == 1, err
        assert f"it is a directory (name the store file in it, like {tmp_path / 'runs' / 'graphtape.db'})" in err, err
    assert list((tmp_path / "runs").iterdir()) == []


def test_the_readme_demo_agent_path_outside_the_repository_names_the_bundled_file(demo, tmp_path, monkeypatch, capsys):
    from graphtape.tui.demo import agents_dir

    db, ids = demo
    monkeypatch.chdir(tmp_path)  # `graphtape demo` in a project's folder: no fixtures/agents here
    for argv in (["replay", ids["happy"]], ["test-gen", ids["happy"], "--name", "x"]):
        code, out, err = run_cli(capsys, "--db", db, *argv, "--graph", "fixtures/agents/reason_act.py:graph_happy")
        assert code == 2 and err.count("\n") == 1, err
        assert err.endswith(f"; the demo's agents come with graphtape: {agents_dir() / 'reason_act.py'}\n"), err


def test_an_empty_store_reminds_that_only_the_graph_attach_returns_is_recorded(tmp_path, monkeypatch, capsys):
    # The usual first mistake: rec.attach(graph) and then graph.invoke(...), the original, unrecorded.
    monkeypatch.chdir(tmp_path)
    graph = bump_graph()
    with Recorder() as rec:
        rec.attach(graph, name="mine")
        graph.invoke({"n": 1})
    code, out, err = run_cli(capsys, "runs")
    assert code == 0 and "run the graph a Recorder's attach returns (`graph = rec.attach(graph)`: the graph passed in is not recorded)" in out
    code, out, err = run_cli(capsys, "show", "last")
    assert code == 2 and err.count("\n") == 1 and "graph = rec.attach(graph); the graph passed in is not recorded" in err


def test_a_namespace_is_named_by_its_path_and_one_the_run_lacks_names_those_it_has(demo, tmp_path, capsys):
    from replay_graphs import sub_graph

    from graphtape import replay
    from graphtape.replay.runner import ReplayError
    from graphtape.tui.demo import agents_dir

    db, ids = demo
    code, out, err = run_cli(capsys, "--db", db, "replay", ids["happy"], "--graph", f"{agents_dir() / 'reason_act.py'}:graph_happy", "--ns", "child")
    assert code == 2 and err.endswith("has no steps in namespace 'child'; it ran no subgraph: leave --ns out\n"), err
    sub_db = str(tmp_path / "sub.db")
    with Recorder(sub_db) as rec:
        rec.attach(sub_graph(1), name="sub").invoke({"n": 1, "log": []})
        rec.flush()
        run_id = rec.last_run_id
    with pytest.raises(ReplayError, match=r"has no steps in namespace 'chld'; its subgraph namespaces: 'child:"):
        replay(run_id, sub_graph(1), ns="chld", db=sub_db)
    # The subgraph's path, as show prints it and diff --ns takes it, names its namespace.
    result = replay(run_id, sub_graph(1), ns="child", db=sub_db)
    assert not result.diverged and "of child:" in result.report()
    code, out, err = run_cli(capsys, "--db", sub_db, "show", run_id, "--ns", "child", "--step", "1")
    assert code == 0 and "namespace child:" in out and " s1" in out, err
    code, out, err = run_cli(capsys, "--db", sub_db, "show", run_id, "--ns", "child")
    assert code == 0 and "s1 → s2" in out, err


BUMP_GRAPH = '''
from typing import TypedDict

from langgraph.graph import END, START, StateGraph


class S(TypedDict):
    n: int


def bump(s):
    {body}


builder = StateGraph(S)
builder.add_node("bump", bump)
builder.add_edge(START, "bump")
builder.add_edge("bump", END)
graph = builder.compile()
'''


def test_a_node_that_raises_now_says_so_and_where(tmp_path, monkeypatch, capsys):
    from graphtape.replay.loading import load_graph

    monkeypatch.chdir(tmp_path)
    (tmp_path / "good.py").write_text(BUMP_GRAPH.format(body='return {"n": s["n"] + 1}'))
    (tmp_path / "broken.py").write_text(BUMP_GRAPH.format(body='raise ValueError("no n today")'))
    db = str(tmp_path / "runs.db")
    with Recorder(db) as rec:
        rec.attach(load_graph("good.py:graph"), name="good").invoke({"n": 1})
        rec.flush()
        good = rec.last_run_id
        with pytest.raises(ValueError):
            rec.attach(load_graph("broken.py:graph"), name="broken").invoke({"n": 1})
        rec.flush()
        broken = rec.last_run_id
    code, out, err = run_cli(capsys, "--db", db, "replay", good, "--graph", "broken.py:graph")
    assert code == 1, err
    line = 'raise ValueError("no n today")'
    assert f"FIRST step 1 node 'bump': error divergence: node 'bump' raised ValueError: no n today at broken.py:12 in bump: {line} (it did not in the recording)" in out, out
    code, out, err = run_cli(capsys, "--db", db, "replay", broken, "--graph", "good.py:graph")
    assert code == 1, err
    assert "error divergence: node 'bump' no longer raises ValueError: no n today (it did in the recording)" in out, out


def test_a_mistyped_run_name_gets_the_closest_name(demo, capsys):
    db, ids = demo
    code, out, err = run_cli(capsys, "--db", db, "show", "demo:incdent")
    assert code == 2 and err.count("\n") == 1
    assert err.endswith("(graphtape runs lists them; did you mean 'demo:incident'?)\n"), err
    code, out, err = run_cli(capsys, "--db", db, "show", "zzzz")
    assert code == 2 and "did you mean" not in err
