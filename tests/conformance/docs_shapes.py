"""More corpus graphs: shapes as the packages' own docs build them.

Imported by ``graphs.py`` (which lists every case), so each graph is reachable as
``tests/conformance/graphs.py:<name>``. Models are scripted and answer from the prompt.
"""

from __future__ import annotations

import operator
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, TypedDict

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_store, get_stream_writer
from langgraph.func import entrypoint, task
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode, create_react_agent
from langgraph.runtime import Runtime
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command, RetryPolicy, Send, interrupt
from pydantic import BaseModel

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "fixtures" / "agents"))
from scripted_model import ScriptedChatModel  # noqa: E402  (a bundled demo file, loaded by path)


def call(tool_name: str, call_id: str, **args: Any) -> dict[str, Any]:
    return {"name": tool_name, "args": args, "id": call_id, "type": "tool_call"}


def scripted(name: str, decide: Any) -> ScriptedChatModel:
    return ScriptedChatModel(script=decide, model_name=name)


def last_tool(messages: list[BaseMessage]) -> ToolMessage | None:
    return messages[-1] if messages and isinstance(messages[-1], ToolMessage) else None


@tool
def lookup_order(order_id: str) -> str:
    """Where an order is."""
    return f"order {order_id} is in transit"


@tool
def refund(order_id: str, amount: int) -> str:
    """Refund an order."""
    return f"refunded {amount} on {order_id}"


# -- create_react_agent: parallel tool calls, then a structured response ---------------------


class OrderReport(BaseModel):
    """What the agent found, as structured output."""

    order_id: str
    status: str
    refunded: int


def _report_model(messages: list[BaseMessage]) -> AIMessage:
    last = messages[-1]
    if isinstance(last, HumanMessage):
        return AIMessage("", tool_calls=[call("lookup_order", "p1", order_id="A1"), call("refund", "p2", order_id="A1", amount=5)])
    if isinstance(last, ToolMessage):
        return AIMessage("A1 is in transit; 5 refunded.")
    # Asked for the structured response (the conversation ends with the agent's answer).
    return AIMessage("", tool_calls=[call("OrderReport", "s1", order_id="A1", status="in transit", refunded=5)])


react_structured = create_react_agent(scripted("report-model", _report_model), [lookup_order, refund], response_format=OrderReport, name="react_structured")


# -- a ToolNode whose tool raises, with handle_tool_errors ------------------------------------


@tool
def charge(card: str) -> str:
    """Charge a card."""
    raise ValueError(f"card {card} was declined")


def _charge_model(messages: list[BaseMessage]) -> AIMessage:
    last = last_tool(messages)
    if last is not None:
        return AIMessage(f"Could not charge: {last.status}.")
    return AIMessage("", tool_calls=[call("charge", "c1", card="4242")])


tool_errors = create_react_agent(scripted("charge-model", _charge_model), ToolNode([charge], handle_tool_errors=True), name="tool_errors")


# -- an interrupt inside a tool (human in the loop), resumed with Command(resume=...) ---------


@tool
def cancel_order(order_id: str) -> str:
    """Cancel an order once a person agrees."""
    answer = interrupt({"cancel": order_id})
    return f"cancel {order_id}: {answer}"


def _cancel_model(messages: list[BaseMessage]) -> AIMessage:
    last = last_tool(messages)
    if last is not None:
        return AIMessage(f"Done: {last.content}")
    return AIMessage("", tool_calls=[call("cancel_order", "k1", order_id="A1")])


tool_interrupt = create_react_agent(scripted("cancel-model", _cancel_model), [cancel_order], checkpointer=InMemorySaver(), name="tool_interrupt")


# -- create_agent with HumanInTheLoopMiddleware (interrupt, approve) --------------------------


def _hitl_model(messages: list[BaseMessage]) -> AIMessage:
    last = last_tool(messages)
    if last is not None:
        return AIMessage(f"Refund done: {last.content}")
    return AIMessage("", tool_calls=[call("refund", "h1", order_id="A1", amount=5)])


def _build_agent_hitl() -> Any:
    from langchain.agents import create_agent
    from langchain.agents.middleware import HumanInTheLoopMiddleware

    return create_agent(scripted("hitl-model", _hitl_model), [refund], middleware=[HumanInTheLoopMiddleware(interrupt_on={"refund": True})], checkpointer=InMemorySaver())


agent_hitl = _build_agent_hitl()


# -- create_agent with a model-call limit and summarization ----------------------------------


def _greedy_model(messages: list[BaseMessage]) -> AIMessage:
    # Never done on its own: the call limit ends the run.
    n = sum(isinstance(m, ToolMessage) for m in messages)
    return AIMessage("", tool_calls=[call("lookup_order", f"g{n}", order_id=f"A{n}")])


def _summary_model(messages: list[BaseMessage]) -> AIMessage:
    return AIMessage(f"summary of {len(str(messages[-1].content))} characters")


def _build_agent_limits() -> Any:
    from langchain.agents import create_agent
    from langchain.agents.middleware import ModelCallLimitMiddleware, SummarizationMiddleware

    return create_agent(
        scripted("greedy-model", _greedy_model),
        [lookup_order],
        middleware=[
            SummarizationMiddleware(model=scripted("summarizer-model", _summary_model), trigger=("messages", 4), keep=("messages", 2)),
            ModelCallLimitMiddleware(run_limit=3, exit_behavior="end"),
        ],
    )


agent_limits = _build_agent_limits()


# -- nested subgraphs two levels deep, a router at each level --------------------------------


class Trail(TypedDict, total=False):
    n: int
    trail: Annotated[list[str], operator.add]


def triage(state: Trail) -> Literal["deep", "shallow"]:
    return "deep" if state["n"] > 2 else "shallow"


def needs_detail(state: Trail) -> Literal["detail", "__end__"]:
    return "detail" if state["n"] % 2 == 1 else "__end__"


def pick_handler(state: Trail) -> Literal["small", "big"]:
    return "big" if state["n"] > 4 else "small"


def _build_nested() -> Any:
    leaf = StateGraph(Trail)
    leaf.add_node("inspect", lambda s: {"trail": ["inspect"]})
    leaf.add_node("small", lambda s: {"trail": ["small"]})
    leaf.add_node("big", lambda s: {"trail": ["big"]})
    leaf.add_edge(START, "inspect")
    leaf.add_conditional_edges("inspect", pick_handler)
    leaf.add_edge("small", END)
    leaf.add_edge("big", END)
    middle = StateGraph(Trail)
    middle.add_node("prepare", lambda s: {"trail": ["prepare"]})
    middle.add_node("detail", leaf.compile())
    middle.add_edge(START, "prepare")
    middle.add_conditional_edges("prepare", needs_detail)
    middle.add_edge("detail", END)
    root = StateGraph(Trail)
    root.add_node("intake", lambda s: {"trail": ["intake"]})
    root.add_node("deep", middle.compile())
    root.add_node("shallow", lambda s: {"trail": ["shallow"]})
    root.add_edge(START, "intake")
    root.add_conditional_edges("intake", triage)
    root.add_edge("deep", END)
    root.add_edge("shallow", END)
    return root.compile()


nested_routers = _build_nested()


# -- a subgraph invoked from inside a node function (not added as a node) ---------------------


class Quote(TypedDict, total=False):
    n: int
    out: str


def price_band(state: Quote) -> Literal["discount", "full"]:
    return "discount" if state["n"] >= 10 else "full"


def _build_pricing() -> Any:
    b = StateGraph(Quote)
    b.add_node("measure", lambda s: {"n": s["n"] * 2})
    b.add_node("discount", lambda s: {"out": f"{s['n']} at 10% off"})
    b.add_node("full", lambda s: {"out": f"{s['n']} at full price"})
    b.add_edge(START, "measure")
    b.add_conditional_edges("measure", price_band)
    b.add_edge("discount", END)
    b.add_edge("full", END)
    return b.compile()


pricing = _build_pricing()


def quote(state: Quote) -> dict[str, Any]:
    priced = pricing.invoke({"n": state["n"]})
    return {"out": f"quote: {priced['out']}"}


def _build_sub_in_node() -> Any:
    b = StateGraph(Quote)
    b.add_node("quote", quote)
    b.add_edge(START, "quote")
    b.add_edge("quote", END)
    return b.compile()


sub_in_node = _build_sub_in_node()


# -- map-reduce: Send fan-out from a router, a reducer, a model call per branch ----------------


class Jokes(TypedDict, total=False):
    topic: str
    subjects: list[str]
    jokes: Annotated[list[str], operator.add]
    best: str


_joke_llm = scripted("joke-model", lambda messages: AIMessage(f"a joke about {messages[-1].content}"))


def continue_to_jokes(state: Jokes) -> list[Send]:
    return [Send("joke", {"subject": s}) for s in state["subjects"]]


def joke(state: dict[str, Any]) -> dict[str, Any]:
    return {"jokes": [str(_joke_llm.invoke([HumanMessage(state["subject"])]).content)]}


def _build_map_reduce() -> Any:
    b = StateGraph(Jokes)
    b.add_node("subjects", lambda s: {"subjects": [f"{s['topic']} {i}" for i in range(3)]})
    b.add_node("joke", joke)
    b.add_node("best", lambda s: {"best": max(s["jokes"])})
    b.add_edge(START, "subjects")
    b.add_conditional_edges("subjects", continue_to_jokes, ["joke"])
    b.add_edge("joke", "best")
    b.add_edge("best", END)
    return b.compile()


map_reduce = _build_map_reduce()


# -- streaming: messages + updates (async), and custom data from get_stream_writer -------------


def _stream_model(messages: list[BaseMessage]) -> AIMessage:
    last = last_tool(messages)
    if last is not None:
        return AIMessage(f"Streaming says: {last.content}")
    return AIMessage("", tool_calls=[call("lookup_order", "st1", order_id="B2")])


streamed = create_react_agent(scripted("stream-model", _stream_model), [lookup_order], name="streamed")


class Progress(TypedDict, total=False):
    n: int
    out: str


def crunch(state: Progress) -> dict[str, Any]:
    write = get_stream_writer()
    for i in range(state["n"]):
        write({"progress": i})
    return {"out": f"crunched {state['n']}"}


def _build_custom_stream() -> Any:
    b = StateGraph(Progress)
    b.add_node("crunch", crunch)
    b.add_edge(START, "crunch")
    b.add_edge("crunch", END)
    return b.compile()


custom_stream = _build_custom_stream()


# -- context_schema / Runtime, and a store used through get_store() --------------------------


@dataclass
class Caller:
    user: str
    tier: str = "basic"


class Greeting(TypedDict, total=False):
    text: str
    reply: str
    remembered: str


def greet_caller(state: Greeting, runtime: Runtime[Caller]) -> dict[str, Any]:
    return {"reply": f"hello {runtime.context.user}: {state['text']}"}


def by_tier(state: Greeting, runtime: Runtime[Caller]) -> Literal["remember", "__end__"]:
    return "remember" if runtime.context.tier == "gold" else "__end__"


def remember_caller(state: Greeting, runtime: Runtime[Caller]) -> dict[str, Any]:
    store = get_store()
    store.put(("callers",), runtime.context.user, {"last": state["text"]})
    got = store.get(("callers",), runtime.context.user)
    return {"remembered": got.value["last"] if got else ""}


def _build_context_store() -> Any:
    b = StateGraph(Greeting, context_schema=Caller)
    b.add_node("greet", greet_caller)
    b.add_node("remember", remember_caller)
    b.add_edge(START, "greet")
    b.add_conditional_edges("greet", by_tier)
    b.add_edge("remember", END)
    return b.compile(store=InMemoryStore())


context_store = _build_context_store()


# -- input_schema / output_schema differing from the state -----------------------------------


class Question(TypedDict):
    question: str


class Answer(TypedDict):
    answer: str


class Work(TypedDict, total=False):
    question: str
    draft: str
    answer: str


def draft_ok(state: Work) -> Literal["polish", "finish"]:
    return "polish" if len(state["draft"]) > 12 else "finish"


def _build_io_schema() -> Any:
    b = StateGraph(Work, input_schema=Question, output_schema=Answer)
    b.add_node("draft", lambda s: {"draft": f"draft for {s['question']}"})
    b.add_node("polish", lambda s: {"answer": s["draft"].upper()})
    b.add_node("finish", lambda s: {"answer": s["draft"]})
    b.add_edge(START, "draft")
    b.add_conditional_edges("draft", draft_ok)
    b.add_edge("polish", END)
    b.add_edge("finish", END)
    return b.compile()


io_schema = _build_io_schema()


# -- a functional-API @task with a RetryPolicy ------------------------------------------------


_task_attempts = {"n": 0}


@task(retry_policy=RetryPolicy(max_attempts=3, initial_interval=0.01, jitter=False, retry_on=ConnectionError))
def flaky_fetch(order_id: str) -> str:
    _task_attempts["n"] += 1
    if _task_attempts["n"] % 2 == 1:  # every first attempt fails, every retry succeeds
        raise ConnectionError("the order service reset the connection")
    return lookup_order.invoke({"order_id": order_id})


@entrypoint()
def task_retry(order_id: str) -> dict[str, Any]:
    return {"status": flaky_fetch(order_id).result()}


# -- Command(goto=Send(...)) from a node -------------------------------------------------------


class Batch(TypedDict, total=False):
    items: list[int]
    results: Annotated[list[int], operator.add]
    handled_by: str


def dispatch(state: Batch) -> Command:
    return Command(goto=[Send("cube", {"items": [x]}) for x in state["items"]], update={"handled_by": "dispatch"})


def _build_goto_send() -> Any:
    b = StateGraph(Batch)
    b.add_node("dispatch", dispatch, destinations=("cube",))
    b.add_node("cube", lambda s: {"results": [s["items"][0] ** 3]})
    b.add_edge(START, "dispatch")
    b.add_edge("cube", END)
    return b.compile()


goto_send = _build_goto_send()


# -- a deferred node waiting for branches of different lengths --------------------------------


class Fan(TypedDict, total=False):
    seen: Annotated[list[str], operator.add]


def _visit(name: str) -> Any:
    return lambda s: {"seen": [name]}


def _build_deferred() -> Any:
    b = StateGraph(Fan)
    for name in ("a", "b", "b_2", "c"):
        b.add_node(name, _visit(name))
    b.add_node("d", _visit("d"), defer=True)
    b.add_edge(START, "a")
    b.add_edge("a", "b")
    b.add_edge("a", "c")
    b.add_edge("b", "b_2")
    b.add_edge("b_2", "d")
    b.add_edge("c", "d")
    b.add_edge("d", END)
    return b.compile()


deferred = _build_deferred()


# -- langgraph-supervisor with output_mode="full_history" -------------------------------------


def _full_supervisor_model(messages: list[BaseMessage]) -> AIMessage:
    done = {m.name for m in messages if isinstance(m, AIMessage) and m.name in ("tracker", "payer") and not m.tool_calls}
    if "tracker" not in done:
        return AIMessage("", tool_calls=[call("transfer_to_tracker", "fh1")])
    if "payer" not in done:
        return AIMessage("", tool_calls=[call("transfer_to_payer", "fh2")])
    return AIMessage("Tracked and paid.")


def _worker(tool_name: str, args: dict[str, Any], answer: str) -> Any:
    def decide(messages: list[BaseMessage]) -> AIMessage:
        last = last_tool(messages)
        if last is not None and last.name == tool_name:
            return AIMessage(answer)
        return AIMessage("", tool_calls=[call(tool_name, f"fw-{tool_name}", **args)])

    return decide


def _build_supervisor_full() -> Any:
    from langgraph_supervisor import create_supervisor

    tracker = create_react_agent(scripted("tracker-model", _worker("lookup_order", {"order_id": "C3"}, "C3 is in transit.")), [lookup_order], name="tracker")
    payer = create_react_agent(scripted("payer-model", _worker("refund", {"order_id": "C3", "amount": 7}, "Refunded 7.")), [refund], name="payer")
    return create_supervisor(
        [tracker, payer],
        model=scripted("full-supervisor-model", _full_supervisor_model),
        output_mode="full_history",
        prompt=SystemMessage("You route between tracker and payer."),
    ).compile()


supervisor_full = _build_supervisor_full()


# -- a swarm of three agents -------------------------------------------------------------------


def _handoff_model(target: str, final: str) -> Any:
    def decide(messages: list[BaseMessage]) -> AIMessage:
        if any(isinstance(m, ToolMessage) and m.name == f"transfer_to_{target}" for m in messages):
            return AIMessage(final)
        return AIMessage("", tool_calls=[call(f"transfer_to_{target}", f"s3-{target}")])

    return decide


def _carol_model(messages: list[BaseMessage]) -> AIMessage:
    last = last_tool(messages)
    if last is not None and last.name == "lookup_order":
        return AIMessage(f"Carol: {last.content}")
    return AIMessage("", tool_calls=[call("lookup_order", "s3-look", order_id="D4")])


def _build_swarm3() -> Any:
    from langgraph_swarm import create_handoff_tool, create_swarm

    ann = create_react_agent(scripted("ann-model", _handoff_model("ben", "Ann: handed over.")), [create_handoff_tool(agent_name="ben")], name="ann")
    ben = create_react_agent(scripted("ben-model", _handoff_model("cat", "Ben: handed over.")), [create_handoff_tool(agent_name="cat")], name="ben")
    cat = create_react_agent(scripted("cat-model", _carol_model), [lookup_order], name="cat")
    return create_swarm([ann, ben, cat], default_active_agent="ann").compile()


swarm3 = _build_swarm3()


# -- a prebuilt agent invoked inside a node, without passing the config on ----------------------


def _desk_model(messages: list[BaseMessage]) -> AIMessage:
    last = last_tool(messages)
    if last is not None:
        return AIMessage(f"Desk: {last.content}")
    return AIMessage("", tool_calls=[call("lookup_order", "d1", order_id="F6")])


desk_agent = create_react_agent(scripted("desk-model", _desk_model), [lookup_order], name="desk")


class Desk(TypedDict, total=False):
    question: str
    answer: str


def ask_desk(state: Desk) -> dict[str, Any]:
    # The config is not passed on: LangGraph hands the node's own to the agent through the context.
    out = desk_agent.invoke({"messages": [HumanMessage(state["question"])]})
    return {"answer": str(out["messages"][-1].content)}


def _build_agent_in_node() -> Any:
    b = StateGraph(Desk)
    b.add_node("ask_desk", ask_desk)
    b.add_node("wrap_up", lambda s: {"answer": s["answer"] + " (checked)"})
    b.add_edge(START, "ask_desk")
    b.add_edge("ask_desk", "wrap_up")
    b.add_edge("wrap_up", END)
    return b.compile()


agent_in_node = _build_agent_in_node()
