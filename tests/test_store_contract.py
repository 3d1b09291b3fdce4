"""The store contract: one suite, run against every backend through ``store_url``.

Each test opens a real store (a SQLite file, or a fresh PostgreSQL schema) and
either records real compiled LangGraph graphs through ``Recorder`` or writes
``Batch``es directly where the store itself is under test. What a recording
reads back is compared with what LangGraph's own checkpointer holds.
"""

from __future__ import annotations

import dataclasses
import operator
import os
import random
import socket
import sqlite3
import stat
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Annotated, Any, Literal, TypedDict

import orjson
import pytest
import sqlalchemy as sa
from conftest import load_agent
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, RemoveMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from langgraph.types import Send

from graphtape.recorder import (
    AmbiguousRun,
    Recorder,
    RunNotFound,
    RunStore,
    SchemaVersionError,
    SqlStore,
    StepNotFound,
    StoreError,
    open_store,
)
from graphtape.recorder import schema as S
from graphtape.recorder.codec import BLOB_REF, Encoder, blob_hash, collect_refs
from graphtape.recorder.frames import MAX_CHAIN, FrameState
from graphtape.recorder.store import MAX_INFLATE, Batch, pack, unpack

# ---------------------------------------------------------------------------
# Graphs
# ---------------------------------------------------------------------------


class ChatState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    n: int
    items: Annotated[list[int], operator.add]


def talk(state: ChatState) -> dict:
    n = state["n"]
    call = {"name": "lookup", "args": {"q": n}, "id": f"call-{n}", "type": "tool_call"}
    return {
        "messages": [
            AIMessage(
                content=f"turn {n}",
                id=f"ai-{n}",
                tool_calls=[call],
                usage_metadata={"input_tokens": 3 + n, "output_tokens": 2, "total_tokens": 5 + n},
                response_metadata={"model_name": "scripted-1", "finish_reason": "tool_calls"},
            ),
            ToolMessage(content=f"result {n}", tool_call_id=f"call-{n}", id=f"tool-{n}", artifact={"rows": [n]}),
        ],
        "n": n + 1,
    }


def route(state: ChatState) -> Literal["talk", "fan"]:
    return "talk" if state["n"] < 3 else "fan"


def fan(state: ChatState) -> dict:
    # Edit a message in the middle of the list and remove another: the list is
    # replaced in the middle and shrinks, not only grows.
    return {"messages": [AIMessage(content="turn 1 (edited)", id="ai-1"), RemoveMessage(id="tool-0"), AIMessage("fanning out", id="ai-fan")]}


def spread(state: ChatState) -> list[Send]:
    return [Send("work", {"x": i}) for i in range(3)]


def work(arg: dict) -> dict:
    return {"items": [arg["x"] * 10]}


def chat_graph(checkpointer: Any = None) -> Any:
    b = StateGraph(ChatState)
    b.add_node("talk", talk)
    b.add_node("fan", fan)
    b.add_node("work", work)
    b.add_edge(START, "talk")
    b.add_conditional_edges("talk", route)
    b.add_conditional_edges("fan", spread, ["work"])
    b.add_edge("work", END)
    return b.compile(checkpointer=checkpointer)


def chat_input() -> dict:
    return {"messages": [SystemMessage("be brief", id="sys"), HumanMessage("hi there", id="h1")], "n": 0, "items": []}


class LongState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    n: int


def long_step(state: LongState) -> dict:
    n = state["n"]
    return {"messages": [AIMessage(f"step {n}: " + "words " * 20, id=f"m-{n}")], "n": n + 1}


def long_graph(steps: int, checkpointer: Any = None) -> Any:
    b = StateGraph(LongState)
    b.add_node("step", long_step)
    b.add_edge(START, "step")
    b.add_conditional_edges("step", lambda s: "step" if s["n"] < steps else END, ["step", END])
    return b.compile(checkpointer=checkpointer)


class Num(TypedDict):
    n: int


def sub_graph_parent(checkpointer: Any = None) -> Any:
    inner = StateGraph(Num)
    inner.add_node("double", lambda s: {"n": s["n"] * 2})
    inner.add_node("inc", lambda s: {"n": s["n"] + 1})
    inner.add_edge(START, "double")
    inner.add_edge("double", "inc")
    outer = StateGraph(Num)
    outer.add_node("prep", lambda s: {"n": s["n"] + 10})
    outer.add_node("child", inner.compile())
    outer.add_edge(START, "prep")
    outer.add_edge("prep", "child")
    return outer.compile(checkpointer=checkpointer)


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------

_EMPTY = (None, "", [], {})
_MESSAGE_TYPES = {"human", "ai", "tool", "system"}


def norm(value: Any) -> Any:
    """Plain, comparable data: messages become dicts without empty fields (both sides alike)."""
    if isinstance(value, BaseMessage):
        d = value.model_dump()
        return {k: norm(v) for k, v in d.items() if v not in _EMPTY}
    if isinstance(value, dict):
        if value.get("type") in _MESSAGE_TYPES and "content" in value:
            return {k: norm(v) for k, v in value.items() if v not in _EMPTY}
        return {k: norm(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [norm(v) for v in value]
    return value


def internal(channel: str) -> bool:
    return channel.startswith(("__", "branch:", "join:"))


@pytest.fixture
def recorder(store_url: str):
    rec = Recorder(store_url)
    yield rec
    rec.close()


def record(rec: Recorder, graph: Any, inputs: Any, config: dict | None = None, **attach: Any) -> tuple[str, Any]:
    out = rec.attach(graph, **attach).invoke(inputs, config)
    assert rec.flush()
    return rec.last_run_id, out


def run_row(run_id: str, *, started: float, name: str = "run", graph: str = "g", status: str = "ok", **fields: Any) -> dict:
    row = {"id": run_id, "name": name, "graph_name": graph, "status": status, "started_at": started, "step_count": 0}
    row.update(fields)
    return row


def history_by_step(graph: Any, config: dict) -> dict[int, Any]:
    out = {}
    for snap in graph.get_state_history(config):
        out.setdefault(snap.metadata["step"], snap)  # newest first: keep the latest per step
    return out


def raw(store_url: str, sql: str, **params: Any) -> list[Any]:
    engine = sa.create_engine(store_url if "://" in store_url else f"sqlite:///{store_url}")
    try:
        with engine.begin() as conn:
            result = conn.execute(sa.text(sql), params)
            return list(result) if result.returns_rows else []
    finally:
        engine.dispose()


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


# ---------------------------------------------------------------------------
# Opening and identity
# ---------------------------------------------------------------------------


def test_store_satisfies_the_protocol(store_url: str) -> None:
    store = open_store(store_url, create=True)
    try:
        assert isinstance(store, RunStore)
        assert store.list_runs() == [] and store.count_runs() == 0
    finally:
        store.close()


def test_reopening_keeps_runs(store_url: str) -> None:
    store = open_store(store_url, create=True)
    store.write(Batch(runs_new=[run_row("aaaa000000000001", started=1.0)]))
    store.close()
    again = open_store(store_url)
    try:
        assert [r.id for r in again.list_runs()] == ["aaaa000000000001"]
    finally:
        again.close()


# ---------------------------------------------------------------------------
# Run listing and run references (Batches written directly)
# ---------------------------------------------------------------------------


@pytest.fixture
def listed(store_url: str):
    store = open_store(store_url, create=True)
    store.write(
        Batch(
            runs_new=[
                run_row("a1b2c3d4e5f60001", started=100.0, name="support_bot", graph="Support"),
                run_row("a1b2c3d4e5f60002", started=200.0, name="supportXbot", graph="Support", status="error", error_message="ValueError: bad order id"),
                run_row("b7777777777777aa", started=300.0, name="research", graph="Research", tags='["nightly", "v2"]'),
                run_row("c0ffee0000000000", started=400.0, name="100% done", graph="Misc", status="interrupted", status_reason="interrupt"),
                run_row("c0ffee0000000001", started=400.0, name="tie", graph="Misc"),
            ]
        )
    )
    yield store
    store.close()


def test_runs_are_listed_newest_first_with_a_stable_tie_break(listed: SqlStore) -> None:
    ids = [r.id for r in listed.list_runs()]
    assert ids == ["c0ffee0000000001", "c0ffee0000000000", "b7777777777777aa", "a1b2c3d4e5f60002", "a1b2c3d4e5f60001"]
    assert [r.id for r in listed.list_runs(limit=2)] == ids[:2]
    assert [r.id for r in listed.list_runs(limit=2, offset=2)] == ids[2:4]
    assert listed.count_runs() == 5
    # last~N counts through the same order.
    assert [listed.resolve_run(f"last~{i}") for i in range(5)] == ids


def test_last_n_counts_recorded_runs_only(listed: SqlStore) -> None:
    """Replays and forks are reached by id: ``last~N`` and its error count the recorded runs."""
    listed.write(Batch(runs_new=[run_row("d00d000000000001", started=500.0, name="replay", parent_run_id="c0ffee0000000001")]))
    assert listed.resolve_run("last") == "c0ffee0000000001"
    assert listed.resolve_run("last~4") == "a1b2c3d4e5f60001"
    with pytest.raises(RunNotFound, match=r"'last~5' goes back further than the 5 recorded run\(s\)"):
        listed.resolve_run("last~5")


def test_runs_filter_by_status(listed: SqlStore) -> None:
    assert [r.id for r in listed.list_runs(status="error")] == ["a1b2c3d4e5f60002"]
    assert [r.id for r in listed.list_runs(status="interrupted")] == ["c0ffee0000000000"]
    assert listed.list_runs(status="running") == []
    err = listed.get_run("a1b2c3d4e5f60002")
    assert (err.status, err.error_message) == ("error", "ValueError: bad order id")


def test_runs_text_search(listed: SqlStore) -> None:
    def ids(text: str) -> set[str]:
        return {r.id for r in listed.list_runs(text=text)}

    assert ids("SUPPORT") == {"a1b2c3d4e5f60001", "a1b2c3d4e5f60002"}  # name and graph, any case
    assert ids("bad order") == {"a1b2c3d4e5f60002"}  # error message
    assert ids("nightly") == {"b7777777777777aa"}  # tags
    assert ids("b7777") == {"b7777777777777aa"}  # id prefix
    # LIKE wildcards in the search text are literal characters.
    assert ids("support_bot") == {"a1b2c3d4e5f60001"}
    assert ids("100%") == {"c0ffee0000000000"}
    assert ids("%") == {"c0ffee0000000000"}
    assert ids("nothing like this") == set()
    assert {r.id for r in listed.list_runs(text="support", status="error")} == {"a1b2c3d4e5f60002"}


def test_resolve_run_references(listed: SqlStore) -> None:
    assert listed.resolve_run("b7777777777777aa") == "b7777777777777aa"
    assert listed.resolve_run("b7") == "b7777777777777aa"
    assert listed.resolve_run("  a1b2c3d4e5f60002 ") == "a1b2c3d4e5f60002"
    assert listed.resolve_run("last") == "c0ffee0000000001"
    assert listed.resolve_run("last~1") == "c0ffee0000000000"
    assert listed.get_run("last~2").name == "research"
    with pytest.raises(AmbiguousRun, match="a1b2c3d4e5f60001.*a1b2c3d4e5f60002"):
        listed.resolve_run("a1b2")
    with pytest.raises(RunNotFound, match="zzz"):
        listed.resolve_run("zzz")
    with pytest.raises(RunNotFound):
        listed.resolve_run("B7")  # ids are case-sensitive on every backend
    with pytest.raises(RunNotFound, match="further"):
        listed.resolve_run("last~5")
    for bad in ("last~x", "last~-1", "last~"):
        with pytest.raises(RunNotFound, match="last~N"):
            listed.resolve_run(bad)
    with pytest.raises(RunNotFound):
        listed.resolve_run("")
    with pytest.raises(RunNotFound):
        listed.get_run("nope")
    with pytest.raises(RunNotFound):
        listed.resolve_run("a1b2%")  # a wildcard is not a prefix
    # A run's name, when no id starts with it: its newest run (as every command takes it).
    assert listed.resolve_run("research") == "b7777777777777aa"
    assert listed.resolve_run("100% done") == "c0ffee0000000000"
    with pytest.raises(RunNotFound):
        listed.resolve_run("support")  # names match whole, not as a prefix


def test_has_run_takes_whole_ids_only(listed: SqlStore) -> None:
    assert listed.has_run("b7777777777777aa") and listed.has_run("c0ffee0000000000")
    # Not a prefix, a name or an alias, which resolve_run would take.
    assert not any(listed.has_run(ref) for ref in ("b7", "research", "last", "B7777777777777AA", "b7777777777777aa ", ""))


def test_text_no_store_can_hold_as_it_is_is_found_in_names_and_is_no_id(listed: SqlStore) -> None:
    """A name holding a lone surrogate, NUL or the column escape itself is stored escaped
    (``column_text``) and found by every filter as it was given; an id or search text holding one
    (a run id typed in another encoding than UTF-8) matches no id, and is not damage."""
    odd = {"d1000000000000a1": "caf\udce9-one", "d1000000000000a2": "caf\udce9\udce9", "d1000000000000a3": "nul\x00name", "d1000000000000a4": "esc\U0010ffffname", "d1000000000000a5": "cafe"}
    listed.write(Batch(runs_new=[run_row(i, started=500.0 + k, name=n) for k, (i, n) in enumerate(odd.items())]))

    def ids(**filters: Any) -> set[str]:
        return {r.id for r in listed.list_runs(**filters)}

    assert ids(name="caf\udce9-one") == {"d1000000000000a1"}
    assert ids(name="caf\udce9*") == {"d1000000000000a1", "d1000000000000a2"}
    assert ids(name="caf*") == {"d1000000000000a1", "d1000000000000a2", "d1000000000000a5"}
    assert ids(name="esc\U0010ffff*") == {"d1000000000000a4"}
    assert ids(text="\udce9") == {"d1000000000000a1", "d1000000000000a2"}
    assert ids(text="\x00") == {"d1000000000000a3"}
    assert ids(text="\U0010ffff") == {"d1000000000000a4"}
    for ref, run_id in [("caf\udce9-one", "d1000000000000a1"), ("nul\x00name", "d1000000000000a3"), ("esc\U0010ffffname", "d1000000000000a4")]:
        assert listed.resolve_run(ref) == run_id
    for bad in ("abc\udcff", "d1\udcff", "x\x00"):
        with pytest.raises(RunNotFound, match="no run matches"):
            listed.resolve_run(bad)
        assert not listed.has_run(bad)
        assert ids(text=bad) == set() and ids(name=bad) == set() and ids(name=bad + "*") == set()
    with pytest.raises(RunNotFound, match="not UTF-8"):
        listed.get_run("abc\udcff")


def test_exact_id_wins_over_longer_ids_it_prefixes(store_url: str) -> None:
    store = open_store(store_url, create=True)
    try:
        store.write(Batch(runs_new=[run_row("abc", started=1.0)] + [run_row(f"abc{i}", started=2.0 + i) for i in range(5)]))
        assert store.resolve_run("abc") == "abc"
        assert store.resolve_run("abc3") == "abc3"
        with pytest.raises(AmbiguousRun, match=r"\.\.\."):
            store.resolve_run("ab")
    finally:
        store.close()


def test_empty_store_references(store_url: str) -> None:
    store = open_store(store_url, create=True)
    try:
        with pytest.raises(RunNotFound, match="no runs yet"):
            store.resolve_run("last")
    finally:
        store.close()


# ---------------------------------------------------------------------------
# A recorded run against LangGraph's own history
# ---------------------------------------------------------------------------


@pytest.fixture
def chat_run(recorder: Recorder):
    graph = chat_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "chat-1"}}
    run_id, out = record(recorder, graph, chat_input(), config, name="chat")
    return recorder.store, run_id, graph, config, out


def test_recorded_run_is_listed(chat_run) -> None:
    store, run_id, graph, config, out = chat_run
    (run,) = store.list_runs()
    assert (run.id, run.name, run.status, run.thread_id) == (run_id, "chat", "ok", "chat-1")
    assert run.step_count == len(store.list_steps(run_id))  # every superstep stored, the input step too
    assert run.ended_at is not None and run.duration_s is not None and run.duration_s >= 0
    detail = store.run_detail(run_id[:6])
    assert detail.run == run
    assert norm(detail.inputs) == norm(chat_input())
    assert {n for n in detail.graph["nodes"]} >= {"talk", "fan", "work"}
    assert store.latest_run_for_thread("chat-1", run.graph_name) == run
    assert detail.output  # the final state
    bare = store.run_detail(run_id, output=False)  # what a replay's config needs, without reading the final state
    assert bare.output is None and (bare.config, bare.inputs, bare.graph) == (detail.config, detail.inputs, detail.graph)


def test_list_steps_and_step_detail(chat_run) -> None:
    store, run_id, graph, config, out = chat_run
    rows = store.list_steps(run_id)
    assert [s.seq for s in rows] == sorted(s.seq for s in rows)
    assert all(s.run_id == run_id and s.ns == "" for s in rows)
    history = history_by_step(graph, config)
    numbers = list(dict.fromkeys(s.step for s in rows))
    assert numbers == sorted(history)
    details = {n: store.step_detail(run_id, n) for n in numbers}
    assert [list(dict.fromkeys(t.node for t in details[n].tasks)) for n in numbers] == [[], ["__start__"], ["talk"], ["talk"], ["talk"], ["fan"], ["work"]]
    for n, detail in details.items():
        snap = history[n]
        s = detail.step
        assert s in rows and not s.pending
        assert s.checkpoint_id == snap.config["configurable"]["checkpoint_id"]
        assert s.parent_checkpoint_id == (snap.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        assert s.source == snap.metadata["source"]
        assert set(detail.next) == set(snap.next), f"step {n}"
    # Routes: a conditional edge that looped, then one that left, then a Send fan-out.
    steps = [details[n].step for n in numbers]
    talk_steps = [s.step for s in steps if s.nodes == ["talk"]]
    routes = [store.step_detail(run_id, st).routes for st in talk_steps]
    assert [(r[0].kind, r[0].router, r[0].destinations) for r in routes] == [
        ("conditional", "route", ["talk"]),
        ("conditional", "route", ["talk"]),
        ("conditional", "route", ["fan"]),
    ]
    fan_step = next(s for s in steps if s.nodes == ["fan"])
    (send,) = store.step_detail(run_id, fan_step.step).routes
    assert send.kind == "send" and send.destinations == ["work"] * 3
    assert [p["arg"] for p in send.sends] == [{"x": 0}, {"x": 1}, {"x": 2}]
    work_step = next(s for s in steps if s.nodes == ["work"])
    detail = store.step_detail(run_id, work_step.step)
    assert len(detail.tasks) == 3
    assert sorted(t.writes["items"][0] for t in detail.tasks) == [0, 10, 20]
    assert detail.next == []
    with pytest.raises(StepNotFound):
        store.step_detail(run_id, 99)
    with pytest.raises(StepNotFound):
        store.step_detail(run_id, 0, "no-such-namespace")
    with pytest.raises(StepNotFound):
        store.state_at(run_id, 99)


def test_state_at_matches_langgraph_history_at_every_step(chat_run, store_url: str) -> None:
    store, run_id, graph, config, out = chat_run
    history = history_by_step(graph, config)
    steps = [s.step for s in store.list_steps(run_id)]
    random.Random(7).shuffle(steps)  # random access, in no particular order
    fresh = open_store(store_url)  # nothing cached from recording
    try:
        for step in steps:
            snap = history[step]
            saved = graph.checkpointer.get_tuple(snap.config).checkpoint
            recorded = fresh.state_at(run_id, step)
            shown = {k: v for k, v in snap.values.items()}
            # LangGraph shows a reducer channel nobody wrote yet as its empty default;
            # the checkpoint (and so the recording) has no value for it.
            for k in set(shown) - set(recorded):
                assert shown[k] in ([], None) and k not in saved["channel_versions"], (step, k)
                del shown[k]
            assert not any(internal(k) for k in recorded)
            assert norm(recorded) == norm(shown), f"step {step}"
    finally:
        fresh.close()
    final = store.state_at(run_id, max(steps))
    assert [m["id"] for m in final["messages"]] == [m.id for m in out["messages"]]
    assert "tool-0" not in [m["id"] for m in final["messages"]]
    assert next(m for m in final["messages"] if m["id"] == "ai-1")["content"] == "turn 1 (edited)"


def test_state_at_typed_rebuilds_the_original_messages(chat_run) -> None:
    store, run_id, graph, config, out = chat_run
    history = history_by_step(graph, config)
    for step in history:
        typed = store.state_at(run_id, step, typed=True)
        for k, v in typed.items():
            assert v == history[step].values[k], f"step {step}, channel {k}"
    final = store.state_at(run_id, max(history), typed=True)
    assert final["messages"] == out["messages"]
    assert [type(m) for m in final["messages"]] == [type(m) for m in out["messages"]]
    ai = next(m for m in final["messages"] if m.id == "ai-2")
    assert ai.tool_calls[0]["args"] == {"q": 2} and ai.usage_metadata["total_tokens"] == 7
    tool_msg = next(m for m in final["messages"] if m.id == "tool-2")
    assert tool_msg.artifact == {"rows": [2]} and tool_msg.tool_call_id == "call-2"


def test_internal_channels_only_on_request(chat_run) -> None:
    store, run_id, graph, config, out = chat_run
    talk_step = next(s.step for s in store.list_steps(run_id) if s.nodes == ["talk"])
    plain = store.state_at(run_id, talk_step)
    full = store.state_at(run_id, talk_step, internal=True)
    assert set(plain) < set(full)
    assert all(internal(k) for k in set(full) - set(plain))


def test_step_rows_and_encoded_inputs_hand_over_the_recording_as_stored(chat_run) -> None:
    # What fixture export copies: rows unmerged, values still encoded, and the same run as the readers show.
    store, run_id, graph, config, out = chat_run
    rows = store.step_rows(run_id)
    assert [r.seq for r in rows] == sorted(r.seq for r in rows) and len({r.seq for r in rows}) == len(rows)
    assert sorted({r.step for r in rows}) == sorted({s.step for s in store.list_steps(run_id)})
    frames = FrameState()
    refs: set[str] = set()
    for r in rows:
        detail = store.step_detail(run_id, r.step)
        assert {t["id"] for t in r.payload["t"]} <= {t.task_id for t in detail.tasks}
        assert all("ti" not in item for item in r.payload["r"] + r.payload["e"])  # compact forms undone
        assert all(isinstance(t.get("t0"), float) for t in r.payload["t"] if t.get("ms") is not None)
        if not r.pending and r.payload.get("s") is not None:
            frames.apply(r.payload["s"], r.is_key)
            values = {k: v for k, v in frames.values.items() if not internal(k)}
            collect_refs(values, refs)
            assert store.decode(values) == store.state_at(run_id, r.step), f"step {r.step}"
    assert refs and set(store.blobs(refs)) == refs  # messages stay blob references, and the store has them
    assert any(r.is_key for r in rows) and not all(r.is_key for r in rows if r.payload.get("s") is not None)
    inputs, config_tree = store.encoded_inputs(run_id)
    assert collect_refs(inputs)  # the input messages are blobs
    detail = store.run_detail(run_id)
    assert store.decode(inputs) == detail.inputs and store.decode(config_tree) == detail.config
    assert store.step_rows("no-such-run") == []
    # Read a page at a time (fixture export streams a long run): the same rows, and marks that say where each step's are.
    assert [(r.seq, r.payload) for r in store.iter_step_rows(run_id, page=2)] == [(r.seq, r.payload) for r in rows]
    assert store.step_row_marks(run_id) == [(r.seq, r.step, r.pending) for r in rows]
    assert list(store.iter_step_rows("no-such-run", page=2)) == [] and store.step_row_marks("no-such-run") == []
    with pytest.raises(RunNotFound):
        store.encoded_inputs("no-such-run")


def test_encoded_reads_refuse_damaged_json(recorder: Recorder, store_url: str) -> None:
    run_id, _ = record(recorder, chat_graph(), chat_input())
    raw(store_url, "UPDATE runs SET inputs = :t WHERE id = :r", t='{"messages": [', r=run_id)
    with pytest.raises(StoreError, match="damaged data"):
        recorder.store.encoded_inputs(run_id)


def test_checkpoint_at_equals_langgraphs_checkpoint(chat_run) -> None:
    store, run_id, graph, config, out = chat_run
    for step, snap in history_by_step(graph, config).items():
        tup = graph.checkpointer.get_tuple(snap.config)
        cp = store.checkpoint_at(run_id, step)
        assert cp.checkpoint_id == tup.checkpoint["id"]
        assert cp.parent_checkpoint_id == (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        assert (cp.step, cp.source, cp.ns) == (tup.metadata["step"], tup.metadata["source"], "")
        assert cp.channel_versions == tup.checkpoint["channel_versions"], f"step {step}"
        assert cp.versions_seen == tup.checkpoint["versions_seen"], f"step {step}"
        assert cp.channel_values == tup.checkpoint["channel_values"], f"step {step}"


class SlowWrites(InMemorySaver):
    """A checkpointer whose first task's writes land late, as on a busy database.

    With LangGraph's default (async) durability the next checkpoint is saved
    before these writes return, so they reach the recorder out of order.
    """

    def put_writes(self, config, writes, task_id, task_path=""):  # type: ignore[override]
        if any(ch == "branch:to:talk" for ch, _ in writes):
            time.sleep(0.2)
        return super().put_writes(config, writes, task_id, task_path)


def test_late_writes_do_not_confuse_reads(recorder: Recorder) -> None:
    graph = chat_graph(SlowWrites())
    config = {"configurable": {"thread_id": "late"}}
    run_id, out = record(recorder, graph, chat_input(), config)
    store = recorder.store
    history = history_by_step(graph, config)
    assert sorted({s.step for s in store.list_steps(run_id)}) == sorted(history)
    for step, snap in history.items():
        detail = store.step_detail(run_id, step)
        assert not detail.step.pending and detail.step.checkpoint_id == snap.config["configurable"]["checkpoint_id"]
        assert set(detail.next) == set(snap.next), f"step {step}"
        assert norm({k: v for k, v in snap.values.items() if v != []}) == norm({k: v for k, v in store.state_at(run_id, step).items() if v != []}), f"step {step}"
        assert store.checkpoint_at(run_id, step).channel_versions == graph.checkpointer.get_tuple(snap.config).checkpoint["channel_versions"]
    start = store.step_detail(run_id, 0)
    assert [t.node for t in start.tasks] == ["__start__"]
    assert [(r.source, r.destinations) for r in start.routes] == [("__start__", ["talk"])]


class Approval(TypedDict):
    draft: str
    approved: bool


def ask(state: Approval) -> dict:
    from langgraph.types import interrupt

    return {"approved": interrupt({"question": f"send {state['draft']!r}?"})}


def approval_graph(checkpointer: Any) -> Any:
    b = StateGraph(Approval)
    b.add_node("write", lambda s: {"draft": s["draft"] + "!"})
    b.add_node("ask", ask)
    b.add_edge(START, "write")
    b.add_edge("write", "ask")
    return b.compile(checkpointer=checkpointer)


def test_interrupted_step_reads_the_state_before_it(recorder: Recorder) -> None:
    from langgraph.types import Command

    graph = recorder.attach(approval_graph(InMemorySaver()))
    config = {"configurable": {"thread_id": "ask"}}
    graph.invoke({"draft": "hello", "approved": False}, config)
    assert recorder.flush()
    store = recorder.store
    run_id = recorder.last_run_id
    run = store.get_run(run_id)
    assert (run.status, run.status_reason) == ("interrupted", "interrupt")
    last = store.list_steps(run_id)[-1]
    assert last.pending and last.has_interrupt and last.nodes == ["ask"]
    assert store.state_at(run_id, last.step) == store.state_at(run_id, last.step - 1) == {"draft": "hello!", "approved": False}
    with pytest.raises(StepNotFound, match="never completed"):
        store.checkpoint_at(run_id, last.step)
    assert store.state_reads(run_id, last.step) >= 1

    graph.invoke(Command(resume=True), config)
    assert recorder.flush()
    assert recorder.last_run_id == run_id, "a resume continues its run"
    assert store.get_run(run_id).status == "ok"
    done = store.step_detail(run_id, last.step)
    assert not done.step.pending
    # One step read alone is the step list's entry: the interrupted row and its resume, merged.
    listed = store.list_steps(run_id)
    assert [store.step_info(run_id, s.step) for s in listed] == listed
    assert store.step_info(run_id, last.step).has_interrupt and not store.step_info(run_id, last.step).pending
    assert store.step_range(run_id) == (listed[0].step, listed[-1].step) and store.step_range(run_id, "nope") is None
    with pytest.raises(StepNotFound, match="no step 99"):
        store.step_info(run_id, 99)
    assert {e.kind for e in done.events} >= {"interrupt", "resume"}
    assert store.state_at(run_id, last.step) == {"draft": "hello!", "approved": True}
    assert store.checkpoint_at(run_id, last.step).channel_values["approved"] is True


def test_blobs_are_stored_once(chat_run, store_url: str) -> None:
    store, run_id, graph, config, out = chat_run

    def copies_of(message_id: str) -> int:
        hashes = [r[0] for r in raw(store_url, "SELECT hash FROM blobs")]
        trees = store.blobs(hashes)
        return sum(1 for t in trees.values() if isinstance(t, dict) and t.get("$t") == "lc.msg" and t["v"].get("id") == message_id)

    steps = [s.step for s in store.list_steps(run_id) if s.step >= 0]
    assert all("h1" in [m["id"] for m in store.state_at(run_id, st)["messages"]] for st in steps)
    assert copies_of("h1") == 1
    # A second run with the same messages shares the blobs (content addressed).
    rec = Recorder(store_url)
    try:
        record(rec, chat_graph(InMemorySaver()), chat_input(), {"configurable": {"thread_id": "chat-2"}})
    finally:
        rec.close()
    assert store.count_runs() == 2
    assert copies_of("h1") == 1 and copies_of("ai-2") == 1


def test_same_blob_from_two_store_instances(store_url: str) -> None:
    first, second = open_store(store_url, create=True), open_store(store_url)
    try:
        blob = (False, orjson.dumps({"$t": "lc.msg", "cls": "HumanMessage", "v": {"content": "x"}}))
        first.write(Batch(blobs={"0" * 32: blob}))
        second.write(Batch(blobs={"0" * 32: blob}))  # this instance does not know it is there
        assert raw(store_url, "SELECT COUNT(*) FROM blobs")[0][0] == 1
        assert second.blobs(["0" * 32])["0" * 32]["v"] == {"content": "x"}
    finally:
        first.close()
        second.close()


def test_store_resolves_blobs_inside_blobs(store_url: str) -> None:
    """A message with a long content is a blob holding a blob: both come back, typed and plain."""
    blobs: dict[str, bytes] = {}

    class StoreSink:
        def put_blob(self, data: bytes) -> str:
            blobs[blob_hash(data)] = data
            return blob_hash(data)

    long = "z" * 3000
    tree = Encoder(sink=StoreSink()).encode({"messages": [HumanMessage(long, id="h1")]})
    assert len(blobs) == 2
    store = SqlStore(store_url, create=True)
    try:
        store.write(Batch(blobs={h: (False, data) for h, data in blobs.items()}))
        plain = store.decode(tree)
        assert plain == {"messages": [{"type": "human", "content": long, "id": "h1"}]}
        assert store.decode(tree)["messages"][0] is plain["messages"][0]  # decoded once, shared after
        assert store.decode(tree, typed=True) == {"messages": [HumanMessage(long, id="h1")]}
        fresh = SqlStore(store_url)  # cold caches: the inner blob is fetched in a second round
        try:
            assert fresh.decode(tree, typed=True)["messages"][0].content == long
        finally:
            fresh.close()
    finally:
        store.close()


def hostile_blobs(store_url: str, trees: dict[str, Any]) -> SqlStore:
    """A store holding these blob trees under these hashes, as a hand-edited store could."""
    writer = SqlStore(store_url, create=True)
    try:
        writer.write(Batch(blobs={h: (False, orjson.dumps(t)) for h, t in trees.items()}))
    finally:
        writer.close()
    return SqlStore(store_url)  # cold caches: every blob is read and resolved


def ref(i: int) -> dict[str, str]:
    return {BLOB_REF: f"{i:032x}"}


@pytest.mark.parametrize("typed", [False, True], ids=["plain", "typed"])
def test_blobs_that_multiply_are_refused(store_url: str, typed: bool) -> None:
    """60 blobs each referencing the next twice: 2**60 values from a few kilobytes."""
    trees: dict[str, Any] = {f"{i:032x}": [ref(i + 1), ref(i + 1)] for i in range(60)}
    trees[f"{60:032x}"] = "leaf " * 20
    store = hostile_blobs(store_url, trees)
    try:
        with pytest.raises(StoreError, match="expands to more than") as err:
            store.decode({"state": ref(0)}, typed=typed)
        assert "\n" not in str(err.value)
        with pytest.raises(StoreError, match="expands to more than"):
            store.blobs([f"{0:032x}"])
        # Lower down the chain the expansion is small, and reads in full.
        expected: Any = "leaf " * 20
        for _ in range(5):
            expected = [expected, expected]
        assert store.decode(ref(55), typed=typed) == expected
    finally:
        store.close()


def test_blobs_that_loop_or_chain_deeply_fail_clearly(store_url: str) -> None:
    loop = {f"{0:032x}": [ref(1)], f"{1:032x}": {"k": ref(0)}}
    chain = {f"{i:032x}": [ref(i + 1)] for i in range(10, 2000)} | {f"{2000:032x}": "end"}
    store = hostile_blobs(store_url, loop | chain)
    try:
        for top in (0, 1, 10):
            for typed in (False, True):
                with pytest.raises(StoreError, match="refers back to itself|levels deep") as err:
                    store.decode(ref(top), typed=typed)
                assert "\n" not in str(err.value)
        assert store.decode(ref(1990), typed=False) == [[[[[[[[[["end"]]]]]]]]]]
    finally:
        store.close()


# ---------------------------------------------------------------------------
# Long runs: deltas, keyframes, bounded reads
# ---------------------------------------------------------------------------


def test_long_run_uses_deltas_and_bounded_reads(recorder: Recorder, store_url: str) -> None:
    steps = 300
    graph = long_graph(steps, InMemorySaver())
    config = {"configurable": {"thread_id": "long"}, "recursion_limit": steps + 10}
    run_id, out = record(recorder, graph, {"messages": [HumanMessage("go", id="go")], "n": 0}, config)
    store = recorder.store
    listed = store.list_steps(run_id)
    assert len({s.step for s in listed}) == steps + 2  # input step, start step, one per node run
    keys = raw(store_url, "SELECT COUNT(*) FROM steps WHERE run_id = :r AND is_key = :t", r=run_id, t=True)[0][0]
    # A keyframe is due once the deltas since the last one add up to its size, so
    # gaps between keyframes widen as the state grows: ~30 for 300 steps here.
    assert keys <= len(listed) // 8, f"{keys} keyframes for {len(listed)} steps"
    frame_bytes = sum(len(r[0]) for r in raw(store_url, "SELECT payload FROM steps WHERE run_id = :r", r=run_id))
    # Every step holding its whole message list would be quadratic: ~300 * 150 refs * ~45 bytes.
    assert frame_bytes < steps * 150 * 45 / 8, frame_bytes

    reads = [store.state_reads(run_id, s.step) for s in listed]
    assert max(reads) <= MAX_CHAIN
    assert 1 <= store.state_reads(run_id, 150) <= MAX_CHAIN

    history = history_by_step(graph, config)
    for step in [150, 0, 1, steps, *random.Random(3).sample(range(steps), 8)]:
        recorded = store.state_at(run_id, step)
        assert norm(recorded) == norm(history[step].values), f"step {step}"
    # Every step, walking back then forth as the TUI steps (parsed keyframes reused between
    # reads), and with long lists deferred, reads back what LangGraph held.
    order = [*reversed(range(steps + 1)), *range(0, steps + 1, 7)]
    assert all(norm(store.state_at(run_id, step)) == norm(history[step].values) for step in order)
    deferred = store.state_at(run_id, steps, deferred=True)
    assert norm({k: list(v) if k == "messages" else v for k, v in deferred.items()}) == norm(history[steps].values)
    s150 = store.state_at(run_id, 150, typed=True)
    assert s150["messages"] == history[150].values["messages"] and len(s150["messages"]) == 151  # the input message and 150 replies
    assert store.state_at(run_id, steps, typed=True)["messages"] == out["messages"]
    # The first message sits in all 300 states and is stored once.
    hashes = [r[0] for r in raw(store_url, "SELECT hash FROM blobs")]
    assert sum(1 for t in store.blobs(hashes).values() if isinstance(t, dict) and t.get("v", {}).get("id") == "go") == 1


# ---------------------------------------------------------------------------
# Calls and namespaces
# ---------------------------------------------------------------------------


def test_calls_of_a_run(recorder: Recorder) -> None:
    scripted = load_agent("scripted_model")

    @tool
    def lookup(order_id: str) -> str:
        """Look an order up."""
        return f"{order_id}: shipped"

    model = scripted.ScriptedChatModel(
        script=[
            AIMessage("", tool_calls=[{"name": "lookup", "args": {"order_id": "A-1"}, "id": "c1"}]),
            "All shipped.",
        ]
    )
    bound = model.bind_tools([lookup])

    class St(TypedDict):
        messages: Annotated[list[AnyMessage], add_messages]

    b = StateGraph(St)
    b.add_node("agent", lambda s: {"messages": [bound.invoke(s["messages"])]})
    b.add_node("tools", ToolNode([lookup]))
    b.add_edge(START, "agent")
    b.add_conditional_edges("agent", lambda s: "tools" if s["messages"][-1].tool_calls else END, ["tools", END])
    b.add_edge("tools", "agent")
    run_id, out = record(recorder, b.compile(), {"messages": [HumanMessage("where is A-1?")]})
    store = recorder.store
    calls = store.calls(run_id)
    assert [(c.kind, c.name.split(":")[0], c.node) for c in calls] == [
        ("model", "ScriptedChatModel", "agent"),
        ("tool", "lookup", "tools"),
        ("model", "ScriptedChatModel", "agent"),
    ]
    assert [c.started_at for c in calls] == sorted(c.started_at for c in calls)
    assert all(c.node in [t.node for t in store.step_detail(run_id, c.step).tasks] for c in calls)
    first, used, last = calls
    assert first.inputs["messages"][-1]["content"] == "where is A-1?"
    assert first.output["tool_calls"][0]["args"] == {"order_id": "A-1"}
    assert first.input_tokens and first.total_tokens == first.input_tokens + first.output_tokens
    assert used.inputs["order_id"] == "A-1" and "shipped" in str(used.output)
    assert last.output["content"] == "All shipped." == out["messages"][-1].content
    assert [c.call_id for c in store.calls(run_id, step=used.step)] == [used.call_id]
    assert store.call_totals(run_id) == ({"model": 2, "tool": 1}, sum(c.total_tokens or 0 for c in calls)) and sum(c.total_tokens or 0 for c in calls) > 0
    assert store.call_totals("no-such-run") == ({}, 0)
    assert store.calls(run_id, ns="") == calls
    assert store.calls(run_id, ns="elsewhere") == []
    assert store.calls("no-such-run") == []
    encoded = store.calls(run_id, encoded=True)
    assert [dataclasses.replace(e, inputs=store.decode(e.inputs), output=store.decode(e.output)) for e in encoded] == calls
    assert collect_refs([e.inputs for e in encoded])  # messages in a model call's inputs stay blob references


def test_namespaces_of_subgraphs(recorder: Recorder) -> None:
    graph = sub_graph_parent(InMemorySaver())
    config = {"configurable": {"thread_id": "sub"}}
    run_id, out = record(recorder, graph, {"n": 1}, config)
    assert out == {"n": 23}
    store = recorder.store
    namespaces = store.namespaces(run_id)
    assert namespaces[0] == "" and len(namespaces) == 2 and namespaces[1].startswith("child:")
    child = namespaces[1]
    for s in store.list_steps(run_id, child):
        assert s.ns == child
        saved = graph.checkpointer.get_tuple({"configurable": {"thread_id": "sub", "checkpoint_ns": child, "checkpoint_id": s.checkpoint_id}})
        assert saved is not None, f"LangGraph has the subgraph checkpoint of step {s.step}"
        values = {k: v for k, v in saved.checkpoint["channel_values"].items() if not internal(k)}
        assert store.state_at(run_id, s.step, child) == values, (s, [(x.step, x.checkpoint_id, store.state_at(run_id, x.step, child)) for x in store.list_steps(run_id, child)])
        assert store.checkpoint_at(run_id, s.step, child).channel_versions == saved.checkpoint["channel_versions"]
    assert store.state_at(run_id, max(s.step for s in store.list_steps(run_id))) == {"n": 23}
    assert store.namespaces("no-such-run") == []
    graph_json = store.run_graph(run_id)
    assert graph_json == store.run_detail(run_id).graph
    assert graph_json["nodes"] == ["prep", "child"] and graph_json["subgraphs"]["child"]["nodes"] == ["double", "inc"]
    with pytest.raises(RunNotFound):
        store.run_graph("no-such-run")


def test_add_run_writes_a_whole_run_once(store_url: str) -> None:
    store = open_store(store_url, create=True)
    other = open_store(store_url)
    try:
        text = "a long string, stored once " * 10
        data = orjson.dumps(text)
        h = blob_hash(data)

        def batch() -> Batch:
            step = {"run_id": "imp1", "ns": "", "seq": 1, "step": 0, "created_at": 1.0, "is_key": True, "nodes": "a", "writes": "", "summary": "", "flags": 0,
                    "payload": pack({"t": [], "r": [], "e": [], "s": {"v": {"x": {BLOB_REF: h}}, "cv": {}, "vs": {}}})}
            return Batch(runs_new=[run_row("imp1", started=1.0)], steps=[step], blobs={h: (False, data)})

        assert store.add_run(batch()) is True
        assert store.add_run(batch()) is False and other.add_run(batch()) is False
        assert [r.id for r in store.list_runs()] == ["imp1"] and len(store.step_rows("imp1")) == 1
        assert store.state_at("imp1", 0) == {"x": text}
        two = batch()
        two.runs_new.append(run_row("imp2", started=2.0))
        with pytest.raises(ValueError, match="one new run"):
            store.add_run(two)
        assert store.count_runs() == 1
    finally:
        other.close()
        store.close()


# ---------------------------------------------------------------------------
# Killed runs
# ---------------------------------------------------------------------------


def test_runs_of_dead_processes_are_marked_killed(store_url: str) -> None:
    store = open_store(store_url, create=True)
    host = socket.gethostname()
    now = time.time()
    stale = now - 3600
    try:
        store.write(
            Batch(
                runs_new=[
                    run_row("dead000000000001", started=now - 10, status="running", owner_host=host, owner_pid=dead_pid(), heartbeat_at=now - 5),
                    run_row("live000000000001", started=now - 9, status="running", owner_host=host, owner_pid=os.getppid(), heartbeat_at=now - 5),
                    run_row("mine000000000001", started=now - 8, status="running", owner_host=host, owner_pid=os.getpid(), heartbeat_at=now - 5),
                    run_row("away000000000001", started=stale, status="running", owner_host="elsewhere", owner_pid=1, heartbeat_at=stale),
                    run_row("busy000000000001", started=stale, status="running", owner_host="elsewhere", owner_pid=1, heartbeat_at=stale),
                    run_row("fine000000000001", started=stale, status="ok", owner_host=host, owner_pid=dead_pid(), heartbeat_at=stale),
                ],
                # A run on another host whose steps are still arriving is alive.
                steps=[{"run_id": "busy000000000001", "ns": "", "seq": 1, "step": 0, "created_at": now - 1, "is_key": True, "nodes": "", "flags": 0, "payload": pack({"t": [], "r": [], "e": [], "s": {"v": {}, "cv": {}, "vs": {}}})}],
            )
        )
        runs = {r.id: r for r in store.list_runs()}
        assert (runs["dead000000000001"].status, runs["dead000000000001"].status_reason) == ("interrupted", "killed")
        assert runs["dead000000000001"].ended_at == pytest.approx(now - 5)
        assert (runs["away000000000001"].status, runs["away000000000001"].status_reason) == ("interrupted", "killed")
        assert runs["live000000000001"].status == "running"
        assert runs["mine000000000001"].status == "running"
        assert runs["busy000000000001"].status == "running"
        assert runs["fine000000000001"].status == "ok"
        assert store.get_run("dead000000000001").status == "interrupted"
    finally:
        store.close()


# ---------------------------------------------------------------------------
# Damaged data and schema versions
# ---------------------------------------------------------------------------


def test_damaged_payload_reads_as_store_error(recorder: Recorder, store_url: str) -> None:
    run_id, _ = record(recorder, chat_graph(), chat_input())
    store = recorder.store
    step = store.list_steps(run_id)[2].step
    raw(store_url, "UPDATE steps SET payload = :p WHERE run_id = :r", p=b"z" + b"\x00not zlib", r=run_id)
    with pytest.raises(StoreError, match="damaged"):
        store.state_at(run_id, step)
    with pytest.raises(StoreError, match="damaged"):
        store.step_detail(run_id, step)
    raw(store_url, "UPDATE steps SET payload = :p WHERE run_id = :r", p=pack({"t": [], "s": {"v": {"x": {"$t": "tuple", "v": None}}}}), r=run_id)
    with pytest.raises(StoreError, match="cannot decode"):
        store.state_at(run_id, step)


def test_newer_schema_version_is_refused(store_url: str) -> None:
    open_store(store_url, create=True).close()
    raw(store_url, "UPDATE graphtape_meta SET value = '999' WHERE key = 'schema_version'")
    with pytest.raises(SchemaVersionError, match="newer") as info:
        open_store(store_url)
    assert "upgrade graphtape" in str(info.value)
    with pytest.raises(SchemaVersionError):
        Recorder(store_url)


def test_older_or_unreadable_schema_version_is_refused(store_url: str) -> None:
    open_store(store_url, create=True).close()
    raw(store_url, "UPDATE graphtape_meta SET value = '0' WHERE key = 'schema_version'")
    with pytest.raises(SchemaVersionError, match="old schema v0"):
        open_store(store_url)
    raw(store_url, "UPDATE graphtape_meta SET value = 'banana' WHERE key = 'schema_version'")
    with pytest.raises(SchemaVersionError, match="banana"):
        open_store(store_url)
    raw(store_url, "DELETE FROM graphtape_meta")
    with pytest.raises(SchemaVersionError, match="no graphtape schema version"):
        open_store(store_url)


def test_foreign_database_with_a_runs_table_is_refused(store_url: str) -> None:
    raw(store_url, "CREATE TABLE runs (id INTEGER PRIMARY KEY, what TEXT)")
    for create in (False, True):
        with pytest.raises(SchemaVersionError, match="another program's database"):
            open_store(store_url, create=create)
    assert raw(store_url, "SELECT COUNT(*) FROM runs")[0][0] == 0  # left alone


def test_schema_version_is_written(store_url: str) -> None:
    open_store(store_url, create=True).close()
    assert raw(store_url, "SELECT value FROM graphtape_meta WHERE key = 'schema_version'")[0][0] == str(S.SCHEMA_VERSION)


# ---------------------------------------------------------------------------
# SQLite files
# ---------------------------------------------------------------------------


def _not_raw_sqlite(exc: BaseException) -> None:
    assert not isinstance(exc, (sqlite3.Error, sa.exc.SQLAlchemyError))
    assert exc.__cause__ is None and exc.__suppress_context__
    assert "\n" not in str(exc)


@pytest.mark.parametrize(
    "content",
    [
        b"this is not a database at all, just some text" * 50,
        b"SQLite format 3\x00" + b"\xff" * 4000,
        b"\x00" * 8192,
    ],
    ids=["text", "bad-header", "zeros"],
)
def test_corrupt_sqlite_file_is_a_store_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "corrupt.db"
    path.write_bytes(content)
    for create in (False, True):
        with pytest.raises(StoreError) as info:
            open_store(path, create=create)
        _not_raw_sqlite(info.value)
    with pytest.raises(StoreError):
        Recorder(str(path))


def test_truncated_sqlite_file_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "cut.db"
    rec = Recorder(str(path))
    record(rec, long_graph(40), {"messages": [], "n": 0}, {"recursion_limit": 100})
    rec.close()
    data = path.read_bytes()
    assert len(data) > 8192
    path.write_bytes(data[: len(data) // 3])
    for p in tmp_path.glob("cut.db-*"):
        p.unlink()
    with pytest.raises(StoreError) as info:
        store = open_store(path)
        run_id = store.resolve_run("last")
        for s in store.list_steps(run_id):
            store.state_at(run_id, s.step)
    _not_raw_sqlite(info.value)


def test_a_missing_directory_is_a_store_error_to_read_and_made_to_record(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such" / "dir" / "graphtape.db"
    with pytest.raises(StoreError, match="does not exist"):
        open_store(missing)
    assert not (tmp_path / "no").exists()
    store = open_store(missing, create=True)
    store.close()
    assert missing.is_file()


def test_open_without_create_does_not_make_a_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.db"
    with pytest.raises(StoreError, match="no database"):
        open_store(path)
    with pytest.raises(StoreError):
        open_store(f"sqlite:///{path}")
    assert list(tmp_path.iterdir()) == []


def test_directory_is_not_a_database(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="directory"):
        open_store(tmp_path, create=True)


def test_new_sqlite_files_are_private(tmp_path: Path) -> None:
    path = tmp_path / "private.db"
    old = os.umask(0o022)
    try:
        rec = Recorder(str(path))
        record(rec, long_graph(3), {"messages": [], "n": 0})
        files = [path, *tmp_path.glob("private.db-*")]
        assert len(files) >= 2, "WAL files exist while the store is open"
        for f in files:
            assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
        rec.close()
    finally:
        os.umask(old)


def test_sqlite_url_with_query_is_the_same_file(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    open_store(path, create=True).close()
    store = open_store(f"sqlite:///{path}?timeout=5")
    try:
        assert store.count_runs() == 0
    finally:
        store.close()
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("q.db-")) == ["q.db"]


def test_unreachable_postgres_is_a_store_error() -> None:
    with pytest.raises(StoreError, match="cannot open") as info:
        open_store("postgresql+psycopg://nobody@127.0.0.1:1/none?connect_timeout=2")
    assert "127.0.0.1" in str(info.value)


# ---------------------------------------------------------------------------
# Payload bytes
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("obj", [{}, [], {"a": 1}, {"s": "x" * 5000, "l": list(range(500))}, "text", None])
def test_pack_round_trip(obj: Any) -> None:
    assert unpack(pack(obj)) == obj


def test_large_payloads_are_compressed() -> None:
    packed = pack({"s": "abc" * 1000})
    assert packed[:1] == b"z" and len(packed) < 200


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"q{}",
        b"j{not json",
        b"j\xff\xfe",
        b"z",
        b"zgarbage that is not zlib",
        pack({"s": "x" * 1000})[:-6],  # truncated stream
        pack({"s": "x" * 1000}) + b"trailing",  # data after the stream
        b"z" + zlib.compress(b"{not json"),
    ],
    ids=["empty", "unknown-head", "bad-json", "bad-utf8", "empty-zlib", "not-zlib", "truncated", "trailing", "zipped-bad-json"],
)
def test_unpack_refuses_garbage(data: bytes) -> None:
    with pytest.raises(StoreError):
        unpack(data)


def _bomb(inflated: int) -> bytes:
    z = zlib.compressobj(9)
    chunk = b"0" * (1 << 20)
    parts = [z.compress(b"[")]
    for _ in range(inflated // len(chunk)):
        parts.append(z.compress(chunk))
    parts.append(z.compress(b"]") + z.flush())
    return b"z" + b"".join(parts)


def test_unpack_refuses_decompression_bombs() -> None:
    small = _bomb(4 << 20)
    with pytest.raises(StoreError, match="inflates beyond"):
        unpack(small, max_size=1 << 20)
    bomb = _bomb(MAX_INFLATE + (8 << 20))
    assert len(bomb) < MAX_INFLATE // 500
    with pytest.raises(StoreError, match="inflates beyond"):
        unpack(bomb)
    # At exactly the limit a payload is still read.
    exact = b"z" + zlib.compress(orjson.dumps(list(range(100))))
    assert unpack(exact, max_size=len(orjson.dumps(list(range(100))))) == list(range(100))
