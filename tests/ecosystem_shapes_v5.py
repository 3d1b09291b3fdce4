"""Shapes reviewers bring that the other shape modules lack, each with a model or tool call.

A deferred node joining a ``Send`` fan-out and a longer branch; ``Overwrite`` of a reducer
channel; a run stopped by its recursion limit that the user goes on with; static breakpoints
before and after nodes, resumed with ``None``; a subgraph compiled with ``checkpointer=True``
added as a node, remembering its turns; ``Command(goto=[Send(...)])`` from a node inside a
subgraph; ``Command.PARENT`` climbing two levels; a ``wrap_tool_call`` middleware turning a
tool's error into its answer; two parallel tool calls that each ask a person; a subgraph
writing custom stream data; a router reading the Runtime context; a cached node hit on the
thread's second turn; input and output schemas and a private channel; pydantic and dataclass
states; ``REMOVE_ALL_MESSAGES``; ``create_react_agent`` with ``response_format``; langchain's
``ToolErrorMiddleware``; a sync entrypoint whose parallel tasks run while one asks a person.

Not here: langgraph-supervisor's parallel handoffs (``parallel_tool_calls=True``). Under
LangGraph 1.2 each handoff runs as a task of its own and the first to finish wins, so the graph
itself goes to one worker or the other from run to run; there is no one result to reproduce.

Each builder takes ``changed``: the same graph with one thing changed in its own code, which a
strict replay of the unchanged graph's recording must catch. Models are scripted and answer
from the prompt, so a graph runs any number of times.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypedDict

from ecosystem_shapes import call, last_tool, lookup, scripted
from langchain.agents import create_agent
from langchain.agents.middleware import ToolErrorMiddleware, wrap_tool_call
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.cache.memory import InMemoryCache
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_stream_writer
from langgraph.func import entrypoint, task
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.prebuilt import ToolNode, create_react_agent, tools_condition
from langgraph.runtime import Runtime, get_runtime
from langgraph.types import CachePolicy, Command, Overwrite, RetryPolicy, Send, interrupt
from pydantic import BaseModel, Field


def _tools_seen(messages: list[BaseMessage]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


def _echo(name: str) -> Any:
    """A model that answers with what it was told last."""
    return scripted(name, lambda ms: AIMessage(f"noted: {ms[-1].content}"))


# -- 1. a deferred node waits for a Send fan-out and a longer branch ------------------------------


class Fan(TypedDict, total=False):
    orders: list[str]
    found: Annotated[list[str], operator.add]
    summary: str


def deferred_reduce(changed: bool = False) -> Any:
    model = _echo("reduce-model")

    def fetch(state: dict[str, Any]) -> dict[str, Any]:
        return {"found": [lookup.invoke({"order_id": state["order"]})]}

    def summarize(state: Fan) -> dict[str, Any]:
        found = sorted(state["found"])
        said = model.invoke([HumanMessage(("; " if changed else " | ").join(found))])
        return {"summary": said.content}

    b = StateGraph(Fan)
    b.add_node("plan", lambda s: {})
    b.add_node("fetch", fetch)
    b.add_node("audit", lambda s: {"found": ["audited"]})
    b.add_node("audit_again", lambda s: {"found": ["audited again"]})
    b.add_node("summarize", summarize, defer=True)
    b.add_edge(START, "plan")
    b.add_conditional_edges("plan", lambda s: [Send("fetch", {"order": o}) for o in s["orders"]])
    b.add_edge("plan", "audit")
    b.add_edge("audit", "audit_again")
    b.add_edge("audit_again", "summarize")
    b.add_edge("fetch", "summarize")
    b.add_edge("summarize", END)
    return b.compile()


# -- 2. Overwrite: a node replaces a reducer channel's value instead of adding to it ---------------


class Notes(TypedDict, total=False):
    notes: Annotated[list[str], operator.add]
    answer: str


def overwritten_notes(changed: bool = False) -> Any:
    model = _echo("notes-model")

    def gather(state: Notes) -> dict[str, Any]:
        return {"notes": [lookup.invoke({"order_id": o}) for o in ("OW1", "OW2")]}

    def compress(state: Notes) -> dict[str, Any]:
        kept = state["notes"][-1:] if changed else state["notes"][:1]
        return {"notes": Overwrite(kept)}

    def answer(state: Notes) -> dict[str, Any]:
        return {"answer": model.invoke([HumanMessage(" / ".join(state["notes"]))]).content}

    b = StateGraph(Notes)
    b.add_node("gather", gather)
    b.add_node("compress", compress)
    b.add_node("answer", answer)
    b.add_edge(START, "gather")
    b.add_edge("gather", "compress")
    b.add_edge("compress", "answer")
    b.add_edge("answer", END)
    return b.compile()


# -- 3. a run stopped by its recursion limit, and the user's next turn on the thread -------------


def restless_then_told(changed: bool = False) -> Any:
    def decide(messages: list[BaseMessage]) -> AIMessage:
        humans = [m for m in messages if isinstance(m, HumanMessage)]
        if humans[-1].content == "Stop.":
            return AIMessage(f"stopped after {len(_tools_seen(messages))} lookups")
        n = len(_tools_seen(messages))
        return AIMessage("", tool_calls=[call("lookup", f"rl{n}", order_id=f"RL{n}")])

    model = scripted("restless-model", decide).bind_tools([lookup])

    def agent(state: MessagesState) -> dict[str, Any]:
        prompt = [SystemMessage("Keep going.")] if changed else []
        return {"messages": [model.invoke(prompt + state["messages"])]}

    b = StateGraph(MessagesState)
    b.add_node("agent", agent)
    b.add_node("tools", ToolNode([lookup]))
    b.add_edge(START, "agent")
    b.add_conditional_edges("agent", tools_condition)
    b.add_edge("tools", "agent")
    return b.compile(checkpointer=InMemorySaver())


# -- 4. static breakpoints before and after nodes, each resumed with None -------------------------


class Draft(TypedDict, total=False):
    topic: str
    draft: str
    facts: str
    final: str


def breakpoints(changed: bool = False) -> Any:
    model = _echo("draft-model")

    def research(state: Draft) -> dict[str, Any]:
        return {"facts": lookup.invoke({"order_id": state["topic"].lower() if changed else state["topic"]})}

    def write(state: Draft) -> dict[str, Any]:
        return {"draft": model.invoke([HumanMessage(state["facts"])]).content}

    b = StateGraph(Draft)
    b.add_node("research", research)
    b.add_node("write", write)
    b.add_node("publish", lambda s: {"final": f"[{s['draft']}]"})
    b.add_edge(START, "research")
    b.add_edge("research", "write")
    b.add_edge("write", "publish")
    b.add_edge("publish", END)
    return b.compile(checkpointer=InMemorySaver(), interrupt_before=["write"], interrupt_after=["write"])


def react_breakpoint(changed: bool = False) -> Any:
    """``create_react_agent``'s own ``interrupt_before=["tools"]``: each tool turn waits for a go."""

    def decide(messages: list[BaseMessage]) -> AIMessage:
        seen = _tools_seen(messages)
        if len(seen) < 2:
            return AIMessage("", tool_calls=[call("lookup", f"bp{len(seen)}", order_id=f"BP{len(seen)}")])
        return AIMessage(" & ".join(m.content for m in seen))

    return create_react_agent(scripted("bp-model", decide), [lookup], prompt="Be brief." if changed else None, interrupt_before=["tools"], checkpointer=InMemorySaver())


# -- 5. a subgraph compiled with checkpointer=True, added as a node: its memory over turns --------


def remembering_subgraph_node(changed: bool = False) -> Any:
    def desk_model(messages: list[BaseMessage]) -> AIMessage:
        asked = sum(isinstance(m, HumanMessage) for m in messages)  # the desk remembers earlier turns
        last = last_tool(messages)
        if last is None or last.tool_call_id != f"rs{asked}":
            return AIMessage("", tool_calls=[call("lookup", f"rs{asked}", order_id=f"RS{asked}")])
        return AIMessage(f"turn {asked}: {last.content}")

    desk = create_react_agent(scripted("desk-model", desk_model), [lookup], prompt="Desk." if changed else None, checkpointer=True, name="desk")
    b = StateGraph(MessagesState)
    b.add_node("greet", lambda s: {"messages": [AIMessage("one moment")]})
    b.add_node("desk", desk)
    b.add_edge(START, "greet")
    b.add_edge("greet", "desk")
    b.add_edge("desk", END)
    return b.compile(checkpointer=InMemorySaver())


# -- 6. Command(goto=[Send(...)]) from a node inside a subgraph ------------------------------------


class Quotes(TypedDict, total=False):
    items: list[str]
    asked: int
    quotes: Annotated[list[str], operator.add]


def command_sends(changed: bool = False) -> Any:
    def dispatch(state: Quotes) -> Command:
        items = sorted(state["items"], reverse=changed)
        return Command(update={"asked": len(items) * (2 if changed else 1)}, goto=[Send("quote", {"items": [i]}) for i in items])

    def quote(state: Quotes) -> dict[str, Any]:
        return {"quotes": [lookup.invoke({"order_id": state["items"][0]})]}

    s = StateGraph(Quotes)
    s.add_node("dispatch", dispatch, destinations=("quote",))
    s.add_node("quote", quote)
    s.add_edge(START, "dispatch")
    s.add_edge("quote", END)
    b = StateGraph(Quotes)
    b.add_node("pricing", s.compile())
    b.add_node("total", lambda st: {"quotes": [f"{len(st['quotes'])} quotes for {st['asked']} asked"]})
    b.add_edge(START, "pricing")
    b.add_edge("pricing", "total")
    b.add_edge("total", END)
    return b.compile()


# -- 7. Command.PARENT from two levels down: the grandchild to the child, the child to the root ---


class Case(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


def climbing_handoffs(changed: bool = False) -> Any:
    model = _echo("escalation-model")

    def triage(state: Case) -> Command:
        return Command(graph=Command.PARENT, goto="escalate", update={"log": ["too hard" if changed else "hard"]})

    inner = StateGraph(Case)
    inner.add_node("triage", triage)
    inner.add_edge(START, "triage")

    def escalate(state: Case) -> Command:
        said = model.invoke([HumanMessage(", ".join(state["log"]))]).content
        return Command(graph=Command.PARENT, goto="manager", update={"log": [said]})

    middle = StateGraph(Case)
    middle.add_node("front", inner.compile())
    middle.add_node("escalate", escalate)
    middle.add_node("close", lambda s: {"log": ["closed"]})
    middle.add_edge(START, "front")
    middle.add_edge("front", "close")

    def manager(state: Case) -> dict[str, Any]:
        return {"log": [lookup.invoke({"order_id": "CL1"})]}

    b = StateGraph(Case)
    b.add_node("desk", middle.compile())
    b.add_node("manager", manager)
    b.add_edge(START, "desk")
    b.add_edge("manager", END)
    return b.compile()


# -- 8. a wrap_tool_call middleware turning a tool's error into its answer -----------------------


@tool
def charge(card: str) -> str:
    """Charge a card."""
    if card.startswith("4000"):
        raise ConnectionError(f"gateway refused {card}")
    return f"charged {card}"


def tool_error_middleware(changed: bool = False) -> Any:
    @wrap_tool_call
    def forgiving(request: Any, handler: Any) -> Any:
        try:
            return handler(request)
        except ConnectionError as exc:
            said = f"{'RETRY LATER' if changed else 'retry later'}: {exc}"
            return ToolMessage(said, tool_call_id=request.tool_call["id"], status="error")

    def decide(messages: list[BaseMessage]) -> AIMessage:
        seen = _tools_seen(messages)
        if not seen:
            return AIMessage("", tool_calls=[call("charge", "te1", card="4000-1"), call("charge", "te2", card="5100-2")])
        return AIMessage(" | ".join(f"{m.status}:{m.content}" for m in sorted(seen, key=lambda m: m.tool_call_id)))

    return create_agent(scripted("charge-model", decide), [charge], middleware=[forgiving])


# -- 9. two parallel tool calls whose tools each ask a person (create_agent) ---------------------


@tool
def refund(order_id: str, amount: int) -> str:
    """Refund an order once a person agrees."""
    answer = interrupt({"refund": order_id, "amount": amount})
    return f"refund {order_id}: {answer}"


def parallel_tool_asks(changed: bool = False) -> Any:
    def decide(messages: list[BaseMessage]) -> AIMessage:
        seen = _tools_seen(messages)
        if not seen:
            return AIMessage("", tool_calls=[call("refund", "pa1", order_id="PA1", amount=5), call("refund", "pa2", order_id="PA2", amount=9)])
        return AIMessage(" | ".join(m.content for m in sorted(seen, key=lambda m: m.tool_call_id)))

    return create_agent(scripted("refund-model", decide), [refund], system_prompt="Refund carefully." if changed else None, checkpointer=InMemorySaver())


# -- 10. a node inside a subgraph writing custom stream data, streamed with subgraphs=True --------


def custom_stream_subgraph(changed: bool = False) -> Any:
    model = _echo("progress-model")

    def work(state: MessagesState) -> dict[str, Any]:
        write = get_stream_writer()
        write({"progress": "looking"})
        found = lookup.invoke({"order_id": "CS1"})
        write({"progress": "found"})
        return {"messages": [model.invoke([HumanMessage(found.title() if changed else found)])]}

    s = StateGraph(MessagesState)
    s.add_node("work", work)
    s.add_edge(START, "work")
    b = StateGraph(MessagesState)
    b.add_node("worker", s.compile())
    b.add_edge(START, "worker")
    return b.compile()


# -- 11. the Runtime context read by a node and by a router -------------------------------------


@dataclass
class Caller:
    """Who is calling (the Runtime context)."""

    user: str
    tier: str


def context_router(changed: bool = False) -> Any:
    model = _echo("tier-model")

    def greet(state: MessagesState, runtime: Runtime[Caller]) -> dict[str, Any]:
        return {"messages": [model.invoke([HumanMessage(f"hello {runtime.context.user}")])]}

    def by_tier(state: MessagesState) -> Literal["gold_desk", "basic_desk"]:
        tier = get_runtime(Caller).context.tier
        return "basic_desk" if changed or tier != "gold" else "gold_desk"

    def desk(kind: str) -> Any:
        def run(state: MessagesState, runtime: Runtime[Caller]) -> dict[str, Any]:
            found = lookup.invoke({"order_id": f"{kind}-{runtime.context.user}"})
            return {"messages": [AIMessage(found)]}

        return run

    b = StateGraph(MessagesState, context_schema=Caller)
    b.add_node("greet", greet)
    b.add_node("gold_desk", desk("gold"))
    b.add_node("basic_desk", desk("basic"))
    b.add_edge(START, "greet")
    b.add_conditional_edges("greet", by_tier)
    b.add_edge("gold_desk", END)
    b.add_edge("basic_desk", END)
    return b.compile()


# -- 12. a cached node hit on the thread's second turn --------------------------------------------


class Ask(TypedDict, total=False):
    question: str
    answer: str
    turns: Annotated[int, operator.add]


def cached_turns(changed: bool = False) -> Any:
    model = _echo("cached-model")

    def think(state: Ask) -> dict[str, Any]:
        return {"answer": model.invoke([HumanMessage(state["question"])]).content}

    def count(state: Ask) -> dict[str, Any]:
        return {"turns": 2 if changed else 1}

    b = StateGraph(Ask)
    b.add_node("think", think, cache_policy=CachePolicy(key_func=lambda s: s["question"].encode()))
    b.add_node("count", count)
    b.add_edge(START, "think")
    b.add_edge("think", "count")
    b.add_edge("count", END)
    return b.compile(checkpointer=InMemorySaver(), cache=InMemoryCache())


# -- 13. input and output schemas other than the state, and a node's private channel --------------


class TicketIn(TypedDict):
    text: str


class TicketOut(TypedDict):
    reply: str


class Ticket(TicketIn, TicketOut, total=False):
    order: str


class Scratch(TypedDict):
    order: str
    scratch: str


def io_private(changed: bool = False) -> Any:
    model = _echo("ticket-model")

    def read(state: TicketIn) -> Scratch:
        order = state["text"].split()[-1]
        return {"order": order, "scratch": lookup.invoke({"order_id": order})}

    def answer(state: Scratch) -> TicketOut:
        said = model.invoke([HumanMessage(state["scratch"].upper() if changed else state["scratch"])])
        return {"reply": said.content}

    b = StateGraph(Ticket, input_schema=TicketIn, output_schema=TicketOut)
    b.add_node("read", read)
    b.add_node("answer", answer)
    b.add_edge(START, "read")
    b.add_edge("read", "answer")
    b.add_edge("answer", END)
    return b.compile()


# -- 14. pydantic and dataclass states, with defaults ---------------------------------------------


class Order(BaseModel):
    """An order as the graph's state (pydantic)."""

    order_id: str
    status: str = "new"
    notes: list[str] = Field(default_factory=list)
    attempts: int = 0


def pydantic_state(changed: bool = False) -> Any:
    model = _echo("order-model")

    def check(state: Order) -> dict[str, Any]:
        return {"status": lookup.invoke({"order_id": state.order_id}), "attempts": state.attempts + (2 if changed else 1)}

    def report(state: Order) -> dict[str, Any]:
        return {"notes": [*state.notes, model.invoke([HumanMessage(f"{state.status} after {state.attempts}")]).content]}

    b = StateGraph(Order)
    b.add_node("check", check)
    b.add_node("report", report)
    b.add_edge(START, "check")
    b.add_edge("check", "report")
    b.add_edge("report", END)
    return b.compile()


@dataclass
class Parcel:
    """A parcel as the graph's state (a dataclass)."""

    parcel_id: str
    where: str = "unknown"
    hops: Annotated[list[str], operator.add] = field(default_factory=list)


def dataclass_state(changed: bool = False) -> Any:
    model = _echo("parcel-model")

    def locate(state: Parcel) -> dict[str, Any]:
        return {"where": lookup.invoke({"order_id": state.parcel_id}), "hops": ["depot"]}

    def tell(state: Parcel) -> dict[str, Any]:
        said = model.invoke([HumanMessage(f"{state.where} via {'>'.join(state.hops)}")]).content
        return {"hops": ["told" if not changed else "TOLD"], "where": said}

    b = StateGraph(Parcel)
    b.add_node("locate", locate)
    b.add_node("tell", tell)
    b.add_edge(START, "locate")
    b.add_edge("locate", "tell")
    b.add_edge("tell", END)
    return b.compile()


# -- 15. REMOVE_ALL_MESSAGES: a node replaces the whole history with a summary ---------------------


def history_reset(changed: bool = False) -> Any:
    def chat(messages: list[BaseMessage]) -> AIMessage:
        last = last_tool(messages)
        if last is not None:
            return AIMessage(f"so: {last.content}")
        asked = messages[-1].content
        return AIMessage("", tool_calls=[call("lookup", f"hr{len(messages)}", order_id=str(asked).split()[-1])])

    model = scripted("reset-model", chat).bind_tools([lookup])

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    def reset(state: MessagesState) -> dict[str, Any]:
        kept = state["messages"][-1:] if not changed else state["messages"][-2:]
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *kept]}

    def after_agent(state: MessagesState) -> Literal["tools", "reset"]:
        return "tools" if state["messages"][-1].tool_calls else "reset"

    b = StateGraph(MessagesState)
    b.add_node("agent", agent)
    b.add_node("tools", ToolNode([lookup]))
    b.add_node("reset", reset)
    b.add_edge(START, "agent")
    b.add_conditional_edges("agent", after_agent)
    b.add_edge("tools", "agent")
    b.add_edge("reset", END)
    return b.compile(checkpointer=InMemorySaver())


# -- 16. create_react_agent with response_format: a structured answer after the loop -------------


class Verdict(BaseModel):
    """The agent's verdict on an order."""

    order_id: str
    late: bool


def react_response_format(changed: bool = False) -> Any:
    def decide(messages: list[BaseMessage]) -> AIMessage:
        last = last_tool(messages)
        if last is None and not any(isinstance(m, AIMessage) for m in messages):
            return AIMessage("", tool_calls=[call("lookup", "rf1", order_id="RF1")])
        if messages and isinstance(messages[0], SystemMessage) and "verdict" in str(messages[0].content).lower():
            return AIMessage("", tool_calls=[call("Verdict", "v1", order_id="RF1", late="transit" in str(messages[-2].content))])
        return AIMessage("RF1 is in transit")

    fmt = ("Give a VERDICT.", Verdict) if changed else ("Give a verdict.", Verdict)
    return create_react_agent(scripted("verdict-model", decide), [lookup], response_format=fmt)


# -- 17. langchain's ToolErrorMiddleware: a tool's error handed to the model, sync and async ------


def tool_error_builtin(changed: bool = False) -> Any:
    def on_error(exc: Exception, request: Any) -> str | None:
        if isinstance(exc, ConnectionError):
            return f"{type(exc).__name__}{'!' if changed else ''}: try another card"
        return None

    async def aon_error(exc: Exception, request: Any) -> str | None:
        return on_error(exc, request)

    def decide(messages: list[BaseMessage]) -> AIMessage:
        seen = _tools_seen(messages)
        if not seen:
            return AIMessage("", tool_calls=[call("charge", "tb1", card="4000-9"), call("lookup", "tb2", order_id="TB2")])
        return AIMessage(" | ".join(f"{m.status}:{m.content}" for m in sorted(seen, key=lambda m: m.tool_call_id)))

    return create_agent(scripted("charge-model", decide), [charge, lookup], middleware=[ToolErrorMiddleware(on_error=on_error, aon_error=aon_error)])


# -- 18. a sync entrypoint whose parallel tasks run at once, one of them asking a person ------------


def entrypoint_one_asks(changed: bool = False) -> Any:
    model = _echo("brief-model")

    @task
    def fetch(order_id: str) -> str:
        return lookup.invoke({"order_id": order_id})

    @task
    def sign(orders: list[str]) -> str:
        return str(interrupt({"sign": orders}))

    @entrypoint(checkpointer=InMemorySaver())
    def brief(orders: list[str]) -> str:
        found = [fetch(o) for o in orders]
        signed = sign(orders)
        texts = [f.result() for f in found]
        joined = (" + " if changed else " & ").join(texts)
        return model.invoke([HumanMessage(f"{joined} ({signed.result()})")]).content

    return brief


# -- 19. a persistent subgraph node (checkpointer=True) whose node asks a person, over turns ------


class Ask2(TypedDict, total=False):
    question: str
    answers: Annotated[list[str], operator.add]


def asking_memory(changed: bool = False) -> Any:
    model = _echo("memory-model")

    def ask(state: Ask2) -> dict[str, Any]:
        said = interrupt({"confirm": state["question"]})
        found = lookup.invoke({"order_id": state["question"]})
        told = model.invoke([HumanMessage(f"{found} ({said}){'!' if changed else ''}; seen {len(state.get('answers', []))}")])
        return {"answers": [told.content]}

    inner = StateGraph(Ask2)
    inner.add_node("ask", ask)
    inner.add_edge(START, "ask")
    b = StateGraph(Ask2)
    b.add_node("desk", inner.compile(checkpointer=True))
    b.add_edge(START, "desk")
    return b.compile(checkpointer=InMemorySaver())


# -- 20. Send packets to a subgraph node, each asking a person ---------------------------------------


class Claims(TypedDict, total=False):
    claims: list[str]
    claim: str
    verdicts: Annotated[list[str], operator.add]


class Verdicts(TypedDict, total=False):
    verdicts: Annotated[list[str], operator.add]


def send_to_subgraph_asks(changed: bool = False) -> Any:
    def judge(state: Claims) -> dict[str, Any]:
        found = lookup.invoke({"order_id": state["claim"]})
        said = interrupt({"claim": state["claim"], "found": found.upper() if changed else found})
        return {"verdicts": [f"{state['claim']}: {said}"]}

    inner = StateGraph(Claims, output_schema=Verdicts)  # each packet hands back its verdict only
    inner.add_node("judge", judge)
    inner.add_edge(START, "judge")
    b = StateGraph(Claims)
    b.add_node("plan", lambda s: {})
    b.add_node("review", inner.compile())
    b.add_edge(START, "plan")
    b.add_conditional_edges("plan", lambda s: [Send("review", {"claim": c}) for c in s["claims"]])
    b.add_edge("review", END)
    return b.compile(checkpointer=InMemorySaver())


# -- 21. a RetryPolicy around a subgraph node whose model fails its first call ---------------------


class Flaky(ConnectionError):
    """A provider's dropped connection."""


def retried_subgraph(changed: bool = False) -> Any:
    calls = {"n": 0}

    def flaky(messages: list[BaseMessage]) -> AIMessage:
        calls["n"] += 1
        if calls["n"] == 1:
            raise Flaky("connection reset")
        return AIMessage(f"noted: {messages[-1].content}")

    model = scripted("flaky-model", flaky)

    def work(state: MessagesState) -> dict[str, Any]:
        found = lookup.invoke({"order_id": "RT1"})
        return {"messages": [model.invoke([HumanMessage(found.upper() if changed else found)])]}

    inner = StateGraph(MessagesState)
    inner.add_node("work", work)
    inner.add_edge(START, "work")
    b = StateGraph(MessagesState)
    b.add_node("worker", inner.compile(), retry_policy=RetryPolicy(retry_on=Flaky, max_attempts=3, initial_interval=0.01, jitter=False))
    b.add_edge(START, "worker")
    return b.compile()


# -- 22. a node awaiting functional @tasks, one of which asks a person -----------------------------


def node_runs_tasks(changed: bool = False) -> Any:
    model = _echo("task-model")

    @task
    def fetch(order_id: str) -> str:
        return lookup.invoke({"order_id": order_id})

    @task
    def confirm(order_id: str) -> str:
        return str(interrupt({"confirm": order_id}))

    def work(state: Notes) -> dict[str, Any]:
        found = [fetch(o) for o in ("NT1", "NT2")]
        ok = confirm("NT1")
        texts = [f.result() for f in found]
        said = model.invoke([HumanMessage(f"{(' + ' if changed else ' & ').join(texts)} ({ok.result()})")])
        return {"answer": said.content}

    b = StateGraph(Notes)
    b.add_node("work", work)
    b.add_edge(START, "work")
    return b.compile(checkpointer=InMemorySaver())
