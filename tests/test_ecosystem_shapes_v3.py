"""More shapes from the packages' docs (``ecosystem_shapes_v3.py``), recorded and strictly replayed.

Each is run as a user runs it and checked by ``shape_harness``: every superstep and call stored,
a strict replay clean, an override of a tool or model answer diverging at the step, node and
namespace of the call. Each is also replayed against the graph with one thing changed (a route,
a state value, a tool's answer): the replay must diverge, and name the node that changed.
"""

from __future__ import annotations

from typing import TypedDict

import ecosystem_shapes_v3 as V3
import shape_harness as H
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import START, StateGraph
from langgraph.types import Command
from shape_harness import Shape, answer_each, messages

from graphtape import Recorder, open_store, replay

_LOST = ("lookup", lambda order_id: "lost")
_LIMIT = {"recursion_limit": 6}

SHAPES: dict[str, Shape] = {
    "functional_agent": Shape(V3.functional_agent, ([HumanMessage("Where are FA1 and FA2?")], [HumanMessage("And now?")]), _LOST, thread=True),
    "functional_review": Shape(V3.functional_review, ([HumanMessage("Where is FR1?")], Command(resume={"action": "edit", "args": {"order_id": "FR9"}})), _LOST, thread=True),
    "async_task_retry": Shape(V3.async_task_retry, (["AT1", "AT2"],), _LOST, how="ainvoke"),
    "remaining_steps_loop": Shape(V3.remaining_steps_loop, ({},), _LOST, config=_LIMIT),
    "react_out_of_steps": Shape(V3.react_out_of_steps, (messages("Go."),), _LOST, config=_LIMIT),
    "tool_runtime": Shape(V3.tool_runtime, (messages("Tea and rice."),), ("basket", lambda: "empty"), how="stream", stream_mode=["updates", "custom"], context=V3.Shopper(user="ada")),
    "parallel_tool_error": Shape(V3.parallel_tool_error, (messages("Pay."),), ("charge", lambda card: "charged")),
    "supervisor_forwards": Shape(V3.supervisor_forwards, (messages("Where is FW1?"),), _LOST),
    "supervisor_inline": Shape(V3.supervisor_inline, (messages("Where is IN1?"),), _LOST),
    "parallel_agents": Shape(V3.parallel_agents, (messages("Check PA1 and PA2."),), _LOST, how="ainvoke"),
    "parallel_agent_nodes": Shape(V3.parallel_agent_nodes, (messages("Check PN1 and PN2."),), _LOST),
    "batched_node": Shape(V3.batched_node, ({"questions": ["BQ1 when?", "BQ2 where?", "BQ3 how?"]},), ("model", lambda messages: AIMessage("no"))),
    "abatched_node": Shape(V3.abatched_node, ({"questions": ["BQ1 when?", "BQ2 where?", "BQ3 how?"]},), _LOST, how="ainvoke"),
    "command_routing": Shape(V3.command_routing, ({"text": "I want my money back"},), ("model", lambda messages: AIMessage("faq"))),
    "handoff_to_parent": Shape(V3.handoff_to_parent, (messages("My parcel HP1?"),), _LOST),
    "summarized_thread": Shape(V3.summarized_thread, (messages("Where is ST1?"), messages("Where is ST2?"), messages("Where is ST3?")), _LOST, thread=True, override_at=2),
    "tools_by_turn": Shape(V3.tools_by_turn, (messages("Cancel TB1."),), ("cancel", lambda order_id: "kept")),
    "structured_union": Shape(V3.structured_union, (messages("Refund SU1?"),), _LOST),
    "agent_in_subgraph_stream": Shape(V3.agent_in_subgraph, (messages("Where are SS1 and SS2?"),), _LOST, how="stream", stream_mode=["updates", "messages"], subgraphs=True),
    "agent_in_subgraph_astream": Shape(V3.agent_in_subgraph, (messages("Where are SS1 and SS2?"),), _LOST, how="astream", stream_mode=["updates", "messages"], subgraphs=True),
    "agent_as_tool": Shape(V3.agent_as_tool, (messages("Research AT7."),), ("research", lambda question: "unknown")),
    "parallel_sub_interrupts": Shape(V3.parallel_sub_interrupts, ({"doc": "D1"}, answer_each("signed")), _LOST, thread=True),
    "functional_injected": Shape(V3.functional_injected, ("FI1",), _LOST, how="stream", stream_mode=["updates", "custom"], thread=True, context=V3.Shopper(user="ada")),
    "artifact_tool": Shape(V3.artifact_tool, (messages("Pay AR1."),), ("pay", lambda order_id: "declined")),
    "rich_state": Shape(V3.rich_state, ({},), _LOST),
    "supervisor_gated_worker": Shape(V3.supervisor_gated_worker, (messages("Refund SG1."), Command(resume={"decisions": [{"type": "approve"}]})), ("refund", lambda order_id, amount: "refused"), thread=True),
}

# What a replay against the changed graph must name first: (kind, namespace, node).
CHANGED: dict[str, tuple[str, str, str]] = {
    "functional_agent": ("state", "", "agent"),  # entrypoint.final saves less history
    "functional_review": ("arguments", "", "call_tool"),  # the person's edit is ignored
    "async_task_retry": ("state", "", "summarize"),  # the task joins its results otherwise
    "remaining_steps_loop": ("route", "", "work"),  # the loop stops a step earlier
    "react_out_of_steps": ("arguments", "", "agent"),  # a prompt
    "tool_runtime": ("arguments", "", "model"),  # a prompt
    "parallel_tool_error": ("state", "", "tools"),  # the error handler words the failure otherwise
    "supervisor_forwards": ("state", "", "clerk"),  # the worker's whole history goes back
    "supervisor_inline": ("arguments", "supervisor", "agent"),  # agent names no longer inline
    "parallel_agents": ("state", "", "billing"),  # one desk words its verdict otherwise
    "parallel_agent_nodes": ("arguments", "billing", "model"),  # one agent gets a prompt
    "batched_node": ("state", "", "ask_all"),
    "abatched_node": ("state", "", "ask_all"),
    "command_routing": ("route", "", "triage"),  # Command(goto=...) goes elsewhere
    "handoff_to_parent": ("arguments", "front", "model"),
    "summarized_thread": ("arguments", "", "SummarizationMiddleware.before_model"),  # keeps more
    "tools_by_turn": ("arguments", "", "model"),  # the middleware offers every tool
    "structured_union": ("state", "", "model"),  # the structured answer's tool message
    "agent_in_subgraph_stream": ("state", "", "greet"),
    "agent_in_subgraph_astream": ("state", "", "greet"),
    "agent_as_tool": ("arguments", "", "model"),
    "parallel_sub_interrupts": ("state", "", "file"),
    "functional_injected": ("state", "", "greet"),
    "artifact_tool": ("state", "", "audit"),
    "rich_state": ("state", "", "check"),
    "supervisor_gated_worker": ("arguments", "cashier", "model"),
}


recorded = H.recorded_shapes(SHAPES)


class TestShapes(H.ChangedShapeChecks):
    changed = CHANGED


def test_a_task_whose_answer_changed_is_named_before_the_call_it_stopped(tmp_path):
    """The functional API runs a whole agent turn in one step: a tool task's changed answer is
    handed to the next model call, which the recording cannot answer. The task is the cause."""
    db = str(tmp_path / "fn.db")
    with Recorder(db) as rec:
        rec.attach(V3.functional_agent(), name="fn").invoke([HumanMessage("Where are FA1 and FA2?")], {"configurable": {"thread_id": "t"}})
    store = open_store(db)
    try:
        (run,) = store.list_runs()
    finally:
        store.close()
    result = replay(run.id, V3.functional_agent(), db=db, overrides={"lookup": lambda order_id: "lost"})
    kinds = [(d.kind, d.node, d.what) for d in result.divergences]
    assert kinds[0] == ("state", "call_tool", "task 'call_tool' returned something else"), result.report()
    assert ("arguments", "call_model") in [(k, n) for k, n, _ in kinds], result.report()  # the stopped call is still told


class Plan(TypedDict, total=False):
    status: str


def test_a_tool_answering_with_a_class_of_its_own_is_answered_with_that_class(tmp_path):
    """A node reads ``eta.days`` from a tool that returns a dataclass: the replay's answer is one."""

    def plan(state: Plan) -> dict:
        eta = V3.courier_eta.invoke({"order_id": "E12"})
        return {"status": f"{type(eta).__name__} in {eta.days}d"}

    def build():
        b = StateGraph(Plan)
        b.add_node("plan", plan)
        b.add_edge(START, "plan")
        return b.compile()

    db = str(tmp_path / "eta.db")
    with Recorder(db) as rec:
        assert rec.attach(build(), name="eta").invoke({}) == {"status": "Eta in 3d"}
    store = open_store(db)
    try:
        (run,) = store.list_runs()
    finally:
        store.close()
    result = replay(run.id, build(), db=db)
    assert not result.diverged, result.report()
    assert result.final_state == {"status": "Eta in 3d"}
