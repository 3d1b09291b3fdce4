"""The conformance corpus: graphs of the shapes people build, from the published packages.

Each graph is built at import time under a module attribute, so a fresh process, a fixture's
marker or ``test-gen`` finds it as ``tests/conformance/graphs.py:<name>``. Chat models are
offline and deterministic: a scripted ``BaseChatModel`` that answers from the prompt (never from
a position in a script, so a graph can run any number of times), and for ``openai_stream`` and
``openai_tools`` the real ``ChatOpenAI`` talking to the fake server in ``fake_openai.py``.

``CASES`` lists, per graph: its inputs and config, and the function names its routing must show
(in subgraphs, on START, in middleware, to END).
"""

from __future__ import annotations

import operator
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, TypedDict

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.cache.memory import InMemoryCache
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.func import entrypoint, task
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import InjectedState, InjectedStore, ToolNode, create_react_agent
from langgraph.store.memory import InMemoryStore
from langgraph.types import CachePolicy, Command, RetryPolicy, Send, interrupt
from pydantic import BaseModel

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "fixtures" / "agents"))
from scripted_model import ScriptedChatModel  # noqa: E402  (a bundled demo file, loaded by path)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from docs_shapes import (  # noqa: E402  (the shapes of the packages' docs; listed in CASES below)
    Caller,
    agent_hitl,
    agent_in_node,
    agent_limits,
    context_store,
    custom_stream,
    deferred,
    goto_send,
    io_schema,
    map_reduce,
    nested_routers,
    react_structured,
    streamed,
    sub_in_node,
    supervisor_full,
    swarm3,
    task_retry,
    tool_errors,
    tool_interrupt,
)
from probed_shapes import IMAGE_BLOCK, async_middleware_agent, breakpoint_continue, cached_subgraph, cached_task, drafts_run, edited_approval, edited_continue, exit_durability, image_prompt, quotes_run, remembering_subgraph, retried_fanout, returning_user, send_to_subgraph, task_interrupts, two_questions  # noqa: E402  (listed in CASES below)


def call(tool_name: str, call_id: str, **args: Any) -> dict[str, Any]:
    return {"name": tool_name, "args": args, "id": call_id, "type": "tool_call"}


def scripted(name: str, decide: Callable[[list[BaseMessage]], AIMessage | str]) -> ScriptedChatModel:
    """A model answering from the prompt it is given (so any run, live or replayed, sees the same)."""
    return ScriptedChatModel(script=decide, model_name=name)


def last_tool(messages: list[BaseMessage]) -> ToolMessage | None:
    return messages[-1] if messages and isinstance(messages[-1], ToolMessage) else None


# -- tools -----------------------------------------------------------------------------------


@tool
def lookup_order(order_id: str) -> str:
    """Where an order is."""
    return f"order {order_id} is in transit"


@tool
def refund(order_id: str, amount: int) -> str:
    """Refund an order."""
    return f"refunded {amount} on {order_id}"


# -- 1. supervisor with two worker agents (langgraph-supervisor) -----------------------------


def _supervisor_model(messages: list[BaseMessage]) -> AIMessage:
    done = {m.name for m in messages if isinstance(m, AIMessage) and m.name in ("researcher", "refunder") and not m.tool_calls}
    if "researcher" not in done:
        return AIMessage("", tool_calls=[call("transfer_to_researcher", "sv1")])
    if "refunder" not in done:
        return AIMessage("", tool_calls=[call("transfer_to_refunder", "sv2")])
    return AIMessage("The order is in transit and 5 was refunded.")


def _worker_model(tool_name: str, args: dict[str, Any], answer: str) -> Callable[[list[BaseMessage]], AIMessage]:
    def decide(messages: list[BaseMessage]) -> AIMessage:
        last = last_tool(messages)
        if last is not None and last.name == tool_name:
            return AIMessage(answer)
        return AIMessage("", tool_calls=[call(tool_name, f"w-{tool_name}", **args)])

    return decide


def _build_supervisor() -> Any:
    from langgraph_supervisor import create_supervisor

    researcher = create_react_agent(scripted("researcher-model", _worker_model("lookup_order", {"order_id": "A1"}, "A1 is in transit.")), [lookup_order], name="researcher")
    refunder = create_react_agent(scripted("refunder-model", _worker_model("refund", {"order_id": "A1", "amount": 5}, "Refunded 5.")), [refund], name="refunder")
    return create_supervisor([researcher, refunder], model=scripted("supervisor-model", _supervisor_model)).compile()


supervisor = _build_supervisor()


# -- 2. swarm: a START router picks the active agent (langgraph-swarm) ----------------------


def _swarm_alice(messages: list[BaseMessage]) -> AIMessage:
    if any(isinstance(m, ToolMessage) and m.name == "transfer_to_bob" for m in messages):
        return AIMessage("Back with Alice: done.")
    return AIMessage("", tool_calls=[call("transfer_to_bob", "sw1")])


def _swarm_bob(messages: list[BaseMessage]) -> AIMessage:
    last = last_tool(messages)
    if last is not None and last.name == "lookup_order":
        return AIMessage("Bob: A1 is in transit.")
    return AIMessage("", tool_calls=[call("lookup_order", "sw2", order_id="A1")])


def _build_swarm() -> Any:
    from langgraph_swarm import create_handoff_tool, create_swarm

    alice = create_react_agent(scripted("alice-model", _swarm_alice), [create_handoff_tool(agent_name="bob")], name="alice")
    bob = create_react_agent(scripted("bob-model", _swarm_bob), [lookup_order], name="bob")
    return create_swarm([alice, bob], default_active_agent="alice").compile()


swarm = _build_swarm()


# -- 3. langchain 1.x create_agent with middleware ------------------------------------------


def is_forbidden(messages: list[BaseMessage]) -> bool:
    """The middleware hook's rule (module level, so a test can change it)."""
    return isinstance(messages[-1], HumanMessage) and "forbidden" in str(messages[-1].content)


def _build_middleware_agent() -> Any:
    from langchain.agents import create_agent
    from langchain.agents.middleware import AgentMiddleware, after_model, before_model

    @before_model(can_jump_to=["end"])
    def stop_when_forbidden(state: Any, runtime: Any) -> dict[str, Any] | None:
        if is_forbidden(state["messages"]):
            return {"messages": [AIMessage("I cannot help with that.")], "jump_to": "end"}
        return None

    @after_model
    def count_turns(state: Any, runtime: Any) -> dict[str, Any] | None:
        return None

    class Audit(AgentMiddleware):
        def after_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
            return None

    def decide(messages: list[BaseMessage]) -> AIMessage:
        last = last_tool(messages)
        if last is not None:
            return AIMessage(f"Done: {last.content}")
        return AIMessage("", tool_calls=[call("lookup_order", "mw1", order_id="A1")])

    return create_agent(scripted("mw-model", decide), [lookup_order], middleware=[stop_when_forbidden, count_turns, Audit()])


middleware_agent = _build_middleware_agent()


# -- 4. functional API ----------------------------------------------------------------------


@task
def fetch(order_id: str) -> str:
    return lookup_order.invoke({"order_id": order_id})


@task
def summarize(text: str) -> str:
    reply = scripted("summary-model", lambda messages: AIMessage(f"summary: {messages[-1].content}")).invoke([HumanMessage(text)])
    return str(reply.content)


@task
def approve(summary: str) -> str:
    answer = interrupt({"approve": summary})
    return f"{summary} ({answer})"


@entrypoint(checkpointer=None)
def functional(order_id: str) -> dict[str, Any]:
    text = fetch(order_id).result()
    summary = summarize(text).result()
    return {"order": order_id, "summary": summary}


@entrypoint(checkpointer=InMemorySaver())
def functional_interrupt(order_id: str) -> dict[str, Any]:
    text = fetch(order_id).result()
    return {"approved": approve(text).result()}


# -- 5. pydantic state with conditional edges ----------------------------------------------


class Ticket(BaseModel):
    text: str
    score: int = 0
    route: str = ""


def _score(state: Ticket) -> dict[str, Any]:
    return {"score": len(state.text)}


def route_ticket(state: Ticket) -> Literal["escalate", "reply"]:
    return "escalate" if state.score > 10 else "reply"


def _build_pydantic() -> Any:
    b = StateGraph(Ticket)
    b.add_node("score", _score)
    b.add_node("escalate", lambda s: {"route": "escalate"})
    b.add_node("reply", lambda s: {"route": "reply"})
    b.add_edge(START, "score")
    b.add_conditional_edges("score", route_ticket)
    b.add_edge("escalate", END)
    b.add_edge("reply", END)
    return b.compile()


pydantic_state = _build_pydantic()


# -- 6. Command.PARENT from a subgraph, and a Send fan-out inside one -------------------------


class Shared(TypedDict, total=False):
    items: list[int]
    results: Annotated[list[int], operator.add]
    handled_by: str


def child_decides(state: Shared) -> Command:
    return Command(graph=Command.PARENT, goto="finish", update={"handled_by": "child"})


def fan_out(state: Shared) -> list[Send]:
    return [Send("square", {"items": [x]}) for x in state["items"]]


def _build_parent_command() -> Any:
    inner = StateGraph(Shared)
    inner.add_node("decide", child_decides)
    inner.add_edge(START, "decide")
    outer = StateGraph(Shared)
    outer.add_node("child", inner.compile(), destinations=("finish",))
    outer.add_node("finish", lambda s: {"results": [0]})
    outer.add_edge(START, "child")
    outer.add_edge("finish", END)
    return outer.compile()


parent_command = _build_parent_command()


def _build_sub_send() -> Any:
    inner = StateGraph(Shared)
    inner.add_node("prepare", lambda s: {})
    inner.add_node("square", lambda s: {"results": [s["items"][0] ** 2]})
    inner.add_edge(START, "prepare")
    inner.add_conditional_edges("prepare", fan_out, ["square"])
    inner.add_edge("square", END)
    outer = StateGraph(Shared)
    outer.add_node("work", inner.compile())
    outer.add_edge(START, "work")
    outer.add_edge("work", END)
    return outer.compile()


sub_send = _build_sub_send()


# -- 7. an interrupt inside a subgraph (resumed), with its own checkpointer --------------------


class Ask(TypedDict, total=False):
    question: str
    answer: str


def ask_human(state: Ask) -> dict[str, Any]:
    return {"answer": interrupt(state["question"])}


def _build_sub_interrupt() -> Any:
    inner = StateGraph(Ask)
    inner.add_node("ask", ask_human)
    inner.add_edge(START, "ask")
    outer = StateGraph(Ask)
    outer.add_node("review", inner.compile())
    outer.add_node("done", lambda s: {"answer": s["answer"].upper()})
    outer.add_edge(START, "review")
    outer.add_edge("review", "done")
    outer.add_edge("done", END)
    return outer.compile(checkpointer=InMemorySaver())


sub_interrupt = _build_sub_interrupt()


# -- 8. ToolNode with injected arguments, and a tool that returns a Command -------------------


class AgentState(MessagesState, total=False):
    customer: str
    stage: str


@tool
def greet(name: str, state: Annotated[dict, InjectedState]) -> str:
    """Greet the customer by name."""
    return f"hello {name} ({state.get('customer')})"


@tool
def remember(note: str, tool_call_id: Annotated[str, InjectedToolCallId], store: Annotated[Any, InjectedStore()]) -> str:
    """Remember a note."""
    store.put(("notes",), "last", {"note": note})
    return f"noted {note}"


@tool
def advance(stage: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command:
    """Move the conversation to a stage."""
    return Command(update={"stage": stage, "messages": [ToolMessage(f"now {stage}", tool_call_id=tool_call_id)]})


def _injected_model(messages: list[BaseMessage]) -> AIMessage:
    if not any(isinstance(m, ToolMessage) for m in messages):
        return AIMessage("", tool_calls=[call("greet", "t1", name="Ada"), call("remember", "t2", note="vip"), call("advance", "t3", stage="billing")])
    return AIMessage("All set.")


_injected_llm = scripted("injected-model", _injected_model)


def agent_turn(state: AgentState) -> dict[str, Any]:
    return {"messages": [_injected_llm.invoke(state["messages"])]}


def tools_or_end(state: AgentState) -> Literal["tools", "__end__"]:
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else "__end__"


def _build_injected() -> Any:
    b = StateGraph(AgentState)
    b.add_node("agent", agent_turn)
    b.add_node("tools", ToolNode([greet, remember, advance]))
    b.add_edge(START, "agent")
    b.add_conditional_edges("agent", tools_or_end)
    b.add_edge("tools", "agent")
    return b.compile(store=InMemoryStore())


injected_tools = _build_injected()


# -- 9. RetryPolicy and CachePolicy -----------------------------------------------------------


class Counter(TypedDict, total=False):
    n: int
    out: str


_flaky_calls = {"n": 0}


def flaky(state: Counter) -> dict[str, Any]:
    _flaky_calls["n"] += 1
    if _flaky_calls["n"] % 2 == 1:  # every first attempt fails, every retry succeeds
        raise ConnectionError("upstream reset the connection")
    return {"out": f"ok after retry ({state['n']})"}


def _build_retry() -> Any:
    b = StateGraph(Counter)
    b.add_node("flaky", flaky, retry_policy=RetryPolicy(max_attempts=3, initial_interval=0.01, jitter=False, retry_on=ConnectionError))
    b.add_edge(START, "flaky")
    b.add_edge("flaky", END)
    return b.compile()


retry = _build_retry()


expensive_runs = {"n": 0}  # how often the cached node's code ran: a cache hit does not run it


def expensive(state: Counter) -> dict[str, Any]:
    expensive_runs["n"] += 1
    return {"out": f"computed {state['n'] * 2}"}


def big_or_small(state: Counter) -> Literal["big", "__end__"]:
    return "big" if state["n"] > 10 else "__end__"


def _build_cache() -> Any:
    b = StateGraph(Counter)
    b.add_node("expensive", expensive, cache_policy=CachePolicy(ttl=600))
    b.add_node("big", lambda s: {"out": s["out"] + " (big)"})
    b.add_edge(START, "expensive")
    b.add_conditional_edges("expensive", big_or_small)
    b.add_edge("big", END)
    return b.compile(cache=InMemoryCache())


cached = _build_cache()


# -- 10. a graph with its own SqliteSaver ------------------------------------------------------


def _build_own_saver() -> Any:
    import sqlite3
    import tempfile

    from langgraph.checkpoint.sqlite import SqliteSaver

    path = Path(tempfile.mkdtemp(prefix="graphtape-own-saver-")) / "memory.db"
    saver = SqliteSaver(sqlite3.connect(path, check_same_thread=False))
    b = StateGraph(Counter)
    b.add_node("bump", lambda s: {"n": s.get("n", 0) + 1})
    b.add_edge(START, "bump")
    b.add_edge("bump", END)
    return b.compile(checkpointer=saver)


own_saver = _build_own_saver()


# -- 11. a loop that hits the recursion limit, and a node that raises -------------------------


def keep_going(state: Counter) -> Literal["loop", "__end__"]:
    return "loop"


def _build_loop() -> Any:
    b = StateGraph(Counter)
    b.add_node("loop", lambda s: {"n": s.get("n", 0) + 1})
    b.add_edge(START, "loop")
    b.add_conditional_edges("loop", keep_going)
    return b.compile()


runaway = _build_loop()


def broken(state: Counter) -> dict[str, Any]:
    raise ValueError(f"cannot handle n={state['n']}")


def _build_raising() -> Any:
    b = StateGraph(Counter)
    b.add_node("prep", lambda s: {"n": s["n"] + 1})
    b.add_node("broken", broken)
    b.add_edge(START, "prep")
    b.add_edge("prep", "broken")
    b.add_edge("broken", END)
    return b.compile()


raising = _build_raising()


# -- 12. the real ChatOpenAI against a local fake server ---------------------------------------


def _openai_model(streaming: bool) -> Any:
    from langchain_openai import ChatOpenAI

    base = os.environ.get("GRAPHTAPE_FAKE_OPENAI", "http://127.0.0.1:9/v1")
    return ChatOpenAI(model="gpt-fake", base_url=base, api_key="sk-fake-key-for-the-local-server", streaming=streaming, stream_usage=True, max_retries=0)


openai_stream = create_react_agent(_openai_model(True), [lookup_order], name="openai_stream")
openai_tools = create_react_agent(_openai_model(False), [lookup_order, refund], name="openai_tools")


# -- the cases ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """How a corpus graph is run and what its recording must show."""

    inputs: Any
    routers: frozenset[str] = frozenset()  # function names that decided routes (anywhere in the run)
    config: dict[str, Any] = field(default_factory=dict)
    resume: Any = None  # a value to resume an interrupt with (the run is invoked twice)
    resumes: tuple = ()  # more values, each resuming the run once more, in order
    resume_update: Any = None  # with resume: the state edit the human sends with the answer
    answer_each: Any = None  # resume every interrupt shown, by its id, with this value, until none is left
    durability: str | None = None  # LangGraph's durability for the run ("exit": one checkpoint, at the end)
    go_on: bool = False  # stopped at a breakpoint or an error: invoke(None) once more (the run checked is that one)
    edit: Any = None  # with go_on: update_state with this first
    repeat: bool = False  # invoke twice with the same input (the second run is the one checked: a cache hit)
    raises: type[BaseException] | None = None
    is_async: bool = False
    needs_openai: bool = False
    context: Any = None  # the run's Runtime context (a graph with a context_schema)
    stream_mode: Any = None  # run with stream()/astream() in this mode; the chunks are the result


def _messages(text: str) -> dict[str, Any]:
    return {"messages": [HumanMessage(text)]}


CASES: dict[str, Case] = {
    "supervisor": Case(_messages("Where is A1? Refund 5."), frozenset({"should_continue"})),
    "swarm": Case(_messages("Hi"), frozenset({"route_to_active_agent", "should_continue"})),
    "middleware_agent": Case(_messages("Where is A1?"), frozenset({"stop_when_forbidden.before_model", "model_to_tools", "tools_to_model"})),
    "functional": Case("A1"),
    "functional_interrupt": Case("A1", config={"configurable": {"thread_id": "fi"}}, resume="yes"),
    "pydantic_state": Case({"text": "please help me now"}, frozenset({"route_ticket"})),
    "parent_command": Case({"items": [1]}),
    "sub_send": Case({"items": [1, 2, 3]}, frozenset({"fan_out"})),
    "sub_interrupt": Case({"question": "ok?"}, config={"configurable": {"thread_id": "si"}}, resume="fine"),
    "injected_tools": Case({**_messages("hi"), "customer": "Ada"}, frozenset({"tools_or_end"})),
    "retry": Case({"n": 3}),
    "cached": Case({"n": 21}, frozenset({"big_or_small"}), repeat=True),
    "own_saver": Case({"n": 1}, config={"configurable": {"thread_id": "own"}}),
    "runaway": Case({"n": 0}, frozenset({"keep_going"}), config={"recursion_limit": 6}, raises=Exception),
    "raising": Case({"n": 1}, raises=ValueError),
    "openai_stream": Case(_messages("Where is A1?"), frozenset({"should_continue"}), is_async=True, needs_openai=True),
    "openai_tools": Case(_messages("Where is A1? Refund 5."), frozenset({"should_continue"}), needs_openai=True),
    "react_structured": Case(_messages("Where is A1? Refund 5."), frozenset({"should_continue"})),
    "tool_errors": Case(_messages("Charge my card."), frozenset({"should_continue"})),
    "tool_interrupt": Case(_messages("Cancel A1."), frozenset({"should_continue"}), config={"configurable": {"thread_id": "ti"}}, resume="approved"),
    "agent_hitl": Case(_messages("Refund A1."), frozenset({"model_to_tools", "tools_to_model"}), config={"configurable": {"thread_id": "ah"}}, resume={"decisions": [{"type": "approve"}]}),
    "agent_limits": Case(_messages("Track everything."), frozenset({"model_to_tools", "tools_to_model", "ModelCallLimitMiddleware.before_model"})),
    "nested_routers": Case({"n": 5}, frozenset({"triage", "needs_detail", "pick_handler"})),
    "sub_in_node": Case({"n": 7}, frozenset({"price_band"})),
    "map_reduce": Case({"topic": "cats"}, frozenset({"continue_to_jokes"})),
    "streamed": Case(_messages("Where is B2?"), frozenset({"should_continue"}), is_async=True, stream_mode=["messages", "updates"]),
    "custom_stream": Case({"n": 3}, stream_mode="custom"),
    "context_store": Case({"text": "hi"}, frozenset({"by_tier"}), context=Caller(user="ada", tier="gold")),
    "io_schema": Case({"question": "why?"}, frozenset({"draft_ok"})),
    "task_retry": Case("E5"),
    "goto_send": Case({"items": [1, 2, 3]}),
    "deferred": Case({}),
    "supervisor_full": Case(_messages("Track C3 and refund 7."), frozenset({"should_continue"})),
    "swarm3": Case(_messages("Hi"), frozenset({"route_to_active_agent", "should_continue"})),
    "agent_in_node": Case({"question": "Where is F6?"}, frozenset({"should_continue"})),
    "two_questions": Case({"answers": "none yet"}, config={"configurable": {"thread_id": "tq"}}, resumes=("A7", "yes")),
    "task_interrupts": Case(["x", "y"], config={"configurable": {"thread_id": "tk"}}, answer_each="ok"),
    "send_to_subgraph": Case({"topic": "cats"}),
    "async_middleware_agent": Case(_messages("Where is A1?"), frozenset({"model_to_tools", "tools_to_model"}), is_async=True),
    "breakpoint_continue": Case({"text": "the refund"}, config={"configurable": {"thread_id": "bc"}}, go_on=True),
    "edited_continue": Case({"text": "the refund"}, config={"configurable": {"thread_id": "ec"}}, go_on=True, edit={"text": "a kinder draft"}),
    "exit_durability": Case({"n": 0}, frozenset({"keep_going"}), durability="exit"),
    "remembering_subgraph": Case({"note": "hello"}, config={"configurable": {"thread_id": "rs"}}, repeat=True),
    "image_prompt": Case({"messages": [HumanMessage(content=[{"type": "text", "text": "what is this?"}, IMAGE_BLOCK])]}),
    "retried_fanout": Case({"items": ["a", "b", "c"]}, config={"configurable": {"thread_id": "rf"}}, go_on=True),
    "cached_subgraph": Case({"item": "apple", "total": 0}, repeat=True),
    "cached_task": Case("tides", repeat=True),
    "edited_approval": Case({"draft": "refund 5"}, config={"configurable": {"thread_id": "ea"}}, resume="approved", resume_update={"note": "checked by Ada"}),
    "returning_user": Case({"user": "ada"}, frozenset({"_returning"}), repeat=True),
}
