"""Housekeeping commands run for real: gc, stats, runs filters, completion, tui --web."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import sqlalchemy as sa

from conftest import load_agent
from graphtape.recorder import Recorder, open_store
from graphtape.recorder import schema as S
from graphtape.tui.cli import build_parser, main

GRAPHTAPE = Path(sys.executable).with_name("graphtape")
DAY = 86400.0


@pytest.fixture(autouse=True)
def _plain_env(monkeypatch):
    monkeypatch.delenv("GRAPHTAPE_DB", raising=False)
    monkeypatch.setenv("COLUMNS", "200")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def sql(url: str, stmt: str, **params) -> list:
    engine = sa.create_engine(open_store(url, create=False).url)
    with engine.begin() as conn:
        result = conn.execute(sa.text(stmt), params)
        rows = list(result) if result.returns_rows else []
    engine.dispose()
    return rows


def age(url: str, run_id: str, days: float) -> None:
    t = time.time() - days * DAY
    sql(url, "UPDATE runs SET started_at = :t, ended_at = :t, heartbeat_at = :t WHERE id = :r", t=t, r=run_id)


def read_everything(store, run_id: str) -> None:
    """Decode every stored value of a run: raises if any blob it needs is gone."""
    store.run_detail(run_id)
    store.calls(run_id)
    for ns in store.namespaces(run_id):
        for s in store.list_steps(run_id, ns):
            store.step_detail(run_id, s.step, ns)
            store.state_at(run_id, s.step, ns, typed=True)


@pytest.fixture
def recorded(store_url):
    """Four recorded runs: two scenarios twice over, so runs share blobs and also own some alone."""
    agent = load_agent("reason_act")
    ids = {}
    with Recorder(store_url) as rec:
        for key, scenario in [("incident_old", "incident"), ("happy_old", "happy"), ("incident_new", "incident"), ("loop_new", "loop_limit")]:
            graph = rec.attach(agent.build_graph(scenario), name=key)
            graph.invoke(agent.inputs_for(scenario), {"configurable": {"thread_id": key}})
            rec.flush()
            ids[key] = rec.store.list_runs(name=key)[0].id
    age(store_url, ids["incident_old"], 40)
    age(store_url, ids["happy_old"], 45)
    return store_url, ids


def test_gc_deletes_old_runs_and_only_unshared_blobs(recorded, capsys):
    url, ids = recorded
    store = open_store(url)
    before = store.stats()["tables"]
    from graphtape.recorder import schema as S
    from graphtape.recorder.store import _no_progress

    with store.engine.connect() as conn:
        def blobs_of(key):
            return store._blob_closure(conn, store._refs_of_runs(conn, S.runs.c.id == ids[key], set(), _no_progress, ""))

        shared = blobs_of("incident_old") & blobs_of("incident_new")
    assert shared  # the case that matters: a blob the deleted run shares with one that stays
    store.close()

    code, out, _ = run(capsys, "--db", url, "gc", "--older-than", "30d", "--dry-run", "--json")
    assert code == 0
    dry = json.loads(out)
    assert dry["dry_run"] and sorted(dry["run_ids"]) == sorted([ids["incident_old"], ids["happy_old"]])
    assert dry["blobs"] > 0 and dry["steps"] > 0 and dry["calls"] > 0
    store = open_store(url)
    assert store.stats()["tables"] == before  # a dry run deletes nothing
    store.close()

    code, out, _ = run(capsys, "--db", url, "gc", "--older-than", "30d", "--json")
    assert code == 0
    done = json.loads(out)
    assert {k: done[k] for k in ("runs", "steps", "calls", "blobs", "blob_bytes")} == {k: dry[k] for k in ("runs", "steps", "calls", "blobs", "blob_bytes")}
    store = open_store(url)
    after = store.stats()["tables"]
    assert {r.name for r in store.list_runs()} == {"incident_new", "loop_new"}
    assert after["runs"]["rows"] == 2
    assert after["steps"]["rows"] == before["steps"]["rows"] - done["steps"]
    assert after["calls"]["rows"] == before["calls"]["rows"] - done["calls"]
    assert after["blobs"]["rows"] == before["blobs"]["rows"] - done["blobs"]
    assert after["run_facets"]["rows"] < before["run_facets"]["rows"]
    # incident_new shares its messages with the deleted incident_old: they must all still be there
    for key in ("incident_new", "loop_new"):
        read_everything(store, ids[key])
    assert set(store.blobs(shared)) == shared
    store.close()
    # nothing left to collect
    code, out, _ = run(capsys, "--db", url, "gc", "--older-than", "30d")
    assert code == 0 and out.startswith("deleted 0 run(s) (0 steps, 0 calls) and 0 unreferenced blob(s)")


def test_gc_spares_live_failed_and_fork_parents(recorded, capsys):
    url, ids = recorded
    old = time.time() - 60 * DAY
    host = socket.gethostname()
    # a run still recording in this (live) process, started long ago
    sql(url, "UPDATE runs SET status = 'running', ended_at = NULL, owner_host = :h, owner_pid = :p, started_at = :t, heartbeat_at = :t WHERE id = :r",
        h=host, p=os.getpid(), t=old, r=ids["loop_new"])
    # a run whose recorder died long ago: marked interrupted, then collected like any old run
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    sql(url, "UPDATE runs SET status = 'running', ended_at = NULL, owner_host = :h, owner_pid = :p, started_at = :t, heartbeat_at = :t WHERE id = :r",
        h=host, p=int(dead.stdout), t=old, r=ids["incident_new"])
    sql(url, "UPDATE steps SET created_at = :t WHERE run_id = :r", t=old, r=ids["incident_new"])  # its last sign of life
    # a failed old run, and a fork (new) of the old happy run
    sql(url, "UPDATE runs SET status = 'error', error_type = 'ValueError', error_message = 'x' WHERE id = :r", r=ids["incident_old"])
    fork = ids["happy_old"][:-4] + "f0rk"
    sql(url, "INSERT INTO runs (id, name, graph_name, status, started_at, step_count, redactions, faults, parent_run_id, fork_step) "
        "VALUES (:f, 'fork', 'g', 'ok', :t, 0, 0, 0, :p, 1)", f=fork, t=time.time(), p=ids["happy_old"])

    code, out, _ = run(capsys, "--db", url, "gc", "--older-than", "30d", "--keep-failed", "--json")
    assert code == 0
    report = json.loads(out)
    assert report["run_ids"] == [ids["incident_new"]]
    assert report["kept_running"] == 1 and report["kept_fork_parents"] == 1
    store = open_store(url)
    left = {r.id: r.status for r in store.list_runs()}
    assert left == {ids["loop_new"]: "running", ids["incident_old"]: "error", ids["happy_old"]: "ok", fork: "ok"}
    for key in ("loop_new", "incident_old", "happy_old"):
        read_everything(store, ids[key])
    store.close()
    # without --keep-failed the failed run goes too; the live one and the fork's parent still stay
    code, out, _ = run(capsys, "--db", url, "gc", "--older-than", "30d")
    assert code == 0 and out.startswith("deleted 1 run(s)") and "1 still recording, 1 parent(s) of kept forks" in out


def test_stats_and_filters_as_json_and_text(recorded, capsys):
    url, ids = recorded
    code, out, _ = run(capsys, "--db", url, "stats", "--json")
    assert code == 0
    stats = json.loads(out)
    store = open_store(url)
    sizes = store.size_report()
    store.close()
    assert {k: v["rows"] for k, v in stats["tables"].items() if k in sizes} == {k: v for k, v in sizes.items() if k != "bytes"}
    assert stats["runs_by_status"] == {"ok": 4} and stats["schema_version"] == S.SCHEMA_VERSION
    assert all(isinstance(t["bytes"], int) and t["bytes"] > 0 for t in stats["tables"].values())
    assert stats["database_bytes"] > 0
    code, out, _ = run(capsys, "--db", url, "stats")
    assert code == 0 and "runs by status: ok 4" in out and "run_facets" in out

    code, out, _ = run(capsys, "--db", url, "runs", "--json", "--tool", "poll_warehouse")
    assert code == 0 and [r["name"] for r in json.loads(out)] == ["loop_new"]
    code, out, _ = run(capsys, "--db", url, "runs", "--json", "--node", "act", "--name", "incident_*")
    assert code == 0 and [r["name"] for r in json.loads(out)] == ["incident_new", "incident_old"]
    code, out, _ = run(capsys, "--db", url, "runs", "--tag", "nope")
    assert code == 0 and out == "no runs match\n"


def test_admin_errors_are_one_line(tmp_path, capsys):
    missing = str(tmp_path / "missing.db")
    for argv in (["gc", "--older-than", "30d"], ["stats"]):
        code, out, err = run(capsys, "--db", missing, *argv)
        assert code == 2 and out == "" and err.count("\n") == 1 and "no database at" in err
        assert not Path(missing).exists()
    code, out, err = run(capsys, "--db", missing, "gc", "--older-than", "soon")
    assert code == 2 and "not an age: 'soon'" in err and "Traceback" not in err



def test_migrate_refuses_a_store_it_cannot_use_as_every_command_does(tmp_path, capsys):
    """Not SQLite or PostgreSQL, or a directory: migrate says it in the line runs says it, not "unexpected"."""
    import importlib.util

    bad = ["mysql://x@y/z", "notaurl://", str(tmp_path)]
    if importlib.util.find_spec("asyncpg") is None:
        bad.append("postgresql+asyncpg://u@127.0.0.1:1/x")  # a driver that is not installed
    for db in bad:
        code, out, err = run(capsys, "--db", db, "migrate")
        assert code == 2 and out == "" and err.count("\n") == 1 and "unexpected" not in err, (db, err)
        assert err == run(capsys, "--db", db, "runs")[2], db
    assert "not mysql" in run(capsys, "--db", "mysql://x@y/z", "migrate")[2]
    assert f"{tmp_path}: it is a directory" in run(capsys, "--db", str(tmp_path), "migrate")[2]

# -- completion ---------------------------------------------------------------------------------


def bash_complete(script: str, line: str) -> list[str]:
    words = line.split(" ")
    program = f"""{script}
COMP_WORDS=({" ".join(repr(w) if w else "''" for w in words)})
COMP_CWORD={len(words) - 1}
_graphtape
printf '%s\\n' "${{COMPREPLY[@]}}"
"""
    out = subprocess.run(["bash", "--norc", "-c", program], capture_output=True, text=True, check=True).stdout
    return [w for w in out.splitlines() if w]


def test_bash_completion_follows_the_parser(capsys):
    code, script, _ = run(capsys, "completion", "bash")
    assert code == 0
    assert bash_complete(script, "graphtape ru") == ["runs"]
    assert bash_complete(script, "graphtape im") == ["import", "import-langgraph", "import-rescue"]
    assert bash_complete(script, "graphtape import-") == ["import-langgraph", "import-rescue"]
    assert set(bash_complete(script, "graphtape runs --t")) == {"--tag", "--tool"}
    assert bash_complete(script, "graphtape runs --status e") == ["error"]
    assert bash_complete(script, "graphtape --db x.db gc --o") == ["--older-than"]
    assert bash_complete(script, "graphtape completion ") == ["bash", "zsh", "fish"]
    assert bash_complete(script, "graphtape runs --tag ") == []  # a value: left to the shell


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_scripts_name_every_command_and_option(shell, capsys):
    code, script, _ = run(capsys, "completion", shell)
    assert code == 0
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    for name, p in sub.choices.items():
        assert name in script
        for action in p._actions:
            for flag in action.option_strings:
                if flag.startswith("--"):
                    assert (flag if shell == "zsh" else f"-l {flag[2:]}") in script, (name, flag)
    if shell == "fish":
        assert "-l status -x -a 'running ok error interrupted incomplete'" in script


# -- the TUI in a browser -------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_tui_web_serves_html_then_stops(tmp_path):
    db = tmp_path / "g.db"
    open_store(db, create=True).close()
    port = _free_port()
    env = {**os.environ, "COLUMNS": "120"}
    env.pop("GRAPHTAPE_DB", None)
    proc = subprocess.Popen([str(GRAPHTAPE), "--db", str(db), "tui", "--web", "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        html = None
        url = proc.stdout.readline().decode().split(" at ", 1)[-1].split()[0]  # printed once the port is bound
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    assert resp.status == 200
                    html = resp.read().decode()
                    break
            except OSError:
                time.sleep(0.2)
        assert html is not None, proc.stderr.read().decode() if proc.poll() is not None else "no answer"
        assert "<html" in html.lower() and "graphtape" in html
    finally:
        proc.terminate()
        proc.wait(timeout=15)
    assert proc.returncode is not None
    with socket.socket() as s:  # no listener holds the port any more: the server stopped
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a closed connection may linger in TIME_WAIT
        s.bind(("127.0.0.1", port))
        s.listen()


def test_tui_web_without_textual_serve_is_one_line(tmp_path):
    db = tmp_path / "g.db"
    open_store(db, create=True).close()
    code = f"import sys; sys.modules['textual_serve'] = None; from graphtape.tui.cli import main; sys.exit(main(['--db', {str(db)!r}, 'tui', '--web']))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == "graphtape: error: --web needs textual-serve: pip install 'graphtape[web]'\n"


def test_a_long_lived_recorder_rewrites_blobs_that_gc_swept(tmp_path):
    """A recorder that wrote a blob before gc deleted it writes it again for its next run."""
    import time
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    from graphtape.recorder import Recorder, open_store

    class S(TypedDict, total=False):
        doc: str
        n: int

    b = StateGraph(S)
    b.add_node("read", lambda s: {"n": len(s["doc"])})
    b.add_edge(START, "read")
    b.add_edge("read", END)
    graph = b.compile()
    doc = "the same long document " * 400  # long strings are stored once, as a shared blob

    db = str(tmp_path / "gc-live.db")
    with Recorder(db) as rec:
        rec.attach(graph).invoke({"doc": doc})
        rec.flush()
        first = rec.last_run_id
        time.sleep(0.05)
        reader = open_store(db)
        try:
            report = reader.gc(0.01)
            assert first in report.run_ids and report.blobs > 0
        finally:
            reader.close()
        rec.attach(graph).invoke({"doc": doc})
        rec.flush()
        second = rec.last_run_id
    store = open_store(db)
    try:
        last = store.list_steps(second)[-1].step
        assert store.state_at(second, last) == {"doc": doc, "n": len(doc)}
    finally:
        store.close()
