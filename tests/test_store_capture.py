"""A graph's long-term memory store: every read and write recorded, reads answered by a replay.

Real components throughout: real compiled graphs, LangGraph's own ``InMemoryStore``
(and a store of our own that fails, for the recorded-error case), a real store file.
"""

from __future__ import annotations

import asyncio
from typing import Any, TypedDict

import pytest
from conftest import exported, imported
from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore, SearchOp
from langgraph.store.memory import InMemoryStore

from graphtape.recorder import Recorder, open_store
from graphtape.replay import replay
from graphtape.replay.fixture import dumps_fixture, parse_fixture
from graphtape.tui.cli import main

KEY = "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a"


class Visit(TypedDict, total=False):
    user: str
    greeting: str
    notes: int


def greet(state: Visit) -> dict[str, Any]:
    store = get_store()
    where = ("users", state["user"])
    prior = store.get(where, "profile")
    store.put(where, "profile", {"name": state["user"], "visits": (prior.value["visits"] + 1) if prior else 1})
    return {"greeting": f"hello again {state['user']}" if prior else f"hello {state['user']}"}


def recall(state: Visit) -> dict[str, Any]:
    store = get_store()
    hits = store.search(("users",), limit=5)
    spaces = store.list_namespaces(prefix=("users",))
    store.delete(("users", state["user"]), "scratch")
    return {"notes": len(hits) + len(spaces)}


def graph(store: BaseStore, greet_fn=greet) -> Any:
    b = StateGraph(Visit)
    b.add_node("greet", greet_fn)
    b.add_node("recall", recall)
    b.add_edge(START, "greet")
    b.add_edge("greet", "recall")
    b.add_edge("recall", END)
    return b.compile(store=store)


@pytest.fixture
def db(tmp_path):
    return str(tmp_path / "memory.db")


def record(db: str, store: BaseStore, runs: int = 2, user: str = "ada", **kw: Any) -> tuple[str, Any]:
    """Run the graph ``runs`` times for one user (the last run is a returning user's); its run id and result."""
    with Recorder(db, **kw) as rec:
        app = rec.attach(graph(store))
        for i in range(runs):
            out = app.invoke({"user": user}, {"configurable": {"thread_id": f"t{i}"}})
        rec.flush()
        return rec.last_run_id, out


def calls(db: str, run_id: str) -> list[Any]:
    store = open_store(db)
    try:
        return store.calls(run_id)
    finally:
        store.close()


def test_every_operation_is_recorded_with_what_it_asked_and_got(db):
    memory = InMemoryStore()
    run_id, out = record(db, memory)
    assert out == {"user": "ada", "greeting": "hello again ada", "notes": 2}
    got = [(c.kind, c.name, c.step, c.node) for c in calls(db, run_id)]
    assert got == [
        ("store", "get", 1, "greet"),
        ("store", "put", 1, "greet"),
        ("store", "search", 2, "recall"),
        ("store", "list_namespaces", 2, "recall"),
        ("store", "delete", 2, "recall"),
    ]
    get, put, search, spaces, delete = calls(db, run_id)
    assert get.inputs == {"namespace": ["users", "ada"], "key": "profile"}
    assert get.output["value"] == {"name": "ada", "visits": 1} and get.output["created_at"].startswith("20")
    assert put.inputs["value"] == {"name": "ada", "visits": 2} and put.output is None
    assert search.inputs == {"namespace_prefix": ["users"], "limit": 5, "offset": 0}
    assert [h["key"] for h in search.output] == ["profile"]
    assert spaces.output == [["users", "ada"]]
    assert delete.inputs == {"namespace": ["users", "ada"], "key": "scratch"}
    assert memory.get(("users", "ada"), "profile").value["visits"] == 2  # the real store got every write
    store = open_store(db)
    try:
        assert store.run_detail(run_id, output=False).config["store"] is True
    finally:
        store.close()


def test_an_async_graph_is_recorded_the_same(db):
    async def agreet(state: Visit) -> dict[str, Any]:
        store = get_store()
        prior = await store.aget(("users", state["user"]), "profile")
        await store.aput(("users", state["user"]), "profile", {"visits": 1})
        return {"greeting": "again" if prior else "first"}

    memory = InMemoryStore()
    with Recorder(db) as rec:
        app = rec.attach(graph(memory, agreet))
        for i in range(2):
            out = asyncio.run(app.ainvoke({"user": "bo"}, {"configurable": {"thread_id": f"a{i}"}}))
        rec.flush()
        run_id = rec.last_run_id
    assert out["greeting"] == "again"
    assert [c.name for c in calls(db, run_id)][:2] == ["get", "put"]
    result = replay(run_id, graph(InMemoryStore(), agreet), db=db)
    assert not result.diverged, result.divergences
    assert result.served["store"] == 5


def test_the_store_outside_a_run_is_untouched_and_still_the_users(db):
    memory = InMemoryStore()
    with Recorder(db) as rec:
        app = rec.attach(graph(memory))
        app.store.put(("users", "cy"), "profile", {"visits": 7})  # the user's own code, no run
        assert app.store.get(("users", "cy"), "profile").value == {"visits": 7}
        assert app.store.inner is memory
        again = rec.attach(app)  # attached twice: the store is wrapped once
        assert again.store.inner is memory
        again.invoke({"user": "cy"}, {"configurable": {"thread_id": "c"}})
        rec.flush()
        run_id = rec.last_run_id
    assert [c.name for c in calls(db, run_id)] == ["get", "put", "search", "list_namespaces", "delete"]
    assert memory.get(("users", "cy"), "profile").value == {"name": "cy", "visits": 8}


def test_a_strict_replay_answers_reads_from_the_recording_and_writes_nothing(db):
    memory = InMemoryStore()
    run_id, out = record(db, memory)
    # Today's store has moved on (more visits since), and a fixture in CI has none at all.
    for today in (memory, InMemoryStore()):
        before = [(i.namespace, i.key, i.value) for i in today.search(("users",))]
        result = replay(run_id, graph(today), db=db)
        assert not result.diverged, result.divergences
        assert result.final_state == out
        assert result.served["store"] == 5
        assert [(i.namespace, i.key, i.value) for i in today.search(("users",))] == before  # nothing written through
    # The replay is a recorded run too: its store calls are there, answered as recorded.
    assert [c.output for c in calls(db, result.run_id)][:1] == [c.output for c in calls(db, run_id)][:1]


def test_tools_mode_answers_reads_too_and_live_mode_reads_todays_store(db):
    memory = InMemoryStore()
    run_id, _ = record(db, memory, runs=1)  # a first visit...
    memory.put(("users", "ada"), "profile", {"name": "ada", "visits": 9})  # ...and the store moved on since
    assert not replay(run_id, graph(memory), db=db, mode="tools").diverged
    live = replay(run_id, graph(memory), db=db, mode="live")
    assert live.diverged and live.final_state["greeting"] == "hello again ada"
    assert memory.get(("users", "ada"), "profile").value["visits"] == 9  # a live replay writes nothing either


def test_a_read_the_recording_cannot_answer_stops_the_replay_and_says_what_it_asked(db):
    run_id, _ = record(db, InMemoryStore())

    def greet_by_other_key(state: Visit) -> dict[str, Any]:
        prior = get_store().get(("users", state["user"]), "settings")
        return {"greeting": f"settings {prior}"}

    result = replay(run_id, graph(InMemoryStore(), greet_by_other_key), db=db)
    assert result.diverged
    first = result.divergences[0]
    assert first.kind == "arguments" and first.node == "greet" and first.step == 1
    assert "store call 'get' has no matching recording (the replay stopped here)" in first.what
    assert first.actual == {"namespace": ["users", "ada"], "key": "settings"}
    assert first.recorded == {"namespace": ["users", "ada"], "key": "profile"}
    # Re-recording: the read goes to the (guarded) real store, and is still reported.
    live = replay(run_id, graph(InMemoryStore(), greet_by_other_key), db=db, on_miss="live")
    assert live.final_state["greeting"] == "settings None"
    assert any("it ran live" in d.what for d in live.divergences)


def test_a_changed_write_is_reported_and_the_replay_goes_on(db):
    run_id, _ = record(db, InMemoryStore())

    def greet_writing_more(state: Visit) -> dict[str, Any]:
        store = get_store()
        prior = store.get(("users", state["user"]), "profile")
        store.put(("users", state["user"]), "profile", {"name": state["user"], "visits": 99})
        return {"greeting": f"hello again {state['user']}" if prior else "hello"}

    today = InMemoryStore()
    result = replay(run_id, graph(today, greet_writing_more), db=db)
    kinds = [(d.kind, d.node, d.what) for d in result.divergences]
    assert ("arguments", "greet", "store call 'put' has no matching recording (the write was kept in the replay, as every replay's writes are)") in kinds
    assert result.final_state["notes"] == 2  # it went on to the end
    assert today.search(("users",)) == []


class FlakySearch(InMemoryStore):
    """A store whose searches fail (a vector index that is down)."""

    def batch(self, ops):
        ops = list(ops)
        if any(isinstance(op, SearchOp) for op in ops):
            raise ConnectionError("the index is down")
        return super().batch(ops)


def test_a_failed_operation_is_recorded_and_replayed_as_the_same_failure(db):
    def tolerant_recall(state: Visit) -> dict[str, Any]:
        try:
            return {"notes": len(get_store().search(("users",)))}
        except ConnectionError as exc:
            return {"notes": -1, "greeting": str(exc)}

    store = FlakySearch()
    b = StateGraph(Visit)
    b.add_node("recall", tolerant_recall)
    b.add_edge(START, "recall")
    b.add_edge("recall", END)
    with Recorder(db) as rec:
        out = rec.attach(b.compile(store=store)).invoke({"user": "ada"}, {"configurable": {"thread_id": "f"}})
        rec.flush()
        run_id = rec.last_run_id
    assert out["notes"] == -1
    (call,) = calls(db, run_id)
    assert call.error_type == "ConnectionError" and call.error_message == "the index is down"
    result = replay(run_id, b.compile(store=InMemoryStore()), db=db)  # today's index is up: the recording still fails it
    assert not result.diverged, result.divergences
    assert result.final_state["notes"] == -1


def test_a_secret_in_a_memory_is_redacted_in_the_recording(db):
    def greet_with_key(state: Visit) -> dict[str, Any]:
        get_store().put(("users", state["user"]), "creds", {"api_key": KEY, "note": f"uses {KEY}"})
        return {"greeting": "ok"}

    memory = InMemoryStore()
    with Recorder(db) as rec:
        rec.attach(graph(memory, greet_with_key)).invoke({"user": "ada"}, {"configurable": {"thread_id": "s"}})
        rec.flush()
        run_id = rec.last_run_id
    put = next(c for c in calls(db, run_id) if c.name == "put")
    assert KEY not in repr(put.inputs)
    assert memory.get(("users", "ada"), "creds").value["api_key"] == KEY  # the real store keeps what the node wrote


def test_a_recording_without_its_store_calls_reads_todays_store(db):
    """A run recorded before the graph had a store (or by an older graphtape): reads go to the store as it is."""
    b = StateGraph(Visit)
    b.add_node("greet", lambda s: {"greeting": "hello"})
    b.add_edge(START, "greet")
    b.add_edge("greet", END)
    with Recorder(db) as rec:
        rec.attach(b.compile()).invoke({"user": "ada"}, {"configurable": {"thread_id": "o"}})
        rec.flush()
        run_id = rec.last_run_id
    memory = InMemoryStore()
    memory.put(("users", "ada"), "profile", {"visits": 3})
    result = replay(run_id, graph(memory).copy(update={}), db=db, from_step=None)
    assert result.served.get("store") is None
    assert result.final_state["greeting"] == "hello again ada"  # read from today's store, and reported as a divergence
    assert result.diverged


def test_a_fixture_carries_the_store_calls_and_replays_with_an_empty_store(db, tmp_path):
    run_id, out = record(db, InMemoryStore())
    fixture = exported(db, run_id)
    assert fixture["config"]["store"] is True
    assert fixture["graphtape_fixture"] == 3  # store calls need v3 (a fixture without them stays v2)
    kinds = [c["kind"] for s in fixture["steps"] for c in s.get("calls", [])]
    assert kinds.count("store") == 5
    other = str(tmp_path / "ci.db")
    result = replay(imported(other, parse_fixture(dumps_fixture(fixture))), graph(InMemoryStore()), db=other)
    assert not result.diverged, result.divergences
    assert result.final_state == out


def test_show_lists_the_store_calls_of_a_step(db, capsys):
    run_id, _ = record(db, InMemoryStore())
    assert main(["show", run_id, "--step", "1", "--db", db]) == 0
    out = capsys.readouterr().out
    assert "store get" in out and "in node greet" in out
    assert "store put" in out and '"visits": 2' in out


def test_a_tampered_store_answer_fails_its_node_in_one_line_never_the_replay(db, tmp_path):
    run_id, _ = record(db, InMemoryStore())
    fixture = exported(db, run_id)
    get = next(c for s in fixture["steps"] for c in s.get("calls", []) if c["name"] == "get")
    get["output"] = {"key": ["not", "a", "key"], "value": "x"}  # someone edited the file
    other = str(tmp_path / "edited.db")
    result = replay(imported(other, parse_fixture(dumps_fixture(fixture))), graph(InMemoryStore()), db=other)
    assert result.diverged
    assert result.error is not None and result.error.startswith("DamagedStoreAnswer: the recorded answer to get at step 1 is damaged")


async def test_the_tui_counts_and_lists_a_steps_store_calls(db):
    from test_tui import calls_of_step, settle

    from graphtape.tui.app import build_app
    from graphtape.tui.widgets.timeline import step_cells

    run_id, _ = record(db, InMemoryStore())
    store = open_store(db)
    try:
        steps, counts = store.list_steps(run_id), store.call_counts(run_id)
    finally:
        store.close()
    assert [str(step_cells(s, counts.get(s.step, {}))[3]) for s in steps if s.step in (1, 2)] == ["S2", "S3"]
    app = build_app(db, run_id)
    async with app.run_test(size=(150, 44)) as pilot:
        await settle(app, pilot)
        panel = await calls_of_step(app, pilot, 2)
        options = panel.query_one("#call-list")
        prompts = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
        assert [p.split()[:2] for p in prompts] == [["store", "search"], ["store", "list_namespaces"], ["store", "delete"]]
        detail = "\n".join(str(r) for r in panel.query_one("#call-detail").content.renderables)
        assert '"namespace_prefix"' in detail and '"visits": 2' in detail


class TtlStore(InMemoryStore):
    """A store that takes a time to live per item (as PostgresStore does)."""

    supports_ttl = True
    ttl_config = {"default_ttl": 5, "refresh_on_read": True}


def test_a_store_with_ttl_keeps_it_through_recording_and_replay(db):
    memory = TtlStore()

    def greet_with_ttl(state: Visit) -> dict[str, Any]:
        store = get_store()
        store.put(("users", state["user"]), "session", {"open": True}, ttl=1)
        return {"greeting": "kept for a minute"}

    with Recorder(db) as rec:
        app = rec.attach(graph(memory, greet_with_ttl))
        assert app.store.supports_ttl and app.store.ttl_config == memory.ttl_config
        app.invoke({"user": "ada"}, {"configurable": {"thread_id": "ttl"}})
        rec.flush()
        run_id = rec.last_run_id
    assert memory.get(("users", "ada"), "session").value == {"open": True}
    result = replay(run_id, graph(TtlStore(), greet_with_ttl), db=db)
    assert not result.diverged, result.divergences


def test_diffing_two_runs_that_read_the_same_memories_written_at_other_times_finds_nothing(db, capsys):
    """An item's timestamps say when it was written, not what it holds: not a difference."""
    runs = []
    for _ in range(2):
        memory = InMemoryStore()
        memory.put(("users", "ada"), "profile", {"name": "ada", "visits": 1})  # written now, each time
        runs.append(record(db, memory, runs=1)[0])
    code, out = main(["--db", db, "diff", *runs]), capsys.readouterr().out
    assert code == 0 and "behaved the same" in out, out


def test_diffing_runs_of_other_models_names_a_store_read_as_a_store_read(db, capsys):
    from conftest import load_agent
    from langchain_core.messages import AIMessage, HumanMessage

    scripted = load_agent("scripted_model").ScriptedChatModel

    def greeter(model_name: str):
        model = scripted(script=lambda _m: AIMessage("hi"), model_name=model_name)

        def greet_with_model(state: Visit) -> dict[str, Any]:
            prior = get_store().get(("users", state["user"]), "profile")
            return {"greeting": model.invoke([HumanMessage(str(prior.value if prior else None))]).content}

        return greet_with_model

    runs = []
    for model_name, visits in (("small", 1), ("large", 2)):
        memory = InMemoryStore()
        memory.put(("users", "ada"), "profile", {"visits": visits})
        with Recorder(db) as rec:
            rec.attach(graph(memory, greeter(model_name))).invoke({"user": "ada"}, {"configurable": {"thread_id": model_name}})
            rec.flush()
            runs.append(rec.last_run_id)
    code, out = main(["--db", db, "diff", *runs]), capsys.readouterr().out
    assert code == 1
    assert "the runs asked other models" in out
    assert "store 'get' answered differently" in out, out


class Memo(TypedDict, total=False):
    user: str
    found: list


def _writes_then_searches(store: BaseStore):
    def write(s: Memo) -> dict:
        get_store().put(("mem", s["user"]), "k1", {"fact": "likes tea"})
        get_store().put(("mem", s["user"]), "k2", {"fact": "hates rain"})
        get_store().delete(("mem", s["user"]), "k2")
        return {}

    def read(s: Memo) -> dict:
        return {"found": [i.value["fact"] for i in get_store().search(("mem", s["user"]))]}

    b = StateGraph(Memo)
    b.add_node("write", write)
    b.add_node("read", read)
    b.add_edge(START, "write")
    b.add_edge("write", "read")
    b.add_edge("read", END)
    return b.compile(store=store)


@pytest.mark.parametrize("mode", ["live", "strict"])
def test_a_fork_searching_what_it_wrote_finds_it_and_the_real_store_stays_unwritten(db, mode):
    """A what-if run keeps its writes to itself; a later step that searches for them (not only a
    get by key) finds them, with what it deleted left out, as the recorded run did."""
    from graphtape.replay import fork

    real = InMemoryStore()
    with Recorder(db) as rec:
        out = rec.attach(_writes_then_searches(real)).invoke({"user": "alice", "found": []})
        run_id = rec.last_run_id
    assert out["found"] == ["likes tea"]
    result = fork(run_id, _writes_then_searches(real), 0, {"user": "bob"}, mode=mode, db=db)
    assert result.error is None, result.report()
    assert result.final_state["found"] == ["likes tea"]
    assert real.search(("mem", "bob")) == []  # the fork's writes never reached the store
    assert not replay(run_id, _writes_then_searches(real), mode="live", db=db).diverged
