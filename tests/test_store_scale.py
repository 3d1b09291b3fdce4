"""Run filters at scale: facets kept by triggers, indexed filters that agree with brute force, schema v2 -> v3.

Timings live in benchmarks/bench_store.py; these tests pin what the filters
return and, on SQLite, that the plans use the indexes rather than reading
every run.
"""

from __future__ import annotations

import importlib.util
import json
import shlex
import sqlite3
from pathlib import Path

import pytest
import sqlalchemy as sa

from conftest import ROOT, load_agent
from graphtape.recorder import Recorder, SchemaVersionError, SqlStore, open_store
from graphtape.recorder import schema as S
from graphtape.tui.cli import main

N = 1200


def _bench():
    spec = importlib.util.spec_from_file_location("_graphtape_bench_store", ROOT / "benchmarks" / "bench_store.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BENCH = _bench()


def _expected() -> list[dict]:
    """Every synthetic run with what it should match on: computed from the rows, not the store."""
    runs: dict[str, dict] = {}
    for batch in BENCH.synthetic_batches(N, t0=1_700_000_000.0):
        for r in batch.runs_new:
            runs[r["id"]] = {**r, "tags": json.loads(r["tags"]), "nodes": set(), "tools": set()}
        for s in batch.steps:
            runs[s["run_id"]]["nodes"].update(n for n in s["nodes"].split(",") if n)
        for c in batch.calls:
            if c["kind"] == "tool":
                runs[c["run_id"]]["tools"].add(c["name"])
    return sorted(runs.values(), key=lambda r: (r["started_at"], r["id"]), reverse=True)


EXPECTED = _expected()


@pytest.fixture
def filled(store_url):
    store = open_store(store_url, create=True)
    for batch in BENCH.synthetic_batches(N, t0=1_700_000_000.0):
        store.write(batch)
    yield store
    store.close()


CASES = [
    ({"status": "error"}, lambda r: r["status"] == "error"),
    ({"name": "agent-03"}, lambda r: r["name"] == "agent-03"),
    ({"name": "agent-1*"}, lambda r: r["name"].startswith("agent-1")),
    ({"tag": "vip"}, lambda r: "vip" in r["tags"]),
    ({"tag": "env:dev"}, lambda r: "env:dev" in r["tags"]),
    ({"tool": BENCH.RARE_TOOL}, lambda r: BENCH.RARE_TOOL in r["tools"]),
    ({"tool": "tool_04"}, lambda r: "tool_04" in r["tools"]),
    ({"node": BENCH.RARE_NODE}, lambda r: BENCH.RARE_NODE in r["nodes"]),
    ({"node": "plan"}, lambda r: "plan" in r["nodes"]),
    ({"error": "TIMEOUT"}, lambda r: r["error_message"] is not None and "timeout" in r["error_message"].lower()),
    ({"status": "ok", "tag": "env:dev", "tool": "tool_04"}, lambda r: r["status"] == "ok" and "env:dev" in r["tags"] and "tool_04" in r["tools"]),
    ({"name": "agent-0*", "node": "plan", "error": "bad order"}, lambda r: r["name"].startswith("agent-0") and r["error_message"] == "ValueError: bad order id"),
]


@pytest.mark.parametrize("walk_threshold", [10**9, 0], ids=["collect", "walk"])
def test_filters_match_brute_force(filled, walk_threshold, monkeypatch):
    # Both ways of applying a facet filter (collect its runs, or test run by run) give the same answer.
    monkeypatch.setattr(type(filled), "FACET_WALK", walk_threshold)
    for filters, keep in CASES:
        want = [r["id"] for r in EXPECTED if keep(r)]
        assert want, filters  # every case matches something, so an empty result is a failure
        got = [r.id for r in filled.list_runs(limit=50, **filters)]
        assert got == want[:50], filters
        assert filled.count_runs(**filters) == len(want), filters
        assert [r.id for r in filled.list_runs(limit=7, offset=3, **filters)] == want[3:10], filters


def test_filter_values_are_not_patterns(filled):
    assert filled.list_runs(tag="env:%") == []
    assert filled.list_runs(name="agent_0*") == []  # "_" is not a wildcard
    assert filled.list_runs(error="%") == []
    assert filled.count_runs(name="*") == N  # an empty prefix matches every name


def test_recorded_runs_are_found_by_tag_node_and_tool(store_url):
    agent = load_agent("reason_act")
    with Recorder(store_url) as rec:
        graph = rec.attach(agent.build_graph("loop_limit"), name="loop", tags=["team:support", "nightly"])
        graph.invoke(agent.inputs_for("loop_limit"), {"configurable": {"thread_id": "t-loop"}})
        other = rec.attach(agent.build_graph("happy"), name="happy", tags=["team:billing"])
        other.invoke(agent.inputs_for("happy"), {"configurable": {"thread_id": "t-happy"}})
        rec.flush()
        store = rec.store
        loop = store.list_runs(name="loop")[0]
        assert [r.id for r in store.list_runs(tag="nightly")] == [loop.id]
        assert [r.id for r in store.list_runs(node="give_up")] == [loop.id]
        assert [r.id for r in store.list_runs(tool="poll_warehouse")] == [loop.id]
        assert {r.name for r in store.list_runs(node="reason")} == {"loop", "happy"}
        assert store.list_runs(tool="ScriptedChatModel:scripted-happy") == []  # model calls are not tools
        store.delete_run(loop.id)
        assert store.list_runs(tag="nightly") == []
        leftover = sa.create_engine(store.url)
        with leftover.connect() as conn:
            assert conn.execute(sa.select(sa.func.count()).select_from(S.run_facets).where(S.run_facets.c.run_id == loop.id)).scalar_one() == 0
        leftover.dispose()


def test_sqlite_plans_use_the_indexes(tmp_path):
    store = open_store(tmp_path / "g.db", create=True)
    for batch in BENCH.synthetic_batches(300):
        store.write(batch)
    compiled = {}
    for label, filters in [("status", {"status": "error"}), ("name", {"name": "agent-03"}), ("error", {"error": "x"}), ("tag", {"tag": "vip"})]:
        q = sa.select(S.runs.c.id).where(*store._run_filters(**filters)).order_by(*store._NEWEST_FIRST).limit(50)
        sql = str(q.compile(store.engine, compile_kwargs={"literal_binds": True}))
        with sqlite3.connect(tmp_path / "g.db") as conn:
            compiled[label] = " | ".join(row[-1] for row in conn.execute("EXPLAIN QUERY PLAN " + sql))
    assert "ix_runs_status" in compiled["status"]
    assert "ix_runs_name" in compiled["name"]
    assert "ix_runs_errors" in compiled["error"]
    assert "run_facets" in compiled["tag"] and "sqlite_autoindex_run_facets" in compiled["tag"]
    for label, plan in compiled.items():
        assert "SCAN runs" not in plan.replace("SCAN runs USING", ""), (label, plan)
    store.close()


# -- schema v2 -> v3 -------------------------------------------------------------------------------


def _downgrade_to_v2(url: str) -> None:
    """Make a current store look like one written by graphtape's schema v2."""
    engine = sa.create_engine(open_store(url, create=False).url)
    with engine.begin() as conn:
        if conn.dialect.name == "sqlite":
            for name in ("gt_runs_tags", "gt_runs_tags_update", "gt_runs_delete", "gt_steps_nodes", "gt_calls_tools"):
                conn.exec_driver_sql(f"DROP TRIGGER {name}")
        else:
            for table in ("runs", "steps", "calls"):
                conn.exec_driver_sql(f"DROP TRIGGER gt_{table}_facets ON {table}")
        conn.exec_driver_sql("DROP TABLE run_facets")
        for name in ("ix_runs_name", "ix_runs_errors", "ix_runs_started", "ix_runs_status"):
            conn.exec_driver_sql(f"DROP INDEX {name}")
        conn.exec_driver_sql("CREATE INDEX ix_runs_started ON runs (started_at)")
        conn.exec_driver_sql("CREATE INDEX ix_runs_status ON runs (status)")
        conn.exec_driver_sql("DROP INDEX ix_calls_failed")
        conn.exec_driver_sql("ALTER TABLE calls DROP COLUMN traceback")
        conn.execute(sa.update(S.meta).values(value="2"))
    engine.dispose()


def test_v2_store_is_refused_then_migrated(store_url, capsys):
    store = open_store(store_url, create=True)
    for batch in BENCH.synthetic_batches(200, t0=1_700_000_000.0):
        store.write(batch)
    store.close()
    _downgrade_to_v2(store_url)
    with pytest.raises(SchemaVersionError, match="uses schema v2.*graphtape --db .* migrate"):
        open_store(store_url)
    code = main(["--db", store_url, "runs"])
    err = capsys.readouterr().err
    assert code == 2 and "` to upgrade it in place" in err and " migrate`" in err and err.count("\n") == 1

    assert main(["--db", store_url, "migrate"]) == 0
    assert f"from schema v2 to v{S.SCHEMA_VERSION}" in capsys.readouterr().out
    store = open_store(store_url)
    want = [r["id"] for r in _expected_for(200) if "vip" in r["tags"]]
    assert [r.id for r in store.list_runs(tag="vip")] == want and want
    assert store.count_runs(node="plan") == 200
    # The triggers came with the migration: new rows are indexed too.
    extra = next(iter(BENCH.synthetic_batches(1, seed=99, t0=1_800_000_000.0)))
    extra.runs_new[0]["id"] = "ffffffffffffffff"
    extra.runs_new[0]["tags"] = '["after-migrate"]'
    for row in (*extra.steps, *extra.calls):
        row["run_id"] = "ffffffffffffffff"
    for row in extra.calls:
        row["call_id"] += "-x"
    store.write(extra)
    assert [r.id for r in store.list_runs(tag="after-migrate")] == ["ffffffffffffffff"]
    store.close()
    assert main(["--db", store_url, "migrate"]) == 0
    assert f"already at schema v{S.SCHEMA_VERSION}" in capsys.readouterr().out


def test_the_migrate_command_an_old_store_suggests_upgrades_that_store(tmp_path, monkeypatch, capsys):
    # A store named with --db: the suggested command must name it too, or it upgrades ./graphtape.db.
    (tmp_path / "project").mkdir()
    (tmp_path / "elsewhere").mkdir()
    db = tmp_path / "project" / "old runs.db"
    store = open_store(str(db), create=True)
    for batch in BENCH.synthetic_batches(3, t0=1_700_000_000.0):
        store.write(batch)
    store.close()
    _downgrade_to_v2(str(db))
    monkeypatch.chdir(tmp_path / "project")
    assert main(["--db", "old runs.db", "runs"]) == 2
    err = capsys.readouterr().err
    suggested = err.split("run `", 1)[1].split("`", 1)[0]
    monkeypatch.chdir(tmp_path / "elsewhere")  # pasted anywhere, it upgrades the store it named
    argv = shlex.split(suggested)
    assert argv[0] == "graphtape" and main(argv[1:]) == 0
    assert "from schema v2 to v" in capsys.readouterr().out
    assert not (tmp_path / "elsewhere" / "graphtape.db").exists()
    assert [r.id for r in open_store(str(db)).list_runs()]


def _expected_for(n: int) -> list[dict]:
    out = []
    for batch in BENCH.synthetic_batches(n, t0=1_700_000_000.0):
        out += [{**r, "tags": json.loads(r["tags"])} for r in batch.runs_new]
    return sorted(out, key=lambda r: (r["started_at"], r["id"]), reverse=True)


def test_migrate_refuses_what_it_cannot_upgrade(tmp_path, capsys):
    db = tmp_path / "old.db"
    open_store(db, create=True).close()
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE graphtape_meta SET value = '1'")
    code = main(["--db", str(db), "migrate"])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "schema v1 cannot be upgraded in place" in err
    code = main(["--db", str(tmp_path / "missing.db"), "migrate"])
    assert code == 2 and "no database at" in capsys.readouterr().err
    assert not Path(tmp_path / "missing.db").exists()


def _counter_loop(recorder: Recorder, steps: int) -> str:
    """A run of ``steps`` supersteps: one node counting up until it has run ``steps`` times."""
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    class Count(TypedDict):
        n: int

    b = StateGraph(Count)
    b.add_node("count", lambda s: {"n": s["n"] + 1})
    b.add_edge(START, "count")
    b.add_conditional_edges("count", lambda s: "count" if s["n"] < steps else END, ["count", END])
    recorder.attach(b.compile()).invoke({"n": 0}, {"recursion_limit": steps + 10})
    return recorder.last_run_id


class CountingStore(SqlStore):
    """A store that counts the rows its reads return, to pin what a view reads."""

    rows_read = 0

    def _read(self, stmt, params=None):
        rows = super()._read(stmt, params)
        self.rows_read += len(rows)
        return rows


def test_showing_one_step_reads_that_step_not_the_run(store_url):
    """``show RUN --step N`` reads the step's own rows and its state's frames: a run of 400 steps
    costs it the rows a run of 8 does (it read every step's row, 200k steps took seconds)."""
    from graphtape.tui.views import step_view

    with Recorder(store_url) as rec:
        short, long = _counter_loop(rec, 8), _counter_loop(rec, 400)
    store = CountingStore(store_url, create=False)
    try:
        read = {}
        for run_id in (short, long):
            step_view(store, run_id, 2)  # once for the caches a store keeps (run rows, keyframes)
            store.rows_read = 0
            view = step_view(store, run_id, 2)
            read[run_id] = store.rows_read
            assert view["step"]["step"] == 2 and view["state"] == {"n": 2} and view["tasks"][0]["node"] == "count"
        assert view["first_step"] == -1 and view["last_step"] == 400
        assert read[long] == read[short], read
    finally:
        store.close()
