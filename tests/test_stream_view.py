"""Attaching graphtape to a graph without a checkpointer leaves its stream as it was: the lent
saver's checkpoint events are dropped in every chunk shape, and the run is still recorded."""

from __future__ import annotations

import asyncio
import operator
from collections import Counter
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from graphtape import Recorder, open_store


class S(TypedDict, total=False):
    n: int
    log: Annotated[list[str], operator.add]


def _graph(checkpointer: Any = None) -> Any:
    inner = StateGraph(S)
    inner.add_node("deep", lambda s: {"log": ["deep"]})
    inner.add_edge(START, "deep")
    inner.add_edge("deep", END)
    b = StateGraph(S)
    b.add_node("inc", lambda s: {"n": s["n"] + 1, "log": ["inc"]})
    b.add_node("sub", inner.compile())
    b.add_edge(START, "inc")
    b.add_edge("inc", "sub")
    b.add_edge("sub", END)
    return b.compile(checkpointer=checkpointer)


def _mode_and_data(chunk: Any, kwargs: dict[str, Any]) -> tuple[str, Any]:
    """A chunk's mode and data, whatever its shape."""
    if kwargs.get("version") == "v2":
        return chunk["type"], chunk["data"]
    body = chunk[1:] if kwargs.get("subgraphs") else chunk
    several = isinstance(kwargs["stream_mode"], list)
    if kwargs.get("subgraphs") and not several:
        body = body[0]
    return (body[0], body[1]) if several else (kwargs["stream_mode"], body)


def _kind(chunk: Any, kwargs: dict[str, Any]) -> str:
    """A chunk's mode (and a debug event's type), whatever its shape."""
    mode, data = _mode_and_data(chunk, kwargs)
    return f"debug:{data['type']}" if mode == "debug" else str(mode)


SHAPES = [
    {"stream_mode": "checkpoints"},
    {"stream_mode": "debug"},
    {"stream_mode": ["checkpoints", "debug", "updates", "tasks"]},
    {"stream_mode": ["checkpoints", "values"], "subgraphs": True},
    {"stream_mode": "debug", "subgraphs": True},
    {"stream_mode": ["checkpoints", "debug", "updates"], "version": "v2"},
    {"stream_mode": ["checkpoints", "updates"], "version": "v2", "subgraphs": True},
]


@pytest.mark.parametrize("kwargs", SHAPES, ids=lambda k: "-".join(f"{a}={b}" for a, b in k.items()))
def test_a_graph_without_a_checkpointer_streams_as_it_did(tmp_path, kwargs):
    graph = _graph()
    bare = Counter(_kind(c, kwargs) for c in graph.stream({"n": 0}, **kwargs))
    rec = Recorder(tmp_path / "s.db")
    app = rec.attach(graph, name="streamed")
    attached = Counter(_kind(c, kwargs) for c in app.stream({"n": 0}, **kwargs))

    async def chunks() -> Counter:
        return Counter([_kind(c, kwargs) async for c in app.astream({"n": 0}, **kwargs)])

    attached_async = asyncio.run(chunks())
    rec.close()
    assert attached == bare and attached_async == bare, (bare, attached, attached_async)
    assert not any(k in ("checkpoints", "debug:checkpoint") for k in bare)
    store = open_store(tmp_path / "s.db")
    try:
        runs = store.list_runs()
        assert len(runs) == 2 and all(r.status == "ok" for r in runs)
        assert all([s.step for s in store.list_steps(r.id)] == [-1, 0, 1, 2] for r in runs)
    finally:
        store.close()


def test_a_graph_with_its_own_checkpointer_keeps_its_checkpoint_events(tmp_path):
    """Its checkpoints are the user's: they stream, attached or not."""
    kwargs = {"stream_mode": ["checkpoints", "debug"]}
    graph = _graph(InMemorySaver())
    bare = Counter(_kind(c, kwargs) for c in graph.stream({"n": 0}, {"configurable": {"thread_id": "a"}}, **kwargs))
    rec = Recorder(tmp_path / "s.db")
    attached = Counter(_kind(c, kwargs) for c in rec.attach(graph).stream({"n": 0}, {"configurable": {"thread_id": "b"}}, **kwargs))
    rec.close()
    assert attached == bare and bare["checkpoints"] == 4 and bare["debug:checkpoint"] == 4


def _configs(chunk: Any, kwargs: dict[str, Any]) -> list[dict]:
    """The configs a chunk's checkpoint event carries (none for other chunks)."""
    mode, data = _mode_and_data(chunk, kwargs)
    event = data if mode == "checkpoints" else data.get("payload") if mode == "debug" and data["type"] == "checkpoint" else None
    return [c for c in (event.get("config"), event.get("parent_config")) if c] if event else []


@pytest.mark.parametrize("kwargs", SHAPES, ids=lambda k: "-".join(f"{a}={b}" for a, b in k.items()))
def test_a_graph_with_its_own_checkpointer_streams_configs_as_it_did(tmp_path, kwargs):
    """graphtape tells its saver which run a checkpoint belongs to through the config: the
    events the caller reads hold the config they would hold without graphtape."""
    graph = _graph(InMemorySaver())
    bare = {frozenset(c["configurable"]) for chunk in graph.stream({"n": 0}, {"configurable": {"thread_id": "a"}}, **kwargs) for c in _configs(chunk, kwargs)}
    rec = Recorder(tmp_path / "s.db")
    app = rec.attach(graph)
    attached = [c for chunk in app.stream({"n": 0}, {"configurable": {"thread_id": "b"}}, **kwargs) for c in _configs(chunk, kwargs)]

    async def configs() -> list[dict]:
        return [c async for chunk in app.astream({"n": 0}, {"configurable": {"thread_id": "c"}}, **kwargs) for c in _configs(chunk, kwargs)]

    attached += asyncio.run(configs())
    rec.close()
    assert bare and attached and {frozenset(c["configurable"]) for c in attached} == bare
    store = open_store(tmp_path / "s.db")
    try:
        assert all([s.step for s in store.list_steps(r.id)] == [-1, 0, 1, 2] for r in store.list_runs())
    finally:
        store.close()


@pytest.mark.parametrize("modes", ["updates", ["updates", "checkpoints"]])
async def test_closing_a_stream_early_saves_where_it_stopped_before_aclose_returns(tmp_path, modes):
    """``async with aclosing(graph.astream(...))`` and a break: LangGraph's own stream is closed
    by the time ``aclose`` returns, so the graph's saver holds the step that finished (the caller
    may close that saver next), and the recording keeps it, as the run cancelled there."""
    from contextlib import aclosing

    async def slow(s: S) -> dict:
        await asyncio.sleep(5)
        return {"log": ["slow"]}

    b = StateGraph(S)
    b.add_node("a", lambda s: {"log": ["a"]})
    b.add_node("slow", slow)
    b.add_edge(START, "a")
    b.add_edge("a", "slow")
    b.add_edge("slow", END)
    states = {}
    with Recorder(tmp_path / "gt.db") as rec:
        for who in ("bare", "recorded"):
            graph = b.compile(checkpointer=InMemorySaver())
            graph = rec.attach(graph, name="closed") if who == "recorded" else graph
            config = {"configurable": {"thread_id": "t"}}
            async with aclosing(graph.astream({"log": []}, config, stream_mode=modes)) as stream:
                async for chunk in stream:
                    if chunk == {"a": {"log": ["a"]}} or chunk == ("updates", {"a": {"log": ["a"]}}):
                        break  # node a's update: slow is running
            state = await graph.aget_state(config)
            states[who] = (state.values, state.next)
        run_id = rec.last_run_id
    assert states["bare"] == ({"log": ["a"]}, ("slow",))
    assert states["recorded"] == states["bare"]
    store = open_store(tmp_path / "gt.db")
    try:
        run = store.get_run(run_id)
        assert run.status == "interrupted" and run.step_count >= 2, (run.status, run.step_count)
    finally:
        store.close()


PRINTED = [
    ("invoke", {"print_mode": "checkpoints"}),
    ("invoke", {"print_mode": ["debug", "updates"]}),
    ("stream", {"stream_mode": "updates", "print_mode": "debug"}),
    ("stream", {"stream_mode": ["values", "checkpoints"], "print_mode": "checkpoints"}),
    ("stream", {"stream_mode": "values", "print_mode": ["checkpoints", "values"], "subgraphs": True}),
    ("stream", {"stream_mode": "updates", "print_mode": "debug", "version": "v2"}),
    ("astream", {"stream_mode": "updates", "print_mode": ["checkpoints", "debug"]}),
]


def _printed(capsys) -> list[str]:
    """What ``print_mode`` printed, each line's mode and what it says apart from ids and times."""
    import re

    lines = capsys.readouterr().out.splitlines()
    uuid = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    return [re.sub(uuid, "_", re.sub(r"'(checkpoint_id|id|timestamp)': '[^']*'", r"'\1': _", line)) for line in lines]


@pytest.mark.parametrize("saver", [False, True], ids=["no-checkpointer", "own-checkpointer"])
@pytest.mark.parametrize(("call", "kwargs"), PRINTED, ids=lambda v: v if isinstance(v, str) else "-".join(f"{a}={b}" for a, b in v.items()))
def test_print_mode_prints_what_the_bare_graph_prints(tmp_path, capsys, saver, call, kwargs):
    """LangGraph prints inside its loop: graphtape's lent saver's checkpoints and its run key
    would be printed there. The caller's chunks and the printed lines are the bare graph's."""

    def run(graph: Any) -> Any:
        config = {"configurable": {"thread_id": "t"}} if saver else {}
        if call == "invoke":
            return graph.invoke({"n": 0}, config, **kwargs)
        if call == "stream":
            return [_mode_and_data(c, {"stream_mode": kwargs["stream_mode"], **kwargs}) for c in graph.stream({"n": 0}, config, **kwargs)]

        async def chunks() -> list:
            return [_mode_and_data(c, kwargs) async for c in graph.astream({"n": 0}, config, **kwargs)]

        return asyncio.run(chunks())

    def strip(out: Any) -> str:
        import re

        uuid = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
        return re.sub(uuid, "_", re.sub(r"'timestamp': '[^']*'", "_", repr(out)))

    bare_out = run(_graph(InMemorySaver() if saver else None))
    bare = _printed(capsys)
    with Recorder(tmp_path / "p.db") as rec:
        recorded_out = run(rec.attach(_graph(InMemorySaver() if saver else None)))
    recorded = _printed(capsys)
    assert bare or kwargs["print_mode"] == "checkpoints" and not saver
    assert recorded == bare
    assert "__graphtape" not in "".join(recorded) and "graphtape-" not in "".join(recorded)
    assert strip(recorded_out) == strip(bare_out)
