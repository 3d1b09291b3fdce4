"""Shapes of the LangGraph ecosystem the conformance corpus lacks, recorded and strictly replayed.

Each shape (``ecosystem_shapes.py``) is run as a user runs it and checked by ``shape_harness``:
every superstep and call stored, a strict replay clean, an override diverging where the call was.
"""

from __future__ import annotations

import ecosystem_shapes as S
import shape_harness as H
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.errors import GraphRecursionError
from langgraph.types import Command
from shape_harness import Shape, answer_each, messages

SHAPES: dict[str, Shape] = {
    "send_in_subgraph": Shape(S.send_in_subgraph, ({"orders": ["A1", "B2", "C3"]},), ("lookup", lambda order_id: "lost")),
    "send_in_subgraph_async": Shape(S.send_in_subgraph, ({"orders": ["A1", "B2"]},), ("lookup", lambda order_id: "lost"), how="ainvoke"),
    "retried_toolnode": Shape(S.retried_toolnode, (messages("Stock of S9?"),), ("stock", lambda sku: "none")),
    "tool_asks_twice": Shape(S.tool_asks_twice, (messages("Wire 40 to Bo."), Command(resume="yes"), Command(resume="very")), ("wire_money", lambda to, amount: "refused"), thread=True),
    "parallel_interrupts": Shape(S.parallel_interrupts, ({"doc": "d1"}, answer_each("ok")), ("lookup", lambda order_id: "?"), thread=True),
    "functional_previous": Shape(S.counting_entrypoint, ("A1", "A1"), ("lookup", lambda order_id: "lost"), thread=True),
    "gathered_tasks": Shape(S.gathered_tasks, (["tides", "moons"], Command(resume="signed")), ("model", lambda messages: AIMessage("no brief")), how="ainvoke", thread=True),
    "tool_command_goto": Shape(S.tool_command_goto, ({**messages("I want a manager"), "customer": "Ada"},), ("escalate", lambda reason: "no supervisor today")),
    "hooked_react": Shape(S.hooked_react, ({"messages": [HumanMessage("ignore me"), HumanMessage("Where are K1 and K2?")]},), ("lookup", lambda order_id: "lost")),
    "react_v1": Shape(S.react_v1, ({"messages": [HumanMessage("ignore me"), HumanMessage("Where are K1 and K2?")]},), ("lookup", lambda order_id: "lost")),
    "return_direct": Shape(S.return_direct, (messages("Price of a lamp?"),), ("final_quote", lambda item: "free")),
    "three_modes": Shape(S.three_modes, (messages("Track M3."),), ("track", lambda order_id: "lost"), how="stream", stream_mode=["updates", "messages", "custom"]),
    "three_modes_async": Shape(S.three_modes, (messages("Track M3."),), ("track", lambda order_id: "lost"), how="astream", stream_mode=["updates", "messages", "custom"]),
    "sub_twice_in_node": Shape(S.sub_twice_in_node, ({"items": ["rope", "nail"]},), ("lookup", lambda order_id: "lost")),
    "trimmed_history": Shape(S.trimmed_history, ({"messages": [HumanMessage("one"), HumanMessage("two"), HumanMessage("three")]},), ("model", lambda messages: AIMessage(f"{len(messages)} seen"))),
    "async_tools": Shape(S.async_tools, (messages("Where is N4?"),), ("async_eta", lambda order_id: "never"), how="ainvoke"),
    "swarm_turns": Shape(S.swarm_turns, (messages("Bill me."), messages("And the order?")), ("lookup", lambda order_id: "lost"), thread=True),
    "sub_gathered_in_node": Shape(S.sub_gathered_in_node, ({"items": ["rope", "nail"]},), ("lookup", lambda order_id: "lost"), how="ainvoke"),
    "store_search_tool": Shape(S.store_search_tool, ({**messages("What do I like?"), "user": "ada"},), ("recall", lambda query: "likes nothing")),
    "retried_model": Shape(S.retried_model, (messages("Why?"),), ("model", lambda messages: AIMessage("because"))),
    "sub_interrupt_in_node": Shape(S.sub_interrupt_in_node, ({"question": "Q7"}, Command(resume="yes")), ("lookup", lambda order_id: "lost"), thread=True),
    "stream_subgraphs": Shape(S.send_in_subgraph, ({"orders": ["A1", "B2"]},), ("lookup", lambda order_id: "lost"), how="stream", stream_mode="updates", subgraphs=True),
    "batch": Shape(S.hooked_react, ([messages("Where are K1 and K2?"), messages("And K3?")],), ("lookup", lambda order_id: "lost"), how="batch"),
    "astream_events": Shape(S.async_tools, (messages("Where is N4?"),), ("async_lookup", lambda order_id: "lost"), how="astream_events"),
    "send_branches_ask": Shape(S.send_branches_ask, ({"claims": ["X1", "X2"]}, answer_each("fine")), ("lookup", lambda order_id: "lost"), thread=True),
    "task_runs_agent": Shape(S.task_runs_agent, ("Where are K1 and K2?",), ("lookup", lambda order_id: "lost")),
    "supervisor_asks": Shape(S.supervisor_asks, (messages("Refund Z9."), Command(resume="approved")), ("model", lambda messages: AIMessage("no")), thread=True),
    "lcel_nodes": Shape(S.lcel_nodes, ({"text": "please refund order 5"},), ("model", lambda messages: AIMessage("nothing"))),
    "restless_async": Shape(S.restless_async, (messages("Go."),), ("lookup", lambda order_id: "lost"), how="ainvoke", raises=GraphRecursionError, config={"recursion_limit": 7}),
}


recorded = H.recorded_shapes(SHAPES)


class TestShapes(H.ShapeChecks):
    pass
