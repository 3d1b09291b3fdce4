"""The harness that records a graph shape as a user runs it and checks what was stored and replayed.

A ``Shape`` says how to build the graph and how a user runs it (invoke, ainvoke, a stream, turns
on a thread answering interrupts). ``record`` runs it with a Recorder attached, and beside it on a
copy with LangGraph's own saver; the checks then hold, for every run the turns made:

- every superstep of every namespace is stored, as LangGraph numbered its checkpoints, with the
  state LangGraph checkpointed there, the nodes that ran and the routes that sent them;
- every tool and model call the run made live is recorded, with its inputs and its output;
- a strict replay (tools and models answered from the recording) reproduces the run;
- a replay whose tool or model answers otherwise (an override) diverges at the step and in the
  node (or ``@task``) and namespace that made the call.
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import HumanMessage
from langgraph.channels.untracked_value import UntrackedValue
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from graphtape import Recorder, open_store, replay
from graphtape.recorder.codec import to_plain
from graphtape.recorder.session import ns_names
from graphtape.replay.normalize import Normalizer


def answer_each(value: Any) -> Callable[[Any], Any]:
    """A turn answering every interrupt the last one showed, each by its id."""
    return lambda out: Command(resume={i.id: value for i in out["__interrupt__"]})


@dataclass(frozen=True)
class Shape:
    build: Callable[[], Any]
    turns: tuple  # the first input, then each payload (or a function of the last result) to go on with
    override: tuple[str, Callable[..., Any]]  # a tool (or "model", every model) and its stand-in
    how: str = "invoke"  # invoke | ainvoke | stream | astream
    stream_mode: Any = None
    subgraphs: bool = False  # stream the subgraphs' chunks too
    thread: bool = False
    raises: type[BaseException] | None = None
    config: dict[str, Any] = field(default_factory=dict)
    threads: tuple[str, ...] = ()  # each turn's thread, where turns go on threads of their own (implies thread)
    context: Any = None  # the Runtime context each turn is run with (a graph with a context_schema)
    override_at: int = 0  # the run to replay changed: the one that made this (0: the first) of the name's calls
    durability: str | None = None  # what each turn is run with ("sync", "exit"), where the user asks for it


def messages(text: str) -> dict[str, Any]:
    return {"messages": [HumanMessage(text)]}


class _Calls(BaseCallbackHandler):
    """Counts the tool and chat-model calls a run makes live (LangChain's own callbacks)."""

    def __init__(self) -> None:
        self.seen: Counter[tuple[str, str]] = Counter()

    def on_tool_start(self, serialized: Any, input_str: str, **kwargs: Any) -> None:
        self.seen["tool", kwargs.get("name") or (serialized or {}).get("name")] += 1

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        self.seen["model", "model"] += 1


def _turns(graph: Any, shape: Shape, config: dict[str, Any]) -> list[Any]:
    """Run the shape's turns; what each ended with (a result, the chunks, or the error)."""
    outs: list[Any] = []
    last: Any = None
    for i, turn in enumerate(shape.turns):
        payload = turn(last) if callable(turn) else copy.deepcopy(turn)
        on = config
        if shape.threads:
            on = {**config, "configurable": {"thread_id": f"{config['configurable']['thread_id']}-{shape.threads[i]}"}}
        try:
            last = _once(graph, shape, payload, on)
        except Exception as exc:  # noqa: BLE001 - a run that fails is a shape too
            last = exc
        outs.append(last)
    return outs


def _once(graph: Any, shape: Shape, payload: Any, config: dict[str, Any]) -> Any:
    given: dict[str, Any] = {"context": shape.context} if shape.context is not None else {}
    if shape.durability is not None:
        given["durability"] = shape.durability
    if shape.how == "invoke":
        return graph.invoke(payload, config, **given)
    if shape.how == "stream":
        return list(graph.stream(payload, config, stream_mode=shape.stream_mode, subgraphs=shape.subgraphs, **given))
    if shape.how == "batch":  # each input a run of its own (on a thread of its own, where there is one)
        thread = (config.get("configurable") or {}).get("thread_id")
        configs = [{**config, "configurable": {"thread_id": f"{thread}-{i}"}} if thread else config for i in range(len(payload))]
        return graph.batch(payload, configs)

    async def go() -> Any:
        if shape.how == "astream":
            return [c async for c in graph.astream(payload, config, stream_mode=shape.stream_mode, subgraphs=shape.subgraphs, **given)]
        if shape.how == "astream_events":
            return [e["event"] async for e in graph.astream_events(payload, config, version="v2", **given)]
        return await graph.ainvoke(payload, config, **given)

    return asyncio.run(go())


def _config(shape: Shape, thread: str | None, callbacks: list[Any] | None = None) -> dict[str, Any]:
    config: dict[str, Any] = dict(shape.config)
    if thread is not None:
        config["configurable"] = {"thread_id": thread}
    if callbacks:
        config["callbacks"] = callbacks
    return config


@dataclass
class Recorded:
    db: str
    run_ids: list[str]
    outs: list[Any]
    history: dict[str, dict[int, list[Any]]]  # LangGraph's own checkpoints: namespace -> step -> values (one per run there)
    live: Counter  # the calls the runs made, as LangChain's callbacks saw them


def record(name: str, shape: Shape, tmp_path_factory: Any) -> Recorded:
    """Run the shape's turns with a Recorder attached, and again on a copy with LangGraph's own saver."""
    db = str(tmp_path_factory.mktemp("eco") / f"{name}.db")
    with Recorder(db) as rec:
        app = rec.attach(shape.build(), name=name)
        outs = _turns(app, shape, _config(shape, "rec" if shape.thread or shape.threads else None))
        rec.flush()
    store = open_store(db)
    try:  # every run the turns made (a resumed interrupt goes on in the run that asked), oldest first
        run_ids = [run.id for run in sorted(store.list_runs(), key=lambda run: run.started_at)]
    finally:
        store.close()
    # The same turns on a copy with LangGraph's own saver: its history, and the calls it makes
    # (every step's checkpoint: under "exit" LangGraph would save only the last, graphtape all).
    graph = shape.build()
    saver = graph.checkpointer if graph.checkpointer not in (None, False, True) else InMemorySaver()
    counted = _Calls()
    _turns(graph.copy(update={"checkpointer": saver}), replace(shape, durability=None), _config(shape, "own", [counted]))
    history: dict[str, dict[int, list[Any]]] = {}
    for cp in saver.list(None):
        ns = ns_names(cp.config["configurable"].get("checkpoint_ns", ""))
        history.setdefault(ns, {}).setdefault(cp.metadata["step"], []).append(_plain(cp.checkpoint["channel_values"]))
    return Recorded(db, run_ids, outs, history, counted.seen)




_PLUMBING = ("branch:", "join:", "__start__", "__pregel_", "__interrupt__", "__resume__")  # LangGraph's, not the state's


def _plain(values: dict[str, Any]) -> Any:
    """A state as compared: its channels (a functional entrypoint's ``__end__`` and ``__previous__``
    among them), without LangGraph's plumbing and the ids every run draws afresh."""
    return _artifacts_unmarked(Normalizer()(to_plain({k: v for k, v in values.items() if not k.startswith(_PLUMBING)})))


def _artifacts_unmarked(value: Any) -> Any:
    """LangGraph's own saver keeps a tool message's artifact (a Pydantic model, a dataclass) as a
    bare dict; graphtape keeps its class's name too. Compared without it."""
    if isinstance(value, dict):
        if value.get("type") == "tool" and isinstance(value.get("artifact"), dict):
            value = {**value, "artifact": _unmarked(value["artifact"])}
        return {k: _artifacts_unmarked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_artifacts_unmarked(v) for v in value]
    return value


def _unmarked(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _unmarked(v) for k, v in value.items() if k != "__type__"}
    if isinstance(value, list):
        return [_unmarked(v) for v in value]
    return value


def _untracked(graph: Any) -> set[str]:
    """The channels LangGraph never checkpoints (``UntrackedValue``), in the graph and its subgraphs."""
    names = {k for k, ch in getattr(graph, "channels", {}).items() if isinstance(ch, UntrackedValue)}
    for _, sub in graph.get_subgraphs(recurse=True):
        names |= {k for k, ch in sub.channels.items() if isinstance(ch, UntrackedValue)}
    return names


def every_superstep_is_stored_with_its_state_nodes_and_routes(name: str, shape: Shape, r: Recorded) -> None:
    if shape.raises is not None:
        assert isinstance(r.outs[-1], shape.raises), r.outs[-1]
    untracked = _untracked(shape.build())
    store = open_store(r.db)
    try:
        ours: dict[str, set[int]] = {}
        for run_id in r.run_ids:
            assert store.get_run(run_id).faults == 0, store.run_detail(run_id).fault_log
            linked: set[str] = set()  # the subgraphs each task ran, as its step records them
            for ns in store.namespaces(run_id):
                details = store.step_details(run_id, ns)
                linked.update(sub for d in details for t in d.tasks for sub in t.subgraph_ns)
                for d in details:
                    if not d.step.checkpoint_id:
                        continue
                    ours.setdefault(ns_names(ns), set()).add(d.step.step)
                    # The state LangGraph checkpointed at that step (a subgraph entered twice: one of its runs').
                    theirs = r.history.get(ns_names(ns), {}).get(d.step.step, [])
                    # graphtape keeps what never-checkpointed channels (langchain's run counters) held too
                    state = {k: v for k, v in store.state_at(run_id, d.step.step, ns, typed=True).items() if k not in untracked}
                    assert _plain(state) in theirs, (name, ns, d.step.step)
                done = [d for d in details if d.step.checkpoint_id and d.tasks]
                for before, after in zip(done, done[1:]):
                    if after.step.step != before.step.step + 1:
                        continue
                    sent = {dest for x in details if x.step.step <= before.step.step for route in x.routes for dest in route.destinations}
                    for t in after.tasks:
                        if (t.path or "").startswith("~__pregel_push, ~"):
                            continue  # a @task a node of the step called: no route goes to it
                        assert t.node in sent, (name, ns, after.step.step, t.node, "ran, but no route went there")
            assert set(store.namespaces(run_id)) - {""} <= linked, (name, "a subgraph no task ran")
    finally:
        store.close()
    assert ours == {ns: set(steps) for ns, steps in r.history.items()}, name


def every_call_is_recorded_with_its_inputs_and_output(name: str, shape: Shape, r: Recorded) -> None:
    store = open_store(r.db)
    try:
        calls = [c for run_id in r.run_ids for c in store.calls(run_id) if c.kind in ("tool", "model")]
    finally:
        store.close()
    assert r.live, (name, "the shape made no call")
    for c in calls:
        assert c.inputs is not None and (c.output is not None or c.error_type), (name, c)
    got = Counter(("model", "model") if c.kind == "model" else ("tool", c.name) for c in calls if c.error_type != "GraphInterrupt")
    asked = Counter(("model", "model") if c.kind == "model" else ("tool", c.name) for c in calls)
    assert got == r.live or asked == r.live, (name, got, r.live)


def a_strict_replay_reproduces_every_run(name: str, shape: Shape, r: Recorded) -> None:
    for run_id in r.run_ids:
        result = replay(run_id, shape.build(), db=r.db)
        assert not result.diverged, result.report()


def a_changed_answer_diverges_where_the_call_was_made(name: str, shape: Shape, r: Recorded) -> None:
    called, stand_in = shape.override
    store = open_store(r.db)
    try:
        made = [(run_id, c) for run_id in r.run_ids for c in store.calls(run_id) if c.kind in ("tool", "model") and called in (c.name, c.kind, c.name.split(":", 1)[-1])]
    finally:
        store.close()
    run_id = made[shape.override_at][0]
    calls = [c for rid, c in made if rid == run_id]  # the override answers every such call of the run
    result = replay(run_id, shape.build(), db=r.db, overrides={called: stand_in})
    first = result.first_divergence
    assert first is not None, result.report()
    # Parallel branches that both make the call in one step tie: either may be told first, but only
    # at a call the recording made, and at the first step its namespace made one.
    where = (ns_names(first.ns), first.step, first.node)
    assert where in {(ns_names(c.ns), c.step, c.node) for c in calls}, result.report()
    assert first.step == min(c.step for c in calls if ns_names(c.ns) == where[0]), result.report()


_FRESH_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\b[0-9a-f]{32}\b")


def as_compared(out: Any) -> Any:
    """What a turn returned, without the ids every run draws afresh (task namespaces, interrupt ids)."""
    if isinstance(out, BaseException):
        return (type(out).__name__, str(out))
    plain = Normalizer()(to_plain(out))
    if isinstance(plain, dict) and isinstance(plain.get("__interrupt__"), list):  # parallel interrupts come in any order
        plain["__interrupt__"] = sorted(plain["__interrupt__"], key=lambda i: json.dumps(i.get("value"), sort_keys=True, default=str))
    return _FRESH_ID.sub("<id>", json.dumps(plain, sort_keys=True, default=str))


def recording_changes_nothing_the_graph_returns(name: str, shape: Shape, r: Recorded) -> None:
    """Each turn returns, recorded, what the same turns return on the graph run without graphtape."""
    graph, thread = shape.build(), bool(shape.thread or shape.threads)
    if graph.checkpointer is None and (thread or shape.durability == "sync"):
        # LangGraph 1.2 itself fails a sync run without a saver ('SyncPregelLoop' has no
        # '_put_checkpoint_fut'); recorded, the graph has graphtape's: compared on a saver of LangGraph's.
        graph, thread = graph.copy(update={"checkpointer": InMemorySaver()}), True
    plain = _turns(graph, shape, _config(shape, "rec" if thread else None))
    if shape.how in ("stream", "astream"):  # parallel tasks' chunks come in any order: the same chunks
        assert [sorted(map(as_compared, o)) for o in r.outs] == [sorted(map(as_compared, o)) for o in plain], name
    else:
        assert [as_compared(o) for o in r.outs] == [as_compared(o) for o in plain], name


def a_changed_graph_diverges_and_names_what_changed(name: str, shape: Shape, r: Recorded, expected: tuple[str, str, str]) -> None:
    """The graph with one thing changed diverges, first at ``expected``: (kind, namespace, node)."""
    result = replay(r.run_ids[shape.override_at], shape.build(changed=True), db=r.db)
    first = result.first_divergence
    assert first is not None, (name, result.report())
    assert (first.kind, ns_names(first.ns), first.node) == expected, result.report()


def recorded_shapes(shapes: dict[str, Shape]) -> Any:
    """A shapes module's ``recorded`` fixture: each shape recorded once, as ``(name, shape, Recorded)``."""

    @pytest.fixture(scope="module", params=sorted(shapes))
    def recorded(request: Any, tmp_path_factory: Any) -> tuple[str, Shape, Recorded]:
        name = request.param
        return name, shapes[name], record(name, shapes[name], tmp_path_factory)

    return recorded


class ShapeChecks:
    """The checks every shape goes through (see the module docstring): a shapes module defines its
    ``recorded`` fixture with ``recorded_shapes`` and subclasses this as ``TestShapes``."""

    def test_every_superstep_is_stored_with_its_state_nodes_and_routes(self, recorded: Any) -> None:
        every_superstep_is_stored_with_its_state_nodes_and_routes(*recorded)

    def test_every_call_is_recorded_with_its_inputs_and_output(self, recorded: Any) -> None:
        every_call_is_recorded_with_its_inputs_and_output(*recorded)

    def test_a_strict_replay_reproduces_every_run(self, recorded: Any) -> None:
        a_strict_replay_reproduces_every_run(*recorded)

    def test_a_changed_answer_diverges_where_the_call_was_made(self, recorded: Any) -> None:
        a_changed_answer_diverges_where_the_call_was_made(*recorded)


class ChangedShapeChecks(ShapeChecks):
    """The checks, plus: the graph built with ``changed=True`` diverges first where ``changed``
    (shape name -> (kind, namespace, node)) says, and recording changes nothing the graph returns."""

    changed: dict[str, tuple[str, str, str]] = {}

    def test_a_changed_graph_diverges_and_names_what_changed(self, recorded: Any) -> None:
        a_changed_graph_diverges_and_names_what_changed(*recorded, self.changed[recorded[0]])

    def test_recording_changes_nothing_the_graph_returns(self, recorded: Any) -> None:
        recording_changes_nothing_the_graph_returns(*recorded)
