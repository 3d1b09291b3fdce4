"""`graphtape import-langgraph`: real SqliteSaver and PostgresSaver databases, made by running real graphs, imported read-only."""

from __future__ import annotations

import contextlib
import hashlib
import json
import operator
import sqlite3
from pathlib import Path
from typing import Annotated, TypedDict

import ormsgpack
import pytest
import sqlalchemy as sa
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send, interrupt

from conftest import load_agent
from graphtape.recorder import open_store
from graphtape.recorder.import_langgraph import LangGraphImportError, _Source, import_langgraph
from graphtape.tui.cli import main


class State(TypedDict, total=False):
    x: int
    log: Annotated[list, operator.add]
    answer: str


class Inner(TypedDict, total=False):
    log: Annotated[list, operator.add]


def _branchy(checkpointer):
    """Conditional edges, Send fan-out, a subgraph, an interrupt and a failing node."""

    def a(s):
        return {"x": s["x"] + 1, "log": ["a"]}

    def boom(s):
        raise ValueError("kaboom at node")

    def ask(s):
        return {"answer": interrupt({"question": "ok?"})}

    inner = StateGraph(Inner)
    inner.add_node("inner_step", lambda s: {"log": ["inner"]})
    inner.add_edge(START, "inner_step")
    inner.add_edge("inner_step", END)
    g = StateGraph(State)
    g.add_node("a", a)
    g.add_node("b", lambda s: {"log": ["b"]})
    g.add_node("c", lambda s: {"log": ["c"]})
    g.add_node("worker", lambda s: {"log": [f"w{s['x']}"]})
    g.add_node("sub", inner.compile())
    g.add_node("ask", ask)
    g.add_node("boom", boom)
    g.add_edge(START, "a")
    g.add_conditional_edges("a", lambda s: "b" if s["x"] % 2 else "c", ["b", "c"])
    g.add_conditional_edges("b", lambda s: [Send("worker", {"x": i}) for i in range(2)], ["worker"])
    g.add_edge("worker", "sub")
    g.add_edge("c", "sub")
    g.add_edge("sub", "ask")
    g.add_conditional_edges("ask", lambda s: "boom" if s.get("answer") == "no" else END, ["boom", END])
    g.add_edge("boom", END)
    return g.compile(checkpointer=checkpointer)


def _run_threads(checkpointer) -> dict:
    """Record four threads; returns the compiled graphs by thread for reading history back."""
    agent = load_agent("reason_act")
    incident = agent.build_graph("incident", checkpointer=checkpointer)
    incident.invoke(agent.inputs_for("incident"), {"configurable": {"thread_id": "incident"}})
    g = _branchy(checkpointer)
    g.invoke({"x": 0, "log": []}, {"configurable": {"thread_id": "odd"}})  # a -> b -> 2 workers -> sub -> ask (interrupt)
    g.invoke({"x": 1, "log": []}, {"configurable": {"thread_id": "even"}})  # a -> c -> sub -> ask (interrupt)
    with pytest.raises(ValueError, match="kaboom"):
        g.invoke(Command(resume="no"), {"configurable": {"thread_id": "even"}})  # -> boom fails
    g.invoke({"x": 2, "log": []}, {"configurable": {"thread_id": "done"}})
    g.invoke(Command(resume="yes"), {"configurable": {"thread_id": "done"}})  # -> END
    return {"incident": incident, "odd": g, "even": g, "done": g}


@pytest.fixture(scope="module")
def sqlite_source(tmp_path_factory):
    path = tmp_path_factory.mktemp("lg") / "checkpoints.db"
    conn = sqlite3.connect(path, check_same_thread=False)
    graphs = _run_threads(SqliteSaver(conn))
    yield path, graphs
    conn.close()


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _by_thread(store) -> dict:
    return {r.thread_id: r for r in store.list_runs()}


def _check_states_match(store, graphs) -> None:
    """Every checkpoint of each thread's current branch reads back as LangGraph's own state."""
    for thread_id, run in _by_thread(store).items():
        graph = graphs[thread_id]
        history = list(graph.get_state_history({"configurable": {"thread_id": thread_id}}))
        assert history, thread_id
        steps = {s.step: s for s in store.list_steps(run.id) if not s.pending}
        for snap in history:
            step = snap.metadata["step"]
            assert steps[step].checkpoint_id == snap.config["configurable"]["checkpoint_id"]
            got = store.state_at(run.id, step, typed=True)
            stored = graph.checkpointer.get_tuple(snap.config).checkpoint["channel_values"]
            want = {k: v for k, v in stored.items() if not k.startswith(("branch:", "__"))}
            assert got == want, (thread_id, step)
            assert {k: v for k, v in dict(snap.values).items() if k in want} == want  # and LangGraph's view agrees


def test_sqlite_saver_threads_become_runs(sqlite_source, tmp_path, capsys):
    path, graphs = sqlite_source
    before = _digest(path)
    db = tmp_path / "g.db"
    code = main(["--db", str(db), "import-langgraph", f"sqlite:///{path}", "--json"])
    out = capsys.readouterr().out
    assert code == 0
    summary = json.loads(out)
    assert summary["imported"] == 4 and summary["already_imported"] == 0 and summary["blocked_types"] == {}
    assert _digest(path) == before  # the source is only read
    store = open_store(db)
    runs = _by_thread(store)
    assert {t: r.status for t, r in runs.items()} == {"incident": "ok", "odd": "interrupted", "even": "error", "done": "ok"}
    assert runs["even"].error_type == "ValueError" and "kaboom" in runs["even"].error_message
    assert all("imported" in r.tags for r in runs.values())
    _check_states_match(store, graphs)

    odd = runs["odd"].id
    infos = {s.step: s for s in store.list_steps(odd)}
    assert [infos[s].nodes for s in sorted(infos)] == [[], ["__start__"], ["a"], ["b"], ["worker"], ["sub"], ["ask"]]
    # b's Sends are a route; both pushed tasks are known to be `worker`
    b_step = store.step_detail(odd, 2)
    assert [(r.kind, r.destinations) for r in b_step.routes] == [("send", ["worker", "worker"])]
    assert [t.node for t in store.step_detail(odd, 3).tasks] == ["worker", "worker"]
    # A route is called a decision only where the thread shows one: `reason` went to act, and later
    # ended the run; `act` always went back to reason, and `a` ran once here, so those are plain edges.
    incident = runs["incident"].id
    assert [(r.source, r.kind, r.destinations) for r in store.step_detail(incident, 1).routes] == [("reason", "conditional", ["act"])]
    assert [(r.source, r.kind, r.destinations) for r in store.step_detail(incident, 2).routes] == [("act", "edge", ["reason"])]
    assert [(r.source, r.kind, r.destinations) for r in store.step_detail(odd, 1).routes] == [("a", "edge", ["b"])]
    assert [(r.kind, r.destinations) for r in store.step_detail(odd, 4).routes] == [("edge", ["ask"])]
    # the interrupt that paused the thread is the last, pending step
    last = store.step_detail(odd, 5)
    assert last.step.pending and last.step.has_interrupt and last.tasks[0].interrupts
    # the subgraph is its own namespace
    ns = [n for n in store.namespaces(odd) if n]
    assert len(ns) == 1 and ns[0].startswith("sub:")
    assert [s.nodes for s in store.list_steps(odd, ns[0])][-1] == ["inner_step"]
    # the resumed, then failed thread: the resume value is an event, the failure a pending step
    even = runs["even"].id
    failed = store.list_steps(even)[-1]
    assert failed.pending and failed.has_error and failed.nodes == ["boom"]
    assert any(e.kind == "resume" and e.value == "no" for e in store.step_detail(even, 4).events)
    # the listing filters see imported runs like recorded ones
    assert [r.thread_id for r in store.list_runs(node="boom")] == ["even"]
    store.close()

    # importing again adds nothing
    assert main(["--db", str(db), "import-langgraph", str(path)]) == 0
    out = capsys.readouterr().out
    assert "imported 0 run(s)" in out and "4 already imported" in out
    assert open_store(db).count_runs() == 4


def test_one_thread_and_text_summary(sqlite_source, tmp_path, capsys):
    path, _ = sqlite_source
    assert main(["--db", str(tmp_path / "g.db"), "import-langgraph", str(path), "--thread", "incident"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("imported 1 run(s)") and "incident" in out and "graphtape show" in out
    code = main(["--db", str(tmp_path / "g.db"), "import-langgraph", str(path), "--thread", "nope"])
    err = capsys.readouterr().err
    assert code == 2 and "no thread 'nope'" in err and err.count("\n") == 1
    code = main(["--db", str(tmp_path / "other.db"), "import-langgraph", str(path), "--thread", "nope"])
    assert code == 2 and not (tmp_path / "other.db").exists()


def test_unsafe_values_are_never_rebuilt(sqlite_source, tmp_path, capsys):
    """A tampered checkpoint DB cannot run code through the import: no unlisted constructors, no pickle."""
    path, _ = sqlite_source
    evil = tmp_path / "evil.db"
    with sqlite3.connect(path) as src, sqlite3.connect(evil) as dst:
        src.backup(dst)
    marker = tmp_path / "pwned"
    # msgpack ext 1 = "call module.name(*args)": os.system would run a shell command if allowed.
    call = ormsgpack.packb(ormsgpack.Ext(1, ormsgpack.packb(["os", "system", [f"touch {marker}"]])))
    pickled = b"cos\nsystem\n(S'touch " + str(marker).encode() + b"'\ntR."
    with sqlite3.connect(evil) as conn:
        conn.execute("UPDATE writes SET type = 'msgpack', value = ? WHERE thread_id = 'done' AND channel = 'answer'", (call,))
        conn.execute("UPDATE writes SET type = 'pickle', value = ? WHERE thread_id = 'odd' AND channel = 'x'", (pickled,))
    code = main(["--db", str(tmp_path / "g.db"), "import-langgraph", str(evil), "--json"])
    out = capsys.readouterr().out
    assert code == 0
    assert not marker.exists()
    blocked = json.loads(out)["blocked_types"]
    assert blocked.get("os.system", 0) >= 1 and blocked.get("pickle", 0) >= 1
    store = open_store(tmp_path / "g.db")
    done = _by_thread(store)["done"]
    answers = [t.writes.get("answer") for s in store.list_steps(done.id) for t in store.step_detail(done.id, s.step).tasks if "answer" in t.writes]
    assert answers == [[f"touch {marker}"]]  # the blocked call's arguments, as plain data
    store.close()


def test_bad_sources_are_one_line_errors(tmp_path, capsys):
    graphtape_db = tmp_path / "graphtape.db"
    open_store(graphtape_db, create=True).close()
    for source, needle in [
        (str(graphtape_db), "no LangGraph SqliteSaver tables"),
        (str(tmp_path / "missing.db"), "no SQLite file"),
        ("mysql://host/db", "unsupported source"),
        ("postgresql://nobody@127.0.0.1:1/none", "cannot open"),
    ]:
        code = main(["--db", str(tmp_path / "out.db"), "import-langgraph", source])
        out, err = capsys.readouterr()
        assert code == 2 and out == "" and err.startswith("graphtape: error: ") and err.count("\n") == 1, err
        assert needle in err, err
        assert not (tmp_path / "out.db").exists()  # nothing to import: no new, empty store left behind


# -- PostgresSaver --------------------------------------------------------------------------


def test_postgres_saver_threads_become_runs(pg_url, tmp_path, capsys):
    from langgraph.checkpoint.postgres import PostgresSaver

    conninfo = pg_url.replace("postgresql+psycopg://", "postgresql://")
    with PostgresSaver.from_conn_string(conninfo) as saver:
        saver.setup()
        graphs = _run_threads(saver)
        engine = sa.create_engine(pg_url)

        def counts() -> dict:
            with engine.connect() as conn:
                return {t: conn.exec_driver_sql(f"SELECT count(*) FROM {t}").scalar_one() for t in ("checkpoints", "checkpoint_blobs", "checkpoint_writes")}

        before = counts()
        db = tmp_path / "g.db"
        code = main(["--db", str(db), "import-langgraph", pg_url, "--json"])
        out = capsys.readouterr().out
        assert code == 0, capsys.readouterr().err
        assert json.loads(out)["imported"] == 4
        assert counts() == before
        store = open_store(db)
        runs = _by_thread(store)
        assert {t: r.status for t, r in runs.items()} == {"incident": "ok", "odd": "interrupted", "even": "error", "done": "ok"}
        _check_states_match(store, graphs)
        store.close()
        # the importer's connections refuse writes
        source = _Source(pg_url)
        with source.engine.connect() as conn:
            assert conn.exec_driver_sql("SHOW transaction_read_only").scalar_one() == "on"
            with pytest.raises(sa.exc.DBAPIError, match="read-only"):
                conn.exec_driver_sql("DELETE FROM checkpoints")
        source.close()
        engine.dispose()


def test_postgres_without_saver_tables(pg_url, tmp_path):
    with pytest.raises(LangGraphImportError, match="no LangGraph PostgresSaver tables"):
        import_langgraph(pg_url, open_store(tmp_path / "g.db", create=True))


class Chain(TypedDict):
    log: Annotated[list, operator.add]


def test_a_time_travelled_thread_imports_its_fork_as_a_step_no_task_ran(tmp_path, capsys):
    """invoke(None, config of an earlier checkpoint): LangGraph saves a fork checkpoint before any
    task runs. The writes stored against its parent are the abandoned branch's, not its tasks."""
    b = StateGraph(Chain)
    for node, after in (("a", "b"), ("b", "c"), ("c", END)):
        b.add_node(node, lambda s, node=node: {"log": [node]})
        b.add_edge(node, after)
    b.add_edge(START, "a")
    path = tmp_path / "threads.db"
    conn = sqlite3.connect(path, check_same_thread=False)
    graph = b.compile(checkpointer=SqliteSaver(conn))
    cfg = {"configurable": {"thread_id": "travelled"}}
    graph.invoke({"log": []}, cfg)
    before_b = next(s for s in graph.get_state_history(cfg) if s.next == ("b",))
    assert graph.invoke(None, before_b.config)["log"] == ["a", "b", "c"]
    conn.close()
    with _imported(path, tmp_path, capsys) as store:
        run = store.get_run("last")
        nodes = {s.step: (s.source, s.nodes) for s in store.list_steps(run.id)}
    forks = [step for step, (source, _) in nodes.items() if source == "fork"]
    assert len(forks) == 1 and nodes[forks[0]][1] == [] and nodes[forks[0] + 1][1] == ["b"]


def test_a_thread_named_by_a_secret_imports_without_it(tmp_path, capsys):
    """A saver's thread whose id is a token: the imported run's thread and name hold a digest."""
    b = StateGraph(Chain)
    b.add_node("a", lambda s: {"log": ["a"]})
    b.add_edge(START, "a")
    b.add_edge("a", END)
    path = tmp_path / "threads.db"
    conn = sqlite3.connect(path, check_same_thread=False)
    token = "ghp_" + "Tk4" * 12
    b.compile(checkpointer=SqliteSaver(conn)).invoke({"log": []}, {"configurable": {"thread_id": token}})
    conn.close()
    db = tmp_path / "g.db"
    assert main(["--db", str(db), "import-langgraph", str(path), "--json"]) == 0
    assert token not in capsys.readouterr().out  # the summary names the thread as stored
    with _imported(path, tmp_path, capsys) as store:
        (run,) = store.list_runs()
        assert run.thread_id.startswith("redacted-thread-") and token not in run.name
    for f in tmp_path.glob("g.db*"):
        assert token.encode() not in f.read_bytes()


@contextlib.contextmanager
def _imported(source: Path, tmp_path: Path, capsys):
    """The store ``graphtape import-langgraph`` made from the saver file ``source`` (open while in the block)."""
    db = tmp_path / "g.db"
    assert main(["--db", str(db), "import-langgraph", str(source)]) == 0
    capsys.readouterr()
    store = open_store(db)
    try:
        yield store
    finally:
        store.close()
