"""The shapes of ``ecosystem_shapes_v4.py``, recorded and strictly replayed, from the start and
from every step the run made; and a user's time travel (a resume from a past checkpoint, an
``update_state`` fork) recorded and replayed.

Each shape is run as a user runs it and checked by ``shape_harness``: every superstep and call
stored, a strict replay clean, an override of a tool or model answer diverging at the step, node
and namespace of the call, and the graph with one thing changed diverging at the node that changed.
"""

from __future__ import annotations

from typing import Any

import ecosystem_shapes_v4 as V4
import shape_harness as H
from ecosystem_shapes import call, last_tool, lookup, scripted
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent
from shape_harness import Shape, messages

from graphtape import Recorder, open_store, replay

_LOST = ("lookup", lambda order_id: "lost")

SHAPES: dict[str, Shape] = {
    "artifact_agent": Shape(V4.artifact_agent, (messages("Ship SH1 and SH2."),), ("ship", lambda order_id: "not shipped")),
    "timed_out_once": Shape(V4.timed_out_once, (messages("Quote TO1."),), ("quote", lambda order_id: "no quote"), how="ainvoke"),
    "durability_sync": Shape(V4.durable_agent, (messages("Where is DU1?"),), _LOST, durability="sync"),
    "durability_exit": Shape(V4.durable_agent, (messages("Where is DU1?"),), _LOST, durability="exit"),
    "durability_exit_stream": Shape(V4.durable_agent, (messages("Where is DU1?"),), _LOST, how="stream", stream_mode="updates", durability="exit"),
    "persistent_desk": Shape(V4.persistent_desk, (messages("Where is PD1?"), messages("And PD2?")), _LOST, thread=True, override_at=1),
    "persistent_desk_sync": Shape(V4.persistent_desk, (messages("Where is PD1?"), messages("And PD2?")), _LOST, thread=True, durability="sync"),
    "direct_tool_node": Shape(V4.direct_tool_node, (messages("Book DN1."),), ("dispatch", lambda order_id: "not dispatched")),
    "method_tool_node": Shape(V4.method_tool_node, (messages("Book MN1."),), ("dispatch", lambda order_id: "not dispatched")),
    "direct_tool_entrypoint": Shape(V4.direct_tool_entrypoint, ("DE1", "DE2"), ("price", lambda order_id: V4.Quote(order_id=order_id, cents=1)), thread=True, override_at=1),
}

# What a replay against the changed graph must name first: (kind, namespace, node).
CHANGED: dict[str, tuple[str, str, str]] = {
    "artifact_agent": ("state", "", "tally.before_model"),  # the middleware tallies otherwise
    "timed_out_once": ("arguments", "", "fetch"),  # the node words the model's prompt otherwise
    "durability_sync": ("arguments", "", "model"),  # a system prompt
    "durability_exit": ("arguments", "", "model"),
    "durability_exit_stream": ("arguments", "", "model"),
    "persistent_desk": ("arguments", "front", "model"),
    "persistent_desk_sync": ("arguments", "front", "model"),
    "direct_tool_node": ("state", "", "tally"),  # the tally doubles
    "method_tool_node": ("state", "", "tally"),
    "direct_tool_entrypoint": ("state", "", "desk"),
}


recorded = H.recorded_shapes(SHAPES)


class TestShapes(H.ChangedShapeChecks):
    changed = CHANGED

    def test_a_strict_replay_from_any_step_reproduces_the_run(self, recorded):
        """Resumed mid-run, the restored state hands each node the types it had: a tool message's
        artifact is its tool's dataclass again, not the recording's marked dict."""
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


def _replayed_after(db: str, build: Any, inputs: Any, node: str, spent: int) -> Any:
    """Record ``build()`` on ``inputs`` (it spends ``spent``), then replay it from the last step
    ``node`` ran in: the state the replay starts from is the recording's, restored."""
    with Recorder(db) as rec:
        assert rec.attach(build(), name=node).invoke(inputs)["spent"] == spent
    store = open_store(db)
    try:
        (run,) = store.list_runs()
        after = max(d.step.step for d in store.step_details(run.id, "") if node in [t.node for t in d.tasks])
    finally:
        store.close()
    result = replay(run.id, build(), db=db, from_step=after)
    assert not result.diverged, result.report()
    assert result.final_state["spent"] == spent
    return result


def test_a_restored_artifact_is_its_tools_class(tmp_path):
    """From the step after the tools ran, the middleware reads ``artifact.cents`` off the restored
    tool messages: a dict there fails the node."""
    _replayed_after(str(tmp_path / "art.db"), V4.artifact_agent, messages("Ship SH1 and SH2."), "tools", 1400)


def test_a_tool_called_by_a_node_itself_hands_its_classes_back_mid_run(tmp_path):
    """No ToolNode: the node calls the tools itself. From the step after it, the next node reads
    ``artifact.cents`` off the restored tool message and ``quote.cents`` off a key annotated
    only ``list``: the tools the node's code reaches say what those hold."""
    result = _replayed_after(str(tmp_path / "direct.db"), V4.direct_tool_node, messages("Book DN1."), "book", 950)
    assert [type(q) for q in result.final_state["quotes"]] == [V4.Quote]


def test_tools_kept_on_the_nodes_own_object_hand_their_classes_back_mid_run(tmp_path):
    """The node is a method whose tools live on ``self`` (one in a dict): the attributes its code
    names lead to them, read without running anything of the object's."""
    result = _replayed_after(str(tmp_path / "method.db"), V4.method_tool_node, messages("Book MN1."), "book", 950)
    assert [type(q) for q in result.final_state["quotes"]] == [V4.Quote]


# -- time travel: the user resumes from a past checkpoint, and forks one with update_state ---------


def _traveller(messages: list[BaseMessage]) -> AIMessage:
    last = last_tool(messages)
    if last is not None:
        return AIMessage(f"Found: {last.content}")
    return AIMessage("", tool_calls=[call("lookup", "tt1", order_id="TT1")])


def _travel_graph(changed: bool = False):
    return create_react_agent(scripted("travel-model", _traveller), [lookup], prompt="Be brief." if changed else None, checkpointer=InMemorySaver())


def _travel(graph) -> list:
    """Run once, go back to the checkpoint before the tool ran, run on from there, then fork it."""
    config = {"configurable": {"thread_id": "travel"}}
    outs = [graph.invoke({"messages": [HumanMessage("Where is TT1?")]}, config)]
    past = next(s for s in graph.get_state_history(config) if s.next == ("tools",))
    outs.append(graph.invoke(None, past.config))
    asked = past.values["messages"][-1]
    edited = AIMessage("", tool_calls=[call("lookup", "tt1", order_id="TT9")], id=asked.id)
    outs.append(graph.invoke(None, graph.update_state(past.config, {"messages": [edited]})))
    return outs


def test_a_time_travelled_run_and_a_fork_are_recorded_and_replay_strictly(tmp_path):
    db = str(tmp_path / "travel.db")
    with Recorder(db) as rec:
        outs = _travel(rec.attach(_travel_graph(), name="travel"))
    assert [H.as_compared(o) for o in outs] == [H.as_compared(o) for o in _travel(_travel_graph())]
    assert outs[2]["messages"][-1].content == "Found: order TT9 is in transit"
    store = open_store(db)
    try:
        runs = sorted(store.list_runs(), key=lambda run: run.started_at)
        tools_ran = [[c.inputs for c in store.calls(run.id) if c.kind == "tool"] for run in runs]
    finally:
        store.close()
    assert len(runs) == 3 and all(run.status == "ok" for run in runs), runs
    assert [len(calls) for calls in tools_ran] == [1, 1, 1], tools_ran  # each run ran the tool once
    for run in runs:
        result = replay(run.id, _travel_graph(), db=db)
        assert not result.diverged, result.report()
        assert result.final_state["messages"][-1].content == outs[runs.index(run)]["messages"][-1].content
        changed = replay(run.id, _travel_graph(changed=True), db=db).first_divergence
        assert changed is not None and (changed.kind, changed.node) == ("arguments", "agent"), run.id
