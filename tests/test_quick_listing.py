"""`graphtape runs` on a SQLite file lists through sqlite3, read-only, and must list exactly what the full store lists.

The demo's recordings (errors, tools, nodes, an interrupted run) plus tagged
runs are listed both ways under every filter `graphtape runs` has; PostgreSQL
and anything unusual go through the full store; the command itself loads
neither SQLAlchemy, Textual nor LangGraph.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from graphtape.recorder import Recorder
from graphtape.recorder import schema as S
from graphtape.recorder.store import SqlStore, connection
from graphtape.recorder.store import listing as full_listing
from graphtape.recorder.store import quick_listing
from graphtape.recorder.store.quick_listing import ListingStore, open_listing
from graphtape.tui.cli import main


class Count(TypedDict):
    n: int


def _bump(state: Count) -> Count:
    if state["n"] < 0:
        raise KeyError("boom: no such key")
    if state["n"] == 99:
        interrupt("a question")
    return {"n": state["n"] + 1}


def _graph():
    g = StateGraph(Count)
    g.add_node("bump", _bump)
    g.add_edge(START, "bump")
    g.add_edge("bump", END)
    return g.compile()


@pytest.fixture(scope="module")
def store_file(tmp_path_factory) -> str:
    """The demo's runs and a few tagged ones, in one SQLite file."""
    db = str(tmp_path_factory.mktemp("listing") / "graphtape.db")
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["--db", db, "demo", "--no-tui"]) == 0
    with Recorder(db) as rec:
        for i, tags in enumerate((["env:prod", "team_a"], ["env:prod"], ["50%_off"], [])):
            rec.attach(_graph(), name=f"tagged-{i}", tags=tags).invoke({"n": i})
        with pytest.raises(KeyError):
            rec.attach(_graph(), name="failing", tags=["env:prod"]).invoke({"n": -1})
        rec.attach(_graph(), name="asking").invoke({"n": 99}, {"configurable": {"thread_id": "t-ask"}})
    return db


def _fields(runs) -> list[dict]:
    return [r.to_dict() for r in runs]


FILTERS = [
    {},
    {"limit": 3},
    {"limit": 0},
    {"limit": 4, "offset": 2},
    {"offset": 1},
    {"status": "error"},
    {"status": "ok", "limit": 2},
    {"status": "interrupted"},
    {"text": "demo"},
    {"text": "LOOKUP"},  # a call's name, any case
    {"text": "50%"},  # LIKE's wildcards are matched as themselves
    {"text": "_"},
    {"text": "timeout"},
    {"text": "nothing matches this"},
    {"name": "demo:*"},
    {"name": "tagged-1"},
    {"name": "tagged*", "limit": 2},
    {"tag": "env:prod"},
    {"tag": "env:prod", "name": "tagged-0"},
    {"tag": "50%_off", "limit": 5},
    {"node": "bump", "limit": 10},
    {"node": "agent"},
    {"tool": "lookup_order_status"},
    {"tool": "lookup_order_status", "limit": 2},
    {"error": "boom"},
    {"error": "KEYERROR"},
    {"text": "boom"},
    {"error": "zzz"},
    {"status": "ok", "text": "tagged", "tag": "env:prod", "limit": 1},
]


@pytest.mark.parametrize("filters", FILTERS, ids=lambda f: ",".join(f"{k}={v}" for k, v in f.items()) or "all")
def test_both_paths_list_the_same_runs(store_file, filters):
    full = SqlStore(store_file, create=False)
    try:
        expected = _fields(full.list_runs(**filters))
    finally:
        full.close()
    got = quick_listing._list_read_only(Path(store_file), **filters)
    assert got is not None, "the read-only path handed a plain SQLite listing to the full store"
    assert _fields(got) == expected


def test_the_store_holds_what_the_filters_test(store_file):
    """The comparisons above are only worth something if the filters find runs."""
    rows = quick_listing._list_read_only(Path(store_file))
    assert {r.status for r in rows} >= {"ok", "error", "interrupted"}
    assert any(r.tags for r in rows) and any(r.error_message for r in rows)
    for filters in ({"tag": "env:prod"}, {"node": "agent"}, {"error": "boom"}, {"status": "interrupted"}, {"text": "50%"}, {"name": "demo:*"}):
        assert quick_listing._list_read_only(Path(store_file), **filters), filters


def test_a_facet_most_runs_share_is_walked_alike(store_file, monkeypatch):
    monkeypatch.setattr(full_listing.RunListing, "FACET_WALK", 0)
    monkeypatch.setattr(quick_listing, "FACET_WALK", 0)
    for filters in ({"tag": "env:prod", "limit": 5}, {"node": "bump", "limit": 1}, {"tool": "lookup_order_status", "limit": 2}):
        full = SqlStore(store_file, create=False)
        try:
            expected = _fields(full.list_runs(**filters))
        finally:
            full.close()
        assert _fields(quick_listing._list_read_only(Path(store_file), **filters)) == expected


def test_text_stored_escaped_is_matched_alike_and_text_no_id_can_be_matches_no_id(tmp_path):
    """Names, tags and searches holding a lone surrogate (an argument typed in another encoding
    than UTF-8), NUL or the column escape are compared as the columns hold them, as the full
    store compares them; neither path sends such text as an id."""
    db = str(tmp_path / "odd.db")
    with Recorder(db) as rec:
        for name in ("caf\udce9-one", "caf\udce9\udce9", "nul\x00name", "esc\U0010ffffname", "cafe"):
            rec.attach(_graph(), name=name, tags=[name]).invoke({"n": 1})
    cases = [{"name": "caf\udce9-one"}, {"name": "caf\udce9*"}, {"name": "caf*"}, {"name": "esc\U0010ffff*"}, {"name": "nul\x00name"}, {"tag": "caf\udce9-one"}]
    cases += [{"text": t} for t in ("\udce9", "\x00", "\U0010ffff", "abc\udcff")] + [{"error": "\udcff"}, {"tool": "x\udcff"}, {"node": "\udcff"}]
    full = SqlStore(db, create=False)
    try:
        for filters in cases:
            got = quick_listing._list_read_only(Path(db), **filters)
            assert got is not None, filters
            assert _fields(got) == _fields(full.list_runs(**filters)), filters
        assert len(full.list_runs(name="caf*")) == 3 and len(full.list_runs(text="\x00")) == 1
    finally:
        full.close()


def test_the_read_only_path_never_writes(store_file, tmp_path):
    copy = tmp_path / "copy.db"
    src = sqlite3.connect(store_file)
    with sqlite3.connect(copy) as dst:
        src.backup(dst)
    src.close()
    copy.chmod(0o444)
    before = copy.read_bytes()
    store = open_listing(str(copy))
    try:
        assert store.list_runs(limit=5)
        assert store._full is None  # answered by sqlite3 alone
    finally:
        store.close()
    assert copy.read_bytes() == before


def test_a_run_still_marked_running_goes_to_the_full_store(tmp_path):
    """The full store marks a run whose process is gone as interrupted (a write): the listing must show that."""
    db = tmp_path / "g.db"
    with Recorder(str(db)) as rec:
        rec.attach(_graph(), name="r").invoke({"n": 1})
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE runs SET status = 'running', ended_at = NULL, owner_host = ?, owner_pid = 999999999", (os.uname().nodename,))
    assert quick_listing._list_read_only(db) is None
    store = open_listing(str(db))
    try:
        runs = store.list_runs()
        assert store._full is not None
    finally:
        store.close()
    assert [(r.status, r.status_reason) for r in runs] == [("interrupted", "killed")]


def test_another_schema_version_goes_to_the_full_store_and_its_error(tmp_path):
    db = tmp_path / "g.db"
    with Recorder(str(db)) as rec:
        rec.attach(_graph(), name="r").invoke({"n": 1})
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE graphtape_meta SET value = '999' WHERE key = 'schema_version'")
    assert quick_listing._list_read_only(db) is None
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["--db", str(db), "runs"])
    assert code == 2 and "newer graphtape" in err.getvalue() and err.getvalue().count("\n") == 1


def test_its_constants_are_the_stores(monkeypatch):
    assert quick_listing.SCHEMA_VERSION == S.SCHEMA_VERSION
    assert quick_listing.READS_AS_IS == S.UPGRADES_ON_OPEN
    assert (quick_listing.DEFAULT_DB, quick_listing.ENV_DB) == (connection.DEFAULT_DB, connection.ENV_DB)
    assert quick_listing.FACET_WALK == full_listing.RunListing.FACET_WALK
    assert quick_listing._ABANDONED_WORDS == full_listing.ABANDONED_WORDS
    monkeypatch.setenv("GRAPHTAPE_DB", "here.db")
    for db in (None, "x.db", "~/y.db", "sqlite:////tmp/z.db"):
        assert "sqlite:///" + str(quick_listing.sqlite_file(db)) == connection.resolve_url(db)


def test_urls_it_does_not_read_itself():
    for db in ("sqlite:///:memory:", "sqlite:////tmp/a.db?mode=ro", "sqlite:///file:a.db", "postgresql://u@h/d", "mysql://h/d"):
        assert quick_listing.sqlite_file(db) is None


def test_postgresql_lists_through_sqlalchemy(pg_url):
    with Recorder(pg_url) as rec:
        rec.attach(_graph(), name="pg-run", tags=["env:prod"]).invoke({"n": 1})
    store = open_listing(pg_url)
    try:
        assert isinstance(store._full, SqlStore)  # opened at once: nothing is read around SQLAlchemy
        got = _fields(store.list_runs(tag="env:prod"))
        assert store.url == store._full.url
    finally:
        store.close()
    full = SqlStore(pg_url, create=False)
    try:
        assert got == _fields(full.list_runs(tag="env:prod")) and [r["name"] for r in got] == ["pg-run"]
    finally:
        full.close()


def test_a_missing_file_is_the_full_stores_one_line_error(tmp_path):
    with pytest.raises(Exception) as info:
        ListingStore(str(tmp_path / "nope.db"))
    assert "nope.db" in str(info.value)


def test_the_command_loads_no_sqlalchemy_textual_or_langgraph(store_file):
    code = (
        "import contextlib, io, json, sys\n"
        "from graphtape.tui.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    main(['--help'])\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        f"    assert main(['--db', {store_file!r}, 'runs', '--json', '--limit', '0']) == 0\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'sqlalchemy', 'textual', 'langgraph', 'langchain_core', 'deepdiff'})\n"
        "print(json.dumps({'heavy': heavy, 'runs': len(json.loads(out.getvalue()))}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"heavy": [], "runs": 12}
