"""More corpus graphs: shapes an outside probe of real graphs found replaying wrong.

Imported by ``graphs.py`` (which lists every case). Each is the smallest graph
that showed its problem: a node asking twice before it finishes, parallel
functional tasks that each wait on a human, two ``Send`` packets entering one
subgraph node in parallel, an agent whose middleware is async only, and a run
stopped at a static breakpoint that goes on with ``invoke(None)``, after an
``update_state`` or not, a run with ``durability="exit"``, a prompt holding an
image as a standard content block, a subgraph with memory of its own
(``checkpointer=True``) on a thread's second run, fan-out tasks of which
one fails, the run going on with ``invoke(None)`` (the others are not run again),
a subgraph node with a cache of its own whose cached node is a hit, and a
human who answers an interrupt and edits the state with it (``Command(resume=...,
update=...)``), and an agent that reads long-term memory earlier runs wrote, routes on
it and writes it (the run checked is a returning user's: a replay in a fresh process has
an empty store).
"""

from __future__ import annotations

import operator
import threading
import time
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, BaseMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.func import entrypoint, task
from langgraph.graph import END, START, MessagesState, StateGraph
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.cache.memory import InMemoryCache
from langgraph.config import get_store
from langgraph.store.memory import InMemoryStore
from langgraph.types import CachePolicy, Send, interrupt

from docs_shapes import call, last_tool, lookup_order, scripted


# -- a node that calls interrupt() twice: resumed twice, each answer in its place ----------------


class Questions(TypedDict, total=False):
    answers: str


def ask_twice(state: Questions) -> dict[str, Any]:
    first = interrupt("which order?")
    second = interrupt(f"refund {first} in full?")
    return {"answers": f"{first}/{second}"}


def _build_two_questions() -> Any:
    b = StateGraph(Questions)
    b.add_node("ask_twice", ask_twice)
    b.add_edge(START, "ask_twice")
    b.add_edge("ask_twice", END)
    return b.compile(checkpointer=InMemorySaver())


two_questions = _build_two_questions()


# -- parallel @tasks that each interrupt: LangGraph shows one at a time, answered by id ----------


@task
def sign_off(item: str) -> str:
    return f"{item}: {interrupt({'sign off': item})}"


@entrypoint(checkpointer=InMemorySaver())
def task_interrupts(items: list[str]) -> dict[str, Any]:
    return {"signed": [f.result() for f in [sign_off(i) for i in items]]}


# -- two Send packets to one subgraph node: each replayed subgraph compared with its own ---------


class Topic(TypedDict, total=False):
    topic: str
    notes: Annotated[list[str], operator.add]


class Notes(TypedDict, total=False):
    notes: Annotated[list[str], operator.add]


def _build_send_to_subgraph() -> Any:
    inner = StateGraph(Topic, output_schema=Notes)
    inner.add_node("research", lambda s: {"notes": [f"notes on {s['topic']}"]})
    inner.add_edge(START, "research")
    inner.add_edge("research", END)
    outer = StateGraph(Topic)
    outer.add_node("researcher", inner.compile())
    outer.add_conditional_edges(START, lambda s: [Send("researcher", {"topic": f"{s['topic']} {i}"}) for i in range(2)], ["researcher"])
    outer.add_edge("researcher", END)
    return outer.compile()


send_to_subgraph = _build_send_to_subgraph()


# -- create_agent with an async-only wrap_model_call: it runs only under ainvoke, so must its replay --


def _tracking_model(messages: list[BaseMessage]) -> AIMessage:
    last = last_tool(messages)
    if last is not None:
        return AIMessage(f"Tracked: {last.content}")
    return AIMessage("", tool_calls=[call("lookup_order", "t1", order_id="A1")])


def _build_async_middleware_agent() -> Any:
    from langchain.agents import create_agent
    from langchain.agents.middleware import wrap_model_call

    @wrap_model_call
    async def timed(request: Any, handler: Any) -> Any:
        return await handler(request)

    return create_agent(scripted("tracking-model", _tracking_model), [lookup_order], middleware=[timed])


async_middleware_agent = _build_async_middleware_agent()


# -- interrupt_before: stopped before a node, then invoke(None) (after update_state, or not) -------


class Draft(TypedDict, total=False):
    text: str
    sent: str


def _build_breakpoint_graph() -> Any:
    b = StateGraph(Draft)
    b.add_node("write", lambda s: {"text": f"draft of {s['text']}"})
    b.add_node("send", lambda s: {"sent": s["text"].upper()})
    b.add_edge(START, "write")
    b.add_edge("write", "send")
    b.add_edge("send", END)
    return b.compile(checkpointer=InMemorySaver(), interrupt_before=["send"])


breakpoint_continue = _build_breakpoint_graph()
edited_continue = _build_breakpoint_graph()


# -- durability="exit" on a graph without a checkpointer: LangGraph saves only the last step -------


class Count(TypedDict, total=False):
    n: int


def keep_going(state: Count) -> str:
    return "count" if state["n"] < 4 else "__end__"


def _build_exit_durability() -> Any:
    b = StateGraph(Count)
    b.add_node("count", lambda s: {"n": s["n"] + 1})
    b.add_edge(START, "count")
    b.add_conditional_edges("count", keep_going, ["count", END])
    return b.compile()


exit_durability = _build_exit_durability()


# -- an image as a standard content block: callbacks see it in OpenAI's form, the model in its own --


IMAGE_BLOCK = {"type": "image", "source_type": "base64", "data": "iVBORw0KGgo=", "mime_type": "image/png"}


def _describe(messages: list[BaseMessage]) -> AIMessage:
    return AIMessage(f"a picture, asked: {messages[-1].content[0]['text']}")


def _build_image_prompt() -> Any:
    model = scripted("vision-model", _describe)
    b = StateGraph(MessagesState)
    b.add_node("look", lambda s: {"messages": [model.invoke(s["messages"])]})
    b.add_edge(START, "look")
    b.add_edge("look", END)
    return b.compile()


image_prompt = _build_image_prompt()


# -- a subgraph compiled with checkpointer=True: it remembers across a thread's runs --------------


class Memo(TypedDict, total=False):
    note: str
    heard: Annotated[list[str], operator.add]


def _build_remembering() -> Any:
    inner = StateGraph(Memo)
    inner.add_node("listen", lambda s: {"heard": [s["note"]]})
    inner.add_edge(START, "listen")
    inner.add_edge("listen", END)
    outer = StateGraph(Memo)
    outer.add_node("memory", inner.compile(checkpointer=True))
    outer.add_edge(START, "memory")
    outer.add_edge("memory", END)
    return outer.compile(checkpointer=InMemorySaver())


remembering_subgraph = _build_remembering()


# -- Send tasks of which one fails; invoke(None) runs it again, the others' writes carried over --

_FAILED_ONCE: set[tuple[str, str]] = set()
# LangGraph stops waiting for a step's other tasks once one fails: a task still running then
# loses its writes, and whether "a" and "c" had finished depends on how busy the machine is.
# The case is "the others' writes are carried over", so "b" fails once they have returned.
_RETURNED: dict[str, set[str]] = {}
_RETURNED_CHANGED = threading.Condition()
_SIBLINGS_GRACE_S = 0.2  # after their nodes return, for LangGraph to take their writes


@tool
def fetch_item(item: str, config: RunnableConfig) -> str:
    """Fetch an item (the first fetch of "b" on a thread fails, as a flaky service does)."""
    thread = str((config.get("configurable") or {}).get("thread_id"))
    if item == "b" and (thread, item) not in _FAILED_ONCE:
        _FAILED_ONCE.add((thread, item))
        with _RETURNED_CHANGED:
            _RETURNED_CHANGED.wait_for(lambda: {"a", "c"} <= _RETURNED.get(thread, set()), timeout=10)
        time.sleep(_SIBLINGS_GRACE_S)
        raise ConnectionError(f"service unavailable for {item}")
    return f"{item}: fetched"


def _fetch(state: dict, config: RunnableConfig) -> dict:
    item = state["items"][0]
    update = {"results": [fetch_item.invoke({"item": item}, config)]}
    with _RETURNED_CHANGED:
        _RETURNED.setdefault(str((config.get("configurable") or {}).get("thread_id")), set()).add(item)
        _RETURNED_CHANGED.notify_all()
    return update


class Fan(TypedDict, total=False):
    items: list[str]
    results: Annotated[list[str], operator.add]
    summary: str


def spread(state: Fan) -> list[Send]:
    return [Send("fetch", {"items": [i]}) for i in state["items"]]


def _build_retried_fanout() -> Any:
    b = StateGraph(Fan)
    b.add_node("fetch", _fetch)
    b.add_node("summarize", lambda s: {"summary": ", ".join(sorted(s["results"]))})
    b.add_conditional_edges(START, spread, ["fetch"])
    b.add_edge("fetch", "summarize")
    b.add_edge("summarize", END)
    return b.compile(checkpointer=InMemorySaver())


retried_fanout = _build_retried_fanout()


# -- a subgraph node with a cache of its own (the root has none): its cached node is a hit -------

quotes_run = {"n": 0}  # how often the cached node's code ran: a hit does not run it


@tool
def price_of(item: str) -> int:
    """The price of an item."""
    return len(item) * 10


class Quote(TypedDict, total=False):
    item: str
    total: int


def quote(state: Quote) -> dict[str, Any]:
    quotes_run["n"] += 1
    return {"total": price_of.invoke({"item": state["item"]})}


def _build_cached_subgraph() -> Any:
    sub = StateGraph(Quote)
    sub.add_node("quote", quote, cache_policy=CachePolicy(ttl=600))
    sub.add_edge(START, "quote")
    sub.add_edge("quote", END)
    b = StateGraph(Quote)
    b.add_node("pricing", sub.compile(cache=InMemoryCache()))
    b.add_node("add_tax", lambda s: {"total": s["total"] + 1})
    b.add_edge(START, "pricing")
    b.add_edge("pricing", "add_tax")
    b.add_edge("add_tax", END)
    return b.compile()


cached_subgraph = _build_cached_subgraph()


# -- a functional-API @task with a cache policy: its second call is a hit no callback names ------

drafts_run = {"n": 0}  # how often the cached task's code ran


@task(cache_policy=CachePolicy(ttl=600))
def draft(topic: str) -> str:
    drafts_run["n"] += 1
    reply = scripted("draft-model", lambda messages: AIMessage(f"draft on {messages[-1].content}")).invoke(topic)
    return str(reply.content)


@task
def polish(text: str) -> str:
    return scripted("polish-model", lambda messages: AIMessage(f"polished {messages[-1].content}")).invoke(text).content


@entrypoint(cache=InMemoryCache())
def cached_task(topic: str) -> dict[str, Any]:
    text = draft(topic).result()
    return {"draft": text, "final": polish(text).result()}


# -- a human answers an interrupt and edits the state in the same Command ---------------------


class Approval(TypedDict, total=False):
    draft: str
    note: str
    answer: str


def _ask_approval(state: Approval) -> dict[str, Any]:
    decision = interrupt({"approve": state["draft"]})
    return {"answer": f"{decision}: {state['draft']} ({state.get('note', 'no note')})"}


def _build_edited_approval() -> Any:
    b = StateGraph(Approval)
    b.add_node("ask", _ask_approval)
    b.add_node("send", lambda s: {"draft": s["answer"].upper()})
    b.add_edge(START, "ask")
    b.add_edge("ask", "send")
    b.add_edge("send", END)
    return b.compile(checkpointer=InMemorySaver())


edited_approval = _build_edited_approval()


# -- a returning user: the run reads memories earlier runs wrote, routes on them, writes more -----


class Visit(TypedDict, total=False):
    user: str
    visits: int
    greeting: str


def _count_visit(state: Visit) -> dict[str, Any]:
    store = get_store()
    where = ("visits", state["user"])
    prior = store.get(where, "seen")
    store.put(where, "seen", {"returning": prior is not None})
    return {"visits": 2 if prior else 1}  # first time, or back again


def _returning(state: Visit) -> str:
    return "welcome_back" if state["visits"] > 1 else "welcome"


def _welcome_back(state: Visit) -> dict[str, Any]:
    store = get_store()
    users = store.list_namespaces(prefix=("visits",))
    notes = store.search(("visits", state["user"]), limit=3)
    return {"greeting": f"welcome back ({len(users)} users, {len(notes)} notes)"}


def _build_returning_user() -> Any:
    b = StateGraph(Visit)
    b.add_node("count_visit", _count_visit)
    b.add_node("welcome", lambda s: {"greeting": "welcome"})
    b.add_node("welcome_back", _welcome_back)
    b.add_edge(START, "count_visit")
    b.add_conditional_edges("count_visit", _returning, ["welcome", "welcome_back"])
    b.add_edge("welcome", END)
    b.add_edge("welcome_back", END)
    return b.compile(store=InMemoryStore())


returning_user = _build_returning_user()
