"""The shapes of ``ecosystem_shapes_v5.py``, recorded and strictly replayed, most of them both
sync and async.

Each shape is run as a user runs it and checked by ``shape_harness``: every superstep and call
stored, a strict replay clean, an override of a tool or model answer diverging at the step, node
and namespace of the call, the graph's results unchanged by recording, and the graph with one
thing changed diverging at the node that changed. Then a user's ``update_state(as_node=...)``
between runs, and two graphs recorded at once by one Recorder.
"""

from __future__ import annotations

import ecosystem_shapes_v5 as V5
import shape_harness as H
import asyncio
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langgraph.types import Command
from shape_harness import Shape, answer_each, messages

from graphtape import Recorder, open_store, replay

_LOST = ("lookup", lambda order_id: "lost")
_NO = ("model", lambda messages: AIMessage("no"))
_GOLD = V5.Caller(user="ada", tier="gold")


def _answer_streamed(value: Any) -> Any:
    """A turn answering every interrupt a streamed turn's root updates showed, by its id (a chunk
    is ``(mode, data)`` where the stream has several modes, ``(namespace, ...)`` with subgraphs)."""

    def answer(chunks: list) -> Command:
        asked = []
        for c in chunks:
            parts = list(c) if isinstance(c, tuple) else [c]
            if parts and isinstance(parts[0], tuple):
                if parts.pop(0):
                    continue  # a subgraph's chunk: its interrupts reach the root's updates too
            if len(parts) == 2 and parts[0] != "updates":
                continue
            asked.extend(parts[-1].get("__interrupt__", ()) if isinstance(parts[-1], dict) else ())
        return Command(resume={i.id: value for i in asked})

    return answer


SHAPES: dict[str, Shape] = {
    "deferred_reduce": Shape(V5.deferred_reduce, ({"orders": ["DR1", "DR2", "DR3"]},), _LOST),
    "deferred_reduce_async": Shape(V5.deferred_reduce, ({"orders": ["DR1", "DR2"]},), _LOST, how="astream", stream_mode="updates"),
    "overwritten_notes": Shape(V5.overwritten_notes, ({"notes": ["given"]},), _LOST),
    "overwritten_notes_async": Shape(V5.overwritten_notes, ({"notes": ["given"]},), _NO, how="ainvoke"),
    "restless_then_told": Shape(V5.restless_then_told, (messages("Go."), messages("Stop.")), _LOST, thread=True, config={"recursion_limit": 5}),
    "restless_then_told_async": Shape(V5.restless_then_told, (messages("Go."), messages("Stop.")), _LOST, how="ainvoke", thread=True, config={"recursion_limit": 5}),
    "breakpoints": Shape(V5.breakpoints, ({"topic": "BK1"}, None, None), _NO, thread=True),
    "breakpoints_async": Shape(V5.breakpoints, ({"topic": "BK1"}, None, None), _NO, how="astream", stream_mode="updates", thread=True),
    "react_breakpoint": Shape(V5.react_breakpoint, (messages("Where are BP0 and BP1?"), None, None), _LOST, thread=True),
    "react_breakpoint_async": Shape(V5.react_breakpoint, (messages("Where are BP0 and BP1?"), None, None), _LOST, how="ainvoke", thread=True),
    "remembering_subgraph_node": Shape(V5.remembering_subgraph_node, (messages("Where is RS1?"), messages("And RS2?")), _LOST, thread=True, override_at=1),
    "remembering_subgraph_node_async": Shape(V5.remembering_subgraph_node, (messages("Where is RS1?"), messages("And RS2?")), _LOST, how="astream", stream_mode="updates", subgraphs=True, thread=True),
    "command_sends": Shape(V5.command_sends, ({"items": ["CS1", "CS2", "CS3"]},), _LOST),
    "command_sends_async": Shape(V5.command_sends, ({"items": ["CS1", "CS2"]},), _LOST, how="ainvoke"),
    "climbing_handoffs": Shape(V5.climbing_handoffs, ({"log": []},), _LOST),
    "climbing_handoffs_async": Shape(V5.climbing_handoffs, ({"log": []},), _NO, how="astream", stream_mode="updates", subgraphs=True),
    "tool_error_middleware": Shape(V5.tool_error_middleware, (messages("Charge both."),), ("charge", lambda card: "charged anyway")),
    "parallel_tool_asks": Shape(V5.parallel_tool_asks, (messages("Refund PA1 and PA2."), answer_each("yes")), _NO, thread=True),
    "parallel_tool_asks_async": Shape(V5.parallel_tool_asks, (messages("Refund PA1 and PA2."), _answer_streamed("yes")), _NO, how="astream", stream_mode=["updates", "messages"], thread=True),
    "custom_stream_subgraph": Shape(V5.custom_stream_subgraph, (messages("Go."),), _LOST, how="stream", stream_mode=["custom", "updates"], subgraphs=True),
    "custom_stream_subgraph_async": Shape(V5.custom_stream_subgraph, (messages("Go."),), _LOST, how="astream", stream_mode=["custom", "updates"], subgraphs=True),
    "context_router": Shape(V5.context_router, (messages("Hi."),), _LOST, context=_GOLD),
    "context_router_async": Shape(V5.context_router, (messages("Hi."),), _LOST, how="ainvoke", context=_GOLD),
    "cached_turns": Shape(V5.cached_turns, ({"question": "Why CT1?"}, {"question": "Why CT1?"}), _NO, thread=True),
    "io_private": Shape(V5.io_private, ({"text": "where is IO1"},), _LOST),
    "io_private_async": Shape(V5.io_private, ({"text": "where is IO1"},), _LOST, how="astream", stream_mode="values"),
    "pydantic_state": Shape(V5.pydantic_state, ({"order_id": "PY1"},), _LOST),
    "pydantic_state_async": Shape(V5.pydantic_state, ({"order_id": "PY1"},), _LOST, how="ainvoke"),
    "dataclass_state": Shape(V5.dataclass_state, ({"parcel_id": "DC1"},), _LOST),
    "dataclass_state_async": Shape(V5.dataclass_state, ({"parcel_id": "DC1"},), _LOST, how="ainvoke"),
    "history_reset": Shape(V5.history_reset, (messages("Where is HR1"), messages("And HR2")), _LOST, thread=True, override_at=1),
    "react_response_format": Shape(V5.react_response_format, (messages("Is RF1 late?"),), _LOST),
    "react_response_format_async": Shape(V5.react_response_format, (messages("Is RF1 late?"),), _LOST, how="ainvoke"),
    "tool_error_builtin": Shape(V5.tool_error_builtin, (messages("Charge and look."),), ("charge", lambda card: "charged anyway")),
    "tool_error_builtin_async": Shape(V5.tool_error_builtin, (messages("Charge and look."),), _LOST, how="astream", stream_mode=["updates", "messages"]),
    "entrypoint_one_asks": Shape(V5.entrypoint_one_asks, (["EO1", "EO2"], Command(resume="signed")), _LOST, thread=True),
    "entrypoint_one_asks_stream": Shape(V5.entrypoint_one_asks, (["EO1", "EO2"], _answer_streamed("signed")), _LOST, how="stream", stream_mode="updates", thread=True),
    "asking_memory": Shape(V5.asking_memory, ({"question": "AM1"}, Command(resume="yes"), {"question": "AM2"}, Command(resume="no")), _LOST, thread=True, override_at=1),
    "asking_memory_async": Shape(V5.asking_memory, ({"question": "AM1"}, Command(resume="yes"), {"question": "AM2"}, Command(resume="no")), _NO, how="ainvoke", thread=True),
    "send_to_subgraph_asks": Shape(V5.send_to_subgraph_asks, ({"claims": ["SC1", "SC2"]}, answer_each("fair")), _LOST, thread=True),
    "send_to_subgraph_asks_async": Shape(V5.send_to_subgraph_asks, ({"claims": ["SC1", "SC2"]}, _answer_streamed("fair")), _LOST, how="astream", stream_mode="updates", subgraphs=True, thread=True),
    "retried_subgraph": Shape(V5.retried_subgraph, (messages("Go."),), _LOST),
    "retried_subgraph_async": Shape(V5.retried_subgraph, (messages("Go."),), _LOST, how="ainvoke"),
    "node_runs_tasks": Shape(V5.node_runs_tasks, ({"notes": []}, Command(resume="ok")), _LOST, thread=True),
    "node_runs_tasks_async": Shape(V5.node_runs_tasks, ({"notes": []}, Command(resume="ok")), _LOST, how="ainvoke", thread=True),
}

# What a replay against the changed graph must name first: (kind, namespace, node).
CHANGED: dict[str, tuple[str, str, str]] = {
    "deferred_reduce": ("arguments", "", "summarize"),
    "deferred_reduce_async": ("arguments", "", "summarize"),
    "overwritten_notes": ("state", "", "compress"),
    "overwritten_notes_async": ("state", "", "compress"),
    "restless_then_told": ("arguments", "", "agent"),
    "restless_then_told_async": ("arguments", "", "agent"),
    "breakpoints": ("arguments", "", "research"),
    "breakpoints_async": ("arguments", "", "research"),
    "react_breakpoint": ("arguments", "", "agent"),
    "react_breakpoint_async": ("arguments", "", "agent"),
    "remembering_subgraph_node": ("arguments", "desk", "agent"),
    "remembering_subgraph_node_async": ("arguments", "desk", "agent"),
    "command_sends": ("state", "pricing", "dispatch"),
    "command_sends_async": ("state", "pricing", "dispatch"),
    "climbing_handoffs": ("route", "desk|front", "triage"),  # its Command.PARENT carries another update
    "climbing_handoffs_async": ("route", "desk|front", "triage"),
    "tool_error_middleware": ("state", "", "tools"),
    "parallel_tool_asks": ("arguments", "", "model"),
    "parallel_tool_asks_async": ("arguments", "", "model"),
    "custom_stream_subgraph": ("arguments", "worker", "work"),
    "custom_stream_subgraph_async": ("arguments", "worker", "work"),
    "context_router": ("route", "", "greet"),
    "context_router_async": ("route", "", "greet"),
    "cached_turns": ("state", "", "count"),
    "io_private": ("arguments", "", "answer"),
    "io_private_async": ("arguments", "", "answer"),
    "pydantic_state": ("state", "", "check"),
    "pydantic_state_async": ("state", "", "check"),
    "dataclass_state": ("state", "", "tell"),
    "dataclass_state_async": ("state", "", "tell"),
    "history_reset": ("state", "", "reset"),
    "react_response_format": ("arguments", "", "generate_structured_response"),
    "react_response_format_async": ("arguments", "", "generate_structured_response"),
    "tool_error_builtin": ("state", "", "tools"),
    "tool_error_builtin_async": ("state", "", "tools"),
    "entrypoint_one_asks": ("arguments", "", "brief"),
    "entrypoint_one_asks_stream": ("arguments", "", "brief"),
    "asking_memory": ("arguments", "desk", "ask"),
    "asking_memory_async": ("arguments", "desk", "ask"),
    "send_to_subgraph_asks": ("arguments", "review", "judge"),  # the question a person is asked
    "send_to_subgraph_asks_async": ("arguments", "review", "judge"),
    "retried_subgraph": ("arguments", "worker", "work"),
    "retried_subgraph_async": ("arguments", "worker", "work"),
    "node_runs_tasks": ("arguments", "", "work"),
    "node_runs_tasks_async": ("arguments", "", "work"),
}


recorded = H.recorded_shapes(SHAPES)


class TestShapes(H.ChangedShapeChecks):
    changed = CHANGED

    def test_a_strict_replay_from_any_step_reproduces_the_run(self, recorded):
        """Resumed at any recorded root step, each run goes on as recorded: the state put back
        (a pydantic or dataclass state, an Overwrite, a persistent subgraph's memory) and the
        steps left before the limit are the recording's."""
        name, shape, r = recorded
        store = open_store(r.db)
        try:
            steps = {run_id: [d.step.step for d in store.step_details(run_id, "") if d.step.checkpoint_id] for run_id in r.run_ids}
        finally:
            store.close()
        for run_id, done in steps.items():
            for step in done[:-1]:
                result = replay(run_id, shape.build(), db=r.db, from_step=step)
                assert not result.diverged, (name, step, result.report())

    def test_a_strict_replay_from_any_subgraph_step_reproduces_the_run(self, recorded):
        """Resumed inside a subgraph (``ns=``) at any of its recorded steps, each run goes on as
        recorded (a persistent subgraph from the step asked for, not from what it remembered)."""
        name, shape, r = recorded
        store = open_store(r.db)
        try:
            spots = [(run_id, ns, d.step.step) for run_id in r.run_ids for ns in store.namespaces(run_id) if ns for d in store.step_details(run_id, ns) if d.step.checkpoint_id]
        finally:
            store.close()
        for run_id, ns, step in spots:
            result = replay(run_id, shape.build(), db=r.db, from_step=step, ns=ns)
            assert not result.diverged, (name, ns, step, result.report())


# -- a user's edit between runs: update_state(as_node=...) at a breakpoint, then resumed ----------


def _edited_between_runs(graph: Any) -> list:
    """Stop before the tools, answer the tool call by hand as if the tools had run, go on."""
    config = {"configurable": {"thread_id": "edit"}}
    outs = [graph.invoke(messages("Where are BP0 and BP1?"), config)]
    asked = graph.get_state(config).values["messages"][-1].tool_calls[0]
    graph.update_state(config, {"messages": [ToolMessage("held at customs", tool_call_id=asked["id"])]}, as_node="tools")
    outs.append(graph.invoke(None, config))
    outs.append(graph.invoke(None, config))
    return outs


def test_a_state_edited_as_a_node_between_runs_is_recorded_and_each_run_replays(tmp_path):
    db = str(tmp_path / "edit.db")
    with Recorder(db) as rec:
        outs = _edited_between_runs(rec.attach(V5.react_breakpoint(), name="edit"))
    assert [H.as_compared(o) for o in outs] == [H.as_compared(o) for o in _edited_between_runs(V5.react_breakpoint())]
    assert outs[-1]["messages"][-1].content == "held at customs & order BP1 is in transit"
    store = open_store(db)
    try:
        runs = sorted(store.list_runs(), key=lambda run: run.started_at)
        tools = [[c.inputs for c in store.calls(run.id) if c.kind == "tool"] for run in runs]
    finally:
        store.close()
    assert [len(t) for t in tools] == [0, 0, 1], tools  # the edit stood in for the first tool call
    for run in runs:
        result = replay(run.id, V5.react_breakpoint(), db=db)
        assert not result.diverged, result.report()
    changed = replay(runs[1].id, V5.react_breakpoint(changed=True), db=db).first_divergence
    assert changed is not None and (changed.kind, changed.node) == ("arguments", "agent"), changed


# -- two graphs on one Recorder at once, on threads of their own ------------------------------------


async def _both(first: Any, second: Any) -> list:
    return list(await asyncio.gather(
        first.ainvoke(messages("Where is HR1"), {"configurable": {"thread_id": "one"}}),
        second.ainvoke(messages("Charge and look."), {"configurable": {"thread_id": "two"}}),
    ))


def test_two_graphs_recorded_at_once_by_one_recorder_keep_their_own_runs(tmp_path):
    db = str(tmp_path / "both.db")
    with Recorder(db) as rec:
        outs = asyncio.run(_both(rec.attach(V5.history_reset(), name="reset"), rec.attach(V5.tool_error_builtin(), name="charge")))
    assert [H.as_compared(o) for o in outs] == [H.as_compared(o) for o in asyncio.run(_both(V5.history_reset(), V5.tool_error_builtin()))]
    store = open_store(db)
    try:
        runs = {run.name: run for run in store.list_runs()}
        tools = {name: sorted(c.name for c in store.calls(run.id) if c.kind == "tool") for name, run in runs.items()}
    finally:
        store.close()
    assert tools == {"reset": ["lookup"], "charge": ["charge", "lookup"]}, tools
    for name, build in (("reset", V5.history_reset), ("charge", V5.tool_error_builtin)):
        result = replay(runs[name].id, build(), db=db)
        assert not result.diverged, result.report()

