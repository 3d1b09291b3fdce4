"""Shapes the other shape modules lack, as the packages' docs show them.

The functional API's own agent (a model task and a tool task in a loop, its history kept by
``previous``) and its human review of tool calls; a ``@task`` retried by a ``RetryPolicy`` run
async; ``RemainingSteps`` ending a loop and ``create_react_agent`` running out of steps; tools
reading the agent's state, context, store and stream through ``ToolRuntime``; parallel tool calls
where one fails into a custom error handler; a supervisor whose worker's answer is forwarded
as is, one that names its agents inline and has a tool of its own; two agents run as
parallel nodes of one superstep; a node that batches a model and a tool; nodes routing by
``Command``; a hand-rolled handoff (a tool's ``Command(graph=Command.PARENT)``); a summarized
conversation over turns of a thread; a ``wrap_model_call`` choosing the tools each turn; and
structured output to one of two schemas.

Each builder takes ``changed``: the same graph with one thing changed in its own code (a route,
a state value, a call's input, a prompt), which a strict replay of the unchanged graph's
recording must catch (a tool's or model's answer is the recording's in a strict replay).
Models are scripted and answer from the prompt, so a graph runs any number of times.
"""

from __future__ import annotations

import asyncio
import enum
import operator
from dataclasses import dataclass
from typing import Annotated, Any, Literal, NotRequired, TypedDict

from ecosystem_shapes import call, last_tool, lookup, scripted
from langchain.agents import AgentState, create_agent
from langchain.agents.middleware import SummarizationMiddleware, wrap_model_call
from langchain.agents.structured_output import ToolStrategy
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.func import entrypoint, task
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.message import add_messages
from langgraph.managed import RemainingSteps
from langgraph.prebuilt import ToolNode, create_react_agent
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command, RetryPolicy, interrupt
from pydantic import BaseModel


def _tools_seen(messages: list[BaseMessage]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


def _looks_up(*orders: str) -> Any:
    """A model that asks for every order at once, then answers with what came back."""

    def decide(messages: list[BaseMessage]) -> AIMessage:
        seen = _tools_seen(messages)
        if not seen:
            return AIMessage("", tool_calls=[call("lookup", f"q{i}", order_id=o) for i, o in enumerate(orders)])
        return AIMessage(" | ".join(sorted(str(m.content) for m in seen)))

    return decide


# -- 1. the functional API's agent: a model task, a tool task per call, history kept by previous --


def functional_agent(changed: bool = False) -> Any:
    model = scripted("fn-model", _looks_up("FA1", "FA2"))
    tools = {"lookup": lookup}

    @task
    def call_model(messages: list[BaseMessage]) -> AIMessage:
        return model.invoke(messages)

    @task
    def call_tool(tool_call: dict[str, Any]) -> ToolMessage:
        return tools[tool_call["name"]].invoke(tool_call)

    @entrypoint(checkpointer=InMemorySaver())
    def agent(messages: list[BaseMessage], previous: list[BaseMessage] | None = None) -> Any:
        messages = add_messages(previous or [], messages)
        response = call_model(messages).result()
        while response.tool_calls:
            results = [call_tool(tc) for tc in response.tool_calls]
            messages = add_messages(messages, [response, *[r.result() for r in results]])
            response = call_model(messages).result()
        messages = add_messages(messages, response)
        return entrypoint.final(value=response, save=messages[-2:] if changed else messages)

    return agent


# -- 2. the functional API reviewing each tool call with a person before it runs -------------------


def functional_review(changed: bool = False) -> Any:
    model = scripted("review-model", _looks_up("FR1"))

    @task
    def call_model(messages: list[BaseMessage]) -> AIMessage:
        return model.invoke(messages)

    @task
    def call_tool(tool_call: dict[str, Any]) -> ToolMessage:
        return lookup.invoke(tool_call)

    def review(tool_call: dict[str, Any]) -> dict[str, Any] | ToolMessage:
        answer = interrupt({"question": "Run this?", "tool_call": tool_call})
        if answer.get("action") == "edit" and not changed:
            return {**tool_call, "args": answer["args"]}
        return tool_call

    @entrypoint(checkpointer=InMemorySaver())
    def agent(messages: list[BaseMessage]) -> list[BaseMessage]:
        response = call_model(messages).result()
        while response.tool_calls:
            reviewed = [review(tc) for tc in response.tool_calls]
            results = [call_tool(tc).result() for tc in reviewed]
            messages = add_messages(messages, [response, *results])
            response = call_model(messages).result()
        return add_messages(messages, response)

    return agent


# -- 3. an async @task retried by a RetryPolicy: it fails once, then answers --------------------------


class _Flaky(Exception):
    """A service's transient failure."""


def async_task_retry(changed: bool = False) -> Any:
    tried = {"n": 0}

    @task(retry_policy=RetryPolicy(max_attempts=3, initial_interval=0.0, jitter=False, retry_on=_Flaky))
    async def fetch(order_id: str) -> str:
        tried["n"] += 1
        if tried["n"] == 1:
            raise _Flaky("try again")
        return await lookup.ainvoke({"order_id": order_id})

    @task
    async def summarize(found: list[str]) -> str:
        return (", " if changed else "; ").join(found)

    @entrypoint()
    async def gather(orders: list[str]) -> str:
        found = await asyncio.gather(*(fetch(o) for o in orders))
        return await summarize(list(found))

    return gather


# -- 4. RemainingSteps: a loop that stops itself before the recursion limit ---------------------------


class Loop(TypedDict, total=False):
    notes: Annotated[list[str], operator.add]
    remaining_steps: RemainingSteps


def remaining_steps_loop(changed: bool = False) -> Any:
    def work(state: Loop) -> dict[str, Any]:
        return {"notes": [lookup.invoke({"order_id": f"RS{len(state.get('notes', []))}"})]}

    def go_on(state: Loop) -> Literal["work", "wrap_up"]:
        return "wrap_up" if state["remaining_steps"] <= (3 if changed else 2) else "work"

    b = StateGraph(Loop)
    b.add_node("work", work)
    b.add_node("wrap_up", lambda s: {"notes": [f"stopped with {s['remaining_steps']} steps left"]})
    b.add_edge(START, "work")
    b.add_conditional_edges("work", go_on)
    b.add_edge("wrap_up", END)
    return b.compile()


def react_out_of_steps(changed: bool = False) -> Any:
    """``create_react_agent`` answers "need more steps" when its tool calls would pass the limit."""

    def restless(messages: list[BaseMessage]) -> AIMessage:
        n = len(_tools_seen(messages))
        return AIMessage("", tool_calls=[call("lookup", f"os{n}", order_id=f"OS{n}")])

    return create_react_agent(scripted("restless-model", restless), [lookup], prompt="Be brief." if changed else None, name="out_of_steps")


# -- 5. ToolRuntime: tools read the agent's state, context and store, write to the stream, update state


@dataclass
class Shopper:
    """Who is asking (the Runtime context)."""

    user: str


class Basket(AgentState):
    items: NotRequired[list[str]]


def tool_runtime(changed: bool = False) -> Any:
    @tool
    def add_item(item: str, runtime: ToolRuntime[Shopper, Basket]) -> Command:
        """Put an item in the shopper's basket."""
        runtime.stream_writer({"adding": item})
        saved = runtime.store.get(("prices",), item)
        price = saved.value["price"] if saved else 0
        items = [*runtime.state.get("items", []), item]
        note = f"{runtime.context.user} added {item} at {price}"
        return Command(update={"items": items, "messages": [ToolMessage(note, tool_call_id=runtime.tool_call_id)]})

    @tool
    def basket(runtime: ToolRuntime[Shopper, Basket]) -> str:
        """What is in the basket."""
        return f"{runtime.context.user} has {', '.join(runtime.state.get('items', []))}"

    def decide(messages: list[BaseMessage]) -> AIMessage:
        seen = _tools_seen(messages)
        if not seen:
            return AIMessage("", tool_calls=[call("add_item", "ai1", item="tea")])
        if len(seen) == 1:
            return AIMessage("", tool_calls=[call("add_item", "ai2", item="rice")])
        if len(seen) == 2:
            return AIMessage("", tool_calls=[call("basket", "bk1")])
        return AIMessage(str(seen[-1].content))

    store = InMemoryStore()
    store.put(("prices",), "tea", {"price": 4})
    store.put(("prices",), "rice", {"price": 2})
    prompt = "Shop for the user." if changed else None
    return create_agent(scripted("shop-model", decide), [add_item, basket], system_prompt=prompt, state_schema=Basket, context_schema=Shopper, store=store, name="shop")


# -- 6. parallel tool calls, one of which fails into the ToolNode's own error handler -------------


def parallel_tool_error(changed: bool = False) -> Any:
    @tool
    def charge(card: str) -> str:
        """Charge a card."""
        raise ValueError(f"card {card} declined")

    def explain(error: Exception) -> str:
        return f"{'DECLINED' if changed else 'declined'}: {error}"

    def decide(messages: list[BaseMessage]) -> AIMessage:
        seen = _tools_seen(messages)
        if not seen:
            return AIMessage("", tool_calls=[call("lookup", "pt1", order_id="PT1"), call("charge", "pt2", card="4000"), call("lookup", "pt3", order_id="PT3")])
        return AIMessage(" | ".join(f"{m.status}:{m.content}" for m in sorted(seen, key=lambda m: m.tool_call_id)))

    tools = ToolNode([lookup, charge], handle_tool_errors=explain)
    return create_react_agent(scripted("charge-model", decide), tools, name="parallel_errors")


# -- 7. langgraph-supervisor: a worker's answer forwarded as is; names inline and a tool of its own --


def _worker(name: str, order: str, changed: bool = False) -> Any:
    """An agent that looks up its order; changed, it has a system prompt."""

    def decide(messages: list[BaseMessage]) -> AIMessage:
        last = last_tool(messages)
        if last is not None and last.name == "lookup":
            return AIMessage(f"{name}: {last.content}")
        return AIMessage("", tool_calls=[call("lookup", f"{name}-l", order_id=order)])

    return create_agent(scripted(f"{name}-model", decide), [lookup], system_prompt=f"You are {name}." if changed else None, name=name)


def supervisor_forwards(changed: bool = False) -> Any:
    from langgraph_supervisor import create_supervisor
    from langgraph_supervisor.handoff import create_forward_message_tool

    def boss(messages: list[BaseMessage]) -> AIMessage:
        names = {m.name for m in messages if isinstance(m, ToolMessage)}
        if "transfer_to_clerk" not in names:
            return AIMessage("", tool_calls=[call("transfer_to_clerk", "fw1")])
        return AIMessage("", tool_calls=[call("forward_message", "fw2", from_agent="clerk")])

    forward = create_forward_message_tool("supervisor")
    mode = "full_history" if changed else "last_message"
    return create_supervisor([_worker("clerk", "FW1")], model=scripted("forwarding-boss", boss), tools=[forward], output_mode=mode).compile()


@tool
def open_ticket(topic: str) -> str:
    """Open a support ticket."""
    return f"ticket opened: {topic}"


def supervisor_inline(changed: bool = False) -> Any:
    from langgraph_supervisor import create_supervisor

    def boss(messages: list[BaseMessage]) -> AIMessage:
        names = [m.name for m in messages if isinstance(m, ToolMessage)]
        if "transfer_to_clerk" not in names:
            return AIMessage("", tool_calls=[call("transfer_to_clerk", "in1")])
        if "open_ticket" not in names:
            said = next(str(m.content) for m in reversed(messages) if isinstance(m, AIMessage) and "<name>clerk</name>" in str(m.content))
            return AIMessage("", tool_calls=[call("open_ticket", "in2", topic=said.split("<content>")[-1].split("</content>")[0])])
        return AIMessage("Ticket filed.")

    workers = [_worker("clerk", "IN1")]
    inline = None if changed else "inline"
    return create_supervisor(workers, model=scripted("inline-boss", boss), tools=[open_ticket], include_agent_name=inline, output_mode="full_history").compile()


# -- 8. two agents run as parallel nodes of one superstep, then joined ------------------------------


class Desks(TypedDict, total=False):
    messages: Annotated[list[BaseMessage], add_messages]
    verdicts: Annotated[list[str], operator.add]


def _verdict(agent: Any, who: str, changed: bool = False) -> Any:
    async def run(state: Desks) -> dict[str, Any]:
        out = await agent.ainvoke({"messages": state["messages"]})
        return {"verdicts": [f"{who}{' says' if changed else ''}: {out['messages'][-1].content}"]}

    return run


def parallel_agents(changed: bool = False) -> Any:
    b = StateGraph(Desks)
    b.add_node("billing", _verdict(_worker("billing", "PA1"), "billing", changed))
    b.add_node("shipping", _verdict(_worker("shipping", "PA2"), "shipping"))
    b.add_node("join", lambda s: {"verdicts": [f"{len(s['verdicts'])} desks answered"]})
    b.add_edge(START, "billing")
    b.add_edge(START, "shipping")
    b.add_edge(["billing", "shipping"], "join")
    b.add_edge("join", END)
    return b.compile()


def parallel_agent_nodes(changed: bool = False) -> Any:
    """The same, with the compiled agents added as nodes themselves (subgraphs of the superstep)."""
    b = StateGraph(MessagesState)
    b.add_node("billing", _worker("billing", "PN1", changed))
    b.add_node("shipping", _worker("shipping", "PN2"))
    b.add_edge(START, "billing")
    b.add_edge(START, "shipping")
    b.add_edge(["billing", "shipping"], END)
    return b.compile()


# -- 9. a node that batches a model over several prompts and a tool over several orders -----------


class Survey(TypedDict, total=False):
    questions: list[str]
    answers: list[str]
    statuses: list[str]


def batched_node(changed: bool = False) -> Any:
    model = scripted("batch-model", lambda messages: AIMessage(f"answer to {messages[-1].content}"))

    def ask_all(state: Survey) -> dict[str, Any]:
        replies = model.batch([[HumanMessage(q)] for q in state["questions"]])
        statuses = lookup.batch([{"order_id": q[:3]} for q in state["questions"]])
        return {"answers": [str(r.content).upper() if changed else str(r.content) for r in replies], "statuses": statuses}

    b = StateGraph(Survey)
    b.add_node("ask_all", ask_all)
    b.add_edge(START, "ask_all")
    b.add_edge("ask_all", END)
    return b.compile()


def abatched_node(changed: bool = False) -> Any:
    model = scripted("abatch-model", lambda messages: AIMessage(f"answer to {messages[-1].content}"))

    async def ask_all(state: Survey) -> dict[str, Any]:
        replies = await model.abatch([[HumanMessage(q)] for q in state["questions"]])
        statuses = await asyncio.gather(*(lookup.ainvoke({"order_id": q[:3]}) for q in state["questions"]))
        return {"answers": [str(r.content) for r in replies], "statuses": [s.upper() if changed else s for s in statuses]}

    b = StateGraph(Survey)
    b.add_node("ask_all", ask_all)
    b.add_edge(START, "ask_all")
    b.add_edge("ask_all", END)
    return b.compile()


# -- 10. nodes that route by returning Command(goto=...) (no edges out of them) ---------------------


class Triage(TypedDict, total=False):
    text: str
    handled_by: str
    log: Annotated[list[str], operator.add]


def command_routing(changed: bool = False) -> Any:
    model = scripted("triage-model", lambda messages: AIMessage("refund" if "money" in str(messages[-1].content) else "faq"))

    def triage(state: Triage) -> Command[Literal["refunds", "faq"]]:
        label = str(model.invoke([HumanMessage(state["text"])]).content)
        goto = "refunds" if label == "refund" and not changed else "faq"
        return Command(update={"log": [f"triaged as {label}"]}, goto=goto)

    def refunds(state: Triage) -> Command[Literal["__end__"]]:
        return Command(update={"handled_by": "refunds", "log": [lookup.invoke({"order_id": "CR1"})]}, goto=END)

    b = StateGraph(Triage)
    b.add_node("triage", triage)
    b.add_node("refunds", refunds)
    b.add_node("faq", lambda s: {"handled_by": "faq"})
    b.add_edge(START, "triage")
    b.add_edge("faq", END)
    return b.compile()


# -- 11. a hand-rolled handoff: an agent's tool sends the parent graph to another agent -------------


class Team(MessagesState, total=False):
    active: str


def handoff_to_parent(changed: bool = False) -> Any:
    @tool
    def transfer_to_refunds(reason: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command:
        """Hand the customer to the refunds desk."""
        note = ToolMessage(f"handed off: {reason}", tool_call_id=tool_call_id, name="transfer_to_refunds")
        return Command(graph=Command.PARENT, goto="refunds", update={"active": "refunds", "messages": [note]})

    def front(messages: list[BaseMessage]) -> AIMessage:
        last = last_tool(messages)
        if last is None:
            return AIMessage("", tool_calls=[call("lookup", "hp1", order_id="HP1")])
        return AIMessage("", tool_calls=[call("transfer_to_refunds", "hp2", reason=str(last.content))])

    def refunds_desk(messages: list[BaseMessage]) -> AIMessage:
        return AIMessage(f"Refunds desk: {sum(isinstance(m, ToolMessage) for m in messages)} notes read")

    b = StateGraph(Team)
    prompt = "Hand refunds on." if changed else None
    b.add_node("front", create_agent(scripted("front-model", front), [lookup, transfer_to_refunds], system_prompt=prompt, name="front"), destinations=("refunds",))
    b.add_node("refunds", create_agent(scripted("refunds-model", refunds_desk), [], name="refunds"))
    b.add_edge(START, "front")
    return b.compile()


# -- 12. SummarizationMiddleware over the turns of a thread: the history is replaced mid-thread ------


def summarized_thread(changed: bool = False) -> Any:
    def agent(messages: list[BaseMessage]) -> AIMessage:
        asked = [m for m in messages if isinstance(m, HumanMessage)]
        last = last_tool(messages)
        if last is not None:
            return AIMessage(f"{asked[-1].content} -> {last.content}")
        order = str(asked[-1].content).split()[-1].rstrip("?")
        return AIMessage("", tool_calls=[call("lookup", f"st-{order}", order_id=order)])

    summary = scripted("thread-summary", lambda messages: AIMessage(f"condensed {len(str(messages[-1].content))} chars"))
    middleware = SummarizationMiddleware(model=summary, trigger=("messages", 6), keep=("messages", 3 if changed else 2))
    return create_agent(scripted("thread-model", agent), [lookup], middleware=[middleware], checkpointer=InMemorySaver(), name="summarized_thread")


# -- 13. a wrap_model_call that picks the tools each turn may use ------------------------------------


@tool
def cancel(order_id: str) -> str:
    """Cancel an order."""
    return f"{order_id} cancelled"


def tools_by_turn(changed: bool = False) -> Any:
    @wrap_model_call
    def only_what_fits(request: Any, handler: Any) -> Any:
        looked = any(isinstance(m, ToolMessage) and m.name == "lookup" for m in request.messages)
        keep = "cancel" if looked else "lookup"
        return handler(request.override(tools=[t for t in request.tools if changed or t.name == keep]))

    def decide(messages: list[BaseMessage]) -> AIMessage:
        last = last_tool(messages)
        if last is None:
            return AIMessage("", tool_calls=[call("lookup", "tb1", order_id="TB1")])
        if last.name == "lookup":
            return AIMessage("", tool_calls=[call("cancel", "tb2", order_id="TB1")])
        return AIMessage(f"Done: {last.content}")

    return create_agent(scripted("picky-model", decide), [lookup, cancel], middleware=[only_what_fits], name="picky")


# -- 14. structured output to one of two schemas (a union), by a tool -------------------------------


class Refund(BaseModel):
    """A refund decision."""

    order_id: str
    amount: int


class Escalation(BaseModel):
    """A case handed to a person."""

    order_id: str
    reason: str


def structured_union(changed: bool = False) -> Any:
    def decide(messages: list[BaseMessage]) -> AIMessage:
        last = last_tool(messages)
        if last is None:
            return AIMessage("", tool_calls=[call("lookup", "su1", order_id="SU1")])
        if last.name == "lookup":
            if "lost" in str(last.content):
                return AIMessage("", tool_calls=[call("Escalation", "su2", order_id="SU1", reason=str(last.content))])
            return AIMessage("", tool_calls=[call("Refund", "su2", order_id="SU1", amount=12)])
        return AIMessage("done")

    strategy = ToolStrategy(Refund | Escalation, tool_message_content="Filed." if changed else None)
    return create_agent(scripted("union-model", decide), [lookup], response_format=strategy, name="union")


# -- 15. a react agent's subgraph chunks streamed as updates and messages ----------------------------


def agent_in_subgraph(changed: bool = False) -> Any:
    inner = create_react_agent(scripted("inner-model", _looks_up("SS1", "SS2")), [lookup], name="inner")
    b = StateGraph(MessagesState)
    b.add_node("greet", lambda s: {"messages": [AIMessage("One moment." if changed else "Looking that up.")]})
    b.add_node("inner", inner)
    b.add_edge(START, "greet")
    b.add_edge("greet", "inner")
    b.add_edge("inner", END)
    return b.compile()


# -- 16. an agent used as a tool: the tool runs another agent and returns its answer ---------------


def agent_as_tool(changed: bool = False) -> Any:
    researcher = create_agent(scripted("research-model", _looks_up("AT7")), [lookup], name="researcher")

    @tool
    def research(question: str) -> str:
        """Ask the research agent."""
        return str(researcher.invoke({"messages": [HumanMessage(question)]})["messages"][-1].content)

    def decide(messages: list[BaseMessage]) -> AIMessage:
        last = last_tool(messages)
        if last is None:
            return AIMessage("", tool_calls=[call("research", "rs1", question="Where is AT7?")])
        return AIMessage(f"Research says: {last.content}")

    return create_agent(scripted("lead-model", decide), [research], system_prompt="Lead." if changed else None, name="lead")


# -- 17. parallel subgraphs that each ask a person, resumed with one answer per interrupt id --------


class Sign(TypedDict, total=False):
    doc: str
    signatures: Annotated[list[str], operator.add]


class Signed(TypedDict):
    signatures: Annotated[list[str], operator.add]


def _signer(who: str) -> Any:
    def ask(state: Sign) -> dict[str, Any]:
        checked = lookup.invoke({"order_id": f"{who}-{state['doc']}"})
        return {"signatures": [f"{who} {interrupt({'sign': state['doc'], 'by': who})} ({checked})"]}

    inner = StateGraph(Sign, output_schema=Signed)
    inner.add_node("ask", ask)
    inner.add_edge(START, "ask")
    inner.add_edge("ask", END)
    return inner.compile()


def parallel_sub_interrupts(changed: bool = False) -> Any:
    b = StateGraph(Sign)
    b.add_node("legal", _signer("legal"))
    b.add_node("finance", _signer("finance"))
    b.add_node("file", lambda s: {"signatures": ["filed" if not changed else "archived"]})
    b.add_edge(START, "legal")
    b.add_edge(START, "finance")
    b.add_edge(["legal", "finance"], "file")
    b.add_edge("file", END)
    return b.compile(checkpointer=InMemorySaver())


# -- 18. an entrypoint given the store, the stream writer and the Runtime context -----------------


def functional_injected(changed: bool = False) -> Any:
    from langgraph.runtime import Runtime

    store = InMemoryStore()
    store.put(("users",), "ada", {"plan": "gold"})

    @task
    def fetch(order_id: str) -> str:
        return lookup.invoke({"order_id": order_id})

    @entrypoint(checkpointer=InMemorySaver(), store=store, context_schema=Shopper)
    def greet(order_id: str, runtime: Runtime[Shopper]) -> dict[str, Any]:
        plan = runtime.store.get(("users",), runtime.context.user).value["plan"]
        runtime.stream_writer({"plan": plan})
        status = fetch(order_id).result()
        runtime.store.put(("seen",), order_id, {"by": runtime.context.user})
        return {"plan": plan.upper() if changed else plan, "status": status}

    return greet


# -- 19. a tool answering with content and an artifact (a pydantic model) ----------------------------


class Receipt(BaseModel):
    """What a payment left behind."""

    order_id: str
    cents: int


def artifact_tool(changed: bool = False) -> Any:
    @tool(response_format="content_and_artifact")
    def pay(order_id: str) -> tuple[str, Receipt]:
        """Pay for an order."""
        return f"paid {order_id}", Receipt(order_id=order_id, cents=1250)

    def decide(messages: list[BaseMessage]) -> AIMessage:
        last = last_tool(messages)
        if last is None:
            return AIMessage("", tool_calls=[call("pay", "pa1", order_id="AR1")])
        return AIMessage(f"{last.content} ({last.artifact.cents if isinstance(last.artifact, Receipt) else last.artifact})")

    b = StateGraph(MessagesState)
    model = scripted("pay-model", decide)
    b.add_node("agent", lambda s: {"messages": [model.invoke(s["messages"])]})
    b.add_node("tools", ToolNode([pay]))
    def audit(state: MessagesState) -> dict[str, Any]:
        cents = sum(m.artifact.cents for m in state["messages"] if isinstance(m, ToolMessage))
        return {"messages": [AIMessage(f"audited {cents} cents{'!' if changed else ''}")]}

    b.add_node("audit", audit)
    b.add_edge(START, "agent")
    b.add_conditional_edges("agent", lambda s: "tools" if s["messages"][-1].tool_calls else "audit", ["tools", "audit"])
    b.add_edge("tools", "agent")
    b.add_edge("audit", END)
    return b.compile()


# -- 20. a state of richer types: a datetime, an Enum, a pydantic model, a set, a tuple -----------


class Priority(str, enum.Enum):
    LOW = "low"
    HIGH = "high"


class Case(BaseModel):
    """A support case."""

    order_id: str
    priority: Priority


@dataclass
class Eta:
    """When and how an order arrives."""

    days: int
    courier: str


@tool
def courier_eta(order_id: str) -> Eta:
    """When an order arrives, and with whom."""
    return Eta(days=len(order_id), courier="post")


class Rich(TypedDict, total=False):
    opened: Any
    case: Case
    tags: set[str]
    span: tuple[int, int]
    status: str


def rich_state(changed: bool = False) -> Any:
    import datetime as dt

    def open_case(state: Rich) -> dict[str, Any]:
        return {"opened": dt.datetime(2024, 5, 1, 12, 30, tzinfo=dt.timezone.utc), "case": Case(order_id="RC1", priority=Priority.HIGH), "tags": {"urgent", "web"}, "span": (1, 3)}

    def check(state: Rich) -> dict[str, Any]:
        status = lookup.invoke({"order_id": state["case"].order_id})
        late = state["opened"] + dt.timedelta(days=2 if changed else 1)
        due = courier_eta.invoke({"order_id": state["case"].order_id})  # a tool answering with a dataclass
        return {"status": f"{status} ({state['case'].priority.value}, {sorted(state['tags'])}, due {late.date()}, eta {due.days}d via {due.courier})"}

    b = StateGraph(Rich)
    b.add_node("open_case", open_case)
    b.add_node("check", check)
    b.add_edge(START, "open_case")
    b.add_edge("open_case", "check")
    b.add_edge("check", END)
    return b.compile()


# -- 21. a create_agent worker gated by HumanInTheLoopMiddleware inside a supervisor -----------------


def supervisor_gated_worker(changed: bool = False) -> Any:
    from langchain.agents.middleware import HumanInTheLoopMiddleware
    from langgraph_supervisor import create_supervisor

    @tool
    def refund(order_id: str, amount: int) -> str:
        """Refund an order."""
        return f"refunded {amount} on {order_id}"

    def cashier(messages: list[BaseMessage]) -> AIMessage:
        last = last_tool(messages)
        if last is not None and last.name == "refund":
            return AIMessage(f"cashier: {last.content}")
        return AIMessage("", tool_calls=[call("refund", "sg1", order_id="SG1", amount=9)])

    def boss(messages: list[BaseMessage]) -> AIMessage:
        if any(isinstance(m, ToolMessage) and m.name == "transfer_back_to_supervisor" for m in messages):
            return AIMessage("Refund handled.")
        return AIMessage("", tool_calls=[call("transfer_to_cashier", "sg0")])

    gate = HumanInTheLoopMiddleware(interrupt_on={"refund": True})
    worker = create_agent(scripted("cashier-model", cashier), [refund], middleware=[gate], system_prompt="Pay." if changed else None, name="cashier")
    return create_supervisor([worker], model=scripted("gate-boss", boss)).compile(checkpointer=InMemorySaver())
