"""``replay --ns`` in a subgraph whose parent is not the namespace one segment up: an agent a
functional ``@task`` runs (``entry:<id>|task:<id>``, run by the root's task) and the second run
of an agent a node runs twice (``node:<id>|1``, numbered, run by the root's node).

Each resumes at every recorded step of that namespace, matches the recording, and makes only the
calls after that step (an override there diverges at the next call, not before).
"""

from __future__ import annotations

from typing import Any, TypedDict

import ecosystem_shapes as S
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, StateGraph

from graphtape import Recorder, open_store, replay


class Questions(TypedDict, total=False):
    questions: list[str]
    answers: list[str]


def _asks_about(messages: list) -> AIMessage:
    """Look up the orders the question names (K1 and K2, or K3 and K4), then answer."""
    if S.last_tool(messages) is not None:
        return AIMessage("Found them.")
    orders = ("K1", "K2") if "K1" in str(messages[0].content) else ("K3", "K4")
    return AIMessage("", tool_calls=[S.call("lookup", f"q-{o}", order_id=o) for o in orders])


def agent_twice_in_node() -> Any:
    """A node that asks a prebuilt agent two questions in turn (its Send packets carry remaining_steps)."""
    agent = S.create_react_agent(S.scripted("inner-model", _asks_about), [S.lookup], name="inner")

    def ask_all(state: Questions) -> dict[str, Any]:
        return {"answers": [str(agent.invoke({"messages": [HumanMessage(q)]})["messages"][-1].content) for q in state["questions"]]}

    b = StateGraph(Questions)
    b.add_node("ask_all", ask_all)
    b.add_edge(START, "ask_all")
    b.add_edge("ask_all", END)
    return b.compile()


SHAPES = {
    "task_runs_agent": (S.task_runs_agent, "Where are K1 and K2?", lambda ns: "|investigate:" in ns),
    "agent_twice_in_node": (agent_twice_in_node, {"questions": ["Where are K1 and K2?", "And K3 and K4?"]}, lambda ns: ns.endswith("|1")),
}


@pytest.fixture(scope="module", params=sorted(SHAPES))
def recorded(request, tmp_path_factory) -> tuple[Any, str, str, str]:
    build, payload, pick = SHAPES[request.param]
    db = str(tmp_path_factory.mktemp("ns") / "runs.db")
    with Recorder(db) as rec:
        rec.attach(build(), name=request.param).invoke(payload)
        rec.flush()
    store = open_store(db)
    try:
        run_id = store.list_runs()[0].id
        (ns,) = [n for n in store.namespaces(run_id) if pick(n)]
    finally:
        store.close()
    return build, db, run_id, ns


def test_a_replay_resumes_at_each_step_of_the_namespace_and_matches(recorded):
    build, db, run_id, ns = recorded
    store = open_store(db)
    try:
        steps = [s.step for s in store.list_steps(run_id, ns) if s.checkpoint_id]
        calls = [c for c in store.calls(run_id) if c.ns == ns and c.kind in ("tool", "model")]
    finally:
        store.close()
    assert len(steps) >= 4 and calls
    for step in steps[:-1]:
        result = replay(run_id, build(), step, ns=ns, db=db, require_all_used=True)
        assert not result.diverged, result.report()
        after = [c for c in calls if c.step > step]
        assert sum(result.served.values()) >= len(after), (step, result.served, result.report())


def test_an_override_after_the_resumed_step_diverges_at_its_call(recorded):
    build, db, run_id, ns = recorded
    store = open_store(db)
    try:
        tools = [c for c in store.calls(run_id) if c.ns == ns and c.kind == "tool"]
    finally:
        store.close()
    first = min(c.step for c in tools)
    asked = {c.inputs["order_id"] for c in tools}  # only this run's lookups answer otherwise

    def lookup(order_id: str) -> str:
        return "lost" if order_id in asked else f"order {order_id} is in transit"

    result = replay(run_id, build(), first - 1, ns=ns, db=db, overrides={"lookup": lookup})
    found = result.first_divergence
    assert found is not None, result.report()
    assert (found.step, found.node) == (first, tools[0].node), result.report()
