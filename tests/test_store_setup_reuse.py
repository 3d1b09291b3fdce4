"""What stores of one process share: compiled statements, the schema's DDL, an engine.

A replay opens two stores and the pytest plugin a new one per fixture test; each
used to compile the same statements and the same schema again. These tests hold
the sharing to what is safe: stores still read only their own file, a
PostgreSQL engine keeps its own cache, and a store made from the shared DDL has
exactly the schema ``create_all`` makes. A store opened beside another (a
replay's recorder beside the store the replay reads) shares its engine and
leaves it open.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
import sqlalchemy as sa
from conftest import imported, load_agent

from graphtape.recorder import Recorder, SqlStore
from graphtape.recorder import schema as S
from graphtape.recorder.store.compiled_cache import SQLITE_COMPILED, SharedCompiledCache
from graphtape.replay.fixture import import_fixture

ROOT = Path(__file__).resolve().parents[1]
INCIDENT = json.loads((ROOT / "fixtures" / "runs" / "demo-incident.json").read_text(encoding="utf-8"))
REACT = json.loads((ROOT / "fixtures" / "runs" / "demo-react.json").read_text(encoding="utf-8"))


def _read_all(store: SqlStore, run_id: str) -> tuple:
    """What a replay reads of a run, through the store API."""
    detail = store.run_detail(run_id)
    steps = store.step_details(run_id, "")
    calls = store.calls(run_id)
    return [r.id for r in store.list_runs()], detail.run.name, len(steps), [c.name for c in calls], detail.output


def test_a_second_sqlite_store_compiles_nothing_again_and_reads_its_own_file(tmp_path: Path) -> None:
    first_id = imported(tmp_path / "a.db", INCIDENT)
    second_id = imported(tmp_path / "b.db", REACT)
    first, second = SqlStore(tmp_path / "a.db", create=False), SqlStore(tmp_path / "b.db", create=False)
    try:
        seen_first = _read_all(first, first_id)
        compiled = len(SQLITE_COMPILED)
        seen_second = _read_all(second, second_id)
        # The same statements on another file (another engine, another dialect object): all found compiled.
        assert len(SQLITE_COMPILED) == compiled
        assert seen_first[0] == [first_id] and seen_second[0] == [second_id]
        assert seen_first[1:] != seen_second[1:]
        assert seen_second[3] == [c.name for c in second.calls(second_id)] and len(seen_second[3]) == 6
    finally:
        first.close()
        second.close()


def test_the_shared_cache_keys_by_how_a_dialect_compiles(tmp_path: Path) -> None:
    cache = SharedCompiledCache()
    lite_a = sa.create_engine(f"sqlite:///{tmp_path / 'a.db'}").dialect
    lite_b = sa.create_engine(f"sqlite:///{tmp_path / 'b.db'}").dialect
    pg = sa.create_engine("postgresql+psycopg://nobody@127.0.0.1:1/none").dialect  # never connects
    cache[(lite_a, "stmt", (), False, False)] = "compiled for SQLite"
    assert cache.get((lite_b, "stmt", (), False, False)) == "compiled for SQLite"
    assert cache.get((pg, "stmt", (), False, False)) is None
    assert cache.get((lite_b, "stmt", (), False, True)) is None  # executemany compiles differently
    # A key of another shape (a later SQLAlchemy) is kept as it is: per engine, as SQLAlchemy's own.
    cache["other"] = 1
    assert cache.get("other") == 1 and cache.get(("other",)) is None


def test_the_shared_cache_stays_bounded() -> None:
    cache = SharedCompiledCache(max_entries=3)
    for i in range(7):
        cache[("k", i)] = i
    assert len(cache) <= 3 and cache.get(("k", 6)) == 6


def test_a_postgresql_store_keeps_its_own_statement_cache(pg_url: str) -> None:
    store = SqlStore(pg_url)
    try:
        run_id = imported(pg_url, INCIDENT)
        before = len(SQLITE_COMPILED)
        assert _read_all(store, run_id)[0] == [run_id]
        assert len(SQLITE_COMPILED) == before
    finally:
        store.close()


def _schema(path: Path) -> list[tuple]:
    con = sqlite3.connect(path)
    try:
        return sorted(con.execute("SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"))
    finally:
        con.close()


def test_a_new_sqlite_store_has_exactly_the_schema_create_all_makes(tmp_path: Path) -> None:
    SqlStore(tmp_path / "store.db").close()
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'reference.db'}")
    try:
        S.metadata.create_all(engine)
    finally:
        engine.dispose()
    made, reference = _schema(tmp_path / "store.db"), _schema(tmp_path / "reference.db")
    assert made == reference
    kinds = {kind for kind, *_ in made}
    assert kinds == {"table", "index", "trigger"} and len(made) >= 20


def test_a_store_beside_another_shares_its_engine_and_leaves_it_open(store_url: str) -> None:
    owner = SqlStore(store_url)
    try:
        first = imported(store_url, INCIDENT)
        assert owner.has_run(first)
        idle = owner.engine.pool.checkedin()
        beside = SqlStore.beside(owner)
        assert beside.engine is owner.engine and beside.url == owner.url
        # Its own writing connection: what it writes, the owner reads.
        second = import_fixture(beside, REACT).run_id
        assert owner.has_run(second) and beside.has_run(first)
        beside.close()
        # Closing it closed its own connection only: the owner's pool keeps what it held.
        assert owner.engine.pool.checkedin() >= idle
        assert sorted(r.id for r in owner.list_runs()) == sorted([first, second])
    finally:
        owner.close()


def test_a_recorder_records_into_a_store_it_is_given(tmp_path: Path) -> None:
    owner = SqlStore(tmp_path / "store.db")
    try:
        graph = load_agent("react_agent").build_graph()
        recorder = Recorder(durability="exit", store=SqlStore.beside(owner))
        recorder.attach(graph).invoke(load_agent("react_agent").inputs_for())
        recorder.close()
        run = owner.get_run(recorder.last_run_id)
        assert run.status == "ok" and run.step_count > 0 and len(owner.calls(run.id)) > 0
        with pytest.raises(ValueError, match="db or an open store"):
            Recorder(tmp_path / "store.db", store=SqlStore.beside(owner))
    finally:
        owner.close()


def test_a_read_only_store_given_to_a_recorder_is_refused_as_one_opened_read_only(tmp_path: Path) -> None:
    from graphtape.recorder.errors import ReadOnlyStore

    SqlStore(tmp_path / "store.db").close()
    with pytest.raises(ReadOnlyStore, match="read-only"):
        Recorder(store=SqlStore(tmp_path / "store.db", read_only=True), strict=True)
