"""Production agent shapes (``ecosystem_shapes_v1.py``: langchain v1 ``create_agent`` middleware,
supervisors, a swarm, a memory store across threads), recorded and strictly replayed.

Each is run as a user runs it and checked by ``shape_harness``: every superstep and call stored,
a strict replay clean, an override of a tool or model answer diverging at the step, node and
namespace of the call.
"""

from __future__ import annotations

import ecosystem_shapes_v1 as V
import shape_harness as H
from langchain_core.messages import AIMessage
from langgraph.types import Command
from shape_harness import Shape, messages


def _decide(*decisions: dict) -> Command:
    return Command(resume={"decisions": list(decisions)})


def _approve_r7_reject_r8(out: dict) -> Command:
    """Answer each per-call interrupt by its id: the R7 refund approved, the R8 one rejected."""
    no = {"type": "reject", "message": "too small"}
    return Command(resume={i.id: no if "R8" in str(i.value) else {"type": "approve"} for i in out["__interrupt__"]})


_EDITED = {"type": "edit", "edited_action": {"name": "refund", "args": {"order_id": "R7", "amount": 10}}}
_LOST = ("lookup", lambda order_id: "lost")
_NO = ("model", lambda messages: AIMessage("no"))

SHAPES: dict[str, Shape] = {
    "summarized": Shape(V.summarized, (messages("Where are S1, S2 and S3?"),), ("summary-model", lambda messages: AIMessage("nothing to say"))),
    "summarized_async": Shape(V.summarized, (messages("Where are S1, S2 and S3?"),), _LOST, how="ainvoke"),
    "hitl_approve": Shape(V.human_in_the_loop, (messages("Refund R7."), _decide({"type": "approve"})), ("refund", lambda order_id, amount: "refused"), thread=True),
    "hitl_edit": Shape(V.human_in_the_loop, (messages("Refund R7."), _decide(_EDITED)), ("refund", lambda order_id, amount: "refused"), thread=True),
    "hitl_reject": Shape(V.human_in_the_loop, (messages("Refund R7."), _decide({"type": "reject", "message": "not this one"})), _NO, thread=True),
    "hitl_async": Shape(V.human_in_the_loop, (messages("Refund R7."), _decide({"type": "approve"})), ("refund", lambda order_id, amount: "refused"), how="astream", stream_mode="updates", thread=True),
    "model_retried": Shape(V.model_retried, (messages("Where is T1?"),), _LOST),
    "tool_retried": Shape(V.tool_retried, (messages("Stock of S9?"),), ("stock", lambda sku: "none")),
    "model_call_limited": Shape(V.model_call_limited, (messages("Go."),), _LOST),
    "tool_call_limited": Shape(V.tool_call_limited, (messages("Go."), messages("Again.")), _LOST, thread=True),
    "tool_selector": Shape(V.tool_selector, (messages("What is the weather in Oslo?"),), ("selector-model", lambda messages: AIMessage("", tool_calls=[{"name": "ToolSelectionResponse", "args": {"tools": ["lookup"]}, "id": "x", "type": "tool_call"}]))),
    "todo_list": Shape(V.todo_list, (messages("Look up P1 and report."),), _LOST),
    "context_edited": Shape(V.context_edited, (messages("Where are C1, C2 and C3?"),), _LOST),
    "pii_redacted": Shape(V.pii_redacted, (messages("Mail ada@example.com about E5."),), _LOST),
    "custom_hooks": Shape(V.custom_hooks, (messages("Where are H1 and H2?"),), _LOST),
    "custom_hooks_stream": Shape(V.custom_hooks, (messages("Where are H1 and H2?"),), _LOST, how="stream", stream_mode=["updates", "messages"]),
    "dynamic_model": Shape(V.dynamic_model, (messages("Where are D1 and D2?"),), ("large-model", lambda messages: AIMessage("too long"))),
    "structured_tool_strategy": Shape(V.structured_tool_strategy, (messages("Where is F2?"),), _LOST),
    "structured_provider_strategy": Shape(V.structured_provider_strategy, (messages("Where is F2?"),), _LOST),
    "async_agent": Shape(V.async_agent, (messages("When does A8 arrive?"),), ("eta", lambda order_id: "never"), how="ainvoke"),
    "async_agent_astream": Shape(V.async_agent, (messages("When does A8 arrive?"),), ("eta", lambda order_id: "never"), how="astream", stream_mode=["updates", "messages"]),
    "supervisor_full_history": Shape(V.supervisor, (messages("Check W1 and W2."),), _LOST),
    "supervisor_last_message": Shape(V.supervisor_last_message, (messages("Check W1 and W2."),), _LOST),
    "supervisor_no_handoff_back": Shape(V.supervisor_no_handoff_back, (messages("Check W1 and W2."),), _LOST),
    "supervisor_of_supervisors": Shape(V.supervisor_of_supervisors, (messages("Check W1 and W2."),), _LOST),
    "supervisor_async": Shape(V.supervisor_of_supervisors, (messages("Check W1 and W2."),), _LOST, how="astream", stream_mode="updates", subgraphs=True),
    "swarm_of_three": Shape(V.swarm_of_three, (messages("Ship V3."), Command(resume="go ahead")), _LOST, thread=True),
    "memory_two_threads": Shape(V.memory_agent, (messages("Remember likes tea"), messages("Remember likes rain"), messages("What drinks?")), ("recall", lambda query: "nothing"), threads=("a", "a", "b")),
    "hitl_per_call": Shape(V.human_per_call, (messages("Refund R7 and R8."), _approve_r7_reject_r8), ("refund", lambda order_id, amount: "refused"), thread=True),
    "hitl_edit_async": Shape(V.human_in_the_loop, (messages("Refund R7."), _decide(_EDITED)), ("refund", lambda order_id, amount: "refused"), how="ainvoke", thread=True),
    "model_fallback": Shape(V.model_fallback, (messages("Where is B1?"),), ("backup-model", lambda messages: AIMessage("no idea"))),
    "tool_retry_gives_up": Shape(V.tool_retry_gives_up, (messages("Stock of Q1?"),), _LOST),
    "model_call_limit_raises": Shape(V.model_call_limit_raises, (messages("Go."),), _LOST, raises=Exception),
    "guarded": Shape(V.guarded, (messages("Where is G1?"), messages("Something forbidden.")), _LOST, thread=True, context=V.Caller(user="ada", tier="gold")),
    "guarded_async": Shape(V.guarded, (messages("Where is G1?"), messages("Something forbidden.")), _LOST, how="astream", stream_mode=["updates", "messages"], thread=True, context=V.Caller(user="ada", tier="gold")),
    "tool_emulated": Shape(V.tool_emulated, (messages("Weather in Oslo?"),), ("emulator-model", lambda messages: AIMessage("snow"))),
    "structured_retried": Shape(V.structured_retried, (messages("Where is F3?"),), _LOST),
    "memory_two_threads_async": Shape(V.memory_agent_async, (messages("Remember likes tea"), messages("Remember likes rain"), messages("What drinks?")), ("arecall", lambda query: "nothing"), how="ainvoke", threads=("a", "a", "b")),
    "swarm_of_three_async": Shape(V.swarm_of_three, (messages("Ship V3."), Command(resume="go ahead")), _LOST, how="astream", stream_mode="updates", subgraphs=True, thread=True),
    "summarized_stream": Shape(V.summarized, (messages("Where are S1, S2 and S3?"),), ("summary-model", lambda messages: AIMessage("nothing to say")), how="astream", stream_mode="messages"),
}


recorded = H.recorded_shapes(SHAPES)


class TestShapes(H.ShapeChecks):
    pass
