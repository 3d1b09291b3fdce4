"""What a superstep shares is encoded once, and stored as it was.

A step's ``Send`` packets are its tasks channel's value, its router's answer and its
routes' packets; a model's answer is recorded from a copy and the state then holds the
answer itself. Each used to be encoded again each time (three times for a packet, whose
argument may carry the whole state); now once. Real compiled graphs, a scripted chat model,
a real store file; what is stored is checked as read back.
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Send

from graphtape.recorder import Recorder, open_store
from graphtape.recorder.codec import Encoder

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "agents"))
from scripted_model import ScriptedChatModel  # noqa: E402  (a bundled demo file, loaded by path)


class Counted(Mapping):
    """A packet argument that counts how often it is read whole (each encoding reads it once)."""

    reads: dict[str, int] = {}

    def __init__(self, label: str, **values: Any) -> None:
        self._values = {"label": label, **values}

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def items(self):  # type: ignore[override]
        label = self._values["label"]
        Counted.reads[label] = Counted.reads.get(label, 0) + 1
        return self._values.items()


class Fan(TypedDict):
    topics: list[str]
    done: Annotated[list[str], operator.add]


def fan_graph() -> Any:
    def plan(state: Fan) -> dict:
        return {"topics": ["a", "b", "c"]}

    def fan(state: Fan) -> list[Send]:
        return [Send("work", Counted(t, depth=2)) for t in state["topics"]]

    def work(arg: Any) -> dict:
        return {"done": [arg["label"]]}

    b = StateGraph(Fan)
    b.add_node("plan", plan)
    b.add_node("work", work)
    b.add_edge(START, "plan")
    b.add_conditional_edges("plan", fan, ["work"])
    b.add_edge("work", END)
    return b.compile()


def test_a_steps_send_packets_are_encoded_once(tmp_path):
    Counted.reads.clear()
    rec = Recorder(str(tmp_path / "once.db"))
    out = rec.attach(fan_graph()).invoke({"topics": [], "done": []})
    rec.close()
    assert sorted(out["done"]) == ["a", "b", "c"]
    # Once when the step is recorded (the tasks channel, the router's answer and the routes share
    # it); the graph's own reads of a packet do not go through items().
    assert Counted.reads == {"a": 1, "b": 1, "c": 1}
    store = open_store(str(tmp_path / "once.db"))
    (route,) = [r for s in store.list_steps(rec.last_run_id) for r in store.step_detail(rec.last_run_id, s.step).routes if r.kind == "send"]
    assert route.router == "fan" and route.destinations == ["work", "work", "work"]
    assert [p["arg"] for p in route.sends] == [{"label": t, "depth": 2} for t in "abc"]
    store.close()


class Chat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def chat_graph() -> Any:
    model = ScriptedChatModel(script=lambda messages: AIMessage(f"answer to {len(messages)}", id=f"ai-{len(messages)}"), model_name="scripted")

    def agent(state: Chat) -> dict:
        return {"messages": [model.invoke(state["messages"])]}

    b = StateGraph(Chat)
    b.add_node("agent", agent)
    b.add_edge(START, "agent")
    b.add_edge("agent", END)
    return b.compile()


def test_a_models_answer_is_encoded_once(tmp_path, monkeypatch):
    encoded: list[str] = []
    own = Encoder._enc_message

    def counting(self: Encoder, m: Any, depth: int) -> dict:
        encoded.append(str(m.content))
        return own(self, m, depth)

    monkeypatch.setattr(Encoder, "_enc_message", counting)
    rec = Recorder(str(tmp_path / "chat.db"))
    out = rec.attach(chat_graph()).invoke({"messages": [HumanMessage("hi", id="h1")]})
    rec.close()
    assert out["messages"][-1].content == "answer to 1"
    # The call's answer (a copy) once; the state's message, the same answer, reuses it.
    assert encoded.count("answer to 1") == 1
    store = open_store(str(tmp_path / "chat.db"))
    (call,) = store.calls(rec.last_run_id)
    last = store.list_steps(rec.last_run_id)[-1].step
    state = store.state_at(rec.last_run_id, last, typed=True)
    assert call.output["content"] == state["messages"][-1].content == "answer to 1"
    assert state["messages"][-1].id == "ai-1"
    store.close()


def test_an_answer_changed_in_place_is_encoded_again(tmp_path, monkeypatch):
    """LangGraph names an agent's answer after it returns (a prebuilt agent's ``name``): the state
    then differs from the call's copy, and is stored as it is."""

    def agent(state: Chat) -> dict:
        model = ScriptedChatModel(script=lambda messages: AIMessage("named later", id="ai-x"), model_name="scripted")
        answer = model.invoke(state["messages"])
        answer.name = "helper"  # changed after the call returned
        return {"messages": [answer]}

    b = StateGraph(Chat)
    b.add_node("agent", agent)
    b.add_edge(START, "agent")
    b.add_edge("agent", END)
    rec = Recorder(str(tmp_path / "named.db"))
    rec.attach(b.compile()).invoke({"messages": [HumanMessage("hi", id="h1")]})
    rec.close()
    store = open_store(str(tmp_path / "named.db"))
    (call,) = store.calls(rec.last_run_id)
    last = store.list_steps(rec.last_run_id)[-1].step
    state = store.state_at(rec.last_run_id, last, typed=True)
    assert "name" not in call.output
    assert state["messages"][-1].name == "helper"
    store.close()
