"""More graph shapes from the LangGraph ecosystem, each built fresh by a function.

The conformance corpus (``tests/conformance``) holds the common shapes; these are ones it does
not: ``Send`` fan-outs inside a subgraph and branches that each ask a person, a ``ToolNode``
or a model retried by a ``RetryPolicy``, a tool that asks twice, parallel nodes that interrupt
in one superstep and join, the functional API (``previous``, ``entrypoint.final``, async tasks
gathered, a ``@task`` that runs an agent), a tool whose ``Command`` routes, ``create_react_agent``
with model hooks and as version 1, a ``return_direct`` tool, a tool writing custom stream data,
a subgraph a node runs twice (in turn, or at once), an interrupt inside such a subgraph,
``RemoveMessage``, async tools, memories searched through ``InjectedStore``, a multi-turn swarm,
a supervisor whose worker's tool asks a person, LCEL chains and structured output as nodes.
Models are scripted and answer from the prompt, so a graph can run any number of times and a
replay sees what the recording saw.
"""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, Any, Literal, TypedDict

from conftest import load_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_store, get_stream_writer
from langgraph.func import entrypoint, task
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import InjectedState, InjectedStore, ToolNode, create_react_agent
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command, RetryPolicy, Send, interrupt

ScriptedChatModel = load_agent("scripted_model").ScriptedChatModel


def call(name: str, call_id: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def scripted(name: str, decide: Any) -> Any:
    return ScriptedChatModel(script=decide, model_name=name)


def last_tool(messages: list[BaseMessage]) -> ToolMessage | None:
    return messages[-1] if messages and isinstance(messages[-1], ToolMessage) else None


@tool
def lookup(order_id: str) -> str:
    """Where an order is."""
    return f"order {order_id} is in transit"


# -- 1. map-reduce with Send inside a subgraph, a tool call per branch --------------------------


class Orders(TypedDict, total=False):
    orders: list[str]
    found: Annotated[list[str], operator.add]


def each_order(state: Orders) -> list[Send]:
    return [Send("look", {"orders": [o]}) for o in state["orders"]]


def send_in_subgraph() -> Any:
    inner = StateGraph(Orders)
    inner.add_node("plan", lambda s: {})
    inner.add_node("look", lambda s: {"found": [lookup.invoke({"order_id": s["orders"][0]})]})
    inner.add_edge(START, "plan")
    inner.add_conditional_edges("plan", each_order, ["look"])
    inner.add_edge("look", END)
    outer = StateGraph(Orders)
    outer.add_node("intake", lambda s: {})
    outer.add_node("fanout", inner.compile())
    outer.add_node("report", lambda s: {"found": [f"{len(s['found'])} found"]})
    outer.add_edge(START, "intake")
    outer.add_edge("intake", "fanout")
    outer.add_edge("fanout", "report")
    outer.add_edge("report", END)
    return outer.compile()


# -- 2. a ToolNode retried by a RetryPolicy: the tool fails once, then answers -----------------


class Flaky:
    """A tool that fails its first call on each graph built, as a flaky service does."""

    def __init__(self) -> None:
        self.calls = 0

        @tool
        def stock(sku: str) -> str:
            """How many of an item are in stock."""
            self.calls += 1
            if self.calls == 1:
                raise ConnectionError("inventory service reset the connection")
            return f"{sku}: 7 in stock"

        self.tool = stock


def _stock_model(messages: list[BaseMessage]) -> AIMessage:
    last = last_tool(messages)
    if last is not None:
        return AIMessage(f"Stock: {last.content}")
    return AIMessage("", tool_calls=[call("stock", "r1", sku="S9")])


def tools_or_end(state: MessagesState) -> Literal["tools", "__end__"]:
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else "__end__"


def retried_toolnode() -> Any:
    model = scripted("stock-model", _stock_model)
    flaky = Flaky()
    b = StateGraph(MessagesState)
    b.add_node("agent", lambda s: {"messages": [model.invoke(s["messages"])]})
    b.add_node("tools", ToolNode([flaky.tool], handle_tool_errors=False), retry_policy=RetryPolicy(max_attempts=3, initial_interval=0.01, jitter=False, retry_on=ConnectionError))
    b.add_edge(START, "agent")
    b.add_conditional_edges("agent", tools_or_end)
    b.add_edge("tools", "agent")
    return b.compile()


# -- 3. a tool that asks a person twice, in a create_react_agent -------------------------------


@tool
def wire_money(to: str, amount: int) -> str:
    """Wire money once a person confirms twice."""
    first = interrupt({"confirm": f"wire {amount} to {to}?"})
    second = interrupt({"really": f"{first}: sure?"})
    return f"wired {amount} to {to} ({first}, {second})"


def _wire_model(messages: list[BaseMessage]) -> AIMessage:
    last = last_tool(messages)
    if last is not None:
        return AIMessage(f"Done: {last.content}")
    return AIMessage("", tool_calls=[call("wire_money", "w1", to="Bo", amount=40)])


def tool_asks_twice() -> Any:
    return create_react_agent(scripted("wire-model", _wire_model), [wire_money], checkpointer=InMemorySaver(), name="wire")


# -- 4. two parallel nodes that each interrupt in one superstep ---------------------------------


class Reviews(TypedDict, total=False):
    doc: str
    verdicts: Annotated[list[str], operator.add]


def _reviewer(who: str) -> Any:
    def review(state: Reviews) -> dict[str, Any]:
        checked = lookup.invoke({"order_id": f"{who}-{state['doc']}"})
        return {"verdicts": [f"{who}: {interrupt({'review': state['doc'], 'by': who})} ({checked})"]}

    return review


def parallel_interrupts() -> Any:
    b = StateGraph(Reviews)
    b.add_node("legal", _reviewer("legal"))
    b.add_node("finance", _reviewer("finance"))
    b.add_node("publish", lambda s: {"verdicts": ["published"]})
    b.add_edge(START, "legal")
    b.add_edge(START, "finance")
    b.add_edge(["legal", "finance"], "publish")
    b.add_edge("publish", END)
    return b.compile(checkpointer=InMemorySaver())


# -- 5. functional API: previous, entrypoint.final, a task calling a tool ----------------------


def counting_entrypoint() -> Any:
    @task
    def fetch_status(order_id: str) -> str:
        return lookup.invoke({"order_id": order_id})

    @entrypoint(checkpointer=InMemorySaver())
    def tally(order_id: str, previous: Any = None) -> Any:
        seen = (previous or {"count": 0})["count"] + 1
        status = fetch_status(order_id).result()
        return entrypoint.final(value={"status": status, "seen": seen}, save={"count": seen})

    return tally


# -- 6. async functional API: tasks gathered, a model in each, an interrupt ---------------------


def gathered_tasks() -> Any:
    model = scripted("brief-model", lambda messages: AIMessage(f"brief on {messages[-1].content}"))

    @task
    async def brief(topic: str) -> str:
        return str((await model.ainvoke([HumanMessage(topic)])).content)

    @task
    async def sign(text: str) -> str:
        return f"{text} [{interrupt({'sign': text})}]"

    @entrypoint(checkpointer=InMemorySaver())
    async def briefing(topics: list[str]) -> dict[str, Any]:
        briefs = await asyncio.gather(*(brief(t) for t in topics))
        return {"signed": await sign(" / ".join(briefs))}

    return briefing


# -- 7. a tool returning Command(update=..., goto=...) with InjectedToolCallId and InjectedState -


class Desk(MessagesState, total=False):
    customer: str
    escalated_by: str


@tool
def escalate(reason: str, tool_call_id: Annotated[str, InjectedToolCallId], state: Annotated[dict, InjectedState]) -> Command:
    """Hand the conversation to a human supervisor."""
    note = f"escalated for {state.get('customer')}: {reason}"
    return Command(update={"escalated_by": reason, "messages": [ToolMessage(note, tool_call_id=tool_call_id)]}, goto="supervisor")


def _desk_model(messages: list[BaseMessage]) -> AIMessage:
    return AIMessage("", tool_calls=[call("escalate", "e1", reason="angry customer")])


def tool_command_goto() -> Any:
    model = scripted("desk-model", _desk_model)
    b = StateGraph(Desk)
    b.add_node("agent", lambda s: {"messages": [model.invoke(s["messages"])]})
    b.add_node("tools", ToolNode([escalate]))
    b.add_node("supervisor", lambda s: {"messages": [AIMessage(f"Supervisor here ({s['escalated_by']}).")]})
    b.add_edge(START, "agent")
    b.add_conditional_edges("agent", tools_or_end)
    b.add_edge("supervisor", END)
    return b.compile()


# -- 8. create_react_agent with a pre- and a post-model hook, and version 1 (parallel tool calls) -


def _hooked_model(messages: list[BaseMessage]) -> AIMessage:
    tools_seen = [m for m in messages if isinstance(m, ToolMessage)]
    if tools_seen:
        return AIMessage("Both orders are in transit.")
    return AIMessage("", tool_calls=[call("lookup", "h1", order_id="K1"), call("lookup", "h2", order_id="K2")])


def _trim(state: Any) -> dict[str, Any]:
    return {"llm_input_messages": [m for m in state["messages"] if not (isinstance(m, HumanMessage) and m.content == "ignore me")]}


def _audit(state: Any) -> dict[str, Any]:
    return {}


def hooked_react() -> Any:
    return create_react_agent(scripted("hooked-model", _hooked_model), [lookup], pre_model_hook=_trim, post_model_hook=_audit, name="hooked")


def react_v1() -> Any:
    """Version 1 runs a turn's tool calls in one ``tools`` task (version 2 sends one task each)."""
    return create_react_agent(scripted("v1-model", _hooked_model), [lookup], pre_model_hook=_trim, version="v1", name="classic")


# -- 9. a return_direct tool ends the agent's loop -----------------------------------------------


@tool(return_direct=True)
def final_quote(item: str) -> str:
    """Quote a price; the quote is the agent's answer."""
    return f"{item} costs 12"


def _quote_model(messages: list[BaseMessage]) -> AIMessage:
    return AIMessage("", tool_calls=[call("final_quote", "q1", item="lamp"), call("lookup", "q2", order_id="L1")])


def return_direct() -> Any:
    return create_react_agent(scripted("quote-model", _quote_model), [final_quote, lookup], name="quoter")


# -- 10. three stream modes at once: updates, messages and custom -------------------------------


@tool
def track(order_id: str) -> str:
    """Track an order, reporting progress as it goes."""
    write = get_stream_writer()
    for leg in ("warehouse", "truck"):
        write({"order": order_id, "leg": leg})
    return f"{order_id} is on the truck"


def _track_model(messages: list[BaseMessage]) -> AIMessage:
    last = last_tool(messages)
    if last is not None:
        return AIMessage(f"Tracking: {last.content}")
    return AIMessage("", tool_calls=[call("track", "tr1", order_id="M3")])


def three_modes() -> Any:
    return create_react_agent(scripted("track-model", _track_model), [track], name="tracker")


# -- 11. a subgraph invoked twice inside one node, a tool call in each run ----------------------


class Quote(TypedDict, total=False):
    items: list[str]
    quotes: list[str]


class Priced(TypedDict, total=False):
    item: str
    price: str


def both_items(state: Priced) -> Literal["rush", "normal"]:
    return "rush" if state["item"].startswith("r") else "normal"


def sub_twice_in_node() -> Any:
    p = StateGraph(Priced)
    p.add_node("check", lambda s: {"price": lookup.invoke({"order_id": s["item"]})})
    p.add_node("rush", lambda s: {"price": s["price"] + " (rush)"})
    p.add_node("normal", lambda s: {"price": s["price"] + " (normal)"})
    p.add_edge(START, "check")
    p.add_conditional_edges("check", both_items)
    p.add_edge("rush", END)
    p.add_edge("normal", END)
    pricing = p.compile()

    def quote_all(state: Quote) -> dict[str, Any]:
        return {"quotes": [pricing.invoke({"item": item})["price"] for item in state["items"]]}

    b = StateGraph(Quote)
    b.add_node("quote_all", quote_all)
    b.add_edge(START, "quote_all")
    b.add_edge("quote_all", END)
    return b.compile()


# -- 12. add_messages with RemoveMessage: a node trims the history before the model ------------


def _chat_model(messages: list[BaseMessage]) -> AIMessage:
    return AIMessage(f"I see {len(messages)} messages, last: {messages[-1].content}")


def trimmed_history() -> Any:
    model = scripted("trim-model", _chat_model)

    def trim(state: MessagesState) -> dict[str, Any]:
        return {"messages": [RemoveMessage(id=m.id) for m in state["messages"][:-2]]}

    b = StateGraph(MessagesState)
    b.add_node("trim", trim)
    b.add_node("reply", lambda s: {"messages": [model.invoke(s["messages"])]})
    b.add_edge(START, "trim")
    b.add_edge("trim", "reply")
    b.add_edge("reply", END)
    return b.compile()


# -- 13. async tools in a ToolNode, an async model node, run with ainvoke ------------------------


@tool
async def async_lookup(order_id: str) -> str:
    """Where an order is (asynchronously)."""
    await asyncio.sleep(0)
    return f"order {order_id} is out for delivery"


@tool
async def async_eta(order_id: str) -> str:
    """When an order arrives (asynchronously)."""
    await asyncio.sleep(0)
    return f"order {order_id} arrives tomorrow"


def _async_model(messages: list[BaseMessage]) -> AIMessage:
    if last_tool(messages) is not None:
        return AIMessage("Out for delivery, arriving tomorrow.")
    return AIMessage("", tool_calls=[call("async_lookup", "a1", order_id="N4"), call("async_eta", "a2", order_id="N4")])


def async_tools() -> Any:
    model = scripted("async-model", _async_model)

    async def agent(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"], config)]}

    b = StateGraph(MessagesState)
    b.add_node("agent", agent)
    b.add_node("tools", ToolNode([async_lookup, async_eta]))
    b.add_edge(START, "agent")
    b.add_conditional_edges("agent", tools_or_end)
    b.add_edge("tools", "agent")
    return b.compile()


# -- 14. a multi-turn swarm on a thread: the second turn starts with the agent handed to --------


def _swarm_desk(messages: list[BaseMessage]) -> AIMessage:
    if any(isinstance(m, ToolMessage) and m.name == "transfer_to_billing" for m in messages):
        return AIMessage("Billing has it.")
    return AIMessage("", tool_calls=[call("transfer_to_billing", "sw1")])


def _swarm_billing(messages: list[BaseMessage]) -> AIMessage:
    last = messages[-1]
    if isinstance(last, ToolMessage) and last.name == "lookup":
        return AIMessage(f"Billing: {last.content}")
    if isinstance(last, HumanMessage):
        return AIMessage("", tool_calls=[call("lookup", f"bl-{len(messages)}", order_id="P5")])
    return AIMessage("Billing here.")


def swarm_turns() -> Any:
    from langgraph_swarm import create_handoff_tool, create_swarm

    desk = create_react_agent(scripted("desk-model", _swarm_desk), [create_handoff_tool(agent_name="billing")], name="desk")
    billing = create_react_agent(scripted("billing-model", _swarm_billing), [lookup], name="billing")
    return create_swarm([desk, billing], default_active_agent="desk").compile(checkpointer=InMemorySaver())


# -- 15. a loop of tool calls that meets its recursion limit, under ainvoke ---------------------


def _restless_model(messages: list[BaseMessage]) -> AIMessage:
    n = sum(isinstance(m, ToolMessage) for m in messages)
    return AIMessage("", tool_calls=[call("lookup", f"rl{n}", order_id=f"R{n}")])


def restless_async() -> Any:
    return create_react_agent(scripted("restless-model", _restless_model), [lookup], name="restless")


# -- 16. an async node that runs one subgraph twice at once (asyncio.gather) --------------------


def sub_gathered_in_node() -> Any:
    p = StateGraph(Priced)
    p.add_node("check", lambda s: {"price": lookup.invoke({"order_id": s["item"]})})
    p.add_node("rush", lambda s: {"price": s["price"] + " (rush)"})
    p.add_node("normal", lambda s: {"price": s["price"] + " (normal)"})
    p.add_edge(START, "check")
    p.add_conditional_edges("check", both_items)
    p.add_edge("rush", END)
    p.add_edge("normal", END)
    pricing = p.compile()

    async def quote_all(state: Quote) -> dict[str, Any]:
        priced = await asyncio.gather(*(pricing.ainvoke({"item": item}) for item in state["items"]))
        return {"quotes": [p["price"] for p in priced]}

    b = StateGraph(Quote)
    b.add_node("quote_all", quote_all)
    b.add_edge(START, "quote_all")
    b.add_edge("quote_all", END)
    return b.compile()


# -- 17. memories: a node writes them, a tool searches them through InjectedStore ---------------


class Notes(MessagesState, total=False):
    user: str


@tool
def recall(query: str, store: Annotated[Any, InjectedStore()], state: Annotated[dict, InjectedState]) -> str:
    """Search what is remembered about the user."""
    hits = store.search(("notes", state["user"]), query=query, limit=5)
    return "; ".join(sorted(h.value["text"] for h in hits)) or "nothing"


def _recall_model(messages: list[BaseMessage]) -> AIMessage:
    last = last_tool(messages)
    if last is not None:
        return AIMessage(f"You told me: {last.content}")
    return AIMessage("", tool_calls=[call("recall", "m1", query="likes")])


def store_search_tool() -> Any:
    model = scripted("recall-model", _recall_model)

    def note(state: Notes) -> dict[str, Any]:
        store = get_store()
        store.put(("notes", state["user"]), "tea", {"text": "likes tea"})
        store.put(("notes", state["user"]), "rain", {"text": "likes rain"})
        return {}

    b = StateGraph(Notes)
    b.add_node("note", note)
    b.add_node("agent", lambda s: {"messages": [model.invoke(s["messages"])]})
    b.add_node("tools", ToolNode([recall]))
    b.add_edge(START, "note")
    b.add_edge("note", "agent")
    b.add_conditional_edges("agent", tools_or_end)
    b.add_edge("tools", "agent")
    return b.compile(store=InMemoryStore())


# -- 18. a model that fails once with a provider's error, the node retried by its RetryPolicy ---


class Overloaded(Exception):
    """A provider's "overloaded, try again" error."""

    def __init__(self, message: str, status_code: int = 529) -> None:
        super().__init__(message)
        self.status_code = status_code


def retried_model() -> Any:
    asked = {"n": 0}

    def decide(messages: list[BaseMessage]) -> AIMessage:
        asked["n"] += 1
        if asked["n"] == 1:
            raise Overloaded("the model is overloaded")
        return AIMessage(f"answer to {messages[-1].content}")

    model = scripted("busy-model", decide)
    b = StateGraph(MessagesState)
    b.add_node("answer", lambda s: {"messages": [model.invoke(s["messages"])]}, retry_policy=RetryPolicy(max_attempts=3, initial_interval=0.01, jitter=False, retry_on=Overloaded))
    b.add_edge(START, "answer")
    b.add_edge("answer", END)
    return b.compile()


# -- 19. an interrupt inside a subgraph that a node invokes itself, resumed ----------------------


class Ask(TypedDict, total=False):
    question: str
    answer: str


def sub_interrupt_in_node() -> Any:
    inner = StateGraph(Ask)
    inner.add_node("look", lambda s: {"answer": lookup.invoke({"order_id": s["question"]})})
    inner.add_node("ask", lambda s: {"answer": f"{s['answer']} / {interrupt({'confirm': s['answer']})}"})
    inner.add_edge(START, "look")
    inner.add_edge("look", "ask")
    inner.add_edge("ask", END)
    asking = inner.compile()

    def delegate(state: Ask) -> dict[str, Any]:
        return {"answer": asking.invoke({"question": state["question"]})["answer"]}

    b = StateGraph(Ask)
    b.add_node("delegate", delegate)
    b.add_node("finish", lambda s: {"answer": s["answer"].upper()})
    b.add_edge(START, "delegate")
    b.add_edge("delegate", "finish")
    b.add_edge("finish", END)
    return b.compile(checkpointer=InMemorySaver())


# -- 20. Send branches that each ask a person (map-reduce with a human per branch) --------------


class Claims(TypedDict, total=False):
    claims: list[str]
    decided: Annotated[list[str], operator.add]


def _judge(state: dict[str, Any]) -> dict[str, Any]:
    claim = state["claim"]
    found = lookup.invoke({"order_id": claim})
    return {"decided": [f"{claim}: {interrupt({'approve': claim})} ({found})"]}


def send_branches_ask() -> Any:
    b = StateGraph(Claims)
    b.add_node("judge", _judge)
    b.add_conditional_edges(START, lambda s: [Send("judge", {"claim": c}) for c in s["claims"]], ["judge"])
    b.add_edge("judge", END)
    return b.compile(checkpointer=InMemorySaver())


# -- 21. a functional @task that runs a StateGraph agent ----------------------------------------


def task_runs_agent() -> Any:
    agent = create_react_agent(scripted("inner-model", _hooked_model), [lookup], name="inner")

    @task
    def investigate(question: str) -> str:
        out = agent.invoke({"messages": [HumanMessage(question)]})
        return str(out["messages"][-1].content)

    @entrypoint()
    def case_file(question: str) -> dict[str, Any]:
        return {"finding": investigate(question).result()}

    return case_file


# -- 22. a supervisor whose worker's tool asks a person (an interrupt two graphs deep) ----------


@tool
def issue_refund(order_id: str) -> str:
    """Refund an order once a person agrees."""
    return f"refund of {order_id}: {interrupt({'refund': order_id})}"


def _boss_model(messages: list[BaseMessage]) -> AIMessage:
    if any(isinstance(m, AIMessage) and m.name == "cashier" and not m.tool_calls for m in messages):
        return AIMessage("The cashier handled it.")
    return AIMessage("", tool_calls=[call("transfer_to_cashier", "b1")])


def _cashier_model(messages: list[BaseMessage]) -> AIMessage:
    last = last_tool(messages)
    if last is not None and last.name == "issue_refund":
        return AIMessage(f"Cashier: {last.content}")
    return AIMessage("", tool_calls=[call("issue_refund", "c1", order_id="Z9")])


def supervisor_asks() -> Any:
    from langgraph_supervisor import create_supervisor

    cashier = create_react_agent(scripted("cashier-model", _cashier_model), [issue_refund], name="cashier")
    return create_supervisor([cashier], model=scripted("boss-model", _boss_model)).compile(checkpointer=InMemorySaver())


# -- 23. a node that is an LCEL chain: prompt | model | parser, and structured output -----------


class Verdict(TypedDict):
    """A verdict on a request."""

    allowed: bool
    reason: str


def _verdict_model(messages: list[BaseMessage]) -> AIMessage:
    text = str(messages[-1].content)
    if "Summarize" in text:
        return AIMessage(f"summary: {text[-20:]}")
    return AIMessage("", tool_calls=[call("Verdict", "v1", allowed="refund" in text, reason="policy")])


class Request(TypedDict, total=False):
    text: str
    summary: str
    verdict: dict


def lcel_nodes() -> Any:
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate

    model = scripted("lcel-model", _verdict_model)
    summarize = ChatPromptTemplate.from_messages([("human", "Summarize: {text}")]) | model | StrOutputParser()
    judge = model.with_structured_output(Verdict)
    b = StateGraph(Request)
    b.add_node("summarize", lambda s: {"summary": summarize.invoke({"text": s["text"]})})
    b.add_node("judge", lambda s: {"verdict": judge.invoke(f"Judge: {s['summary']}")})
    b.add_edge(START, "summarize")
    b.add_edge("summarize", "judge")
    b.add_edge("judge", END)
    return b.compile()
