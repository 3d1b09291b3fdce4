"""A replay or fork resuming mid-run hands the next node the Pydantic models and dataclasses the state held.

Real compiled graphs and a real store; nothing is registered with ``register_type``: the
graph's own schema says what each key holds.
"""

from __future__ import annotations

import dataclasses
import enum
import operator
import subprocess
import sys
import textwrap
from typing import Annotated, Any, Optional, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel, ConfigDict

from graphtape.recorder import Recorder, open_store
from graphtape.replay import fork, replay


class Step(BaseModel):
    model_config = ConfigDict(extra="forbid")  # the recording's class markers must not reach it
    name: str
    cost: int = 1


class Plan(BaseModel):
    steps: list[Step]
    owner: Optional[str] = None


@dataclasses.dataclass
class Budget:
    limit: int
    spent: int = 0


class S(TypedDict, total=False):
    goal: str
    plan: Plan
    budget: Budget
    loose: Plan  # annotated as a model, but the node puts a plain dict there
    done: list[str]
    total: int


def plan(s: S) -> dict[str, Any]:
    return {"plan": Plan(steps=[Step(name="a", cost=2), Step(name="b")], owner="ada"), "budget": Budget(limit=5), "loose": {"steps": []}}


def work(s: S) -> dict[str, Any]:
    assert isinstance(s["loose"], dict)  # what the node put there, also in a replay
    return {"done": [st.name for st in s["plan"].steps], "budget": dataclasses.replace(s["budget"], spent=s["budget"].spent + 1)}


def tally(s: S) -> dict[str, Any]:
    return {"total": sum(st.cost for st in s["plan"].steps) + s["budget"].spent}


def graph() -> Any:
    b = StateGraph(S)
    for name, fn in (("plan", plan), ("work", work), ("tally", tally)):
        b.add_node(name, fn)
    b.add_edge(START, "plan")
    b.add_edge("plan", "work")
    b.add_edge("work", "tally")
    b.add_edge("tally", END)
    return b.compile()


@pytest.fixture
def recorded(tmp_path):
    db = str(tmp_path / "types.db")
    with Recorder(db) as rec:
        out = rec.attach(graph()).invoke({"goal": "g"})
        rec.flush()
        return db, rec.last_run_id, out


@pytest.mark.parametrize("step", [None, 0, 1, 2])
def test_a_replay_from_any_step_gets_the_models_back(recorded, step):
    db, run_id, out = recorded
    assert out["total"] == 4
    result = replay(run_id, graph(), from_step=step, db=db)
    assert not result.diverged, result.divergences
    assert result.error is None


def test_a_fork_mid_run_gets_them_too(recorded):
    db, run_id, _ = recorded
    result = fork(run_id, graph(), 1, {"goal": "other"}, db=db)
    assert result.error is None, result.error
    store = open_store(db)
    try:
        assert store.run_detail(result.run_id).output["total"] == 4
    finally:
        store.close()


@pytest.mark.parametrize("edit, total", [('plan.steps.0.cost=7', 9), ('plan={"steps": [{"name": "x", "cost": 5}]}', 6)])
def test_a_fork_edit_of_a_model_hands_the_graph_the_model(recorded, edit, total):
    """``fork --set`` into a model-typed key (a field by its path, or the whole object as JSON):
    the next node reads ``state["plan"].steps`` from a Plan, as in the recording; the result's
    final state holds the models too. A plain dict passed to fork() stays a dict (``loose``)."""
    from graphtape.replay.edits import parse_edits

    db, run_id, _ = recorded
    store = open_store(db)
    try:
        update = parse_edits([edit], lambda: store.state_at(run_id, 1))
    finally:
        store.close()
    result = fork(run_id, graph(), 1, {**update, "loose": {"steps": []}}, as_node="plan", db=db)
    assert result.error is None, result.error
    assert result.final_state["total"] == total
    assert isinstance(result.final_state["plan"], Plan) and isinstance(result.final_state["plan"].steps[0], Step)


def test_an_input_holding_a_model_replays_from_the_input_step(tmp_path):
    db = str(tmp_path / "input.db")
    b = StateGraph(S)
    b.add_node("tally", tally)
    b.add_edge(START, "tally")
    b.add_edge("tally", END)
    with Recorder(db) as rec:
        out = rec.attach(b.compile()).invoke({"plan": Plan(steps=[Step(name="x", cost=3)]), "budget": Budget(limit=1)})
        rec.flush()
        run_id = rec.last_run_id
    result = replay(run_id, b.compile(), db=db)
    assert not result.diverged, result.divergences
    assert out["total"] == 3


SCRIPT = """
from typing import TypedDict
from pydantic import BaseModel
from langgraph.graph import END, START, StateGraph

class Plan(BaseModel):
    steps: list[str]

class S(TypedDict, total=False):
    plan: Plan
    n: int

def build():
    b = StateGraph(S)
    b.add_node("plan", lambda s: {"plan": Plan(steps=["a", "b"])})
    b.add_node("count", lambda s: {"n": len(s["plan"].steps)})
    b.add_edge(START, "plan")
    b.add_edge("plan", "count")
    b.add_edge("count", END)
    return b.compile()

if __name__ == "__main__":
    import sys
    from graphtape import Recorder
    with Recorder(sys.argv[1]) as rec:
        rec.attach(build()).invoke({})
"""


def test_a_class_recorded_by_a_script_is_found_when_the_graph_is_imported(tmp_path):
    """Recorded as ``__main__.Plan`` (``python agent.py``), replayed with ``agent.Plan``: the same class."""
    (tmp_path / "agent_types.py").write_text(textwrap.dedent(SCRIPT))
    db = str(tmp_path / "script.db")
    subprocess.run([sys.executable, str(tmp_path / "agent_types.py"), db], check=True, cwd=tmp_path)
    sys.path.insert(0, str(tmp_path))
    try:
        import agent_types

        store = open_store(db)
        try:
            run_id = store.list_runs()[0].id
        finally:
            store.close()
        result = replay(run_id, agent_types.build(), from_step=1, db=db)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("agent_types", None)
    assert not result.diverged, result.divergences


class Stage(enum.Enum):
    DRAFT = "draft"
    DONE = "done"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Ticket(BaseModel):
    stage: Stage


class E(TypedDict, total=False):
    stage: Stage
    levels: list[Level]
    ticket: Ticket
    tags: frozenset[str]
    raw: bytearray
    seen: str


def advance(s: E) -> dict[str, Any]:
    # Each line fails on what a lossy restore hands over: a bare value, a set, bytes.
    return {
        "stage": Stage.DONE if s["stage"] is Stage.DRAFT else s["stage"],
        "levels": [lv for lv in s["levels"] if lv.name == "HIGH"],
        "tags": s["tags"] | {"seen"},
        "raw": s["raw"] + b"!",
    }


def describe(s: E) -> dict[str, Any]:
    kinds = (s["stage"], *s["levels"], s["ticket"].stage, s["tags"], s["raw"])
    return {"seen": ",".join(type(v).__name__ for v in kinds)}


def enum_graph() -> Any:
    b = StateGraph(E)
    b.add_node("advance", advance)
    b.add_node("describe", describe)
    b.add_edge(START, "advance")
    b.add_edge("advance", "describe")
    b.add_edge("describe", END)
    return b.compile()


ENUM_INPUT = {"stage": Stage.DRAFT, "levels": [Level.LOW, Level.HIGH], "ticket": Ticket(stage=Stage.DRAFT), "tags": frozenset({"a"}), "raw": bytearray(b"x")}


@pytest.mark.parametrize("step", [None, 0, 1])
def test_enum_members_frozensets_and_bytearrays_come_back_as_themselves(tmp_path, step):
    """From the input step and mid-run, a node is handed what the graph held: ``Stage.DRAFT``
    (not ``"draft"``), ``Level.HIGH`` (not ``2``), a frozenset, a bytearray."""
    db = str(tmp_path / "enums.db")
    with Recorder(db) as rec:
        out = rec.attach(enum_graph()).invoke(dict(ENUM_INPUT))
        rec.flush()
        run_id = rec.last_run_id
    assert out["seen"] == "Stage,Level,Stage,frozenset,bytearray"
    result = replay(run_id, enum_graph(), from_step=step, db=db)
    assert result.error is None, result.error
    assert not result.diverged, result.divergences
    assert result.final_state["stage"] is Stage.DONE
    assert result.final_state["tags"] == frozenset({"a", "seen"}) and type(result.final_state["tags"]) is frozenset


def test_a_member_of_a_class_the_schema_does_not_name_stays_its_value(tmp_path):
    """Only classes today's graph names (or registered ones) are rebuilt: nothing is looked up by a recorded name."""
    db = str(tmp_path / "loose.db")

    class Loose(TypedDict, total=False):
        anything: Any
        seen: str

    b = StateGraph(Loose)
    b.add_node("look", lambda s: {"seen": type(s["anything"]).__name__})
    b.add_edge(START, "look")
    b.add_edge("look", END)
    with Recorder(db) as rec:
        rec.attach(b.compile()).invoke({"anything": Stage.DRAFT})
        rec.flush()
        run_id = rec.last_run_id
    result = replay(run_id, b.compile(), db=db)
    assert result.final_state["anything"] == "draft"
    assert [(d.kind, d.recorded, d.actual) for d in result.divergences] == [("state", "Stage", "str")]


class Job(BaseModel):
    step: Step
    round: int


class Fan(TypedDict, total=False):
    round: int
    results: Annotated[list, operator.add]


def _fan_graph() -> Any:
    """Each round sends a Job (a model, as the node's input_schema says) to ``work`` per item."""
    from langgraph.types import Command, Send

    def plan(s: Fan) -> Command:
        if s.get("round", 0) >= 2:
            return Command(goto=END)
        r = s.get("round", 0)
        return Command(update={"round": r + 1}, goto=[Send("work", Job(step=Step(name=f"s{r}{k}", cost=k), round=r)) for k in range(2)])

    def work(job: Job) -> dict:
        return {"results": [f"{job.step.name}:{job.step.cost}:{type(job).__name__}"]}

    b = StateGraph(Fan)
    b.add_node("plan", plan, destinations=("work", END))
    b.add_node("work", work, input_schema=Job)
    b.add_edge(START, "plan")
    b.add_edge("work", "plan")
    return b.compile()


def test_a_replay_mid_run_hands_pending_sends_their_models(tmp_path):
    """A replay that starts where Send packets wait: a packet's argument (a model the target node's
    input_schema names) is that model again, not the dict the recording read back."""
    db = tmp_path / "gt.db"
    with Recorder(db) as rec:
        assert len(rec.attach(_fan_graph()).invoke({})["results"]) == 4
        run_id = rec.last_run_id
    store = open_store(db)
    try:
        sending = [s.step for s in store.list_steps(run_id) if s.nodes == ["plan"] and s.step > 0]
    finally:
        store.close()
    for step in sending:
        result = replay(run_id, _fan_graph(), step, db=db, mode="strict")
        assert not result.diverged, f"from step {step}: {result.report()}"


class Weather(BaseModel):
    city: str
    temp_c: int


def _weather_agent() -> Any:
    """langchain's create_agent with a ToolStrategy response format; a middleware reads the
    previous run's answer (``structured_response``, annotated with a TypeVar) by attribute."""
    from langchain.agents import create_agent
    from langchain.agents.middleware import before_model
    from langchain.agents.structured_output import ToolStrategy
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver

    from conftest import load_agent

    @before_model
    def previous(state, runtime):
        prev = state.get("structured_response")
        return {"messages": [HumanMessage(f"previous city: {prev.city}")]} if prev is not None else None

    def answer(messages):
        n = sum(isinstance(m, HumanMessage) for m in messages)
        return AIMessage(content="", tool_calls=[{"name": "Weather", "args": {"city": "Oslo", "temp_c": 20 + n}, "id": f"s{len(messages)}"}])

    model = load_agent("scripted_model").ScriptedChatModel(script=answer, model_name="weather")
    return create_agent(model, [], middleware=[previous], response_format=ToolStrategy(Weather), checkpointer=InMemorySaver())


def test_an_agents_structured_response_comes_back_as_its_response_formats_model(tmp_path):
    """The key's annotation names no class; the agent's response format does (no register_type)."""
    db = str(tmp_path / "weather.db")
    config = {"configurable": {"thread_id": "w"}}
    with Recorder(db) as rec:
        agent = rec.attach(_weather_agent())
        agent.invoke({"messages": [("user", "weather?")]}, config)
        assert agent.invoke({"messages": [("user", "and now?")]}, config)["structured_response"].temp_c == 23
        rec.flush()
        run_id = rec.last_run_id  # the thread's second run: it starts from the first's answer
    result = replay(run_id, _weather_agent(), db=db)
    assert result.error is None and not result.diverged, result.report()
    assert result.final_state["structured_response"] == Weather(city="Oslo", temp_c=23)
