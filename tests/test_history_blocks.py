"""Long message histories are stored as shared blocks: a prompt or a Send packet one message longer
than the last stores only its new end, reads back as the same list everywhere (typed, plain, replay,
fixtures), and a store written so is marked for the graphtape that reads it."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import orjson
import pytest
import replay_graphs as G
from conftest import load_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.prebuilt import create_react_agent

from graphtape.recorder import Recorder, open_store
from graphtape.recorder import schema as S
from graphtape.recorder.codec import BLOB_REF, Decoder, Encoder, blob_hash
from graphtape.recorder.errors import StoreError
from graphtape.recorder.history_blocks import BLOCK_AT, CAT, LEAF
from graphtape.recorder.store import Batch, SqlStore, migrate_store
from graphtape.replay import export_fixture, import_fixture, read_fixture, replay, write_fixture

ScriptedChatModel = load_agent("scripted_model").ScriptedChatModel


class DictSink:
    """A blob sink keeping blobs in memory, as the store would (content-addressed)."""

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}

    def put_blob(self, data: bytes) -> str:
        h = blob_hash(data)
        self.blobs.setdefault(h, data)
        return h

    def trees(self) -> dict:
        return {h: orjson.loads(d) for h, d in self.blobs.items()}


def history(stop: int, start: int = 0) -> list[HumanMessage]:
    return [HumanMessage(content=f"message {i} " + "z" * 60, id=f"m{i}") for i in range(start, stop)]


@pytest.mark.parametrize("n", [BLOCK_AT - 1, BLOCK_AT, BLOCK_AT + 1, 47, 64, 100, 1000])
def test_a_history_of_any_length_decodes_to_itself(n: int) -> None:
    sink = DictSink()
    msgs = history(n)
    tree = Encoder(sink=sink).encode({"messages": msgs})
    trees = sink.trees()
    assert Decoder(trees, typed=True).decode(tree)["messages"] == msgs
    assert [m["id"] for m in Decoder(trees).decode(tree)["messages"]] == [f"m{i}" for i in range(n)]
    assert (f'"{CAT}"' in json.dumps(trees)) == (n >= BLOCK_AT)  # shorter lists are stored as they are


def test_a_history_one_message_longer_stores_only_its_new_end() -> None:
    sink = DictSink()
    enc = Encoder(sink=sink)
    msgs = history(1000)
    first = enc.encode(msgs)
    flat = len(orjson.dumps([{BLOB_REF: "0" * 32}] * len(msgs)))  # what each copy cost stored as a list
    before = set(sink.blobs)
    for n in range(1001, 1011):
        msgs = [*msgs, *history(n, n - 1)]
        enc.encode(msgs)
        enc.encode(msgs)  # a second copy in the same step (a prompt, a Send packet): nothing new
    new = [d for h, d in sink.blobs.items() if h not in before and b'"lc.msg"' not in d]
    per_step = sum(map(len, new)) / 10
    assert flat > 40_000 and per_step < 1_200, per_step
    # Identical histories make identical blobs in another run: the same reference.
    other = DictSink()
    assert Encoder(sink=other).encode(history(1000)) == first
    assert set(other.blobs) <= before


def test_blocks_are_aligned_so_every_longer_history_shares_them() -> None:
    sink = DictSink()
    enc = Encoder(sink=sink)
    enc.encode(history(4 * LEAF))
    leaves = {h for h, t in sink.trees().items() if type(t) is list}
    assert len(leaves) == 4
    longer = DictSink()
    Encoder(sink=longer).encode(history(7 * LEAF + 3))
    assert leaves <= set(longer.blobs)  # the first four leaves, made again by another run, are the same blobs


# -- a real agent, recorded, read, replayed, exported ------------------------------------------------


@tool
def lookup(n: int) -> str:
    """Look something up."""
    return f"result {n}: " + "x" * 40


def agent_script(turns: int) -> list[AIMessage]:
    calls = [AIMessage(content=f"step {i}", tool_calls=[{"name": "lookup", "args": {"n": i}, "id": f"call_{i}"}]) for i in range(turns)]
    return [*calls, AIMessage(content=f"all {turns} done")]


def agent():
    return create_react_agent(ScriptedChatModel(script=agent_script(6)), [lookup])


def agent_inputs(prefill: int) -> dict:
    return {"messages": [*history(prefill), HumanMessage(content="look everything up", id="ask")]}


def record(db: str, graph, inputs) -> str:
    with Recorder(db) as rec:
        rec.attach(graph).invoke(inputs, {"recursion_limit": 100})
        rec.flush()
        return rec.last_run_id


@pytest.fixture
def agent_run(tmp_path: Path) -> tuple[str, str]:
    db = str(tmp_path / "agent.db")
    return db, record(db, agent(), agent_inputs(70))


def test_an_agents_prompts_and_send_packets_read_back_whole(agent_run) -> None:
    db, run_id = agent_run
    store = open_store(db)
    try:
        prompts = [c.inputs["messages"] for c in store.calls(run_id) if c.kind == "model"]
        assert [len(p) for p in prompts] == [71 + 2 * i for i in range(7)]
        assert [m["id"] for m in prompts[-1][:70]] == [f"m{i}" for i in range(70)]
        assert [m["content"] for m in prompts[-1][-2:]] == ["step 5", "result 5: " + "x" * 40]
        sends = [s for d in store.step_details(run_id) for r in d.routes for s in r.sends]
        assert len(sends) == 6 and [len(s["arg"]["state"]["messages"]) for s in sends] == [72 + 2 * i for i in range(6)]
        typed = store.decode(store.calls(run_id, encoded=True)[-1].inputs, typed=True)["messages"]
        assert typed[0] == HumanMessage(content="message 0 " + "z" * 60, id="m0") and len(typed) == 83
        # Stored as blocks: the last prompt is one reference in its call row.
        raw = sqlite3.connect(db).execute("SELECT inputs FROM calls WHERE kind = 'model' ORDER BY started_at DESC LIMIT 1").fetchone()[0]
        assert list(json.loads(raw)["messages"]) == [BLOB_REF] and raw.count(BLOB_REF) == 1
    finally:
        store.close()


def test_an_agent_with_a_long_history_stores_little_per_superstep(tmp_path: Path) -> None:
    sizes = []
    for turns in (4, 12):
        db = tmp_path / f"a{turns}.db"
        graph = create_react_agent(ScriptedChatModel(script=agent_script(turns)), [lookup])
        record(str(db), graph, agent_inputs(1000))
        conn = sqlite3.connect(db)
        sizes.append(sum(conn.execute(f"SELECT SUM(LENGTH({col})) FROM {t}").fetchone()[0] or 0 for t, col in (("blobs", "data"), ("steps", "payload"), ("calls", "inputs"))))
        conn.close()
    per_superstep = (sizes[1] - sizes[0]) / 16  # 8 more tool turns, two supersteps each
    assert per_superstep < 2_500, per_superstep  # stored as lists, every prompt and Send packet cost ~40 KB here


def test_a_replay_of_an_agent_with_a_long_history_compares_equal_and_finds_a_change(agent_run) -> None:
    db, run_id = agent_run
    assert not replay(run_id, agent(), db=db).diverged
    changed = replay(run_id, agent(), db=db, overrides={"lookup": lambda n: f"result {n}: changed"})
    kinds = {(d.kind, d.step) for d in changed.divergences}
    assert ("call", 2) in kinds or ("state", 2) in kinds, changed.divergences


def test_send_packets_holding_a_long_history_compare_block_by_block(tmp_path: Path) -> None:
    db = str(tmp_path / "send.db")
    run_id = record(db, G.send_history_graph(stop=80), {"messages": [HumanMessage(content=f"hello {i}") for i in range(70)], "done": 0})
    assert not replay(run_id, G.send_history_graph(stop=80), db=db).diverged  # message ids differ: blocks differ, equal once normalized
    result = replay(run_id, G.send_history_graph(suffix="!", stop=80), db=db)
    d = next(d for d in result.divergences if d.kind == "route")
    assert d.step == 1 and d.node == "talk" and "same destinations" in d.what
    assert [s["arg"]["messages"][-1]["content"] for s in d.actual[0]["sends"]] == ["task 0!", "task 1!"]
    assert [len(s["arg"]["messages"]) for s in d.recorded[0]["sends"]] == [72, 72]


def as_fixture(db: str, run_id: str, tmp_path: Path) -> tuple[str, str]:
    """The run exported as a fixture and imported into a store of its own: (that store, the run)."""
    path = tmp_path / "fixture.json"
    store = open_store(db)
    try:
        write_fixture(path, export_fixture(store, run_id))
    finally:
        store.close()
    imported_db = str(tmp_path / "imported.db")
    store = open_store(imported_db, create=True)
    try:
        return imported_db, import_fixture(store, read_fixture(path)).run_id
    finally:
        store.close()


def test_a_fixture_holds_the_history_as_one_list_and_imports_back(agent_run, tmp_path: Path) -> None:
    imported_db, fixture_run = as_fixture(*agent_run, tmp_path)
    text = (tmp_path / "fixture.json").read_text()
    assert f'"{CAT}"' not in text  # a fixture does not depend on how a store cuts histories
    store = open_store(imported_db)
    try:
        prompts = [c.inputs["messages"] for c in store.calls(fixture_run) if c.kind == "model"]
        assert [len(p) for p in prompts] == [71 + 2 * i for i in range(7)]
        assert prompts[-1][0]["content"] == "message 0 " + "z" * 60
        # Stored as the recorder stores it: each prompt one reference to shared blocks, while the
        # state's own history stays a list of its messages (a frame appends to it).
        assert all(set(c.inputs["messages"]) == {BLOB_REF} for c in store.calls(fixture_run, encoded=True) if c.kind == "model")
        histories = [v["messages"] for _, v in store.frames(fixture_run, "") if "messages" in v]
        assert len(histories) >= 13 and all(type(h) is list and len(h) > BLOCK_AT for h in histories)
    finally:
        store.close()


def imported_as_lists(monkeypatch) -> None:
    """Import as an earlier graphtape did: every history as one list, never as blocks."""
    import graphtape.replay.fixture_import as fixture_import

    monkeypatch.setattr(fixture_import, "BLOCK_AT", 10**9)


@pytest.mark.parametrize("as_lists", [False, True], ids=["imported-as-recorded", "imported-as-lists"])
def test_a_replayed_fixture_compares_its_send_packets_as_stored(agent_run, tmp_path: Path, monkeypatch, as_lists: bool) -> None:
    # Imported now, the fixture's run stores each packet's history as the replay does (blocks);
    # imported by an earlier graphtape, as a list. Either way the packets (each holding the whole
    # history) are found equal without being decoded.
    if as_lists:
        imported_as_lists(monkeypatch)
    imported_db, fixture_run = as_fixture(*agent_run, tmp_path)
    store = open_store(imported_db)
    decoded_packets = []
    decode = store.decode

    def counting(tree, **kw):
        if b'"lg.send"' in orjson.dumps(tree):
            decoded_packets.append(tree)
        return decode(tree, **kw)

    monkeypatch.setattr(store, "decode", counting)
    try:
        result = replay(fixture_run, agent(), store=store, mode="strict")
        stored = [[s["arg"]["state"]["messages"] for d in store.step_details(run, encoded_routes=True) for r in d.routes for s in r.sends] for run in (fixture_run, result.run_id)]
    finally:
        store.close()
    assert not result.diverged, result.report()
    assert len(stored[0]) == len(stored[1]) == 6
    assert all(set(h) == {BLOB_REF} for h in stored[1])
    if as_lists:
        assert all(type(h) is list and len(h) > BLOCK_AT for h in stored[0])
    else:
        assert stored[0] == stored[1]  # the same blocks: equal by their hashes
    assert decoded_packets == []


@pytest.mark.parametrize("as_lists", [False, True], ids=["imported-as-recorded", "imported-as-lists"])
def test_a_replayed_fixture_still_finds_a_changed_send_packet(tmp_path: Path, monkeypatch, as_lists: bool) -> None:
    if as_lists:
        imported_as_lists(monkeypatch)
    db = str(tmp_path / "send.db")
    run_id = record(db, G.send_history_graph(stop=80), {"messages": [HumanMessage(content=f"hello {i}") for i in range(70)], "done": 0})
    imported_db, fixture_run = as_fixture(db, run_id, tmp_path)
    assert not replay(fixture_run, G.send_history_graph(stop=80), db=imported_db).diverged
    result = replay(fixture_run, G.send_history_graph(suffix="!", stop=80), db=imported_db)
    d = next(d for d in result.divergences if d.kind == "route")
    assert d.step == 1 and d.node == "talk" and "same destinations" in d.what
    assert [s["arg"]["messages"][-1]["content"] for s in d.actual[0]["sends"]] == ["task 0!", "task 1!"]
    assert [len(s["arg"]["messages"]) for s in d.recorded[0]["sends"]] == [72, 72]


# -- damaged or hostile blocks ---------------------------------------------------------------------


def hostile(store_url: str, trees: dict) -> SqlStore:
    writer = SqlStore(store_url, create=True)
    try:
        writer.write(Batch(blobs={h: (False, orjson.dumps(t)) for h, t in trees.items()}))
    finally:
        writer.close()
    return SqlStore(store_url)


def ref(i: int) -> dict:
    return {BLOB_REF: f"{i:032x}"}


@pytest.mark.parametrize("typed", [False, True], ids=["plain", "typed"])
def test_blocks_that_multiply_are_refused(store_url: str, typed: bool) -> None:
    """60 blocks each made of the next one twice: 2**60 items from a few kilobytes."""
    trees: dict = {f"{i:032x}": {"$t": CAT, "v": [ref(i + 1), ref(i + 1)]} for i in range(60)}
    trees[f"{60:032x}"] = ["item"] * 16
    store = hostile(store_url, trees)
    try:
        with pytest.raises(StoreError, match="expands to more than") as err:
            store.decode({"messages": ref(0)}, typed=typed)
        assert "\n" not in str(err.value)
        assert store.decode(ref(57), typed=typed) == ["item"] * 128  # lower down, small: read in full
    finally:
        store.close()


@pytest.mark.parametrize(
    "trees",
    [
        {f"{0:032x}": {"$t": CAT, "v": [ref(0)]}},  # a block made of itself
        {f"{0:032x}": {"$t": CAT, "v": [ref(1)]}, f"{1:032x}": {"$t": CAT, "v": [[1], ref(0)]}},  # a loop through two
        {f"{0:032x}": {"$t": CAT, "v": [ref(1)]}, f"{1:032x}": {"k": "not a list"}},  # a part that is not a list
        {f"{0:032x}": {"$t": CAT, "v": "abc"}},  # parts that are not a list
    ],
    ids=["self", "loop", "not-a-list", "parts-not-a-list"],
)
def test_damaged_blocks_fail_with_one_line(store_url: str, trees: dict) -> None:
    store = hostile(store_url, trees)
    try:
        for typed in (False, True):
            with pytest.raises(StoreError) as err:
                store.decode(ref(0), typed=typed)
            assert "\n" not in str(err.value) and "Traceback" not in str(err.value)
    finally:
        store.close()


def test_a_missing_block_reads_as_missing(sqlite_url: str) -> None:
    """As a missing message does: the rest of the history still reads (a store damaged by hand)."""
    store = hostile(sqlite_url, {f"{0:032x}": {"$t": CAT, "v": [ref(1), ["tail"]]}})
    try:
        for typed in (False, True):
            assert store.decode(ref(0), typed=typed) == [{"__type__": "missing-blob", "ref": f"{1:032x}"}, "tail"]
    finally:
        store.close()


# -- the schema version ------------------------------------------------------------------------------


def set_version(url: str, version: int) -> None:
    store = SqlStore(url, create=True)
    try:
        with store.engine.begin() as conn:
            conn.execute(S.meta.update().where(S.meta.c.key == "schema_version").values(value=str(version)))
    finally:
        store.close()


def version_of(url: str) -> str:
    store = SqlStore(url, create=False)
    try:
        with store.engine.connect() as conn:
            return conn.execute(S.meta.select().where(S.meta.c.key == "schema_version")).first().value
    finally:
        store.close()


def test_a_v4_store_is_read_as_it_is_and_raised_when_recorded_into(store_url: str) -> None:
    assert S.SCHEMA_VERSION >= 5 and 4 in S.UPGRADES_ON_OPEN
    record(store_url, agent(), agent_inputs(3))
    set_version(store_url, 4)  # as graphtape before history blocks left it: the same tables
    store = open_store(store_url, create=False)
    try:
        assert len(store.list_runs()) == 1
    finally:
        store.close()
    assert version_of(store_url) == "4"  # reading changed nothing: the graphtape before can still open it
    record(store_url, agent(), agent_inputs(70))  # recording writes history blocks: the store says v5 (or later) first
    assert version_of(store_url) == str(S.SCHEMA_VERSION)
    store = open_store(store_url)
    try:
        assert [len(c.inputs["messages"]) for c in store.calls(store.list_runs()[0].id) if c.kind == "model"][-1] == 83
    finally:
        store.close()


def test_gc_keeps_the_blocks_a_kept_run_shares_and_drops_the_rest(store_url: str) -> None:
    old = record(store_url, agent(), agent_inputs(100))
    kept = record(store_url, agent(), agent_inputs(70))  # its first 64 messages' blocks are the old run's
    store = open_store(store_url)
    try:
        before = store.stats()["tables"]["blobs"]["rows"]
        store.delete_run(old)
        report = store.gc(older_than_s=10**9)
        assert report.blobs > 0 and store.stats()["tables"]["blobs"]["rows"] < before
        fresh = SqlStore(store_url, create=False)  # cold caches: every block is read from the database
        try:
            prompts = [c.inputs["messages"] for c in fresh.calls(kept) if c.kind == "model"]
            assert [len(p) for p in prompts] == [71 + 2 * i for i in range(7)]
            assert all("missing" not in json.dumps(p) for p in prompts)
        finally:
            fresh.close()
    finally:
        store.close()


def test_migrate_raises_a_v4_store_by_hand(store_url: str) -> None:
    record(store_url, agent(), agent_inputs(3))
    set_version(store_url, 4)
    assert migrate_store(store_url)[1:] == (4, S.SCHEMA_VERSION)
    assert version_of(store_url) == str(S.SCHEMA_VERSION)
