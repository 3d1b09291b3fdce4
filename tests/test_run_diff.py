"""Diffing two recorded runs: alignment on real recorded runs, the first difference, graph versions, ignores, subgraphs."""

from __future__ import annotations

import pytest
from conftest import load_agent
from diff_graphs import failing_graph, retry_graph, stamped_graph, timeout_graph, versioned_graph
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from replay_graphs import chat_graph, chat_script, fan_graph, interrupt_graph, sub_graph

from graphtape.recorder import Recorder
from graphtape.replay.graph_shape import GraphShape, graph_changes
from graphtape.replay.run_align import align
from graphtape.replay.carry import Carry
from graphtape.replay.run_diff import RunDiffError, diff_runs


def record(rec: Recorder, graph, inputs: dict, name: str) -> str:
    app = rec.attach(graph, name=name)
    try:
        app.invoke(inputs)
    except Exception:  # noqa: BLE001 - a failing run is still a recorded run
        pass
    rec.flush()
    return rec.last_run_id


@pytest.fixture
def demo_runs(recorder_factory):
    """The demo agent's happy and incident runs, recorded as `graphtape demo` records them."""
    agent = load_agent("reason_act")
    rec = recorder_factory()
    happy = record(rec, agent.build_graph("happy"), agent.inputs_for("happy"), "demo:happy")
    incident = record(rec, agent.build_graph("incident"), agent.inputs_for("incident"), "demo:incident")
    return rec.store, happy, incident


# -- alignment --------------------------------------------------------------------------------


def test_align_pairs_equal_steps_and_leaves_the_extra_ones_unpaired():
    a = ["start", "fetch>answer", "answer>end"]
    b = ["start", "fetch>fetch", "fetch>fetch", "fetch>answer", "answer>end"]
    assert align(a, b) == [(0, 0), (None, 1), (None, 2), (1, 3), (2, 4)]


def test_align_pairs_steps_that_differ_in_the_same_place():
    assert align(["s", "x", "e"], ["s", "y", "e"]) == [(0, 0), (1, 1), (2, 2)]
    assert align(["s", "x", "x2", "e"], ["s", "y", "e"]) == [(0, 0), (1, 1), (2, None), (3, 2)]


def test_align_uses_what_steps_decided_where_their_shapes_repeat():
    # A loop: every turn has the same shape; only the decisions say which turn B retried.
    shape = ["turn"] * 6
    a_dec = ["t1", "t2", "t3", "t4"]
    b_dec = ["t1", "t2", "t2", "t2", "t3", "t4"]
    pairs = align(shape[:4], shape, a_dec, b_dec)
    assert pairs == [(0, 0), (1, 1), (None, 2), (None, 3), (2, 4), (3, 5)]
    # Without them the shapes line up by position, and the retry shows at the end.
    assert align(shape[:4], shape)[-2:] == [(None, 4), (None, 5)]


def test_a_run_with_extra_retries_aligns_after_them(recorder_factory):
    rec = recorder_factory()
    a = record(rec, retry_graph(0), {"query": "order 7"}, "fetch")
    b = record(rec, retry_graph(2), {"query": "order 7"}, "fetch")
    diff = diff_runs(a, b, store=rec.store)
    steps_a = [s.step for s in rec.store.list_steps(a)]
    steps_b = [s.step for s in rec.store.list_steps(b)]
    assert steps_a == [-1, 0, 1, 2] and steps_b == [-1, 0, 1, 2, 3, 4]
    # B's two failed attempts stand alone; the attempt that answered and `answer` line up after them.
    assert diff.aligned == [(-1, -1), (0, 0), (None, 1), (None, 2), (1, 3), (2, 4)]
    extra = [d for d in diff.differences if d.kind == "extra"]
    assert len(extra) == 1 and (extra[0].step, extra[0].step_b) == (None, 1)
    assert "2 steps" in extra[0].what and "'flaky_search' failed at step 1 (ConnectionError)" in extra[0].what
    # After the retries the runs did the same thing: only the attempt count tells them apart.
    after = [d for d in diff.differences if d.kind != "extra"]
    assert [(d.kind, d.what, d.step, d.step_b) for d in after] == [("state", "state key 'attempts' differs", 1, 3)]
    assert (after[0].recorded, after[0].actual) == (1, 3)
    assert diff.first_difference is extra[0]


def test_two_recordings_of_the_same_behaviour_are_the_same(recorder_factory):
    agent = load_agent("reason_act")
    rec = recorder_factory()
    a = record(rec, agent.build_graph("happy"), agent.inputs_for("happy"), "demo:happy")
    b = record(rec, agent.build_graph("happy"), agent.inputs_for("happy"), "demo:happy")
    diff = diff_runs(a, b, store=rec.store)  # message ids, run ids, timestamps and latencies all differ
    assert diff.same, diff.report()
    assert diff.first_difference is None and diff.graph_changes == []
    assert diff.labels == (f"run {a[:8]}", f"run {b[:8]}")
    assert "behaved the same" in diff.verdict()


# -- the demo: happy against incident ----------------------------------------------------------


def test_demo_happy_against_incident_names_the_status_tool_timeout_first(demo_runs):
    store, happy, incident = demo_runs
    diff = diff_runs(happy, incident, store=store)
    first = diff.first_difference
    assert first is not None and first.first
    assert (first.kind, first.node, first.step, first.step_b) == ("call", "act", 2, 2)
    assert "'lookup_order_status' timed out in demo:incident" in first.what and "answered in demo:happy" in first.what
    assert first.actual["timed out"] and first.actual["waited_ms"] >= 150
    assert first.recorded["status"] == "in_transit"  # what the tool said in the run that worked
    assert diff.summary().startswith("first difference: step 2 node 'act': call: tool 'lookup_order_status' timed out")
    # The other inputs come first, told as what the runs were given, and what only carries them is marked.
    before = diff.differences[: diff.differences.index(first)]
    assert before and all(d.carried for d in before)
    assert {d.kind for d in before} >= {"input", "state", "arguments"}
    # The retries stand alone, and the final answers are compared where the runs line up again.
    assert diff.aligned == [(-1, -1), (0, 0), (1, 1), (2, 2), (None, 3), (None, 4), (None, 5), (None, 6), (3, 7)]
    outcome = next(d for d in diff.differences if d.what == "state key 'agent_outcome' differs" and d.step == 3)
    assert "delivered" in outcome.actual["answer"] and "in transit" in outcome.recorded["answer"]
    assert not outcome.carried


def test_report_and_json_show_both_sides_and_a_diff(demo_runs):
    store, happy, incident = demo_runs
    diff = diff_runs(happy, incident, store=store)
    report = diff.report()
    assert report.splitlines()[1] == diff.summary()
    assert "FIRST step 2 node 'act': call:" in report
    assert "  demo:happy:    " in report and "  demo:incident: " in report
    assert "--- demo:happy" in report and "+++ demo:incident" in report
    data = diff.to_dict()
    assert data["same"] is False and data["first_difference"]["kind"] == "call"
    assert data["first_difference"]["a"]["status"] == "in_transit"
    assert [d["first"] for d in data["differences"]].count(True) == 1
    assert data["aligned"][-1] == [3, 7]


def test_diff_runs_on_every_store_backend(store_url):
    agent = load_agent("reason_act")
    with Recorder(store_url) as rec:
        a = record(rec, agent.build_graph("happy"), agent.inputs_for("happy"), "demo:happy")
        b = record(rec, agent.build_graph("unknown_tool"), agent.inputs_for("happy"), "demo:unknown")
        diff = diff_runs(a, b, store=rec.store)
    first = diff.first_difference
    # Same question: the model answered differently at once (it called a tool that does not exist).
    assert (first.kind, first.step, first.node) == ("call", 1, "reason")
    assert "cancel_order" in str(first.actual) and not any(d.kind == "input" for d in diff.differences)


# -- code versions, ignores, subgraphs ---------------------------------------------------------


def test_runs_of_different_graph_versions_say_how_the_graphs_differ(recorder_factory):
    rec = recorder_factory()
    a = record(rec, versioned_graph(1), {"x": 2}, "pipeline")
    b = record(rec, versioned_graph(2), {"x": 2}, "pipeline")
    diff = diff_runs(a, b, store=rec.store)
    la, lb = diff.labels
    assert diff.graph_changes == [f"node 'audit' only in {lb}'s graph", f"edges audit → __end__, score → audit only in {lb}'s graph", f"edge score → __end__ only in {la}'s graph"]
    route = diff.first_difference
    assert (route.kind, route.node, route.step) == ("route", "score", 2)
    assert route.what == f"score went to __end__ in {la}, went to audit in {lb}"
    extra = next(d for d in diff.differences if d.kind == "extra")
    assert extra.step_b == 3 and "audit" in extra.what
    assert f"graph: node 'audit' only in {lb}'s graph" in diff.report()


def test_graph_changes_name_routers_and_subgraphs():
    a = GraphShape.from_json({"nodes": ["a", "b"], "edges": [], "conditional_edges": [{"source": "a", "router": "pick", "path_map": {"x": "b"}}]})
    b = GraphShape.from_json(
        {
            "nodes": ["a", "b", "c"],
            "edges": [],
            "conditional_edges": [{"source": "a", "router": "pick", "path_map": {"x": "b", "y": "c"}}, {"source": "c", "router": "back", "path_map": None}],
            "subgraphs": {"b": {"nodes": ["s1"], "edges": [{"source": "__start__", "target": "s1"}]}},
        }
    )
    assert graph_changes(a, b) == [
        "node 'c' only in B's graph",
        "router 'pick' after 'a' goes to b, c in B's graph, b in A's",
        "router 'back' after 'c' only in B's graph",
        "node 'b' is a subgraph only in B's graph",
    ]
    assert graph_changes(a, GraphShape.from_json({})) == ["B recorded no graph structure: the graphs cannot be compared"]
    assert GraphShape.from_json("not a graph").known is False


def test_ignore_leaves_state_paths_out(recorder_factory):
    rec = recorder_factory()
    a = record(rec, stamped_graph("2024-05-01T10:00"), {"x": 3}, "stamped")
    b = record(rec, stamped_graph("2024-05-02T11:30"), {"x": 3}, "stamped")
    diff = diff_runs(a, b, store=rec.store)
    assert [(d.kind, d.what) for d in diff.differences] == [("state", "state key 'stamp' differs")]
    assert diff_runs(a, b, store=rec.store, ignore=["stamp"]).same
    assert diff_runs(a, b, store=rec.store, ignore=["**"]).same
    with pytest.raises(RunDiffError, match="empty path segment"):
        diff_runs(a, b, store=rec.store, ignore=["stamp..x"])


def test_parallel_calls_are_paired_by_who_made_them(recorder_factory):
    rec = recorder_factory()
    a = record(rec, chat_graph(chat_script(x=21)), {"messages": [("user", "go")]}, "chat")
    b = record(rec, chat_graph(chat_script(x=22)), {"messages": [("user", "go")]}, "chat")
    diff = diff_runs(a, b, store=rec.store)
    first = diff.first_difference
    assert (first.kind, first.node, first.step) == ("call", "agent", 1)  # the model asked for other arguments
    args = [d for d in diff.differences if d.kind == "arguments"]
    assert {d.what for d in args} >= {"tool 'double' was called with other arguments", "tool 'halve' was called with other arguments"}
    assert all(d.step == 2 and d.node == "tools" for d in args if "tool" in d.what)
    assert not any(d.kind in ("missing", "extra") for d in diff.differences)


def test_differences_inside_a_subgraph_come_before_the_parent_steps(recorder_factory):
    rec = recorder_factory()
    a = record(rec, sub_graph(1), {"n": 1, "log": []}, "sub")
    b = record(rec, sub_graph(5), {"n": 1, "log": []}, "sub")
    diff = diff_runs(a, b, store=rec.store)
    inside = [d for d in diff.differences if d.ns == "child"]
    assert inside and diff.differences.index(inside[0]) == 0
    first = diff.first_difference
    assert (first.kind, first.ns, first.step, first.node) == ("state", "child", 2, "s2")
    assert first.root == (2, 2) and first.ns_a.startswith("child:") and first.ns_b.startswith("child:") and first.ns_a != first.ns_b
    assert first.where() == "step 2 in child"
    # The parent's own step shows the subgraph's result as its state.
    assert any(d.ns == "" and d.step == 2 and d.what == "state key 'n' differs" for d in diff.differences)
    only = diff_runs(a, b, store=rec.store, ns="child")
    assert only.ns == "child" and only.differences and all(d.ns == "child" for d in only.differences)
    assert [p[0] for p in only.aligned] == [-1, 0, 1, 2, 3]
    with pytest.raises(RunDiffError, match="no subgraph namespace 'nope'|neither run has a subgraph namespace 'nope'"):
        diff_runs(a, b, store=rec.store, ns="nope")


def test_a_fan_out_that_sent_fewer_packets_to_a_node_says_how_many(recorder_factory):
    rec = recorder_factory()
    a = record(rec, fan_graph(), {"items": [1, 2, 3]}, "fan")
    b = record(rec, fan_graph(), {"items": [4, 5]}, "fan")
    diff = diff_runs(a, b, store=rec.store)
    la, lb = diff.labels
    routes = [d.what for d in diff.differences if d.kind == "route" and d.node == "plan"]
    # Both went to worker only: what differs is how many packets went there.
    assert routes == [f"plan sent 3× worker in {la}, 2× worker in {lb} (fan)"], [d.what for d in diff.differences]


def test_a_node_that_failed_in_one_run_only(recorder_factory):
    rec = recorder_factory()
    a = record(rec, failing_graph(False), {"x": 3}, "work")
    b = record(rec, failing_graph(True), {"x": 3}, "work")
    diff = diff_runs(a, b, store=rec.store)
    la, lb = diff.labels
    first = diff.first_difference
    assert (first.kind, first.node, first.step) == ("error", "work", 1)
    assert first.what == f"work failed in {lb} (ValueError: cannot work on 3), not in {la}"
    kinds = [(d.kind, d.what) for d in diff.differences]
    assert ("route", f"work went to __end__ in {la}, failed in {lb}") in kinds
    assert kinds[-1] == ("error", f"the run ended error in {lb}, ok in {la}")


def test_an_interrupt_answered_differently_is_told_like_a_call(recorder_factory):
    rec = recorder_factory()
    ids = []
    for answer in ("yes", "no", None):
        app = rec.attach(interrupt_graph(InMemorySaver()), name="ask")
        config = {"configurable": {"thread_id": f"t-{answer}"}}
        app.invoke({"q": "ship it?"}, config)
        if answer is not None:
            app.invoke(Command(resume=answer), config)
        rec.flush()
        ids.append(rec.last_run_id)
    yes, no, waiting = ids
    diff = diff_runs(yes, no, store=rec.store)
    first = diff.first_difference
    assert (first.kind, first.node, first.step, first.what) == ("call", "ask", 1, "ask was answered differently at its interrupt")
    assert (first.recorded, first.actual) == ([["ask", "yes"]], [["ask", "no"]])
    stopped = diff_runs(yes, waiting, store=rec.store)
    lb = stopped.labels[1]
    assert any(d.what == f"ask went to act in {stopped.labels[0]}, stopped at an interrupt in {lb}" for d in stopped.differences)
    assert stopped.aligned[-1] == (2, None) and stopped.differences[-1].what.startswith(f"the run ended interrupted in {lb}")


@pytest.mark.parametrize("linger", [0.0, 0.4], ids=["still running when the run ended", "returned before the run ended"])
def test_a_call_its_node_gave_up_on_is_a_timeout_however_late_it_returned(recorder_factory, linger):
    rec = recorder_factory()
    a = record(rec, timeout_graph(0.0), {"order": "A-7"}, "look")
    b = record(rec, timeout_graph(0.25, linger), {"order": "A-7"}, "look")
    late = rec.store.calls(b)[0]
    # How the recording holds it depends on when the run ended: still running, or returned late.
    assert (late.error_type == "Unfinished") == (linger == 0.0)
    diff = diff_runs(a, b, store=rec.store)
    first = diff.first_difference
    assert (first.kind, first.node, first.step) == ("call", "check", 1)
    assert first.what.startswith(f"tool 'order_status' timed out in {diff.labels[1]} (its node stopped waiting after ")
    assert first.recorded == "in transit" and first.actual["timed out"] and 90 <= first.actual["waited_ms"] <= 400


def test_what_carries_the_inputs_through():
    carry = Carry({"question": "Where is my order A-1042?", "limit": 3, "n": 1}, {"question": "Has my order A-1042 arrived?", "limit": 5, "n": 1})
    prompt = [{"type": "human", "content": "User asks: Where is my order A-1042? Be brief."}]
    assert carry.explains(prompt, [{"type": "human", "content": "User asks: Has my order A-1042 arrived? Be brief."}])
    assert not carry.explains(prompt, [{"type": "human", "content": "User asks: Has my order A-1042 arrived? Be long."}])
    # A number is followed only under the key it has in the input, never anywhere it happens to appear.
    assert carry.explains(3, 5, "limit") and carry.explains({"limit": 3}, {"limit": 5})
    assert not carry.explains(3, 5, "retries") and not carry.explains({"retries": 3}, {"retries": 5})
    assert not Carry({"a": 1}, {"a": 1}).explains("x", "y")
