"""Small real graphs for the replay tests: Send fan-out, Command, subgraph, interrupt, chat loop.

Each builder takes the knob a test turns to make the graph diverge from its recording.
"""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

from conftest import load_agent
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from langgraph.types import Command, Send, interrupt

ScriptedChatModel = load_agent("scripted_model").ScriptedChatModel


@tool
def double(x: int) -> int:
    """Double a number."""
    return 2 * x


@tool
def halve(x: int) -> float:
    """Halve a number."""
    return x / 2


# -- Send fan-out -------------------------------------------------------------------


class FanState(TypedDict, total=False):
    items: list[int]
    results: Annotated[list[int], operator.add]


def fan_graph(offset: int = 0):
    """plan fans out one `worker` per item with Send; each worker calls `double`."""

    def fan(state: FanState) -> list[Send]:
        return [Send("worker", {"items": [i]}) for i in state["items"]]

    def worker(state: FanState) -> dict:
        return {"results": [double.invoke({"x": state["items"][0] + offset})]}

    b = StateGraph(FanState)
    b.add_node("plan", lambda s: {})
    b.add_node("worker", worker)
    b.add_edge(START, "plan")
    b.add_conditional_edges("plan", fan, ["worker"])
    b.add_edge("worker", END)
    return b.compile()


# -- Command goto ---------------------------------------------------------------------


class CmdState(TypedDict, total=False):
    x: int
    path: Annotated[list[str], operator.add]


def cmd_graph(threshold: int = 5):
    """`router` returns Command(goto=big|small) depending on x > threshold."""

    def router(state: CmdState) -> Command:
        return Command(goto="big" if state["x"] > threshold else "small", update={"path": ["router"]})

    b = StateGraph(CmdState)
    b.add_node("router", router, destinations=("big", "small"))
    b.add_node("big", lambda s: {"path": ["big"]})
    b.add_node("small", lambda s: {"path": ["small"]})
    b.add_edge(START, "router")
    b.add_edge("big", END)
    b.add_edge("small", END)
    return b.compile()


# -- subgraph ---------------------------------------------------------------------------


class SubState(TypedDict, total=False):
    n: int
    log: Annotated[list[str], operator.add]


def sub_graph(step_add: int = 1):
    """pre -> child (s1: double, s2: +step_add, s3: double) -> post."""

    def s1(state: SubState) -> dict:
        return {"n": double.invoke({"x": state["n"]}), "log": ["s1"]}

    def s2(state: SubState) -> dict:
        return {"n": state["n"] + step_add, "log": ["s2"]}

    def s3(state: SubState) -> dict:
        return {"n": double.invoke({"x": state["n"]}), "log": ["s3"]}

    c = StateGraph(SubState)
    c.add_node("s1", s1)
    c.add_node("s2", s2)
    c.add_node("s3", s3)
    c.add_edge(START, "s1")
    c.add_edge("s1", "s2")
    c.add_edge("s2", "s3")
    c.add_edge("s3", END)
    p = StateGraph(SubState)
    p.add_node("pre", lambda s: {"log": ["pre"]})
    p.add_node("child", c.compile())
    p.add_node("post", lambda s: {"log": ["post"]})
    p.add_edge(START, "pre")
    p.add_edge("pre", "child")
    p.add_edge("child", "post")
    p.add_edge("post", END)
    return p.compile()


# -- interrupt ----------------------------------------------------------------------------


class AskState(TypedDict, total=False):
    q: str
    approved: str
    answer: str


def interrupt_graph(checkpointer):
    """`ask` interrupts for approval; `act` answers with the resume value."""

    def ask(state: AskState) -> dict:
        return {"approved": interrupt({"question": state["q"]})}

    b = StateGraph(AskState)
    b.add_node("ask", ask)
    b.add_node("act", lambda s: {"answer": f"done:{s['approved']}"})
    b.add_edge(START, "ask")
    b.add_edge("ask", "act")
    b.add_edge("act", END)
    return b.compile(checkpointer=checkpointer)


# -- chat loop with a conditional router ------------------------------------------------------


class ChatState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def tool_call(name: str, call_id: str, **args) -> dict:
    return {"name": name, "args": args, "id": call_id}


def chat_script(x: int = 21, final: str = "42") -> list[AIMessage]:
    """Two parallel tool calls, then a final answer."""
    return [
        AIMessage(content="", tool_calls=[tool_call("double", "c1", x=x), tool_call("halve", "c2", x=x)]),
        AIMessage(content=final),
    ]


def chat_graph(script: list[AIMessage] | None = None, *, is_async: bool = False, tools=(double, halve), node_tools=None, stop_word: str | None = None):
    """agent (chat model with tools) -> should_continue -> ToolNode (parallel calls) -> agent.

    ``node_tools`` (default: ``tools``) are the tools the ToolNode can run.
    """
    model = ScriptedChatModel(script=script or chat_script()).bind_tools(list(tools))

    def should_continue(state: ChatState) -> str:
        last = state["messages"][-1]
        if stop_word is not None and stop_word in str(last.content):
            return END
        return "tools" if last.tool_calls else END

    if is_async:

        async def agent(state: ChatState) -> dict:
            return {"messages": [await model.ainvoke(state["messages"])]}

    else:

        def agent(state: ChatState) -> dict:
            return {"messages": [model.invoke(state["messages"])]}

    b = StateGraph(ChatState)
    b.add_node("agent", agent)
    b.add_node("tools", ToolNode(list(node_tools if node_tools is not None else tools)))
    b.add_edge(START, "agent")
    b.add_conditional_edges("agent", should_continue, ["tools", END])
    b.add_edge("tools", "agent")
    return b.compile()


def send_history_graph(suffix: str = "", stop: int = 12):
    """A router that sends the whole history to two workers (as create_react_agent's tool calls do),
    until the history holds ``stop`` messages."""

    class HistoryState(TypedDict):
        messages: Annotated[list, add_messages]
        done: Annotated[int, operator.add]

    def talk(state) -> dict:
        return {"messages": [AIMessage(content=f"turn {len(state['messages'])}")]}

    def fan(state) -> list:
        if len(state["messages"]) >= stop:
            return [Send("finish", {"messages": state["messages"], "done": 0})]
        return [Send("work", {"messages": [*state["messages"], HumanMessage(content=f"task {i}{suffix}")], "done": 0}) for i in range(2)]

    g = StateGraph(HistoryState)
    g.add_node("talk", talk)
    g.add_node("work", lambda s: {"done": 1})
    g.add_node("finish", lambda s: {"done": 100})
    g.add_edge(START, "talk")
    g.add_conditional_edges("talk", fan, ["work", "finish"])
    g.add_edge("work", "talk")
    g.add_edge("finish", END)
    return g.compile()
