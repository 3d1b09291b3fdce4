"""Shared fixtures: a fresh store on real SQLite and on real PostgreSQL.

PostgreSQL comes from ``GRAPHTAPE_TEST_PG_URL`` (default: the local server
with trust auth). Outside CI a missing server skips those tests; with
``CI=true`` it fails them, so CI can never pass without testing PostgreSQL.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

ROOT = Path(__file__).resolve().parents[1]
AGENTS = ROOT / "fixtures" / "agents"
PG_DEFAULT = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


class Count(TypedDict):
    n: int


def bump_graph() -> Any:
    """A one-node graph (n -> n + 1): what a test that is about the store, not the graph, records."""
    b = StateGraph(Count)
    b.add_node("bump", lambda s: {"n": s["n"] + 1})
    b.add_edge(START, "bump")
    b.add_edge("bump", END)
    return b.compile()


def load_agent(name: str):
    """Load a bundled demo agent module by path, as graphtape itself does."""
    path = AGENTS / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_graphtape_test_agent_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def exported(db, run_id, **kw) -> dict:
    """A recorded run's fixture, as ``graphtape export`` writes it."""
    from graphtape.recorder import SqlStore
    from graphtape.replay import export_fixture

    store = SqlStore(db)
    try:
        return export_fixture(store, run_id, **kw)
    finally:
        store.close()


def imported(db, fixture) -> str:
    """The run id ``fixture`` has once imported into the store ``db`` (made if missing)."""
    from graphtape.recorder import SqlStore
    from graphtape.replay.fixture import import_fixture

    store = SqlStore(db)
    try:
        return import_fixture(store, fixture).run_id
    finally:
        store.close()


@pytest.fixture(autouse=True)
def _rescues_beside_the_test(monkeypatch, tmp_path_factory):
    """Runs a test's store never took are rescued into a folder of its own, never the checkout."""
    monkeypatch.setenv("GRAPHTAPE_RESCUE_DIR", str(tmp_path_factory.mktemp("rescued")))


@pytest.fixture(autouse=True)
def _pipe_width(monkeypatch):
    """The CLI fits its tables to the terminal: every test sees the width a pipe gets (120, as in
    CI), not the width of the window the suite happens to run in."""
    monkeypatch.setenv("COLUMNS", "120")


def _pg_base_url() -> str:
    return os.environ.get("GRAPHTAPE_TEST_PG_URL", PG_DEFAULT)


def _pg_available(url: str) -> str | None:
    try:
        engine = sa.create_engine(url)
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
        engine.dispose()
        return None
    except Exception as exc:  # noqa: BLE001 - any failure means "no server"
        return str(exc).splitlines()[0]


@pytest.fixture(scope="session")
def pg_server() -> str:
    url = _pg_base_url()
    why = _pg_available(url)
    if why is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but PostgreSQL is not reachable at {url}: {why}")
        pytest.skip(f"PostgreSQL not reachable at {url}: {why}")
    return url


@pytest.fixture
def pg_url(pg_server: str):
    """A URL to a fresh, empty PostgreSQL schema (dropped afterwards)."""
    schema = f"gt_{secrets.token_hex(6)}"
    engine = sa.create_engine(pg_server)
    with engine.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    sep = "&" if "?" in pg_server else "?"
    yield f"{pg_server}{sep}options=-csearch_path%3D{schema}"
    with engine.begin() as conn:
        conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
    engine.dispose()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return str(tmp_path / "graphtape.db")


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path: Path) -> str:
    """Every store backend: the same contract runs on each."""
    if request.param == "sqlite":
        return str(tmp_path / "graphtape.db")
    return request.getfixturevalue("pg_url")


@pytest.fixture
def recorder_factory(sqlite_url: str):
    """Recorders on a fresh SQLite file, closed after the test."""
    from graphtape.recorder import Recorder

    made = []

    def make(db: str | None = None, **kwargs):
        rec = Recorder(db or sqlite_url, **kwargs)
        made.append(rec)
        return rec

    yield make
    for rec in made:
        rec.close()


sys.path.insert(0, str(ROOT / "tests"))
