"""graphtape against its peers, side by side in one run.

The peers are other record/replay tools for LangGraph agents, installed as the
``peers`` extra (``pip install -e ".[peers]"``) and each attached the way its
README says:

- **reeltime** 1.0.0: a ``tape.session()`` around the run, its LangChain
  callback handler (``tape.langchain.handler()``) on the run's config, the
  model's provider call and the tool wrapped with ``tape.wrap`` / ``@tape.tool``.
- **agent-rewind** 0.8.0: ``with rewind.record(path)`` around the run, the
  provider call under ``@rewind.llm`` and the tool under ``@rewind.tool``.
- **langgraph-replay** 0.1.1: ``ReplayCheckpointer`` as the graph's checkpointer
  and ``ReplayCallbackHandler`` on the run's config.
- **timewarp-llm** 0.2.1: ``timewarp.wrap(graph, ...)`` and ``.invoke``.

Baselines measured in the same process: the graph without a checkpointer, a
do-nothing checkpointer with a do-nothing callback handler (the *floor*: what
LangGraph's own checkpoint and callback machinery costs before anyone records
anything), ``InMemorySaver`` and ``SqliteSaver``.

Sections:

1. **Recording**, CPU and wall time per superstep (medians; setups interleaved
   within each repetition, so drift hits them alike) on four shapes: a
   three-node loop with an int state, the same loop in short runs (6
   supersteps each, many runs per sample, made durable once at the end: what a
   run costs beyond its supersteps), the loop with a message list growing by
   one 200-character message per superstep, and ``create_react_agent`` with a
   scripted provider and one tool. Baselines include LangGraph's ``sync``
   durability with a do-nothing saver and with ``InMemorySaver``: what
   graphtape's sync mode pays before it writes anything; and that do-nothing
   saver inserting one fixed 64-byte SQLite row a superstep, committed when the
   run ends and, under sync durability, at each superstep: the least any
   recorder that keeps (or makes durable) every superstep pays. CPU is the whole process's
   (``time.process_time``), from ``invoke`` until the recording is durable
   (graphtape's background writer flushed), so work moved to a thread is still
   counted; the graph thread's own CPU is shown beside it. What each setup
   stored is counted; a setup that stored nothing is marked.
2. **Replay**: a strict replay of a 101-superstep ``create_react_agent`` run,
   for every tool that has one; a failure shows its error. Baselines: the run
   itself live with nothing attached, the run through a do-nothing saver and
   handler (what a replay that records each superstep pays LangGraph), and
   graphtape recording it live (the part of a strict replay spent recording
   the replay). Then the same for a 5-superstep run, the size of a typical
   fixture: there what a replay costs besides running the graph (opening the
   store, reading the recording, comparing) weighs most. A row shows the work
   the pytest plugin does for each test (the fixture file read, imported into
   the session's store, replayed). Last, 40 replays of the 101-superstep run
   back to back, as a test session runs them: no collection is forced between
   them (the rows above force one before each), so the garbage collector's
   pauses are counted, with graphtape's replay-time GC threshold and, as the
   in-run baseline, with Python's own.
3. **CLI**: ``graphtape runs`` on 1,000 runs against reeltime's ``tape ls`` on
   1,000 runs, each a whole process, alternated.
4. **Storage**: graphtape's bytes per superstep at 1,000 messages against
   SqliteSaver's, and whether two identical runs store the same bytes.

Last, each target of the performance issue is printed as met or not, beside
the same ratio for the floor, so a target below what LangGraph's own machinery
reaches shows as such.

Usage::

    .venv/bin/python benchmarks/bench_peers.py            # everything, 5 repetitions (~5 min)
    .venv/bin/python benchmarks/bench_peers.py --quick    # smoke run
    .venv/bin/python benchmarks/bench_peers.py --only recording --reps 9

A report, not a test: it always exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_recorder import IntState, MsgState, _int_node, _msg_node, build, int_inputs, msg_inputs, round_steps, table_bytes  # noqa: E402
from bench_recorder import sqlite_saver as bench_sqlite_saver  # noqa: E402
from langchain_core.callbacks import BaseCallbackHandler  # noqa: E402
from langchain_core.language_models import BaseChatModel  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage  # noqa: E402
from langchain_core.outputs import ChatGeneration, ChatResult  # noqa: E402
from langchain_core.tools import StructuredTool  # noqa: E402
from langgraph.checkpoint.base import BaseCheckpointSaver  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402

from graphtape.recorder import Recorder  # noqa: E402

warnings.filterwarnings("ignore")  # create_react_agent's move notice, peers' own notices
PEERS = ("reeltime", "agent-rewind", "langgraph-replay", "timewarp-llm")


# ---------------------------------------------------------------------------
# The agent: create_react_agent over a scripted provider
# ---------------------------------------------------------------------------


def provider_reply(request: dict) -> dict:
    """A provider's answer as JSON, the way an SDK returns it: one tool call per turn until
    ``turns`` are done, then a final answer. Decided by the prompt alone, so any rerun
    (a replay) asks and gets the same."""
    done = sum(1 for m in request["messages"] if m["role"] == "tool")
    if done >= request["turns"]:
        return {"content": f"all {done} lookups done", "tool_calls": []}
    return {"content": f"step {done}", "tool_calls": [{"name": "lookup", "args": {"n": done}, "id": f"call_{done}"}]}


def lookup(n: int) -> str:
    """Look something up."""
    return f"result {n}: " + "x" * 80


class ProviderChat(BaseChatModel):
    """A chat model whose provider is a plain function of a JSON request, as an SDK client is:
    a recorder that hooks the provider call (agent-rewind, reeltime) sees it like a real one."""

    turns: int = 50
    provider: Any = None

    @property
    def _llm_type(self) -> str:
        return "provider-chat"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self.bind(tools=[t.name for t in tools], **kwargs)

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        request = {"model": "scripted-1", "turns": self.turns, "messages": [{"role": _role(m), "content": m.content} for m in messages]}
        reply = self.provider(request)
        msg = AIMessage(content=reply["content"], tool_calls=reply["tool_calls"], usage_metadata={"input_tokens": 10, "output_tokens": 5, "total_tokens": 15})
        return ChatResult(generations=[ChatGeneration(message=msg)])


def _role(m: BaseMessage) -> str:
    return {"human": "user", "ai": "assistant", "tool": "tool"}.get(m.type, m.type)


def react_graph(turns: int, provider: Callable[[dict], dict] = provider_reply, tool_fn: Callable[..., str] = lookup, checkpointer: Any = None) -> Any:
    from langgraph.prebuilt import create_react_agent

    tool = StructuredTool.from_function(tool_fn, name="lookup", description="Look something up.")
    return create_react_agent(ProviderChat(turns=turns, provider=provider), [tool], checkpointer=checkpointer)


def react_inputs(steps: int, prefill: int = 0) -> dict:
    return {"messages": [HumanMessage(content="look everything up")]}


def react_turns(steps: int) -> int:
    """Tool turns for about ``steps`` node supersteps: agent+tools per turn, plus the final agent."""
    return max(1, (steps - 1) // 2)


# ---------------------------------------------------------------------------
# Baselines
# ---------------------------------------------------------------------------


class NullSaver(BaseCheckpointSaver):
    """A checkpointer that keeps nothing: LangGraph's checkpoint machinery runs, nothing is stored."""

    def get_tuple(self, config):  # type: ignore[override]
        return None

    def list(self, config, *, filter=None, before=None, limit=None):  # type: ignore[override]
        return iter(())

    def put(self, config, checkpoint, metadata, new_versions):  # type: ignore[override]
        conf = config["configurable"]
        return {"configurable": {"thread_id": conf["thread_id"], "checkpoint_ns": conf.get("checkpoint_ns", ""), "checkpoint_id": checkpoint["id"]}}

    def put_writes(self, config, writes, task_id, task_path=""):  # type: ignore[override]
        return None

    def get_next_version(self, current, channel):  # type: ignore[override]
        return (current or 0) + 1 if not isinstance(current, str) else int(current.split(".")[0]) + 1


class NullHandler(BaseCallbackHandler):
    """A callback handler that does nothing (run inline, as graphtape's is)."""

    run_inline = True


class RowSaver(NullSaver):
    """The least a recorder that keeps every superstep in SQLite must pay: the floor plus one
    fixed 64-byte row inserted a checkpoint (raw ``sqlite3``, WAL and ``synchronous=NORMAL`` as
    graphtape's store sets them). ``commit_each``: each row is its own transaction (what ``sync``
    durability asks); else one transaction holds a run's rows, committed by ``durable()``.
    Nothing is encoded; a lower bound, not a recorder."""

    ROW = b"x" * 64

    def __init__(self, path: Path, *, commit_each: bool) -> None:
        super().__init__()
        self.commit_each = commit_each
        self.conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.execute("CREATE TABLE IF NOT EXISTS steps (id INTEGER PRIMARY KEY, checkpoint_id TEXT, payload BLOB)")

    def put(self, config, checkpoint, metadata, new_versions):  # type: ignore[override]
        if not self.conn.in_transaction:
            self.conn.execute("BEGIN")
        self.conn.execute("INSERT INTO steps (checkpoint_id, payload) VALUES (?, ?)", (checkpoint["id"], self.ROW))
        if self.commit_each:
            self.conn.execute("COMMIT")
        return super().put(config, checkpoint, metadata, new_versions)

    def durable(self) -> None:
        if self.conn.in_transaction:
            self.conn.execute("COMMIT")


# ---------------------------------------------------------------------------
# Setups: one way of running a graph, and what it stored
# ---------------------------------------------------------------------------


FLOOR = "floor (null saver+handler)"
FLOOR_SYNC = "floor (sync durability)"
FLOOR_ROW = "floor + row/step"
FLOOR_COMMIT = "floor + commit/step (sync)"


@dataclass
class Setup:
    """``run(inputs, steps)`` runs the graph once; ``durable()`` waits until what it recorded is
    stored; ``captured()`` says what it stored so far."""

    name: str
    run: Callable[[Any, int], Any]
    durable: Callable[[], None] = lambda: None
    captured: Callable[[], str] = lambda: "-"
    close: Callable[[], None] = lambda: None
    error: str | None = None
    kind: str = "baseline"  # baseline | graphtape | peer


@dataclass
class Shape:
    label: str
    graph: Callable[..., Any]  # (checkpointer=None, provider=..., tool_fn=...) -> compiled graph
    inputs: Callable[[int], Any]
    steps: int
    check: Callable[[Any], bool]
    runs: int = 1  # runs per sample: many short runs show what a run costs beyond its supersteps


def _config(steps: int, thread: str | None = None, callbacks: list | None = None) -> dict:
    cfg: dict[str, Any] = {"configurable": {"thread_id": thread or f"bench-{uuid.uuid4().hex}"}, "recursion_limit": steps * 2 + 20}
    if callbacks:
        cfg["callbacks"] = callbacks
    return cfg


def baseline_setups(shape: Shape, tmp: Path) -> list[Setup]:
    out = []
    plain = shape.graph()
    out.append(Setup("no checkpointer", lambda inp, n: plain.invoke(inp, _config(n))))
    floor = shape.graph(checkpointer=NullSaver())
    handler = NullHandler()
    out.append(Setup(FLOOR, lambda inp, n: floor.invoke(inp, _config(n, callbacks=[handler]))))
    # LangGraph's "sync" durability waits for each checkpoint's save before the next superstep:
    # what graphtape's sync mode pays before it writes anything.
    out.append(Setup(FLOOR_SYNC, lambda inp, n: floor.invoke(inp, _config(n, callbacks=[handler]), durability="sync")))
    # The floor plus a SQLite row a superstep, committed when the run ends (what any recorder that
    # keeps each superstep pays at least), and committed at each superstep under sync durability.
    rows = RowSaver(tmp / f"rows-{shape.label}.sqlite", commit_each=False)
    row_floor = shape.graph(checkpointer=rows)
    out.append(Setup(FLOOR_ROW, lambda inp, n: row_floor.invoke(inp, _config(n, callbacks=[handler])), durable=rows.durable, close=rows.conn.close))
    commits = RowSaver(tmp / f"commits-{shape.label}.sqlite", commit_each=True)
    commit_floor = shape.graph(checkpointer=commits)
    out.append(Setup(FLOOR_COMMIT, lambda inp, n: commit_floor.invoke(inp, _config(n, callbacks=[handler]), durability="sync"), close=commits.conn.close))
    mem_saver = InMemorySaver()
    mem = shape.graph(checkpointer=mem_saver)
    last_thread = lambda: next(reversed(mem_saver.storage.values()))  # noqa: E731 - the latest run's thread
    mem_captured = lambda: f"{sum(len(v) for v in last_thread().values())} checkpoints (state)"  # noqa: E731
    out.append(Setup("InMemorySaver", lambda inp, n: mem.invoke(inp, _config(n)), captured=mem_captured))
    out.append(Setup("InMemorySaver sync", lambda inp, n: mem.invoke(inp, _config(n), durability="sync"), captured=mem_captured))
    conn = sqlite3.connect(str(tmp / f"lg-{shape.label}.sqlite"), check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    lite = shape.graph(checkpointer=saver)
    last = "SELECT COUNT(*) FROM checkpoints WHERE thread_id = (SELECT thread_id FROM checkpoints ORDER BY rowid DESC LIMIT 1)"
    count = lambda: f"{conn.execute(last).fetchone()[0]} checkpoints (state)"  # noqa: E731
    out.append(Setup("SqliteSaver", lambda inp, n: lite.invoke(inp, _config(n)), captured=count, close=conn.close))
    out.append(Setup("SqliteSaver sync", lambda inp, n: lite.invoke(inp, _config(n), durability="sync"), captured=count))
    return out


def graphtape_setups(shape: Shape, tmp: Path) -> list[Setup]:
    out = []
    for durability in ("async", "sync", "exit"):
        rec = Recorder(tmp / f"gt-{durability}-{shape.label}.db", durability=durability)
        g = rec.attach(shape.graph(), name=f"bench-{shape.label}")
        out.append(
            Setup(
                "graphtape" if durability == "async" else f"graphtape {durability}",
                lambda inp, n, g=g: g.invoke(inp, _config(n)),
                durable=lambda rec=rec: rec.flush(120),
                captured=lambda rec=rec: _graphtape_captured(rec),
                close=rec.close,
                kind="graphtape",
            )
        )
    return out


def _graphtape_captured(rec: Recorder) -> str:
    rec.flush(120)
    run = rec.store.get_run(rec.last_run_id)
    calls = len(rec.store.calls(rec.last_run_id))
    return f"{run.step_count} steps (state, routes), {calls} calls"


def peer_setups(shape: Shape, tmp: Path) -> list[Setup]:
    out = []
    for name, make in (("reeltime", _reeltime), ("agent-rewind", _rewind), ("langgraph-replay", _lgreplay), ("timewarp-llm", _timewarp)):
        try:
            setup = make(shape, tmp / name)
        except Exception as exc:  # noqa: BLE001 - a peer that cannot attach is reported, not fatal
            setup = Setup(name, _failing(exc), error=_one_line(exc))
        setup.kind = "peer"
        out.append(setup)
    return out


def _failing(exc: BaseException) -> Callable[[Any, int], Any]:
    def run(inp: Any, n: int) -> Any:
        raise exc

    return run


def _reeltime(shape: Shape, d: Path) -> Setup:
    import reeltime as tape

    d.mkdir(parents=True, exist_ok=True)
    graph = shape.graph(provider=tape.wrap(provider_reply, name="llm"), tool_fn=tape.tool(lookup))
    last: dict[str, Any] = {}

    def run(inp: Any, n: int) -> Any:
        with tape.session(tape_dir=str(d)) as t:
            out = graph.invoke(inp, _config(n, callbacks=[tape.langchain.handler()]))
        last["run"] = t.run_id
        return out

    def captured() -> str:
        trace = tape.read_trace(_reeltime_trace(d, last["run"]))
        kinds: dict[str, int] = {}
        for ev in trace.events:
            kinds[ev.kind] = kinds.get(ev.kind, 0) + 1
        return _kinds(kinds, state=False)

    return Setup("reeltime", run, captured=captured)


def _reeltime_trace(d: Path, run_id: str) -> Path:
    return next((d / "runs").glob(f"{run_id}*"))


def _rewind(shape: Shape, d: Path) -> Setup:
    import rewind

    d.mkdir(parents=True, exist_ok=True)
    graph = shape.graph(provider=rewind.llm(provider_reply), tool_fn=rewind.tool(lookup))
    last: dict[str, Path] = {}

    def run(inp: Any, n: int) -> Any:
        path = d / f"{uuid.uuid4().hex}.rewind"
        with rewind.record(path):
            out = graph.invoke(inp, _config(n))
        last["path"] = path
        return out

    def captured() -> str:
        kinds: dict[str, int] = {}
        with open(last["path"], encoding="utf-8") as f:
            for line in f:
                kind = json.loads(line).get("kind")
                if kind:
                    kinds[kind] = kinds.get(kind, 0) + 1
        return _kinds(kinds, state=False)

    return Setup("agent-rewind", run, captured=captured)


def _lgreplay(shape: Shape, d: Path) -> Setup:
    from langgraph_replay import ReplayCallbackHandler, ReplayCheckpointer

    d.mkdir(parents=True, exist_ok=True)
    db = str(d / "replay.db")
    graph = shape.graph(checkpointer=ReplayCheckpointer(db_path=db))
    handler = ReplayCallbackHandler(db)
    last: dict[str, str] = {}

    def run(inp: Any, n: int) -> Any:
        thread = f"bench-{uuid.uuid4().hex}"
        last["thread"] = thread
        return graph.invoke(inp, _config(n, thread=thread, callbacks=[handler]))

    def captured() -> str:
        conn = sqlite3.connect(db)
        try:
            tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
            parts = []
            for t in tables:
                cols = [r[1] for r in conn.execute(f"PRAGMA table_info({t})")]
                if "thread_id" in cols:
                    n = conn.execute(f"SELECT COUNT(*) FROM {t} WHERE thread_id = ?", (last["thread"],)).fetchone()[0]
                    if n:
                        parts.append(f"{n} {t}")
            return ", ".join(parts) or "nothing"
        finally:
            conn.close()

    return Setup("langgraph-replay", run, captured=captured)


def _timewarp(shape: Shape, d: Path) -> Setup:
    from timewarp import wrap
    from timewarp.store import LocalStore

    d.mkdir(parents=True, exist_ok=True)
    store = LocalStore(db_path=d / "timewarp.sqlite3", blobs_root=d / "blobs")
    handle = wrap(shape.graph(checkpointer=InMemorySaver()), project="bench", name=shape.label, store=store)

    def run(inp: Any, n: int) -> Any:
        return handle.invoke(inp, config=_config(n))

    def captured() -> str:
        kinds: dict[str, int] = {}
        for ev in store.list_events(handle.last_run_id):
            k = getattr(ev.action_type, "value", str(ev.action_type))
            kinds[k] = kinds.get(k, 0) + 1
        return _kinds(kinds, state="SNAPSHOT" in kinds)

    return Setup("timewarp-llm", run, captured=captured)


def _kinds(kinds: dict[str, int], state: bool) -> str:
    if not kinds:
        return "NOTHING RECORDED"
    text = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
    return text + ("" if state else " (no per-step state)")


# ---------------------------------------------------------------------------
# Part 1: recording
# ---------------------------------------------------------------------------


@dataclass
class Sample:
    cpu: list[float] = field(default_factory=list)  # process CPU s, invoke until durable
    thread_cpu: list[float] = field(default_factory=list)  # the graph thread's CPU s during invoke
    wall: list[float] = field(default_factory=list)  # wall s, invoke until durable


def time_shape(shape: Shape, reps: int, tmp: Path) -> tuple[list[Setup], dict[str, Sample]]:
    tmp.mkdir(parents=True, exist_ok=True)
    setups = baseline_setups(shape, tmp) + graphtape_setups(shape, tmp) + peer_setups(shape, tmp)
    samples = {s.name: Sample() for s in setups}

    def once(s: Setup, timed: bool) -> None:
        if s.error:
            return
        inputs = [shape.inputs(shape.steps) for _ in range(shape.runs)]
        gc.collect()
        c0, t0, w0 = time.process_time(), time.thread_time(), time.perf_counter()
        try:
            for inp in inputs:
                out = s.run(inp, shape.steps)
            t1 = time.thread_time()
            s.durable()
        except Exception as exc:  # noqa: BLE001 - a failing setup is reported with its error
            s.error = _one_line(exc)
            return
        c1, w1 = time.process_time(), time.perf_counter()
        if not shape.check(out):
            s.error = "the graph's result changed"
            return
        if timed:
            samples[s.name].cpu.append(c1 - c0)
            samples[s.name].thread_cpu.append(t1 - t0)
            samples[s.name].wall.append(w1 - w0)

    for s in setups:  # warm-up: imports, caches, schemas
        once(s, timed=False)
    for rep in range(reps):
        for s in setups if rep % 2 == 0 else list(reversed(setups)):
            once(s, timed=True)
        print(f"  {shape.label}: repetition {rep + 1}/{reps}", file=sys.stderr, flush=True)
    for s in setups:
        if not s.error:
            try:
                s.captured = _fixed(s.captured())
            except Exception as exc:  # noqa: BLE001
                s.captured = _fixed(f"? ({_one_line(exc)})")
    return setups, samples


def _fixed(text: str) -> Callable[[], str]:
    return lambda: text


def print_recording(shape: Shape, setups: list[Setup], samples: dict[str, Sample]) -> dict[str, float]:
    per = shape.steps * shape.runs
    med = {name: statistics.median(s.cpu) / per * 1e6 for name, s in samples.items() if s.cpu}
    base, floor, mem = med.get("no checkpointer"), med.get(FLOOR), med.get("InMemorySaver")
    runs = f", {shape.runs} runs per sample" if shape.runs > 1 else ""
    print(f"\nRecording: {shape.label}, {shape.steps} supersteps per run{runs}, medians (µs per superstep)")
    head = f"  {'setup':<27} {'CPU':>8} {'thread':>8} {'wall':>8} {'×none':>6} {'×floor':>7} {'×InMem':>7}  captured"
    print(head)
    print("  " + "-" * (len(head) + 30))
    for s in setups:
        sm = samples[s.name]
        if s.error or not sm.cpu:
            print(f"  {s.name:<27} {'FAILED':>8}  {s.error}")
            continue
        cpu = med[s.name]
        th = statistics.median(sm.thread_cpu) / per * 1e6
        wall = statistics.median(sm.wall) / per * 1e6
        ratio = lambda ref: f"{cpu / ref:.2f}" if ref else "-"  # noqa: E731
        print(f"  {s.name:<27} {cpu:>8.0f} {th:>8.0f} {wall:>8.0f} {ratio(base):>6} {ratio(floor):>7} {ratio(mem):>7}  {s.captured()}")
    return med


# ---------------------------------------------------------------------------
# Part 2: strict replay of a 101-superstep create_react_agent run
# ---------------------------------------------------------------------------


@dataclass
class ReplayResult:
    name: str
    cpu: list[float] = field(default_factory=list)
    wall: list[float] = field(default_factory=list)
    error: str | None = None
    note: str = ""


def replay_section(steps: int, reps: int, tmp: Path) -> list[ReplayResult]:
    turns = react_turns(steps)
    runners: list[tuple[str, Callable[[], Callable[[], str]]]] = [
        (BARE, lambda: _bare_runner(turns)),
        (REPLAY_FLOOR, lambda: _floor_runner(turns)),
        (GT_RECORDING, lambda: _gt_record_runner(turns, tmp / "r-gt-rec")),
        ("graphtape", lambda: _gt_replayer(turns, tmp / "r-gt")),
        (GT_FIXTURE_TEST, lambda: _gt_fixture_test(turns, tmp / "r-gt-fixture")),
        ("agent-rewind", lambda: _rewind_replayer(turns, tmp / "r-rewind")),
        ("reeltime", lambda: _reeltime_replayer(turns, tmp / "r-reel")),
        ("langgraph-replay", lambda: _lgreplay_replayer(turns, tmp / "r-lgr")),
        ("timewarp-llm", lambda: _timewarp_replayer(turns, tmp / "r-tw")),
    ]
    results = []
    prepared = []
    for name, prepare in runners:
        res = ReplayResult(name)
        results.append(res)
        try:
            prepared.append((res, prepare()))
        except Exception as exc:  # noqa: BLE001
            res.error = "recording: " + _one_line(exc)
    for rep in range(reps + 1):  # the first is a warm-up
        for res, go in prepared if rep % 2 == 0 else list(reversed(prepared)):
            if res.error:
                continue
            gc.collect()
            c0, w0 = time.process_time(), time.perf_counter()
            try:
                res.note = go()
            except Exception as exc:  # noqa: BLE001
                res.error = _one_line(exc)
                continue
            if rep:
                res.cpu.append(time.process_time() - c0)
                res.wall.append(time.perf_counter() - w0)
        print(f"  replay: repetition {rep}/{reps}", file=sys.stderr, flush=True)
    return results


BARE = "bare graph run"
SHORT_REPLAY_STEPS = 5  # two model+tool turns and the answer: the size of a typical fixture
REPLAY_FLOOR = "floor (saver+handler)"
GT_RECORDING = "graphtape recording"
GT_FIXTURE_TEST = "graphtape fixture test"


def _bare_runner(turns: int) -> Callable[[], str]:
    """The same run live with nothing attached: what re-running the graph costs any replay."""

    def go() -> str:
        react_graph(turns).invoke(react_inputs(0), _config(2 * turns + 1))
        return "baseline: the run itself, live, no checkpointer, nothing recorded or compared"

    return go


def _floor_runner(turns: int) -> Callable[[], str]:
    """The run live through LangGraph's checkpoint and callback machinery, keeping nothing: what
    a replay that records each superstep's state (through a checkpointer) pays before it does so."""
    handler = NullHandler()

    def go() -> str:
        react_graph(turns, checkpointer=NullSaver()).invoke(react_inputs(0), _config(2 * turns + 1, callbacks=[handler]))
        return "baseline: the run live with a do-nothing saver and handler (LangGraph's per-step machinery)"

    return go


def _gt_record_runner(turns: int, d: Path) -> Callable[[], str]:
    """graphtape recording the same run: the part of its replay spent recording the replay."""
    d.mkdir(parents=True)
    rec = Recorder(d / "gt.db")

    def go() -> str:
        rec.attach(react_graph(turns)).invoke(react_inputs(0), _config(2 * turns + 1))
        rec.flush(120)
        return "baseline: recording the run live (a strict replay records its replay too)"

    return go


def _gt_replayer(turns: int, d: Path) -> Callable[[], str]:
    from graphtape.replay import replay

    d.mkdir(parents=True)
    db = str(d / "gt.db")
    with Recorder(db) as rec:
        rec.attach(react_graph(turns)).invoke(react_inputs(0), _config(2 * turns + 1))
        rec.flush()
        run_id = rec.last_run_id
        count = rec.store.get_run(run_id).step_count

    def go() -> str:
        result = replay(run_id, react_graph(turns), db=db, mode="strict")
        if result.diverged:
            raise RuntimeError(f"diverged: {result.first_divergence}")
        return f"{count} steps recorded; replay recorded and compared step by step ({result.served} calls answered)"

    return go


def _gt_fixture_test(turns: int, d: Path) -> Callable[[], str]:
    """What the pytest plugin does for each test: read the fixture file, import it into the
    session's store (found there after the first test) and replay it strictly."""
    from graphtape.recorder import SqlStore
    from graphtape.replay import replay
    from graphtape.replay.fixture import export_fixture, import_fixture, read_fixture, write_fixture

    d.mkdir(parents=True)
    with Recorder(d / "recorded.db") as rec:
        rec.attach(react_graph(turns)).invoke(react_inputs(0), _config(2 * turns + 1))
        rec.flush()
        write_fixture(d / "fixture.json", export_fixture(rec.store, rec.last_run_id))
    session = SqlStore(d / "session.db")  # the plugin's one store per test session

    def go() -> str:
        run_id = import_fixture(session, read_fixture(d / "fixture.json")).run_id
        result = replay(run_id, react_graph(turns), store=session, mode="strict")
        if result.diverged:
            raise RuntimeError(f"diverged: {result.first_divergence}")
        return "the plugin's work per test: read the fixture file, import it (found), replay it"

    return go


def _rewind_replayer(turns: int, d: Path) -> Callable[[], str]:
    import rewind

    d.mkdir(parents=True)
    path = d / "run.rewind"
    graph = react_graph(turns, provider=rewind.llm(provider_reply), tool_fn=rewind.tool(lookup))
    with rewind.record(path):
        graph.invoke(react_inputs(0), _config(2 * turns + 1))

    def go() -> str:
        with rewind.replay(path, match="strict", require_full_consumption=True):
            react_graph(turns, provider=rewind.llm(provider_reply), tool_fn=rewind.tool(lookup)).invoke(react_inputs(0), _config(2 * turns + 1))
        return "calls served from the trace; no state recorded or compared"

    return go


def _reeltime_replayer(turns: int, d: Path) -> Callable[[], str]:
    import reeltime as tape

    d.mkdir(parents=True)
    graph = react_graph(turns, provider=tape.wrap(provider_reply, name="llm"), tool_fn=tape.tool(lookup))
    # reeltime matches an event by its call site: recording and replay call the graph from one line.
    def run(g: Any) -> None:
        g.invoke(react_inputs(0), _config(2 * turns + 1, callbacks=[tape.langchain.handler()]))

    with tape.session(tape_dir=str(d)) as t:
        run(graph)
    run_id = t.run_id

    def go() -> str:
        g = react_graph(turns, provider=tape.wrap(provider_reply, name="llm"), tool_fn=tape.tool(lookup))
        with tape.session("replay", replay=run_id, tape_dir=str(d), strictness="strict"):
            run(g)
        return "calls and chain events served from the tape; no state recorded"

    return go


def _lgreplay_replayer(turns: int, d: Path) -> Callable[[], str]:
    from langgraph_replay import ReplayCallbackHandler, ReplayCheckpointer, ReplayRunner

    d.mkdir(parents=True)
    db = str(d / "replay.db")
    graph = react_graph(turns, checkpointer=ReplayCheckpointer(db_path=db))
    graph.invoke(react_inputs(0), _config(2 * turns + 1, thread="t-1", callbacks=[ReplayCallbackHandler(db)]))

    def go() -> str:
        report = ReplayRunner(db, react_graph(turns, checkpointer=ReplayCheckpointer(db_path=db))).replay("t-1", mode="deterministic")
        if report.error or not report.passed:
            raise RuntimeError(report.error or report.summary())
        return f"{report.total_steps} steps compared"

    return go


def _timewarp_replayer(turns: int, d: Path) -> Callable[[], str]:
    from timewarp import wrap
    from timewarp.bindings import bind_langgraph_playback
    from timewarp.replay import LangGraphReplayer
    from timewarp.store import LocalStore

    d.mkdir(parents=True)
    store = LocalStore(db_path=d / "timewarp.sqlite3", blobs_root=d / "blobs")
    handle = wrap(react_graph(turns, checkpointer=InMemorySaver()), project="bench", name="react", store=store)
    handle.invoke(react_inputs(0), config=_config(2 * turns + 1, thread="t-1"))
    run_id = handle.last_run_id

    def go() -> str:
        graph = react_graph(turns, checkpointer=InMemorySaver())
        teardown: list[Callable[[], None]] = []
        try:
            LangGraphReplayer(graph=graph, store=store).resume(run_id, None, "t-1", install_wrappers=lambda llm, tool, mem: teardown.append(bind_langgraph_playback(graph, llm, tool, mem)))
        finally:
            for t in teardown:
                t()
        return "resumed with recorded outputs"

    return go


def print_replay(results: list[ReplayResult], steps: int) -> dict[str, float]:
    print(f"\nStrict replay of a {steps}-superstep create_react_agent run ({react_turns(steps)} model+tool turns), medians")
    print(f"  {'tool':<20} {'CPU ms':>8} {'wall ms':>8} {'×bare':>6}  notes")
    bare = next((statistics.median(r.cpu) for r in results if r.name == BARE and r.cpu), None)
    out = {}
    for r in results:
        if r.error or not r.cpu:
            print(f"  {r.name:<20} {'FAILED':>8}  {r.error}")
            continue
        cpu, wall = statistics.median(r.cpu) * 1e3, statistics.median(r.wall) * 1e3
        out[r.name] = cpu
        ratio = f"{cpu / (bare * 1e3):>6.2f}" if bare else f"{'':>6}"
        print(f"  {r.name:<20} {cpu:>8.0f} {wall:>8.0f} {ratio}  {r.note}")
    return out


def session_section(steps: int, runs: int, tmp: Path) -> None:
    """Replays back to back, as one pytest session runs fixture tests: no collection is forced
    between them, so the garbage collector's pauses fall where they fall (means, pauses included)."""
    from graphtape.replay import gc_threshold

    turns = react_turns(steps)
    fixture_test = _gt_fixture_test(turns, tmp / "fixture")
    rewind = _rewind_replayer(turns, tmp / "rewind")
    default = gc_threshold.YOUNG_THRESHOLD

    def with_default_threshold() -> str:
        gc_threshold.YOUNG_THRESHOLD = gc.get_threshold()[0]  # the raise becomes a no-op
        try:
            return fixture_test()
        finally:
            gc_threshold.YOUNG_THRESHOLD = default

    setups = [
        ("graphtape fixture test", fixture_test),
        ("  same, Python's GC threshold", with_default_threshold),
        ("agent-rewind", rewind),
        (BARE, _bare_runner(turns)),
    ]
    paused = {"on": False, "since": 0.0, "total": 0.0}

    def watch(phase: str, _info: dict) -> None:
        if phase == "start":
            paused["since"] = time.perf_counter()
        elif paused["on"]:
            paused["total"] += time.perf_counter() - paused["since"]

    cpu: dict[str, float] = {name: 0.0 for name, _ in setups}
    gc_s: dict[str, float] = {name: 0.0 for name, _ in setups}
    for _, go in setups:
        go()  # warm-up
    gc.collect()
    gc.callbacks.append(watch)
    try:
        rounds = 4
        for _ in range(rounds):
            for name, go in setups:
                paused["total"], paused["on"] = 0.0, True
                c0 = time.process_time()
                for _ in range(runs // rounds):
                    go()
                cpu[name] += time.process_time() - c0
                gc_s[name] += paused["total"]
                paused["on"] = False
    finally:
        gc.callbacks.remove(watch)
    n = rounds * (runs // rounds)
    print(f"\n{n} strict replays of the {steps}-superstep run back to back, as one test session runs them (no collection forced; means)")
    print(f"  {'':<30} {'CPU ms':>8} {'of it GC':>9}")
    for name, _ in setups:
        print(f"  {name:<30} {cpu[name] / n * 1e3:>8.0f} {gc_s[name] / n * 1e3:>9.1f}")


# ---------------------------------------------------------------------------
# Part 3: listing 1,000 runs, whole process
# ---------------------------------------------------------------------------


def cli_section(runs: int, reps: int, tmp: Path) -> float | None:
    """graphtape ÷ reeltime, wall, the median of pair-by-pair ratios (None if a command failed)."""
    import reeltime as tape

    gt_db = tmp / "cli-gt.db"
    graph_builder = build(IntState, _int_node)
    with Recorder(gt_db) as rec:
        g = rec.attach(graph_builder.compile(), name="cli")
        for _ in range(runs):
            g.invoke(int_inputs(3), _config(3))
    reel_dir = tmp / "cli-reel"
    (reel_dir).mkdir()
    react = react_graph(1, provider=tape.wrap(provider_reply, name="llm"), tool_fn=tape.tool(lookup))
    for _ in range(runs):
        with tape.session(tape_dir=str(reel_dir / ".tape")):
            react.invoke(react_inputs(0), _config(5, callbacks=[tape.langchain.handler()]))
    bin_dir = Path(sys.executable).parent
    gt_cmd = [str(bin_dir / "graphtape"), "runs", "--db", str(gt_db)]
    reel_cmd = [str(bin_dir / "tape"), "ls"]
    # Both commands as installed tools run: from bytecode caches, which the untimed first round
    # writes (into one temporary folder, for both). A wheel's files are compiled at install; an
    # editable checkout under PYTHONDONTWRITEBYTECODE would compile every module on every run.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(COLUMNS="120", PYTHONPYCACHEPREFIX=str(tmp / "pycache"))
    times: dict[str, list[tuple[float, float]]] = {"graphtape runs": [], "reeltime tape ls": []}
    for rep in range(reps + 1):
        for name, cmd, cwd in (("graphtape runs", gt_cmd, tmp), ("reeltime tape ls", reel_cmd, reel_dir)):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            w0 = time.perf_counter()
            done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
            wall = time.perf_counter() - w0
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if done.returncode != 0:
                print(f"  {name} failed: {done.stderr.strip().splitlines()[-1:]}")
                return None
            if rep:
                times[name].append((after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, wall))
    print(f"\nListing {runs} runs, whole process (each command {reps}×, alternated, both from bytecode caches), medians")
    med = {}
    for name, ts in times.items():
        cpu, wall = statistics.median(t[0] for t in ts), statistics.median(t[1] for t in ts)
        med[name] = wall
        print(f"  {name:<18} CPU {cpu:6.3f} s   wall {wall:6.3f} s")
    ratios = [a[1] / b[1] for a, b in zip(times["graphtape runs"], times["reeltime tape ls"])]
    print(f"  graphtape ÷ reeltime, pair by pair (wall): median {statistics.median(ratios):.2f}×")
    return statistics.median(ratios)


# ---------------------------------------------------------------------------
# Part 4: storage
# ---------------------------------------------------------------------------


def _file_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


def _gt_bytes(path: Path, prefill: int, steps: int, fixed_ids: bool = False) -> tuple[int, dict[str, int]]:
    """Record one growing-message run; ``fixed_ids`` gives every message an id of its own
    (as a scripted model's replies have), where otherwise add_messages draws random ones."""
    rec = Recorder(path)
    g = rec.attach(build(MsgState, _fixed_id_msg_node if fixed_ids else _msg_node).compile())
    inputs = msg_inputs(steps, prefill)
    if fixed_ids:
        inputs["messages"] = [m.model_copy(update={"id": f"in-{i}"}) for i, m in enumerate(inputs["messages"])]
    g.invoke(inputs, _config(steps, thread="t"))
    rec.close()
    return _file_bytes(path), table_bytes(path)


def _fixed_id_msg_node(state: Any) -> dict:
    out = _msg_node(state)
    out["messages"][0].id = f"m-{state['n']}"
    return out


def _recorded_content(path: Path) -> tuple[dict, list]:
    """Every blob, and every step row without what must differ between identical runs: the run's
    id, LangGraph's checkpoint and task ids, and times (task start offsets and durations)."""
    import zlib

    conn = sqlite3.connect(str(path))
    try:
        blobs = dict(conn.execute("SELECT hash, data FROM blobs"))
        steps = []
        for row in conn.execute("SELECT ns, seq, step, source, is_key, nodes, writes, summary, flags, payload FROM steps ORDER BY seq"):
            data = row[-1]
            payload = json.loads(zlib.decompress(data[1:]) if data[:1] == b"z" else data[1:])
            for task in payload.get("t", []):
                for key in ("id", "dt", "ms"):
                    task.pop(key, None)
            steps.append((row[:-1], payload))
        return blobs, steps
    finally:
        conn.close()


def storage_section(prefill: int, k: int, tmp: Path) -> float:
    import bench_recorder

    sizes = {}
    for steps in (k, 2 * k):
        sizes[steps] = _gt_bytes(tmp / f"bytes-{steps}.db", prefill, steps)
    per_step = (sizes[2 * k][0] - sizes[k][0]) / k
    lite_k = 30
    lite = [bench_recorder.sqlite_saver_bytes(build(MsgState, _msg_node), tmp / f"lite-{n}.sqlite", prefill, n) for n in (lite_k, 2 * lite_k)]
    lite_per_step = (lite[1] - lite[0]) / lite_k
    # Identical runs store identical bytes: the same inputs (same texts, fresh message objects), twice.
    bench_recorder._off_counter = 0
    again_a = _gt_bytes(tmp / "same-a.db", prefill, k)
    bench_recorder._off_counter = 0
    again_b = _gt_bytes(tmp / "same-b.db", prefill, k)
    print(f"\nStorage at {prefill} messages (growth from {k} to {2 * k} supersteps ÷ {k})")
    print(f"  graphtape       {per_step:8.0f} B/superstep")
    print(f"  SqliteSaver     {lite_per_step / 1024:8.1f} KiB/superstep  (from {lite_k} to {2 * lite_k})")
    same = again_a == again_b
    print(f"  two identical {k}-superstep runs: {again_a[0]} and {again_b[0]} bytes; tables {'identical' if same else 'DIFFER: ' + str({t: (again_a[1].get(t), again_b[1].get(t)) for t in set(again_a[1]) | set(again_b[1]) if again_a[1].get(t) != again_b[1].get(t)})}")
    print("    (random message ids: add_messages draws them, and they are part of each message's blob)")
    # The same with every message id fixed, as a scripted model's replies have them: the content.
    fixed = []
    for name in ("fixed-a.db", "fixed-b.db"):
        bench_recorder._off_counter = 0
        fixed.append((_gt_bytes(tmp / name, prefill, k, fixed_ids=True), _recorded_content(tmp / name)))
    (size_a, _), (blobs_a, steps_a) = fixed[0]
    (size_b, _), (blobs_b, steps_b) = fixed[1]
    print(
        f"  the same with fixed message ids: {size_a} and {size_b} bytes; "
        f"blobs {'identical' if blobs_a == blobs_b else 'DIFFER'} ({len(blobs_a)}); "
        f"step rows {'identical' if steps_a == steps_b else 'DIFFER'} ({len(steps_a)}, frames, routes, writes, summaries; "
        "apart from the run id, LangGraph's checkpoint and task ids, and times)"
    )
    agent_storage(prefill, 10 if prefill < 1000 else 50, tmp)
    return per_step


def _agent_inputs(prefill: int) -> dict:
    """A history of ``prefill`` 200-character user messages, then the request."""
    history = [HumanMessage(content=f"earlier message {i} " + "y" * 180, id=f"h-{i}") for i in range(prefill)]
    return {"messages": [*history, HumanMessage(content="look everything up", id="ask")]}


def _agent_bytes(path: Path, prefill: int, turns: int, saver: bool) -> int:
    """File bytes after one create_react_agent run of ``turns`` tool turns, recorded by graphtape or kept by SqliteSaver."""
    config = {"configurable": {"thread_id": "t"}, "recursion_limit": 2 * turns + 20}
    if saver:
        checkpointer, conn = bench_sqlite_saver(path)
        react_graph(turns, checkpointer=checkpointer).invoke(_agent_inputs(prefill), config)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
    else:
        rec = Recorder(path)
        rec.attach(react_graph(turns)).invoke(_agent_inputs(prefill), config)
        rec.close()
    return _file_bytes(path)


def agent_storage(prefill: int, turns: int, tmp: Path) -> None:
    """Bytes per superstep of create_react_agent with a long history: every superstep's state,
    each tool's Send packet and each model prompt carry the whole history."""
    rows = []
    for label, saver in (("graphtape", False), ("SqliteSaver", True)):
        sizes = [_agent_bytes(tmp / f"agent-{label}-{prefill}-{n}.db", prefill, n, saver) for n in (turns, 2 * turns)]
        rows.append((label, (sizes[1] - sizes[0]) / (2 * turns)))  # two supersteps per tool turn
    print(f"\nStorage of create_react_agent at {prefill} messages (growth from {turns} to {2 * turns} tool turns ÷ {2 * turns} supersteps)")
    for label, per_step in rows:
        print(f"  {label:<15} {per_step:8.0f} B/superstep")
    print(f"  SqliteSaver ÷ graphtape: {rows[1][1] / max(rows[0][1], 1):.0f}×")


# ---------------------------------------------------------------------------
# The targets, against what LangGraph's own machinery reaches on the same measure
# ---------------------------------------------------------------------------


def print_targets(recording: dict[str, dict[str, float]], replay: dict[str, float], cli: float | None, storage: tuple[int, float] | None) -> None:
    """Each target of the performance issue: graphtape's figure, and beside it the same ratio for
    a setup that keeps nothing (the floor), so a target below what the floor reaches shows as such."""
    print("\nTargets (CPU medians from this run; 'floor' is LangGraph's own machinery with a saver and handler that keep nothing)")

    def line(ok: bool, what: str, figures: str) -> None:
        print(f"  [{'met' if ok else 'NOT MET':>7}] {what}: {figures}")

    for label, med in recording.items():
        gt, mem, floor, row = med.get("graphtape"), med.get("InMemorySaver"), med.get(FLOOR), med.get(FLOOR_ROW)
        if gt and mem and floor and row:
            line(gt <= mem, f"recording ≤ InMemorySaver, {label}", f"{gt / mem:.2f}× (the floor: {floor / mem:.2f}×, and with a row a step: {row / mem:.2f}×)")
            line(gt <= 1.15 * floor, f"recording ≤ 1.15× the floor, {label}", f"{gt / floor:.2f}× (the floor with a row a step: {row / floor:.2f}×)")
        sync, lite, mem_sync, floor_sync, commit = (med.get(k) for k in ("graphtape sync", "SqliteSaver sync", "InMemorySaver sync", FLOOR_SYNC, FLOOR_COMMIT))
        if sync and lite and mem_sync and floor_sync and commit:
            figures = f"{sync / lite:.2f}× (InMemorySaver sync: {mem_sync / lite:.2f}×, the sync floor: {floor_sync / lite:.2f}×, and with a commit a step: {commit / lite:.2f}×)"
            line(sync <= 0.5 * lite, f"sync ≤ 0.5× SqliteSaver sync, {label}", figures)
    for prefix, what in (("", "strict replay ≤ agent-rewind's"), ("short ", f"(no target) strict replay of a {SHORT_REPLAY_STEPS}-superstep run ≤ agent-rewind's")):
        gt, rewind, floor = replay.get(prefix + "graphtape"), replay.get(prefix + "agent-rewind"), replay.get(prefix + REPLAY_FLOOR)
        if gt and rewind and floor:
            line(gt <= rewind, what, f"{gt / rewind:.2f}× (the floor: {floor / rewind:.2f}×; recording the run live: {replay.get(prefix + GT_RECORDING, 0) / rewind:.2f}×)")
    if cli is not None:
        line(cli <= 1.0, "`graphtape runs` ≤ reeltime's `tape ls` (wall, pair by pair)", f"{cli:.2f}×")
    if storage is not None:
        prefill, per_step = storage
        line(per_step <= 1024, f"storage ≤ 1 KB per superstep at {prefill:,} messages", f"{per_step:.0f} B")


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:160] if text else ''}"


def _loop_shape(label: str, state: type, node: Callable[[Any], dict], inputs: Callable[[int], Any], steps: int, runs: int = 1) -> Shape:
    b = build(state, node)
    steps = round_steps(steps)

    def graph(checkpointer: Any = None, provider: Any = None, tool_fn: Any = None) -> Any:
        return b.compile(checkpointer=checkpointer)

    return Shape(label, graph, inputs, steps, lambda out: out["n"] == steps, runs=runs)


def _int_shape(steps: int) -> Shape:
    return _loop_shape("3-node loop, int state", IntState, _int_node, int_inputs, steps)


def _short_shape(steps: int) -> Shape:
    """Short runs, as most agent runs are: what each run costs on top of its supersteps
    (opening and ending it, making it durable) weighs as much as the supersteps themselves."""
    short = round_steps(6)
    return _loop_shape("short runs, int state", IntState, _int_node, int_inputs, short, runs=max(5, steps // short))


def _msg_shape(steps: int) -> Shape:
    return _loop_shape("growing message list", MsgState, _msg_node, msg_inputs, steps)


def _react_shape(steps: int) -> Shape:
    turns = react_turns(steps)

    def graph(checkpointer: Any = None, provider: Any = provider_reply, tool_fn: Any = lookup) -> Any:
        return react_graph(turns, provider=provider, tool_fn=tool_fn, checkpointer=checkpointer)

    return Shape("create_react_agent", graph, react_inputs, 2 * turns + 1, lambda out: out["messages"][-1].content == f"all {turns} lookups done")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=None, help="timed repetitions (default 5; 2 with --quick)")
    ap.add_argument("--quick", action="store_true", help="smoke run: fewer steps, repetitions and runs")
    ap.add_argument("--only", choices=("recording", "replay", "cli", "storage"), action="append", help="run only these sections")
    args = ap.parse_args(argv)
    reps = args.reps or (2 if args.quick else 5)
    only = set(args.only or ("recording", "replay", "cli", "storage"))
    steps = 30 if args.quick else 150
    import langgraph.version as lgv
    from importlib.metadata import version

    print("graphtape against its peers (one process, one run)")
    print(f"  python {sys.version.split()[0]}, langgraph {getattr(lgv, '__version__', '?')}, {os.cpu_count()} CPUs, {reps} repetitions, medians")
    print("  " + ", ".join(f"{p} {_version(version, p)}" for p in ("graphtape", *PEERS)))
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="graphtape-peers-") as d, contextlib.chdir(d):
        tmp = Path(d)
        recording: dict[str, dict[str, float]] = {}
        replayed: dict[str, float] = {}
        cli = storage = None
        if "recording" in only:
            for make in (_int_shape, _short_shape, _msg_shape, _react_shape):
                shape = make(steps)
                setups, samples = time_shape(shape, reps, tmp / shape.label.replace(" ", "_").replace(",", ""))
                recording[shape.label] = print_recording(shape, setups, samples)
        if "replay" in only:
            replayed = print_replay(replay_section(101, reps, tmp / "replay-101"), 101)
            # A fixture test replays a short run: what a replay costs besides the run itself.
            short = print_replay(replay_section(SHORT_REPLAY_STEPS, reps * 4, tmp / "replay-short"), SHORT_REPLAY_STEPS)
            replayed.update({f"short {k}": v for k, v in short.items()})
            session_section(101, 8 if args.quick else 40, tmp / "replay-session")
        if "cli" in only:
            cli = cli_section(100 if args.quick else 1000, reps, tmp)
        if "storage" in only:
            prefill = 100 if args.quick else 1000
            storage = (prefill, storage_section(prefill, 30 if args.quick else 258, tmp))
        print_targets(recording, replayed, cli, storage)
    print(f"\n  total {time.perf_counter() - started:.0f} s")
    return 0


def _version(version: Callable[[str], str], dist: str) -> str:
    try:
        return version(dist)
    except Exception:  # noqa: BLE001
        return "not installed"


if __name__ == "__main__":
    try:
        main()
    except Exception as exc:  # noqa: BLE001 - a report: say what failed, still exit 0
        traceback.print_exc()
        print(f"\nbenchmark failed: {type(exc).__name__}: {exc}", file=sys.stderr)
    sys.exit(0)
