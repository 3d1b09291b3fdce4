"""A replayed message gets the id the recording gave it, and never an id another message holds.

Real compiled graphs, recorded into a real store and replayed: a faithful replay's
states are the recording's, as stored; a replay that changes a message gives that
message a fresh id; reducers that trim or rebuild the history never see an id reused.
"""

from __future__ import annotations

import uuid
from typing import Annotated

import pytest
import replay_graphs as G
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import create_react_agent
from typing_extensions import TypedDict

from graphtape.recorder import Recorder, open_store
from graphtape.replay import export_fixture, import_fixture, read_fixture, replay, write_fixture
from graphtape.replay.message_ids import RecordedIds


def record(db: str, graph, inputs) -> str:
    with Recorder(db) as rec:
        rec.attach(graph).invoke(inputs)
        rec.flush()
        return rec.last_run_id


def root_frames(db: str, run_id: str) -> list[tuple[int, dict]]:
    store = open_store(db)
    try:
        return list(store.frames(run_id, ""))
    finally:
        store.close()


def final_messages(db: str, run_id: str) -> list[dict]:
    store = open_store(db)
    try:
        return store.run_detail(run_id).output["messages"]
    finally:
        store.close()


def final_ids(db: str, run_id: str) -> list[str]:
    return [m["id"] for m in final_messages(db, run_id)]


def test_a_faithful_replay_stores_the_recorded_states_as_they_are(tmp_path):
    db = str(tmp_path / "ids.db")
    # The input as a tuple, ToolNode's answers: every one of them gets its id from add_messages.
    run_id = record(db, G.chat_graph(), {"messages": [("user", "what is 21 doubled and halved?")]})
    result = replay(run_id, G.chat_graph(), db=db, mode="strict")
    assert not result.diverged, result.report()
    recorded, replayed = root_frames(db, run_id), root_frames(db, result.run_id)
    assert [s for s, _ in recorded] == [s for s, _ in replayed]
    # Same ids, so the same stored messages: equal as stored, step by step.
    assert [v.get("messages") for _, v in recorded] == [v.get("messages") for _, v in replayed]
    ids = final_ids(db, result.run_id)
    assert ids == final_ids(db, run_id) and len(set(ids)) == len(ids) == 5


def test_a_prebuilt_agent_replayed_async_keeps_its_ids(tmp_path):
    db = str(tmp_path / "ids.db")
    script = G.chat_script(x=4)

    def agent():
        return create_react_agent(G.ScriptedChatModel(script=list(script)), [G.double, G.halve])

    with Recorder(db) as rec:
        import asyncio

        asyncio.run(rec.attach(agent()).ainvoke({"messages": [HumanMessage(content="go")]}))
        rec.flush()
        run_id = rec.last_run_id
    result = replay(run_id, agent(), db=db, mode="strict")
    assert not result.diverged, result.report()
    assert final_ids(db, result.run_id) == final_ids(db, run_id)


def test_a_changed_message_gets_a_fresh_id_and_the_rest_keep_theirs(tmp_path):
    db = str(tmp_path / "ids.db")
    run_id = record(db, G.chat_graph(), {"messages": [("user", "go")]})

    # Today's tool answers differently; the model's answers still come from the recording.
    result = replay(run_id, G.chat_graph(), db=db, mode="strict", overrides={"double": lambda x: x * 3})
    assert result.diverged and result.divergences[0].kind == "state", result.report()
    recorded, replayed = final_ids(db, run_id), final_ids(db, result.run_id)
    messages = final_messages(db, result.run_id)
    changed = [m for m in messages if m["type"] == "tool" and m["content"] == "63"]
    assert len(changed) == 1
    assert changed[0]["id"] not in recorded  # no recorded message has this content: no recorded id
    assert len(set(replayed)) == len(replayed)
    assert replayed[0] == recorded[0]  # the input did not change


class Trimmed(TypedDict):
    messages: Annotated[list, lambda left, right: add_messages(left, right)[-3:]]


def trimmed_graph():
    """A node adds an id-less message each step to a history a custom reducer keeps at three."""

    def talk(state: Trimmed) -> dict:
        return {"messages": [AIMessage(content="again")]}  # the same text every time: only order tells them apart

    def more(state: Trimmed) -> str:
        return "talk" if sum(1 for m in state["messages"] if m.type == "ai") < 3 and len(state["messages"]) < 3 else END

    b = StateGraph(Trimmed)
    b.add_node("talk", talk)
    b.add_edge(START, "talk")
    b.add_conditional_edges("talk", more, ["talk", END])
    return b.compile()


def test_a_reducer_that_trims_keeps_each_recorded_id_on_its_own_message(tmp_path):
    db = str(tmp_path / "ids.db")
    run_id = record(db, trimmed_graph(), {"messages": [HumanMessage(content="hi")]})
    result = replay(run_id, trimmed_graph(), db=db, mode="strict")
    assert not result.diverged, result.report()
    recorded, replayed = root_frames(db, run_id), root_frames(db, result.run_id)
    assert [v.get("messages") for _, v in recorded] == [v.get("messages") for _, v in replayed]
    ids = final_ids(db, result.run_id)
    assert len(set(ids)) == len(ids) == 3


def _minted() -> str:
    return str(uuid.uuid4())


def test_recorded_ids_are_handed_out_once_in_order_and_never_twice_in_a_state():
    a, b, taken = _minted(), _minted(), _minted()
    ids = RecordedIds(
        [
            {"type": "ai", "content": "same", "id": a},
            {"type": "ai", "content": "same", "id": b},
            {"type": "ai", "content": "same", "id": taken},  # a recorded answer brings this one itself
            {"type": "ai", "content": "same", "id": "lc_run--not-minted"},  # not add_messages' shape
        ],
        taken=[taken],
    )
    first, second, third = (AIMessage(content="same", id=_minted()) for _ in range(3))
    ids.adopt([], [first, second], 2)
    assert (first.id, second.id) == (a, b)
    ids.adopt([first, second], [first, second, third], 1)
    assert third.id not in (a, b, taken, "lc_run--not-minted")  # nothing left to give: it keeps its own


def test_an_id_the_state_already_holds_is_never_given_again():
    a = _minted()
    ids = RecordedIds([{"type": "tool", "content": "4", "tool_call_id": "c1", "id": a}])
    holder = ToolMessage(content="other", tool_call_id="c9", id=a)  # the state holds ``a`` already
    new = ToolMessage(content="4", tool_call_id="c1", id=_minted())
    fresh = new.id
    ids.adopt([holder], [holder, new], 1)
    assert new.id == fresh
    # A message that was in the state before the reducer ran is not renamed either.
    old = ToolMessage(content="4", tool_call_id="c1", id=_minted())
    kept = old.id
    RecordedIds([{"type": "tool", "content": "4", "tool_call_id": "c1", "id": _minted()}]).adopt([old], [old], 1)
    assert old.id == kept


@pytest.mark.parametrize("from_fixture", [False, True])
def test_a_fixtures_stand_in_ids_are_handed_out_only_for_a_fixtures_run(from_fixture):
    # A live recording's "msg-1" was given by the graph itself (it comes back with its message);
    # in a fixture's run it stands for an id add_messages minted.
    ids = RecordedIds([{"type": "ai", "content": "ok", "id": "msg-1"}], stand_ins=from_fixture)
    new = AIMessage(content="ok", id=_minted())
    fresh = new.id
    ids.adopt([], [new], 1)
    assert new.id == ("msg-1" if from_fixture else fresh)


def test_a_replayed_fixture_stores_the_fixtures_messages_as_they_are(tmp_path):
    # A fixture numbers every message id ("msg-3") and folds a tool's answer into the message
    # add_messages made of it: the replay gives its new messages those ids all the same.
    db = str(tmp_path / "ids.db")
    run_id = record(db, G.chat_graph(), {"messages": [("user", "what is 21 doubled and halved?")]})
    store = open_store(db)
    try:
        write_fixture(tmp_path / "chat.json", export_fixture(store, run_id))
    finally:
        store.close()
    imported_db = str(tmp_path / "imported.db")
    store = open_store(imported_db, create=True)
    try:
        fixture_run = import_fixture(store, read_fixture(tmp_path / "chat.json")).run_id
    finally:
        store.close()
    result = replay(fixture_run, G.chat_graph(), db=imported_db, mode="strict")
    assert not result.diverged, result.report()
    recorded, replayed = root_frames(imported_db, fixture_run), root_frames(imported_db, result.run_id)
    assert [v.get("messages") for _, v in recorded] == [v.get("messages") for _, v in replayed]
    ids = final_ids(imported_db, result.run_id)
    assert ids == final_ids(imported_db, fixture_run) == [f"msg-{i}" for i in range(1, 6)]
