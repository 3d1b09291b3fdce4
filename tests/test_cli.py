"""The `graphtape` command line, run for real: demo recordings in SQLite files, `main([...])` and subprocesses."""

from __future__ import annotations

import contextlib
import io
import json
import operator
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Annotated, TypedDict

import pytest
from langgraph.graph.message import add_messages

from graphtape.tui.cli import build_parser, main

GRAPHTAPE = Path(sys.executable).with_name("graphtape")
DEMO_NAMES = ["demo:incident", "demo:react", "demo:loop_limit", "demo:bad_input", "demo:unknown_tool", "demo:happy"]


@pytest.fixture(autouse=True)
def _plain_env(monkeypatch):
    monkeypatch.delenv("GRAPHTAPE_DB", raising=False)
    monkeypatch.setenv("COLUMNS", "200")


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """One `graphtape demo --no-tui` recording shared by the read-only tests: (db path, stdout)."""
    db = tmp_path_factory.mktemp("demo") / "graphtape.db"
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["--db", str(db), "demo", "--no-tui"])
    assert code == 0, err.getvalue()
    return str(db), out.getvalue()


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_one_line_error(code: int, out: str, err: str, *needles: str) -> None:
    assert code == 2
    assert out == ""
    assert err.startswith("graphtape: error: ")
    assert err.count("\n") == 1, err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, err


def _runs(db: str, capsys) -> list[dict]:
    code, out, _ = run(capsys, "--db", db, "runs", "--json")
    assert code == 0
    return json.loads(out)


# -- demo -------------------------------------------------------------------------


def test_demo_records_every_scenario_with_the_incident_last(demo, capsys):
    db, out = demo
    assert "recording the demo agents into" in out
    runs = _runs(db, capsys)
    assert [r["name"] for r in runs] == DEMO_NAMES
    assert all(r["status"] == "ok" for r in runs)
    incident = runs[0]
    path, _, attr = incident["graph_ref"].rpartition(":")
    assert attr == "graph_incident" and Path(path).name == "reason_act.py" and Path(path).is_file()
    # The reference names the exact scenario's graph, so a replay loads the right one.
    from graphtape.replay.loading import load_graph

    assert load_graph(incident["graph_ref"]).get_graph() is not None
    assert "scenario:incident" in incident["tags"]
    # Without a TUI it prints the incident's summary, wrong answer included.
    assert f"run {incident['id']}  demo:incident" in out
    assert "delivered on 2024-05-03" in out


def test_demo_one_scenario(tmp_path, capsys):
    db = str(tmp_path / "one.db")
    code, out, err = run(capsys, "--db", db, "demo", "--scenario", "happy", "--no-tui")
    assert code == 0, err
    assert [r["name"] for r in _runs(db, capsys)] == ["demo:happy"]
    assert "run " in out and "demo:happy" in out


def test_demo_unknown_scenario_names_the_valid_ones_and_creates_nothing(tmp_path, capsys):
    db = tmp_path / "none.db"
    code, out, err = run(capsys, "--db", str(db), "demo", "--scenario", "nope", "--no-tui")
    assert_one_line_error(code, out, err, "'nope'", "incident", "react", "all")
    assert not db.exists()


def test_demo_opens_the_tui_only_on_a_terminal(tmp_path, capsys):
    # stdin/stdout are not TTYs under pytest, so even with a tui.app around the summary is printed.
    code, out, _ = run(capsys, "--db", str(tmp_path / "t.db"), "demo", "--scenario", "happy")
    assert code == 0
    assert "demo:happy" in out and "STEP" in out


# -- runs ---------------------------------------------------------------------------


def test_runs_table(demo, capsys):
    db, _ = demo
    code, out, err = run(capsys, "--db", db, "runs")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["ID", "NAME", "STATUS", "STEPS", "STARTED", "DURATION", "REDACTIONS", "FAULTS"]
    assert [line.split()[1] for line in lines[1:]] == DEMO_NAMES
    loop = next(line for line in lines if "demo:loop_limit" in line)
    assert loop.split()[-1] == "5"  # the unserializable tool results are counted as faults


def test_runs_json_filters_and_limit(demo, capsys):
    db, _ = demo
    runs = _runs(db, capsys)
    assert {"id", "name", "status", "step_count", "started_at", "duration_s", "redactions", "faults"} <= set(runs[0])
    assert [r["started_at"] for r in runs] == sorted((r["started_at"] for r in runs), reverse=True)

    code, out, _ = run(capsys, "--db", db, "runs", "--json", "--search", "incident")
    assert [r["name"] for r in json.loads(out)] == ["demo:incident"]
    code, out, _ = run(capsys, "--db", db, "runs", "--json", "--status", "error")
    assert json.loads(out) == []
    code, out, err = run(capsys, "--db", db, "runs", "--limit", "2")
    assert code == 0 and len(out.splitlines()) == 3
    assert "--limit 0" in err
    code, out, err = run(capsys, "runs", "--db", db, "--limit", "0")  # global options also after the command
    assert code == 0 and len(out.splitlines()) == 7 and err == ""


def test_runs_bad_status_is_a_usage_error_naming_the_choices(demo, capsys):
    code, _, err = run(capsys, "--db", demo[0], "runs", "--status", "bogus")
    assert code == 2
    assert "'ok'" in err and "'interrupted'" in err


def test_runs_on_an_empty_store(tmp_path, capsys):
    from graphtape.recorder import open_store

    db = str(tmp_path / "empty.db")
    open_store(db, create=True).close()
    code, out, _ = run(capsys, "--db", db, "runs")
    assert code == 0 and "no runs" in out and "graphtape demo" in out


def test_db_defaults_to_env_then_cwd(demo, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GRAPHTAPE_DB", demo[0])
    assert len(_runs_without_db(capsys)) == 6
    monkeypatch.delenv("GRAPHTAPE_DB")
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "runs")
    assert_one_line_error(code, out, err, str(tmp_path / "graphtape.db"))
    assert not (tmp_path / "graphtape.db").exists()


def _runs_without_db(capsys) -> list[dict]:
    code, out, _ = run(capsys, "runs", "--json")
    assert code == 0
    return json.loads(out)


# -- show -----------------------------------------------------------------------------


def test_show_last_tells_the_incident_step_by_step(demo, capsys):
    db, _ = demo
    code, out, err = run(capsys, "--db", db, "show", "last")
    assert code == 0, err
    assert out.startswith("run ") and "demo:incident" in out.splitlines()[0]
    for field in ("status", "graph", "thread", "started", "input", "versions"):
        assert f"  {field} " in out
    assert "reason_act:incident" in out and "langgraph " in out
    rows = {line.split()[0]: line for line in out.splitlines() if line[:4].strip().lstrip("-").isdigit()}
    assert set(rows) == {str(n) for n in range(-1, 8)}
    assert "should_continue returned 'act'" in rows["1"] and "1 model" in rows["1"]
    assert "1 tool" in rows["6"]
    # The story is readable without --step: timeouts, the fallback to an estimate, the wrong answer.
    assert out.count("tool lookup_order_status [error]") == 2
    assert 'estimate_delivery_date(order_id="A-1042")' in out
    assert 'ai: "Good news: your order A-1042 was delivered on 2024-05-03."' in out
    assert "--step 7" in out


def test_show_by_prefix_and_by_last_tilde(demo, capsys):
    db, _ = demo
    runs = _runs(db, capsys)
    code, out, _ = run(capsys, "--db", db, "show", runs[0]["id"][:7])
    assert code == 0 and out.splitlines()[0] == f"run {runs[0]['id']}  demo:incident"
    code, out, _ = run(capsys, "--db", db, "show", "last~1")
    assert code == 0 and out.splitlines()[0] == f"run {runs[1]['id']}  demo:react"
    assert "⇉ 2× tools" in out  # the parallel tool calls fan out as Sends


def test_show_step(demo, capsys):
    db, _ = demo
    code, out, err = run(capsys, "--db", db, "show", "last", "--step", "6")
    assert code == 0, err
    assert out.splitlines()[0].endswith("step 6  act")
    for section in ("tasks", "routes", "calls", "next: reason", "state after step 6"):
        assert f"\n{section}" in out
    assert "conditional via check_iteration_limit, returned \"reason\"" in out
    assert "tool  estimate_delivery_date" in out
    assert '"is_tracking_data": false' in out
    assert "more chars; --full shows all" in out  # the long tool message is folded
    code, full, _ = run(capsys, "--db", db, "show", "last", "--step", "6", "--full")
    assert code == 0 and "more chars" not in full


def test_show_step_of_the_parallel_sends(demo, capsys):
    code, out, _ = run(capsys, "--db", demo[0], "show", "last~1", "--step", "1")
    assert code == 0
    assert 'Send(tools): lookup_order_status(order_id="A-1042")' in out
    assert 'Send(tools): lookup_order_status(order_id="B-2077")' in out
    assert "tokens 35 in / 60 out" in out


def test_show_json(demo, capsys):
    db, _ = demo
    code, out, _ = run(capsys, "--db", db, "show", "last", "--json")
    view = json.loads(out)
    assert code == 0
    assert view["run"]["name"] == "demo:incident"
    assert view["inputs"]["input"] == "Has my order A-1042 arrived yet?"
    assert [s["step"] for s in view["steps"]] == list(range(-1, 8))
    by_step = {s["step"]: s for s in view["steps"]}
    assert by_step[1]["calls"] == {"model": 1} and by_step[6]["calls"] == {"tool": 1}
    assert by_step[1]["routes"][0]["router"] == "should_continue"
    assert by_step[2]["tasks"][0]["writes"]["retries"] == 1

    code, out, _ = run(capsys, "--db", db, "show", "last", "--step", "7", "--json")
    step = json.loads(out)
    assert step["step"]["step"] == 7 and step["next"] == []
    assert step["tasks"][0]["node"] == "reason"
    assert [c["kind"] for c in step["calls"]] == ["model"]
    assert step["state"]["agent_outcome"]["answer"].startswith("Good news")
    assert step["state"]["retries"] == 2


# -- errors --------------------------------------------------------------------------------


def test_unknown_run(demo, capsys):
    assert_one_line_error(*run(capsys, "--db", demo[0], "show", "zzz"), "'zzz'", "graphtape runs")


def test_unknown_step_and_namespace(demo, capsys):
    assert_one_line_error(*run(capsys, "--db", demo[0], "show", "last", "--step", "42"), "no step 42")
    assert_one_line_error(*run(capsys, "--db", demo[0], "show", "last", "--ns", "nope"), "'nope'")


def test_a_run_given_in_bytes_that_are_not_utf8_is_no_run_not_a_damaged_store(demo, tmp_path, monkeypatch, capsys):
    """A run id or search text typed in another encoding reaches Python as lone surrogates
    (``abc\\xff`` -> ``'abc\\udcff'``), which no store text can be: every command that takes one
    says no run matches it, and never that the store holds damaged data."""
    db = demo[0]
    monkeypatch.chdir(tmp_path)  # nothing is written, but a default output would go here
    bad = os.fsdecode(b"abc\xff")
    for argv in (["show", bad], ["diff", bad, "last"], ["diff", "last", bad], ["export", bad, "-o", str(tmp_path / "f.json")], ["replay", bad], ["fork", bad, "--at", "0"], ["test-gen", bad, "--graph", "x:y", "-o", str(tmp_path)], ["tui", bad]):
        code, out, err = run(capsys, "--db", db, *argv)
        assert_one_line_error(code, out, err, "no run matches 'abc\\udcff'", "not UTF-8")
        assert "damaged" not in err, argv
    for option in ("--search", "--name", "--tag", "--tool", "--node", "--error"):
        for value in (bad, bad + "*"):
            code, out, err = run(capsys, "--db", db, "runs", option, value, "--json")
            assert (code, json.loads(out), err) == (0, [], ""), (option, err)
    assert not list(tmp_path.iterdir())
    # The real thing: the bytes as a shell passes them.
    proc = subprocess.run([str(GRAPHTAPE), "--db", db, "show", b"abc\xff"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "no run matches" in proc.stderr and "damaged" not in proc.stderr, proc.stderr


def test_bad_db_path(tmp_path, capsys):
    missing_dir = tmp_path / "no" / "such" / "dir.db"
    for argv in (["show", "last"], ["runs"]):
        assert_one_line_error(*run(capsys, "--db", str(missing_dir), *argv), "does not exist")
    (tmp_path / "blocked").write_text("a file where the folder should be")
    assert_one_line_error(*run(capsys, "--db", str(tmp_path / "blocked" / "x.db"), "demo", "--no-tui"), "is not a folder")
    assert_one_line_error(*run(capsys, "--db", str(tmp_path), "runs"), "directory")


def test_a_db_that_can_never_be_a_store_is_refused_by_the_recorder_and_the_cli(tmp_path, capsys):
    """A directory, a name or path longer than the file system or SQLite opens, an in-memory URL:
    waiting cannot fix them, so Recorder raises at once (no warning, then rows lost at close) and
    every command says why in one line."""
    from graphtape.recorder import Recorder, StoreError

    cases = {
        str(tmp_path): "it is a directory",
        str(tmp_path / ("x" * 300 + ".db")): "longer than 255 bytes",
        str(tmp_path / ("d" * 200) / ("d" * 200) / ("d" * 200) / "g.db"): "longer than SQLite opens",
        "sqlite://": "in-memory SQLite database",
    }
    for db, why in cases.items():
        with pytest.raises(StoreError, match=why):
            Recorder(db)
        for argv in (["runs"], ["show", "last"]):
            assert_one_line_error(*run(capsys, "--db", db, *argv), why)


def test_reading_a_missing_database_does_not_create_it(tmp_path, capsys):
    db = tmp_path / "absent.db"
    for argv in (["runs"], ["show", "last"]):
        assert_one_line_error(*run(capsys, "--db", str(db), *argv), "no database")
    assert list(tmp_path.iterdir()) == []


def test_reading_a_file_that_is_no_store_leaves_it_as_it_was(tmp_path, capsys):
    """An empty file, or another app's SQLite database: refused in one line, and not turned into
    a 4 KB database or switched to WAL by the refusal."""
    import sqlite3

    empty, other = tmp_path / "empty.db", tmp_path / "other.db"
    empty.touch()
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    conn.close()
    before = other.read_bytes()
    for db in (empty, other):
        for argv in (["runs"], ["show", "last"], ["stats"]):
            assert_one_line_error(*run(capsys, "--db", str(db), *argv), "not a graphtape database")
    assert empty.read_bytes() == b"" and other.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.db", "other.db"]


def test_a_copy_taken_without_its_wal_file_says_what_is_missing(tmp_path, capsys):
    """Copied while a run records, the main file alone holds only SQLite's header: the tables are
    still in the -wal file. The refusal says so, in one line."""
    import shutil
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    from graphtape.recorder import Recorder

    class One(TypedDict):
        n: int

    b = StateGraph(One)
    b.add_node("a", lambda s: {"n": s["n"] + 1})
    b.add_edge(START, "a")
    b.add_edge("a", END)
    db, copy = tmp_path / "live.db", tmp_path / "copy.db"
    with Recorder(str(db)) as rec:
        rec.attach(b.compile()).invoke({"n": 0})
        rec.flush()
        shutil.copy(db, copy)  # the recorder still has the file open: its tables are in live.db-wal
        assert_one_line_error(*run(capsys, "--db", str(copy), "runs"), "-wal file")
    assert run(capsys, "--db", str(db), "runs")[0] == 0


@pytest.mark.parametrize("junk", [b"hello, not a database at all", bytes(range(256)) * 40])
def test_corrupt_file(tmp_path, capsys, junk):
    db = tmp_path / "junk.db"
    db.write_bytes(junk)
    for argv in (["runs"], ["show", "last"]):
        assert_one_line_error(*run(capsys, "--db", str(db), *argv), "junk.db")


def test_newer_schema_is_refused(demo, tmp_path, capsys):
    db = tmp_path / "future.db"
    with sqlite3.connect(demo[0]) as src, sqlite3.connect(db) as dst:
        src.backup(dst)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE graphtape_meta SET value = '999' WHERE key = 'schema_version'")
    for argv in (["runs"], ["show", "last"]):
        assert_one_line_error(*run(capsys, "--db", str(db), *argv), "newer graphtape", "999")


def test_debug_shows_the_traceback(demo, capsys):
    code, out, err = run(capsys, "--db", demo[0], "--debug", "show", "zzz")
    assert code == 2 and "Traceback" in err and "RunNotFound" in err
    assert err.rstrip().splitlines()[-1].startswith("graphtape: error: ")


def test_interrupt_and_unexpected_errors_have_no_traceback(demo, capsys, monkeypatch):
    from graphtape.tui import views

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(views, "runs_view", interrupted)
    code, out, err = run(capsys, "--db", demo[0], "runs")
    assert code == 130 and err == "graphtape: interrupted\n"

    def broken(*a, **k):
        raise TypeError("something deep\nsecond line")

    monkeypatch.setattr(views, "runs_view", broken)
    assert_one_line_error(*run(capsys, "--db", demo[0], "runs"), "unexpected TypeError: something deep", "--debug")


# -- help, version, entry points ------------------------------------------------------------


def _subcommands() -> dict[str, object]:
    parser = build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    return dict(action.choices)


def test_every_command_has_help(capsys):
    commands = _subcommands()
    assert {"demo", "runs", "show"} <= set(commands)
    code, out, _ = run(capsys, "--help")
    assert code == 0
    for name in commands:
        assert name in out
        code, out_cmd, _ = run(capsys, name, "--help")
        assert code == 0
        assert out_cmd.startswith(f"usage: graphtape {name}")
        description = commands[name].description
        assert description and "\n" not in description and description in " ".join(out_cmd.split())


def test_version(capsys):
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.startswith("graphtape ")


def test_console_script_and_python_m(demo, tmp_path):
    assert GRAPHTAPE.exists(), "the package is not installed with its console script"
    proc = subprocess.run([str(GRAPHTAPE), "--db", demo[0], "show", "last"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "demo:incident" in proc.stdout
    proc = subprocess.run([str(GRAPHTAPE), "--db", str(tmp_path / "x" / "y.db"), "runs"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "tui", "--version"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.startswith("graphtape ")


def test_closed_pipe_is_quiet(demo):
    read_end, write_end = os.pipe()
    os.close(read_end)  # like `graphtape runs | head` after head has exited
    try:
        proc = subprocess.run([str(GRAPHTAPE), "--db", demo[0], "show", "last"], stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert proc.returncode == 141
    assert proc.stderr == ""


def test_headless_commands_never_import_textual(demo):
    code = (
        "import sys; import tui, tui.cli; assert 'textual' not in sys.modules, 'import'; "
        f"rc = tui.cli.main(['--db', {demo[0]!r}, 'show', 'last', '--step', '6']); "
        f"rc += tui.cli.main(['--db', {demo[0]!r}, 'runs', '--json']); "
        "bad = [m for m in sys.modules if m == 'textual' or m.startswith('textual.')]; "
        "sys.exit(rc or (3 if bad else 0))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_importing_the_cli_is_light():
    code = "import sys, tui.cli; print(sorted(m for m in ('textual', 'langgraph', 'recorder') if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stdout + proc.stderr


# -- loading graphs by reference ------------------------------------------------------------------


def test_load_graph_by_path_and_its_errors(tmp_path):
    from graphtape.tui.demo import agents_dir
    from graphtape.replay.loading import GraphLoadError, load_graph

    agent = agents_dir() / "reason_act.py"
    graph = load_graph(f"{agent}:graph")
    assert graph.name == "reason_act:incident"

    with pytest.raises(GraphLoadError, match="no such file"):
        load_graph(f"{tmp_path / 'missing.py'}:graph")
    with pytest.raises(GraphLoadError, match="graph-like names there: graph"):
        load_graph(f"{agent}:nothing_here")
    with pytest.raises(GraphLoadError, match="not a compiled LangGraph graph"):
        load_graph(f"{agent}:build_graph")
    with pytest.raises(GraphLoadError, match="use package.module:attr"):
        load_graph(str(agent))
    with pytest.raises(GraphLoadError, match="no module named 'no_such_module_xyz'"):
        load_graph("no_such_module_xyz:graph")

    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('boom at import')\n")
    with pytest.raises(GraphLoadError, match="RuntimeError: boom at import") as info:
        load_graph(f"{broken}:graph")
    assert isinstance(info.value.__cause__, RuntimeError)  # kept for --debug


class TrimState(TypedDict):
    done: Annotated[list, operator.add]
    messages: Annotated[list, add_messages]


class TrimReturned(TypedDict):
    done: list


def test_show_counts_every_message_a_step_writes_and_gives_the_output_the_graph_returns(tmp_path, capsys):
    """A step that removes two messages says two; a graph with an output schema returned its keys only."""
    from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
    from langgraph.graph import END, START, StateGraph

    from graphtape import Recorder

    def trim(state: TrimState) -> dict:
        return {"done": ["trim"], "messages": [RemoveMessage(id=m.id) for m in state["messages"][:2]]}

    b = StateGraph(TrimState, output_schema=TrimReturned)
    b.add_node("trim", trim)
    b.add_edge(START, "trim")
    b.add_edge("trim", END)
    db = tmp_path / "gt.db"
    with Recorder(db) as rec:
        out = rec.attach(b.compile(), name="trim").invoke({"done": [], "messages": [HumanMessage("a", id="1"), AIMessage("b", id="2"), HumanMessage("c", id="3")]})
    assert out == {"done": ["trim"]}
    code, text, _ = run(capsys, "--db", str(db), "show", "last")
    assert code == 0
    lines = text.splitlines()
    assert any(line.split() == ["output", '{"done":', '["trim"]}'] for line in lines), text
    assert any(line.strip() == "remove 2 messages" for line in lines), text
    assert any(line.strip() == '3 messages, last human: "c"' for line in lines), text
