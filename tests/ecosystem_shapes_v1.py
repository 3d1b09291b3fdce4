"""Shapes production agents take today: langchain v1 ``create_agent`` with its middleware, the
supervisor and swarm packages, and a memory store shared across threads.

Each function builds the graph fresh. Models are scripted and answer from the prompt, so a graph
runs any number of times and a replay sees what the recording saw; a model or tool that fails
once fails on the first call of each graph built, as a flaky service does.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, NotRequired

from ecosystem_shapes import call, last_tool, lookup, scripted
from langchain.agents import AgentState, create_agent
from langchain.agents.middleware import (
    ClearToolUsesEdit,
    ContextEditingMiddleware,
    HumanInTheLoopMiddleware,
    LLMToolSelectorMiddleware,
    ModelCallLimitMiddleware,
    ModelRetryMiddleware,
    PIIMiddleware,
    SummarizationMiddleware,
    TodoListMiddleware,
    ToolCallLimitMiddleware,
    ToolRetryMiddleware,
    after_model,
    before_model,
    wrap_model_call,
    wrap_tool_call,
)
from langchain.agents.structured_output import ProviderStrategy, ToolStrategy
from langchain_core.embeddings import Embeddings
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_store
from langgraph.store.memory import InMemoryStore
from langgraph.types import interrupt


def _tools_seen(messages: list[BaseMessage]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


def _human(messages: list[BaseMessage]) -> str:
    return next((str(m.content) for m in reversed(messages) if isinstance(m, HumanMessage)), "")


def _looks_up(*orders: str) -> Any:
    """A model that looks up each order in turn, one tool call a turn, then answers."""

    def decide(messages: list[BaseMessage]) -> AIMessage:
        seen = _tools_seen(messages)
        if len(seen) < len(orders):
            return AIMessage("", tool_calls=[call("lookup", f"o{len(seen)}", order_id=orders[len(seen)])])
        return AIMessage("; ".join(str(m.content) for m in seen))

    return decide


# -- 1. SummarizationMiddleware: a scripted summary model condenses a long history ---------------


def _summarized_agent(messages: list[BaseMessage]) -> AIMessage:
    if any("condensed:" in str(m.content) for m in messages):
        return AIMessage(f"From the summary: {len(messages)} messages left")
    return _looks_up("S1", "S2", "S3")(messages)


def summarized() -> Any:
    summary = scripted("summary-model", lambda messages: AIMessage(f"condensed: {len(str(messages[-1].content))} chars"))
    agent = scripted("agent-model", _summarized_agent)
    middleware = SummarizationMiddleware(model=summary, trigger=("messages", 4), keep=("messages", 2))
    return create_agent(agent, [lookup], middleware=[middleware], name="summarized")


# -- 2. HumanInTheLoopMiddleware: the tool call waits for a person, who approves, edits or rejects


@tool
def refund(order_id: str, amount: int) -> str:
    """Refund an order."""
    return f"refunded {amount} on {order_id}"


def _refund_model(messages: list[BaseMessage]) -> AIMessage:
    last = last_tool(messages)
    if last is not None:
        return AIMessage(f"Outcome: {last.content}")
    return AIMessage("", tool_calls=[call("refund", "rf1", order_id="R7", amount=30)])


def human_in_the_loop() -> Any:
    gate = HumanInTheLoopMiddleware(interrupt_on={"refund": True, "lookup": False})
    return create_agent(scripted("refund-model", _refund_model), [refund, lookup], middleware=[gate], checkpointer=InMemorySaver(), name="refunds")


# -- 3. ModelRetryMiddleware / ToolRetryMiddleware: a failure, then success ----------------------


class _Overloaded(Exception):
    """A provider's "overloaded, try again" error."""


def model_retried() -> Any:
    asked = {"n": 0}

    def decide(messages: list[BaseMessage]) -> AIMessage:
        asked["n"] += 1
        if asked["n"] == 1:
            raise _Overloaded("the model is overloaded")
        return _looks_up("T1")(messages)

    retry = ModelRetryMiddleware(max_retries=2, retry_on=(_Overloaded,), initial_delay=0.0, jitter=False)
    return create_agent(scripted("busy-model", decide), [lookup], middleware=[retry], name="retried_model")


def tool_retried() -> Any:
    tried = {"n": 0}

    @tool
    def stock(sku: str) -> str:
        """How many of an item are in stock."""
        tried["n"] += 1
        if tried["n"] == 1:
            raise ConnectionError("inventory service reset the connection")
        return f"{sku}: 7 in stock"

    def decide(messages: list[BaseMessage]) -> AIMessage:
        last = last_tool(messages)
        if last is not None:
            return AIMessage(f"Stock: {last.content}")
        return AIMessage("", tool_calls=[call("stock", "st1", sku="S9")])

    retry = ToolRetryMiddleware(max_retries=2, tools=["stock"], retry_on=(ConnectionError,), initial_delay=0.0, jitter=False)
    return create_agent(scripted("stock-model", decide), [stock], middleware=[retry], name="retried_tool")


# -- 4. call limits that the run meets --------------------------------------------------------------


def _restless(messages: list[BaseMessage]) -> AIMessage:
    n = len(_tools_seen(messages))
    return AIMessage("", tool_calls=[call("lookup", f"rl{n}", order_id=f"R{n}")])


def model_call_limited() -> Any:
    return create_agent(scripted("restless-model", _restless), [lookup], middleware=[ModelCallLimitMiddleware(run_limit=3, exit_behavior="end")], name="model_limited")


def tool_call_limited() -> Any:
    limit = ToolCallLimitMiddleware(tool_name="lookup", thread_limit=2, exit_behavior="end")
    return create_agent(scripted("restless-model", _restless), [lookup], middleware=[limit], checkpointer=InMemorySaver(), name="tool_limited")


# -- 5. LLMToolSelectorMiddleware: a selector model picks the tools the agent model sees -------------


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@tool
def stock_price(ticker: str) -> str:
    """A stock's price."""
    return f"{ticker} is at 12"


def _selector(messages: list[BaseMessage]) -> AIMessage:
    wanted = ["weather"] if "weather" in _human(messages) else ["lookup"]
    return AIMessage("", tool_calls=[call("ToolSelectionResponse", "sel1", tools=wanted)])


def _weather_model(messages: list[BaseMessage]) -> AIMessage:
    last = last_tool(messages)
    if last is not None:
        return AIMessage(f"Forecast: {last.content}")
    return AIMessage("", tool_calls=[call("weather", "wx1", city="Oslo")])


def tool_selector() -> Any:
    select = LLMToolSelectorMiddleware(model=scripted("selector-model", _selector), max_tools=1)
    return create_agent(scripted("weather-model", _weather_model), [lookup, weather, stock_price], middleware=[select], name="selective")


# -- 6. TodoListMiddleware: the model plans with write_todos, then works -----------------------------


def _planner(messages: list[BaseMessage]) -> AIMessage:
    seen = _tools_seen(messages)
    if not seen:
        todos = [{"content": "look up P1", "status": "in_progress"}, {"content": "report", "status": "pending"}]
        return AIMessage("", tool_calls=[call("write_todos", "td1", todos=todos)])
    if len(seen) == 1:
        return AIMessage("", tool_calls=[call("lookup", "td2", order_id="P1")])
    return AIMessage(f"Report: {seen[-1].content}")


def todo_list() -> Any:
    return create_agent(scripted("planner-model", _planner), [lookup], middleware=[TodoListMiddleware()], name="planner")


# -- 7. ContextEditingMiddleware: old tool results are cleared before the model sees them ------------


def context_edited() -> Any:
    edit = ClearToolUsesEdit(trigger=40, keep=1, placeholder="[cleared]")
    model = scripted("edited-model", _looks_up("C1", "C2", "C3"))
    return create_agent(model, [lookup], middleware=[ContextEditingMiddleware(edits=[edit])], name="edited")


# -- 8. PIIMiddleware: an email is redacted from the input before the model sees it -----------------


def _pii_model(messages: list[BaseMessage]) -> AIMessage:
    last = last_tool(messages)
    if last is not None:
        return AIMessage(f"Noted ({_human(messages)}): {last.content}")
    return AIMessage("", tool_calls=[call("lookup", "pii1", order_id="E5")])


def pii_redacted() -> Any:
    return create_agent(scripted("pii-model", _pii_model), [lookup], middleware=[PIIMiddleware("email", strategy="redact", apply_to_input=True)], name="careful")


# -- 9. custom middleware by decorator: before/after the model, wrapping model and tool calls --------


@before_model
def _count_turns(state: AgentState, runtime: Any) -> dict[str, Any] | None:
    return {"turns": state.get("turns", 0) + 1}


@after_model
def _note_calls(state: AgentState, runtime: Any) -> dict[str, Any] | None:
    last = state["messages"][-1]
    return {"asked": [c["name"] for c in getattr(last, "tool_calls", [])]}


@wrap_model_call
def _prefixed_prompt(request: Any, handler: Any) -> Any:
    return handler(request.override(system_prompt="Be brief."))


@wrap_tool_call
def _shouted_tool(request: Any, handler: Any) -> Any:
    out = handler(request)
    return out.model_copy(update={"content": str(out.content).upper()}) if isinstance(out, ToolMessage) else out


class _Counted(AgentState):
    turns: NotRequired[int]
    asked: NotRequired[list[str]]


def custom_hooks() -> Any:
    for hook in (_count_turns, _note_calls):
        hook.state_schema = _Counted
    model = scripted("hooked-model", _looks_up("H1", "H2"))
    return create_agent(model, [lookup], middleware=[_count_turns, _note_calls, _prefixed_prompt, _shouted_tool], state_schema=_Counted, name="hooked")


# -- 10. dynamic model selection: a wrap_model_call picks the model by the length of the history ----


def dynamic_model() -> Any:
    small = scripted("small-model", _looks_up("D1", "D2"))
    large = scripted("large-model", _looks_up("D1", "D2"))

    @wrap_model_call
    def choose(request: Any, handler: Any) -> Any:
        return handler(request.override(model=large if len(request.messages) > 2 else small))

    return create_agent(small, [lookup], middleware=[choose], name="chooser")


# -- 11. response_format: structured output by a tool, or by the provider ----------------------------


@dataclass
class Shipment:
    """Where a shipment is."""

    order_id: str
    status: str


def _shipment_model(tool_name: str | None) -> Any:
    def decide(messages: list[BaseMessage]) -> AIMessage:
        last = last_tool(messages)
        if last is None:
            return AIMessage("", tool_calls=[call("lookup", "sh1", order_id="F2")])
        if tool_name is None:  # the provider answers in JSON
            return AIMessage(f'{{"order_id": "F2", "status": "{last.content}"}}')
        if last.name == "lookup":
            return AIMessage("", tool_calls=[call(tool_name, "sh2", order_id="F2", status=str(last.content))])
        return AIMessage("done")

    return decide


def structured_tool_strategy() -> Any:
    return create_agent(scripted("shipment-model", _shipment_model("Shipment")), [lookup], response_format=ToolStrategy(Shipment), name="shipper")


def structured_provider_strategy() -> Any:
    return create_agent(scripted("shipment-model", _shipment_model(None)), [lookup], response_format=ProviderStrategy(Shipment), name="native")


# -- 12. async: async tools and an async wrap_model_call, run with ainvoke / astream -----------------


@tool
async def eta(order_id: str) -> str:
    """When an order arrives (asynchronously)."""
    await asyncio.sleep(0)
    return f"{order_id} arrives tomorrow"


def async_agent() -> Any:
    @wrap_model_call
    async def logged(request: Any, handler: Any) -> Any:
        await asyncio.sleep(0)
        return await handler(request)

    def decide(messages: list[BaseMessage]) -> AIMessage:
        if last_tool(messages) is not None:
            return AIMessage(f"ETA: {last_tool(messages).content}")
        return AIMessage("", tool_calls=[call("eta", "eta1", order_id="A8")])

    return create_agent(scripted("async-model", decide), [eta], middleware=[logged], name="async_agent")


# -- 13. langgraph-supervisor: output modes, handoff-back messages off, a supervisor of supervisors --


def _worker(name: str, order: str) -> Any:
    def decide(messages: list[BaseMessage]) -> AIMessage:
        last = last_tool(messages)
        if last is not None and last.name == "lookup":
            return AIMessage(f"{name}: {last.content}")
        return AIMessage("", tool_calls=[call("lookup", f"{name}-l", order_id=order)])

    return create_agent(scripted(f"{name}-model", decide), [lookup], name=name)


def _boss(*workers: str) -> Any:
    """A supervisor model that hands to each worker in turn, then answers."""

    def decide(messages: list[BaseMessage]) -> AIMessage:
        handed = {m.name for m in messages if isinstance(m, ToolMessage)}
        todo = [w for w in workers if f"transfer_to_{w}" not in handed]
        if todo:
            return AIMessage("", tool_calls=[call(f"transfer_to_{todo[0]}", f"to-{todo[0]}")])
        return AIMessage("All workers reported.")

    return decide


def supervisor(output_mode: str = "full_history", handoff_back: bool = True) -> Any:
    from langgraph_supervisor import create_supervisor

    workers = [_worker("clerk", "W1"), _worker("courier", "W2")]
    return create_supervisor(workers, model=scripted("boss-model", _boss("clerk", "courier")), output_mode=output_mode, add_handoff_back_messages=handoff_back).compile()


def supervisor_last_message() -> Any:
    return supervisor("last_message")


def supervisor_no_handoff_back() -> Any:
    return supervisor("full_history", handoff_back=False)


def supervisor_of_supervisors() -> Any:
    from langgraph_supervisor import create_supervisor

    sales = create_supervisor([_worker("clerk", "W1")], model=scripted("sales-boss", _boss("clerk")), supervisor_name="sales").compile(name="sales")
    ops = create_supervisor([_worker("courier", "W2")], model=scripted("ops-boss", _boss("courier")), supervisor_name="ops").compile(name="ops")
    return create_supervisor([sales, ops], model=scripted("top-boss", _boss("sales", "ops")), supervisor_name="top").compile()


# -- 14. langgraph-swarm: three agents, the last asks a person, resumed ------------------------------


@tool
def ship(order_id: str) -> str:
    """Ship an order once a person agrees."""
    return f"shipping {order_id}: {interrupt({'ship': order_id})}"


def _hands_to(target: str, then: Any = None) -> Any:
    def decide(messages: list[BaseMessage]) -> AIMessage:
        if then is not None:
            out = then(messages)
            if out is not None:
                return out
        return AIMessage("", tool_calls=[call(f"transfer_to_{target}", f"sw-{target}")])

    return decide


def _shipper(messages: list[BaseMessage]) -> AIMessage:
    last = last_tool(messages)
    if last is not None and last.name == "ship":
        return AIMessage(f"Shipper: {last.content}")
    return AIMessage("", tool_calls=[call("ship", "sh-1", order_id="V3")])


def _checker(messages: list[BaseMessage]) -> AIMessage | None:
    last = last_tool(messages)
    if last is not None and last.name == "transfer_to_checker":
        return AIMessage("", tool_calls=[call("lookup", "ck-1", order_id="V3")])
    return None


def swarm_of_three() -> Any:
    from langgraph_swarm import create_handoff_tool, create_swarm

    desk = create_agent(scripted("desk-model", _hands_to("checker")), [create_handoff_tool(agent_name="checker")], name="desk")
    checker = create_agent(scripted("checker-model", _hands_to("shipper", _checker)), [lookup, create_handoff_tool(agent_name="shipper")], name="checker")
    shipper = create_agent(scripted("shipper-model", _shipper), [ship], name="shipper")
    return create_swarm([desk, checker, shipper], default_active_agent="desk").compile(checkpointer=InMemorySaver())


# -- 15. a memory agent: one thread remembers, another searches (an embedding index) ---------------


@tool
def remember(fact: str) -> str:
    """Remember a fact about the user."""
    store = get_store()
    key = f"f{len(store.search(('facts',), limit=50))}"
    store.put(("facts",), key, {"text": fact})
    return f"remembered {key}"


@tool
def recall(query: str) -> str:
    """Search what is remembered about the user."""
    hits = get_store().search(("facts",), query=query, limit=2)
    return "; ".join(sorted(h.value["text"] for h in hits)) or "nothing"


def _memory_model(messages: list[BaseMessage]) -> AIMessage:
    last = last_tool(messages)
    if last is not None:
        return AIMessage(f"Memory says: {last.content}")
    text = _human(messages)
    if text.startswith("Remember"):
        return AIMessage("", tool_calls=[call("remember", "mem1", fact=text.removeprefix("Remember ").strip())])
    return AIMessage("", tool_calls=[call("recall", "mem2", query=text)])


class LetterEmbeddings(Embeddings):
    """An offline embedding: how often each letter a-p occurs, so similar words land near each other."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.embed_query(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return [float(text.lower().count(chr(ord("a") + i))) + 0.01 for i in range(16)]


def memory_agent() -> Any:
    store = InMemoryStore(index={"dims": 16, "embed": LetterEmbeddings(), "fields": ["text"]})
    return create_agent(scripted("memory-model", _memory_model), [remember, recall], checkpointer=InMemorySaver(), store=store, name="memory")


# -- 16. HumanInTheLoopMiddleware per call: two gated calls, an interrupt each, answered by id -------


def _two_refunds(messages: list[BaseMessage]) -> AIMessage:
    seen = _tools_seen(messages)
    if seen:
        return AIMessage(" | ".join(sorted(str(m.content) for m in seen)))
    return AIMessage("", tool_calls=[call("refund", "rf1", order_id="R7", amount=30), call("refund", "rf2", order_id="R8", amount=5)])


def human_per_call() -> Any:
    gate = HumanInTheLoopMiddleware(interrupt_on={"refund": True}, interrupt_mode="per_call")
    return create_agent(scripted("refunds-model", _two_refunds), [refund], middleware=[gate], checkpointer=InMemorySaver(), name="per_call")


# -- 17. ModelFallbackMiddleware: the first model is down, the fallback answers ---------------------


def model_fallback() -> Any:
    from langchain.agents.middleware import ModelFallbackMiddleware

    def down(messages: list[BaseMessage]) -> AIMessage:
        raise _Overloaded("primary is down")

    backup = scripted("backup-model", _looks_up("B1"))
    return create_agent(scripted("primary-model", down), [lookup], middleware=[ModelFallbackMiddleware(backup)], name="fallback")


# -- 18. ToolRetryMiddleware that gives up: the error goes back to the model as a ToolMessage ------


def tool_retry_gives_up() -> Any:
    @tool
    def fragile(sku: str) -> str:
        """A tool whose service is down."""
        raise ConnectionError(f"service down for {sku}")

    def decide(messages: list[BaseMessage]) -> AIMessage:
        last = last_tool(messages)
        if last is not None:
            return AIMessage(f"Gave up: {str(last.content)[:40]}")
        return AIMessage("", tool_calls=[call("fragile", "fr1", sku="Q1"), call("lookup", "fr2", order_id="Q1")])

    retry = ToolRetryMiddleware(max_retries=1, tools=["fragile"], retry_on=(ConnectionError,), on_failure="continue", initial_delay=0.0, jitter=False)
    return create_agent(scripted("fragile-model", decide), [fragile, lookup], middleware=[retry], name="gives_up")


# -- 19. ModelCallLimitMiddleware that raises when the limit is met ---------------------------------


def model_call_limit_raises() -> Any:
    return create_agent(scripted("restless-model", _restless), [lookup], middleware=[ModelCallLimitMiddleware(run_limit=2, exit_behavior="error")], name="strict_limit")


# -- 20. a guardrail that jumps to the end, and a prompt built from the Runtime context ------------


@dataclass
class Caller:
    """Who is calling (the Runtime context)."""

    user: str
    tier: str


def guarded() -> Any:
    from langchain.agents.middleware import before_agent, dynamic_prompt

    @before_agent(can_jump_to=["end"])
    def guard(state: AgentState, runtime: Any) -> dict[str, Any] | None:
        if "forbidden" in _human(state["messages"]):
            return {"messages": [AIMessage("I cannot help with that.")], "jump_to": "end"}
        return None

    @dynamic_prompt
    def by_tier(request: Any) -> str:
        return f"You serve {request.runtime.context.user} ({request.runtime.context.tier})."

    def decide(messages: list[BaseMessage]) -> AIMessage:
        last = last_tool(messages)
        if last is not None:
            return AIMessage(f"{messages[0].content} -> {last.content}")
        return AIMessage("", tool_calls=[call("lookup", "g1", order_id="G1")])

    return create_agent(scripted("guarded-model", decide), [lookup], middleware=[guard, by_tier], context_schema=Caller, checkpointer=InMemorySaver(), name="guarded")


# -- 21. LLMToolEmulator: a model answers in place of a tool -----------------------------------------


def tool_emulated() -> Any:
    from langchain.agents.middleware import LLMToolEmulator

    emulator = scripted("emulator-model", lambda messages: AIMessage("emulated: rainy in Bergen"))
    return create_agent(scripted("weather-model", _weather_model), [weather, lookup], middleware=[LLMToolEmulator(tools=["weather"], model=emulator)], name="emulated")


# -- 22. structured output whose first answer fails validation, retried by ToolStrategy ------------


def structured_retried() -> Any:
    def decide(messages: list[BaseMessage]) -> AIMessage:
        last = last_tool(messages)
        if last is None:
            return AIMessage("", tool_calls=[call("lookup", "sr1", order_id="F3")])
        if last.name == "lookup":
            return AIMessage("", tool_calls=[call("Shipment", "sr2", order_id="F3")])  # status missing
        if last.name == "Shipment" and "rror" in str(last.content):
            return AIMessage("", tool_calls=[call("Shipment", "sr3", order_id="F3", status="in transit")])
        return AIMessage("done")

    return create_agent(scripted("sloppy-model", decide), [lookup], response_format=ToolStrategy(Shipment, handle_errors=True), name="sloppy")


# -- 23. an async memory agent: async tools put and search the store, two threads ------------------


@tool
async def aremember(fact: str) -> str:
    """Remember a fact about the user."""
    store = get_store()
    key = f"f{len(await store.asearch(('facts',), limit=50))}"
    await store.aput(("facts",), key, {"text": fact})
    return f"remembered {key}"


@tool
async def arecall(query: str) -> str:
    """Search what is remembered about the user."""
    hits = await get_store().asearch(("facts",), query=query, limit=2)
    return "; ".join(sorted(h.value["text"] for h in hits)) or "nothing"


def _amemory_model(messages: list[BaseMessage]) -> AIMessage:
    out = _memory_model(messages)
    for c in out.tool_calls:
        c["name"] = "a" + c["name"]
    return out


def memory_agent_async() -> Any:
    store = InMemoryStore(index={"dims": 16, "embed": LetterEmbeddings(), "fields": ["text"]})
    return create_agent(scripted("amemory-model", _amemory_model), [aremember, arecall], checkpointer=InMemorySaver(), store=store, name="amemory")
