"""Very long strings are stored as shared chunks: a text that grows or changes in one place each
superstep stores only what changed, reads back exactly (secrets scrubbed across the cuts), replays
and round-trips through fixtures as the one string it is, and a hostile store cannot join its
chunks into gigabytes."""

from __future__ import annotations

import random
from pathlib import Path
from typing import TypedDict

import orjson
import pytest
from langgraph.graph import END, START, StateGraph
from test_history_blocks import DictSink

from graphtape.recorder import Recorder, open_store
from graphtape.recorder import schema as S
from graphtape.recorder.codec import BLOB_REF, DecodeError, Decoder, Encoder, blob_hash
from graphtape.recorder.string_chunks import CHUNK, CHUNKED_AT, MAX_JOINED, SCAT
from graphtape.replay import export_fixture, import_fixture, read_fixture, replay, write_fixture

SECRET = "sk-abcdefghijklmnopqrstuvwxyz0123456789"


def text(n: int, seed: int = 1) -> str:
    rnd = random.Random(seed)
    return "".join(rnd.choice("abcdefghij klmnop\n") for _ in range(n))


class Doc(TypedDict):
    doc: str
    n: int


def growing_graph(steps: int, mode: str = "append"):
    def write(state: Doc) -> dict:
        doc = state["doc"]
        if mode == "append":
            doc += f"line {state['n']}: " + text(300, state["n"])
        else:  # a few characters changed in place, somewhere past the first chunk
            at = CHUNK + 1000 * state["n"]
            doc = doc[:at] + "EDIT" + doc[at + 4 :]
        return {"doc": doc, "n": state["n"] + 1}

    b = StateGraph(Doc)
    b.add_node("write", write)
    b.add_edge(START, "write")
    b.add_conditional_edges("write", lambda s: END if s["n"] >= steps else "write")
    return b.compile()


def record(db: str, steps: int, start: str, mode: str = "append") -> tuple[str, dict]:
    with Recorder(db) as rec:
        out = rec.attach(growing_graph(steps, mode)).invoke({"doc": start, "n": 0})
        rec.flush()
        return rec.last_run_id, out


def blob_bytes(db: str) -> int:
    store = open_store(db)
    try:
        return store.stats()["tables"]["blobs"]["bytes"]
    finally:
        store.close()


@pytest.mark.parametrize("length", [CHUNKED_AT - 1, CHUNKED_AT + 1, 5 * CHUNK, 5 * CHUNK + 7])
def test_a_long_string_of_any_length_decodes_to_itself(length: int) -> None:
    sink = DictSink()
    s = text(length)
    tree = Encoder(sink=sink).encode({"doc": s})
    trees = sink.trees()
    assert Decoder(trees, typed=True).decode(tree)["doc"] == s
    assert Decoder(trees).decode(tree)["doc"] == s
    assert (f'"{SCAT}"'.encode() in orjson.dumps(trees)) == (length > CHUNKED_AT)


@pytest.mark.parametrize("mode", ["append", "edit"])
def test_a_long_text_changed_each_step_stores_only_what_changed(tmp_path: Path, mode: str) -> None:
    start = text(6 * CHUNK)
    one = str(tmp_path / "one.db")
    record(one, 1, start, mode)
    many = str(tmp_path / "many.db")
    record(many, 12, start, mode)
    # Stored whole each time, twelve versions cost about twelve times one; as chunks, one
    # version plus a chunk (and a list of references) per step: six chunks, so about three times one.
    assert blob_bytes(many) < 3.5 * blob_bytes(one), (blob_bytes(many), blob_bytes(one))


def test_every_step_reads_back_exactly_and_a_secret_across_a_cut_is_scrubbed(store_url: str) -> None:
    # The key and its value straddle the first cut: scrubbed whole before the string is cut.
    start = text(CHUNK - 10) + f" api_key={SECRET} " + text(2 * CHUNK, seed=2)
    run_id, out = record(store_url, 4, start)
    store = open_store(store_url)
    try:
        steps = [s.step for s in store.list_steps(run_id) if s.checkpoint_id]
        states = [store.state_at(run_id, step) for step in steps]
    finally:
        store.close()
    docs = [s["doc"] for s in states if s.get("doc")]
    assert len(docs) == 5 and all(SECRET not in d for d in docs)
    assert docs[-1] == out["doc"].replace(SECRET, "[REDACTED]") and docs[-1] != out["doc"]
    assert [len(d) for d in docs] == sorted(len(d) for d in docs) and len(set(docs)) == 5


def test_a_run_with_long_texts_replays_clean_and_round_trips_through_a_fixture(tmp_path: Path) -> None:
    db = str(tmp_path / "rec.db")
    run_id, _ = record(db, 5, text(3 * CHUNK))
    assert not replay(run_id, growing_graph(5), db=db, mode="strict").diverged
    store = open_store(db)
    try:
        fixture = export_fixture(store, run_id)
        final = store.state_at(run_id, store.list_steps(run_id)[-1].step)["doc"]
    finally:
        store.close()
    path = tmp_path / "fixture.json"
    write_fixture(path, fixture)
    assert f'"{SCAT}"' not in path.read_text()  # a fixture holds the string whole: it does not depend on how a store cuts it
    other = open_store(str(tmp_path / "other.db"), create=True)
    try:
        imported = import_fixture(other, read_fixture(path)).run_id
        assert other.state_at(imported, other.list_steps(imported)[-1].step)["doc"] == final
        result = replay(imported, growing_graph(5), store=other, mode="strict")
        assert not result.diverged, result.divergences
    finally:
        other.close()


def test_a_change_in_a_long_text_is_reported_by_a_replay(tmp_path: Path) -> None:
    db = str(tmp_path / "rec.db")
    run_id, _ = record(db, 4, text(3 * CHUNK))
    result = replay(run_id, growing_graph(4, mode="edit"), db=db, mode="strict")
    assert result.diverged and result.first_divergence.kind == "state" and "'doc'" in result.first_divergence.what


def test_chunks_repeated_past_the_limit_are_refused_not_joined() -> None:
    chunk = "x" * CHUNK
    h = blob_hash(orjson.dumps(chunk))
    top = {"$t": SCAT, "v": [{BLOB_REF: h}] * (MAX_JOINED // CHUNK + 1)}
    with pytest.raises(DecodeError, match="more than"):
        Decoder({h: chunk, "top": top}).decode({BLOB_REF: "top"})
    with pytest.raises(DecodeError, match="not a string"):
        Decoder({h: chunk, "top": {"$t": SCAT, "v": [{BLOB_REF: h}, 5]}}).decode({BLOB_REF: "top"})


def test_a_chunk_written_out_again_is_charged_to_the_read_again() -> None:
    charged: list[int] = []
    chunk = "y" * CHUNK
    tree = {"$t": SCAT, "v": [chunk] * 10}  # as a store's blob cache hands one blob out again: one object
    assert len(Decoder({}, charge=charged.append).decode(tree)) == 10 * CHUNK
    assert sum(charged) == 9 * CHUNK


def test_a_v5_store_is_read_as_it_is_and_raised_when_recorded_into(tmp_path: Path) -> None:
    assert S.SCHEMA_VERSION == 6 and 5 in S.UPGRADES_ON_OPEN
    db = str(tmp_path / "old.db")
    record(db, 1, "short")
    store = open_store(db)
    try:
        with store.engine.begin() as conn:
            conn.execute(S.meta.update().where(S.meta.c.key == "schema_version").values(value="5"))
    finally:
        store.close()
    reader = open_store(db, create=False)
    try:
        assert len(reader.list_runs()) == 1
        with reader.engine.connect() as conn:
            assert conn.execute(S.meta.select().where(S.meta.c.key == "schema_version")).first().value == "5"
    finally:
        reader.close()
    record(db, 2, text(3 * CHUNK))  # recording writes string chunks: the store says v6 first
    reader = open_store(db, create=False)
    try:
        with reader.engine.connect() as conn:
            assert conn.execute(S.meta.select().where(S.meta.c.key == "schema_version")).first().value == "6"
    finally:
        reader.close()


def test_a_read_whose_budget_runs_out_on_a_long_string_says_so_not_that_it_is_malformed() -> None:
    from graphtape.recorder.errors import StoreError

    def charge(n: int) -> None:
        raise StoreError("this read would inflate and build more than 1 MB from stored data")

    tree = {"$t": SCAT, "v": ["y" * CHUNK] * 3}
    with pytest.raises(StoreError, match="^this read would inflate"):
        Decoder({}, charge=charge).decode(tree)
