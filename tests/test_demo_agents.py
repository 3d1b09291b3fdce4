"""The bundled demo agents under fixtures/agents/, run for real and loaded the way graphtape loads them."""

import asyncio
import importlib.util
import json
import threading
import uuid
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

AGENTS = Path(__file__).resolve().parents[1] / "fixtures" / "agents"


def load(filename: str) -> ModuleType:
    """Load a fixture by path under a fresh name, without putting it on sys.path or in sys.modules."""
    spec = importlib.util.spec_from_file_location(f"demo_{uuid.uuid4().hex}", AGENTS / filename)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def scripted() -> ModuleType:
    return load("scripted_model.py")


@pytest.fixture(scope="module")
def reason_act() -> ModuleType:
    return load("reason_act.py")


@pytest.fixture(scope="module")
def react() -> ModuleType:
    return load("react_agent.py")


class Recorder(BaseCallbackHandler):
    """Collects callback events, to prove calls went through LangChain's machinery."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []
        self.lock = threading.Lock()

    def _add(self, kind: str, payload: Any) -> None:
        with self.lock:
            self.events.append((kind, payload))

    def on_chat_model_start(self, serialized, messages, **kwargs):
        self._add("chat_model_start", kwargs.get("invocation_params"))

    def on_llm_end(self, response, **kwargs):
        self._add("llm_end", response.generations[0][0].message)

    def on_tool_start(self, serialized, input_str, **kwargs):
        self._add("tool_start", serialized["name"])

    def of(self, kind: str) -> list[Any]:
        with self.lock:
            return [payload for k, payload in self.events if k == kind]


def observations(state: dict) -> list[dict]:
    return [step["observation"] for step in state["intermediate_steps"]]


# --- the scripted model ----------------------------------------------------


def two_call_reply() -> AIMessage:
    return AIMessage(
        content="Looking both up.",
        tool_calls=[
            {"name": "lookup", "args": {"order_id": "A-1042", "verbose": True}, "id": "c1"},
            {"name": "lookup", "args": {"order_id": "B-2077"}, "id": "c2"},
        ],
    )


def test_streamed_reply_merges_to_the_invoked_one(scripted):
    model = scripted.ScriptedChatModel(script=[two_call_reply()], chunk_chars=5)
    invoked = model.invoke("hi")
    chunks = list(model.stream("hi"))
    assert all(isinstance(c, AIMessageChunk) for c in chunks)
    assert sum(bool(c.tool_call_chunks) for c in chunks) > 2  # arguments arrive in pieces
    merged = chunks[0]
    for chunk in chunks[1:]:
        merged += chunk
    assert merged.content == invoked.content == "Looking both up."
    assert merged.tool_calls == invoked.tool_calls == two_call_reply().tool_calls
    assert merged.usage_metadata == invoked.usage_metadata
    assert invoked.usage_metadata["total_tokens"] == (
        invoked.usage_metadata["input_tokens"] + invoked.usage_metadata["output_tokens"]
    )
    assert merged.response_metadata["model_name"] == invoked.response_metadata["model_name"] == "scripted-1"
    assert model._llm_type == "scripted"


def test_model_runs_through_callbacks_with_bound_tools(scripted, reason_act):
    recorder = Recorder()
    model = scripted.ScriptedChatModel(script=["Fine."], model_name="m-1")
    bound = model.bind_tools([reason_act.estimate_delivery_date])
    reply = bound.invoke("hi", config={"callbacks": [recorder]})
    (params,) = recorder.of("chat_model_start")
    assert params["tools"][0]["function"]["name"] == "estimate_delivery_date"
    assert params["model_name"] == "m-1"
    (ended,) = recorder.of("llm_end")
    assert ended.content == reply.content == "Fine."
    assert ended.usage_metadata == reply.usage_metadata


def test_function_script_and_async(scripted):
    model = scripted.ScriptedChatModel(script=lambda messages: AIMessage(content=f"{len(messages)} in"))
    assert asyncio.run(model.ainvoke([HumanMessage("a"), HumanMessage("b")])).content == "2 in"

    async def collect() -> list:
        return [chunk async for chunk in model.astream("a")]

    assert "".join(c.content for c in asyncio.run(collect())) == "1 in"


def test_script_position_is_per_instance_and_thread_safe(scripted):
    replies = [f"reply {i}" for i in range(64)]
    model = scripted.ScriptedChatModel(script=replies, restart_on_new_conversation=False)
    other = scripted.ScriptedChatModel(script=["other"])
    seen: list[str] = []

    def worker() -> None:
        for _ in range(8):
            seen.append(model.invoke("go").content)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(seen) == sorted(replies)
    assert other.invoke("go").content == "other"
    with pytest.raises(scripted.ScriptExhaustedError, match="reply #65"):
        model.invoke("go")


def test_script_replays_the_reply_objects_untouched(scripted):
    script = [two_call_reply()]
    model = scripted.ScriptedChatModel(script=script)
    first, second = model.invoke("hi"), model.invoke("hi")  # a fresh conversation restarts
    assert first.content == second.content and first.id != second.id
    assert script[0].id is None and script[0].usage_metadata is None


# --- the reason/act agent ----------------------------------------------------


def run(reason_act: ModuleType, scenario: str, **config: Any) -> dict:
    return reason_act.build_graph(scenario).invoke(reason_act.inputs_for(scenario), config=config or None)


def test_fixtures_share_one_scripted_model_class(reason_act, react):
    assert reason_act.ScriptedChatModel is react.ScriptedChatModel
    assert load("reason_act.py").ScriptedChatModel is reason_act.ScriptedChatModel


def test_happy_path_answers_from_the_tool(reason_act):
    state = run(reason_act, "happy")
    assert state["agent_outcome"]["type"] == "finish"
    assert "in transit" in state["agent_outcome"]["answer"]
    assert reason_act.ORDERS["A-1042"]["status"] == "in_transit"
    (obs,) = observations(state)
    assert obs["status"] == "ok" and obs["result"]["carrier"] == "DHL"
    assert state["retries"] == 0


def test_incident_times_out_retries_and_answers_wrong(reason_act):
    recorder = Recorder()
    state = run(reason_act, "incident", callbacks=[recorder])
    answer = state["agent_outcome"]["answer"]
    obs = observations(state)
    assert state["agent_outcome"]["type"] == "finish"
    assert "delivered" in answer
    assert reason_act.ORDERS["A-1042"]["status"] != "delivered"  # the answer is wrong
    assert state["retries"] >= 2
    assert [o["status"] for o in obs if o["tool"] == "lookup_order_status"] == ["timeout", "timeout"]
    assert obs[-1]["tool"] == "estimate_delivery_date" and obs[-1]["result"]["is_tracking_data"] is False
    tool_runs = recorder.of("tool_start")
    assert tool_runs.count("lookup_order_status") == 2 and "estimate_delivery_date" in tool_runs
    assert len(recorder.of("chat_model_start")) == 4


def test_module_graph_is_the_incident_and_can_run_twice(reason_act):
    first = reason_act.graph.invoke(reason_act.inputs_for())
    second = reason_act.graph.invoke(reason_act.inputs_for())
    assert first["agent_outcome"] == second["agent_outcome"]
    assert "delivered" in first["agent_outcome"]["answer"]


def test_unknown_tool_gets_a_structured_error_and_recovers(reason_act):
    state = run(reason_act, "unknown_tool")
    first = observations(state)[0]
    assert first["status"] == "error" and first["error"] == "unknown_tool"
    assert first["tool"] == "cancel_order" and "lookup_order_status" in first["available"]
    tool_message = next(m for m in state["messages"] if isinstance(m, ToolMessage))
    assert tool_message.status == "error" and json.loads(tool_message.content) == first
    assert "in transit" in state["agent_outcome"]["answer"]


def test_schema_violation_becomes_a_validation_observation(reason_act):
    first = observations(run(reason_act, "bad_input"))[0]
    assert first["error"] == "validation_error"
    assert first["details"][0]["loc"] == ["order_id"]


def test_loop_limit_gives_up_with_unserializable_results(reason_act):
    state = run(reason_act, "loop_limit")
    assert state["iterations"] == reason_act.MAX_ITERATIONS
    assert len(state["intermediate_steps"]) == reason_act.MAX_ITERATIONS
    assert state["agent_outcome"]["reason"] == "max_iterations"
    assert "gave up" in state["agent_outcome"]["answer"]
    obs = observations(state)
    assert {o["parse_status"] for o in obs} == {"unserializable"}
    assert obs[0]["result"] == "<unserializable WarehouseTicket>"


def test_reason_act_async_with_checkpointer(reason_act):
    graph = reason_act.build_graph("happy", checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t1"}}
    state = asyncio.run(graph.ainvoke(reason_act.inputs_for("happy"), config))
    assert "in transit" in state["agent_outcome"]["answer"]
    assert graph.get_state(config).values["agent_outcome"] == state["agent_outcome"]


def test_reason_act_streams_model_tokens(reason_act):
    graph = reason_act.build_graph("happy")
    streamed = graph.stream(reason_act.inputs_for("happy"), stream_mode="messages")
    # `reason` also outputs the HumanMessage it adds to state, which LangGraph streams whole.
    from_model = [
        msg for msg, meta in streamed if meta["langgraph_node"] == "reason" and isinstance(msg, AIMessage)
    ]
    assert len(from_model) > 2 and all(isinstance(m, AIMessageChunk) for m in from_model)


def test_unknown_scenario_names_the_valid_ones(reason_act):
    with pytest.raises(ValueError, match="happy, incident"):
        reason_act.build_graph("nope")


# --- the prebuilt ReAct agent --------------------------------------------------


def test_react_agent_answers_after_parallel_tool_calls(react):
    messages = react.graph.invoke(react.inputs_for())["messages"]
    assert messages[-1].content == react.FINAL_ANSWER
    parallel = [m for m in messages if isinstance(m, AIMessage) and len(m.tool_calls) == 2]
    assert len(parallel) == 1
    call_ids = {call["id"] for call in parallel[0].tool_calls}
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage) and m.tool_call_id in call_ids}
    assert answered == call_ids


def test_react_agent_streams_chunks_with_tool_call_chunks(react):
    streamed = list(react.build_graph().stream(react.inputs_for(), stream_mode="messages"))
    from_model = [msg for msg, meta in streamed if meta["langgraph_node"] == "agent"]
    assert from_model and all(isinstance(m, AIMessageChunk) for m in from_model)
    assert any(m.tool_call_chunks for m in from_model)
    assert sum(isinstance(msg, ToolMessage) for msg, _ in streamed) == 3


def test_react_agent_async(react):
    graph = react.build_graph(checkpointer=InMemorySaver())
    state = asyncio.run(graph.ainvoke(react.inputs_for(), {"configurable": {"thread_id": "t1"}}))
    assert state["messages"][-1].content == react.FINAL_ANSWER

    async def stream() -> list:
        return [m async for m, _ in react.build_graph().astream(react.inputs_for(), stream_mode="messages")]

    assert any(isinstance(m, AIMessageChunk) for m in asyncio.run(stream()))


def test_building_the_react_agent_leaks_no_deprecation_warning(react):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        react.build_graph()
    assert not [w for w in caught if issubclass(w.category, DeprecationWarning)]
