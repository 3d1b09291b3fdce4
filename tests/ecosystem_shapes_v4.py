"""Shapes the other shape modules lack: typed artifacts restored mid-run, node timeouts, the
user's durability, and a subgraph that keeps its own memory.

A ``create_agent`` whose tool answers with content and a dataclass artifact, read back by a
``before_model`` middleware (a replay from a mid-run step must hand it the dataclass again); a
node with LangGraph 1.2's ``TimeoutPolicy`` whose first attempt times out and whose retry
succeeds; an agent run with ``durability="sync"`` and ``"exit"``; a ``create_agent``
compiled with ``checkpointer=True`` as a subgraph, remembering its own history over turns; and
tools called outside a ``ToolNode`` (a node, a functional ``@task`` calling ``tool.invoke``
directly) whose typed answers (a message's artifact, a returned model) the next node reads.

Each builder takes ``changed``: the same graph with one thing changed in its own code, which a
strict replay of the unchanged graph's recording must catch. Models are scripted and answer
from the prompt, so a graph runs any number of times.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
import operator
from typing import Annotated, Any, NotRequired

from ecosystem_shapes import call, last_tool, lookup, scripted
from langchain.agents import AgentState, create_agent
from langchain.agents.middleware import before_model
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.func import entrypoint, task
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import RetryPolicy, TimeoutPolicy
from pydantic import BaseModel


# -- 1. a create_agent tool answering with a dataclass artifact, read by a middleware ------------


@dataclass
class Shipment:
    """What a booked shipment left behind."""

    order_id: str
    cents: int


class Spending(AgentState):
    spent: NotRequired[int]


def artifact_agent(changed: bool = False) -> Any:
    @tool(response_format="content_and_artifact")
    def ship(order_id: str) -> tuple[str, Shipment]:
        """Book a shipment."""
        return f"shipped {order_id}", Shipment(order_id=order_id, cents=700)

    @before_model(state_schema=Spending)
    def tally(state: Spending, runtime: Any) -> dict[str, Any] | None:
        shipped = [m.artifact for m in state["messages"] if isinstance(m, ToolMessage)]
        if not shipped:
            return None
        return {"spent": sum(s.cents for s in shipped) * (2 if changed else 1)}

    def decide(messages: list[BaseMessage]) -> AIMessage:
        if last_tool(messages) is None:
            return AIMessage("", tool_calls=[call("ship", "sh1", order_id="SH1"), call("ship", "sh2", order_id="SH2")])
        return AIMessage("Both shipped.")

    return create_agent(scripted("ship-model", decide), [ship], middleware=[tally])


# -- 2. a node whose first attempt times out (TimeoutPolicy), retried --------------------------


def timed_out_once(changed: bool = False) -> Any:
    attempts = {"quote": 0}

    @tool
    async def quote(order_id: str) -> str:
        """A courier's quote; the courier is slow to answer the first time."""
        attempts["quote"] += 1
        if attempts["quote"] == 1:
            await asyncio.sleep(5)
        return f"quote for {order_id}: 7 days"

    model = scripted("quote-model", lambda ms: AIMessage(f"Told: {ms[-1].content}"))

    async def fetch(state: MessagesState) -> dict[str, Any]:
        said = await quote.ainvoke({"order_id": "TO1"})
        reply = await model.ainvoke([HumanMessage(said.upper() if changed else said)])
        return {"messages": [reply]}

    b = StateGraph(MessagesState)
    b.add_node("fetch", fetch, timeout=TimeoutPolicy(run_timeout=0.2), retry_policy=RetryPolicy(max_attempts=3, initial_interval=0.01, jitter=False))
    b.add_edge(START, "fetch")
    b.add_edge("fetch", END)
    return b.compile()


# -- 3. an agent run with the user's durability, on a graph without a checkpointer --------------


def _looker(messages: list[BaseMessage]) -> AIMessage:
    last = last_tool(messages)
    if last is None:
        return AIMessage("", tool_calls=[call("lookup", "du1", order_id="DU1")])
    return AIMessage(f"Found: {last.content}")


def durable_agent(changed: bool = False) -> Any:
    return create_agent(scripted("durable-model", _looker), [lookup], system_prompt="Be brief." if changed else None)


# -- 4. a subgraph compiled with checkpointer=True: its own memory over the thread's turns ---------


def persistent_desk(changed: bool = False) -> Any:
    def desk_model(messages: list[BaseMessage]) -> AIMessage:
        asked = sum(isinstance(m, HumanMessage) for m in messages)  # the desk remembers earlier turns
        last = last_tool(messages)
        if last is None or last.tool_call_id != f"pd{asked}":
            return AIMessage("", tool_calls=[call("lookup", f"pd{asked}", order_id=f"PD{asked}")])
        return AIMessage(f"turn {asked}: {last.content}")

    desk = create_agent(scripted("desk-model", desk_model), [lookup], system_prompt="Desk." if changed else None, checkpointer=True, name="desk")

    def front(state: MessagesState) -> dict[str, Any]:
        answer = desk.invoke({"messages": [state["messages"][-1]]})
        return {"messages": [AIMessage(f"desk says {answer['messages'][-1].content}")]}

    b = StateGraph(MessagesState)
    b.add_node("front", front)
    b.add_edge(START, "front")
    b.add_edge("front", END)
    return b.compile(checkpointer=InMemorySaver())


# -- 5. tools called outside a ToolNode: a node and a functional task call tool.invoke directly ---


class Quote(BaseModel):
    """A courier's price for an order."""

    order_id: str
    cents: int


@tool(response_format="content_and_artifact")
def dispatch(order_id: str) -> tuple[str, Shipment]:
    """Dispatch an order."""
    return f"dispatched {order_id}", Shipment(order_id=order_id, cents=700)


@tool
def price(order_id: str) -> Quote:
    """Price an order."""
    return Quote(order_id=order_id, cents=250)


class Ledger(MessagesState):
    quotes: Annotated[list, operator.add]  # untyped: only the tool that made them says what they are
    spent: int


def direct_tool_node(changed: bool = False) -> Any:
    """A node calls the tools itself (a ToolCall gives a ToolMessage with its artifact); the next
    node reads ``artifact.cents`` and ``quote.cents`` off the state."""

    def book(state: Ledger) -> dict[str, Any]:
        shipped = dispatch.invoke(call("dispatch", "dn1", order_id="DN1"))
        return {"messages": [shipped], "quotes": [price.invoke({"order_id": "DN1"})]}

    def tally(state: Ledger) -> dict[str, Any]:
        shipped = sum(m.artifact.cents for m in state["messages"] if isinstance(m, ToolMessage))
        return {"spent": (shipped + sum(q.cents for q in state["quotes"])) * (2 if changed else 1)}

    b = StateGraph(Ledger)
    b.add_node("book", book)
    b.add_node("tally", tally)
    b.add_edge(START, "book")
    b.add_edge("book", "tally")
    b.add_edge("tally", END)
    return b.compile()


class _Desk:
    """A user's class that keeps its tools on itself: its method is the node that calls them."""

    def __init__(self) -> None:
        self.courier = dispatch
        self.tools = {"price": price}

    def book(self, state: Ledger) -> dict[str, Any]:
        shipped = self.courier.invoke(call("dispatch", "mn1", order_id="MN1"))
        return {"messages": [shipped], "quotes": [self.tools["price"].invoke({"order_id": "MN1"})]}


class _Tally:
    """A node that is an object with ``__call__``."""

    def __init__(self, changed: bool) -> None:
        self.factor = 2 if changed else 1

    def __call__(self, state: Ledger) -> dict[str, Any]:
        shipped = sum(m.artifact.cents for m in state["messages"] if isinstance(m, ToolMessage))
        return {"spent": (shipped + sum(q.cents for q in state["quotes"])) * self.factor}


def method_tool_node(changed: bool = False) -> Any:
    """As ``direct_tool_node``, the tools reached only through the attributes of the node's object."""
    b = StateGraph(Ledger)
    b.add_node("book", _Desk().book)
    b.add_node("tally", _Tally(changed))
    b.add_edge(START, "book")
    b.add_edge("book", "tally")
    b.add_edge("tally", END)
    return b.compile()


def direct_tool_entrypoint(changed: bool = False) -> Any:
    """A functional task calls the tools; the entrypoint saves what they made (the artifact, the
    quote) and reads ``cents`` off both from ``previous`` on the next turn. (LangGraph hands a
    saved value back as its class; a saved tool message's artifact it hands back as a dict.)"""

    @task
    def book(order_id: str) -> tuple[ToolMessage, Quote]:
        shipped = dispatch.invoke(call("dispatch", order_id.lower(), order_id=order_id))
        return shipped, price.invoke({"order_id": order_id})

    @entrypoint(checkpointer=InMemorySaver())
    def desk(order_id: str, previous: Any = None) -> Any:
        before = 0 if previous is None else previous["shipment"].cents + previous["quote"].cents
        shipped, quote = book(order_id).result()
        spent = (before + shipped.artifact.cents + quote.cents) * (2 if changed else 1)
        return entrypoint.final(value={"spent": spent}, save={"shipment": shipped.artifact, "quote": quote})

    return desk
