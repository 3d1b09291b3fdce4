"""Recorder overhead against LangGraph's own checkpointers, in one process.

Two measurements, both printed as tables with a final "targets" check:

1. Time. A three-node loop (a -> b -> c -> router -> a | END) runs ~200
   supersteps, once with an int-only state and once with an ``add_messages``
   list that grows by one 200-character message per superstep. Each setup is
   timed per superstep: no checkpointer (the baseline), InMemorySaver,
   SqliteSaver, graphtape with its default background writer, and graphtape
   with ``durability="sync"``. The headline figure is the graph's wall time
   (``invoke``); graphtape's time until ``flush()`` returns is shown beside it.
2. Bytes. The growing-message graph starts from 10, 100 and 1000 prefilled
   messages; bytes on disk per superstep for SqliteSaver and graphtape are the
   growth of the database between a run of K and a run of 2K supersteps.

Usage::

    .venv/bin/python benchmarks/bench_recorder.py            # full run, 5 reps
    .venv/bin/python benchmarks/bench_recorder.py --reps 9
    .venv/bin/python benchmarks/bench_recorder.py --quick    # smoke run, seconds

The script is a report: it always exits 0.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import random
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.callbacks import BaseCallbackHandler
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from graphtape.recorder import Recorder
from graphtape.recorder import frames as _frames  # only to report whether K spans a keyframe interval

MESSAGE_CHARS = 200
KB = 1024

# ---------------------------------------------------------------------------
# Message text: words from a fixed vocabulary, Zipf-weighted, seeded
# ---------------------------------------------------------------------------

_VOCAB = """
the of and to a in is that for it as with was on be by this are or from at an not which have
has but they their you can will more one all were been we would there also if its other into
when so what about some these than only time any new may after them two most could over such
first through should then between where each those because both many being under while same
order state step graph node agent tool model call result value error retry search query answer
question context document source page user assistant system message token prompt response
database table index record file path config option version schema run thread checkpoint memory
plan task goal check verify summary report data input output function return list item key
weather forecast city temperature price stock market account invoice customer ticket issue
refund shipping address payment card balance transfer request approval review deadline meeting
calendar email reply draft note project team budget estimate risk release deploy build test
please thanks sure here let me look into that found three results below based on information
provided latest update yesterday today tomorrow morning evening week month year number total
""".split()


def make_texts(count: int, seed: int = 1234) -> list[str]:
    """``count`` distinct-looking 200-character texts, reproducible from ``seed``."""
    rng = random.Random(seed)
    weights = [1.0 / (rank + 1) for rank in range(len(_VOCAB))]  # Zipf-like word frequencies
    texts = []
    for _ in range(count):
        words: list[str] = []
        length = 0
        while length < MESSAGE_CHARS:
            w = rng.choices(_VOCAB, weights)[0]
            if not words:
                w = w.capitalize()
            words.append(w)
            length += len(w) + 1
            if rng.random() < 0.08:
                words[-1] += rng.choice(".,;?")
        texts.append(" ".join(words)[:MESSAGE_CHARS])
    return texts


TEXTS = make_texts(4096)


def message(i: int, text: str) -> AnyMessage:
    """Human and AI messages alternate."""
    return HumanMessage(content=text) if i % 2 == 0 else AIMessage(content=text)


# ---------------------------------------------------------------------------
# The graphs
# ---------------------------------------------------------------------------


class IntState(TypedDict):
    n: int
    limit: int
    total: int


class MsgState(TypedDict):
    n: int
    limit: int
    off: int
    messages: Annotated[list[AnyMessage], add_messages]


def _int_node(state: IntState) -> dict:
    return {"n": state["n"] + 1, "total": state["total"] + state["n"]}


def _msg_node(state: MsgState) -> dict:
    n = state["n"]
    return {"n": n + 1, "messages": [message(n, TEXTS[(state["off"] + n) % len(TEXTS)])]}


def _router(state: dict) -> str:
    return "again" if state["n"] < state["limit"] else "done"


def build(state_cls: type, node: Callable[[Any], dict]) -> StateGraph:
    """a -> b -> c -> router -> (a | END): one node per superstep."""
    g = StateGraph(state_cls)
    for name in ("a", "b", "c"):
        g.add_node(name, node)
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", "c")
    g.add_conditional_edges("c", _router, {"again": "a", "done": END})
    return g


def round_steps(steps: int) -> int:
    """The router sits after ``c``, so a run is a multiple of three supersteps."""
    return max(3, -(-steps // 3) * 3)


_off_counter = 0


def int_inputs(steps: int, prefill: int = 0) -> dict:
    return {"n": 0, "limit": steps, "total": 0}


def msg_inputs(steps: int, prefill: int = 0) -> dict:
    """Fresh message objects with fresh ids each call, and fresh text per run (no cross-run dedup)."""
    global _off_counter
    _off_counter += 1
    off = (_off_counter * 997) % len(TEXTS)
    msgs = [message(i, TEXTS[(off + 2000 + i) % len(TEXTS)]).model_copy(update={"id": str(uuid.uuid4())}) for i in range(prefill)]
    return {"n": 0, "limit": steps, "off": off, "messages": msgs}


# ---------------------------------------------------------------------------
# Setups under test
# ---------------------------------------------------------------------------


@dataclass
class Setup:
    """One way of running the graph; ``run`` returns (invoke seconds, seconds until durable)."""

    name: str
    graph: Any
    recorder: Recorder | None = None
    invoke_kwargs: dict | None = None
    close: Callable[[], None] | None = None
    callbacks: list | None = None

    def run(self, inputs: dict, steps: int) -> tuple[float, float]:
        config = {"configurable": {"thread_id": f"bench-{uuid.uuid4().hex}"}, "recursion_limit": steps + 20}
        if self.callbacks:
            config["callbacks"] = self.callbacks
        t0 = time.perf_counter()
        out = self.graph.invoke(inputs, config, **(self.invoke_kwargs or {}))
        t1 = time.perf_counter()
        if self.recorder is not None:
            if not self.recorder.flush(timeout=120):
                raise RuntimeError(f"{self.name}: flush timed out")
        t2 = time.perf_counter()
        if out["n"] != steps:
            raise RuntimeError(f"{self.name}: ran {out['n']} supersteps, expected {steps}")
        return t1 - t0, t2 - t0


class _NoopHandler(BaseCallbackHandler):
    run_inline = True


def sqlite_saver(path: Path) -> tuple[SqliteSaver, sqlite3.Connection]:
    conn = sqlite3.connect(str(path), check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    return saver, conn


def make_setups(builder: StateGraph, tmp: Path, tag: str) -> list[Setup]:
    setups = [Setup("no checkpointer", builder.compile()), Setup("InMemorySaver", builder.compile(checkpointer=InMemorySaver()))]
    # Reference: what LangChain's callback machinery alone costs with one handler that
    # does nothing; graphtape needs a handler to see tools, models and routers.
    setups.append(Setup("empty callback handler", builder.compile(), callbacks=[_NoopHandler()]))
    saver, conn = sqlite_saver(tmp / f"lg-{tag}.sqlite")
    lg_sqlite = builder.compile(checkpointer=saver)
    setups.append(Setup("SqliteSaver", lg_sqlite, close=conn.close))
    setups.append(Setup("SqliteSaver sync", lg_sqlite, invoke_kwargs={"durability": "sync"}))
    rec = Recorder(tmp / f"gt-async-{tag}.db")
    setups.append(Setup("graphtape (async)", rec.attach(builder.compile()), recorder=rec, close=rec.close))
    rec_sync = Recorder(tmp / f"gt-sync-{tag}.db", durability="sync")
    setups.append(Setup("graphtape sync", rec_sync.attach(builder.compile()), recorder=rec_sync, close=rec_sync.close))
    return setups


# ---------------------------------------------------------------------------
# Part 1: time per superstep
# ---------------------------------------------------------------------------


@dataclass
class Timing:
    name: str
    invoke_us: float  # median µs per superstep, graph wall time
    durable_us: float  # median µs per superstep until flush() returned
    spread: float  # (max - min) / median of invoke times, a noise indicator


def time_graph(label: str, builder: StateGraph, inputs: Callable[[int], dict], steps: int, reps: int, tmp: Path) -> list[Timing]:
    """Interleave setups within each repetition, so drift hits them all alike."""
    setups = make_setups(builder, tmp, label)
    samples: dict[str, list[tuple[float, float]]] = {s.name: [] for s in setups}
    try:
        for s in setups:  # warm-up: imports, caches, schema creation
            s.run(inputs(steps), steps)
        for rep in range(reps):
            order = setups if rep % 2 == 0 else list(reversed(setups))
            for s in order:
                inp = inputs(steps)
                gc.collect()
                samples[s.name].append(s.run(inp, steps))
            print(f"  {label}: repetition {rep + 1}/{reps} done", file=sys.stderr, flush=True)
    finally:
        for s in setups:
            if s.close is not None:
                s.close()
    out = []
    for s in setups:
        inv = [a for a, _ in samples[s.name]]
        dur = [b for _, b in samples[s.name]]
        med = statistics.median(inv)
        out.append(Timing(s.name, med / steps * 1e6, statistics.median(dur) / steps * 1e6, (max(inv) - min(inv)) / med))
    return out


def print_timing(title: str, rows: list[Timing]) -> None:
    base = next(r for r in rows if r.name == "no checkpointer").invoke_us
    mem = next(r for r in rows if r.name == "InMemorySaver").invoke_us
    print(f"\n{title}")
    head = f"  {'setup':<20} {'µs/step':>9} {'incl. flush':>12} {'× none':>8} {'× InMemory':>11} {'spread':>7}"
    print(head)
    print("  " + "-" * (len(head) - 2))
    for r in rows:
        flush = f"{r.durable_us:>12.1f}" if r.name.startswith("graphtape") else f"{'':>12}"
        print(f"  {r.name:<20} {r.invoke_us:>9.1f} {flush} {r.invoke_us / base:>8.2f} {r.invoke_us / mem:>11.2f} {r.spread:>6.0%}")


# ---------------------------------------------------------------------------
# Part 2: bytes per superstep
# ---------------------------------------------------------------------------


def file_bytes(path: Path) -> int:
    """The database file plus any WAL left beside it."""
    total = 0
    for p in (path, Path(str(path) + "-wal")):
        if p.exists():
            total += p.stat().st_size
    return total


def sqlite_saver_bytes(builder: StateGraph, path: Path, prefill: int, steps: int) -> int:
    saver, conn = sqlite_saver(path)
    g = builder.compile(checkpointer=saver)
    g.invoke(msg_inputs(steps, prefill), {"configurable": {"thread_id": "t"}, "recursion_limit": steps + 20})
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return file_bytes(path)


def graphtape_bytes(builder: StateGraph, path: Path, prefill: int, steps: int) -> tuple[int, dict[str, int]]:
    rec = Recorder(path)
    g = rec.attach(builder.compile())
    g.invoke(msg_inputs(steps, prefill), {"configurable": {"thread_id": "t"}, "recursion_limit": steps + 20})
    rec.close()  # flushes; the last connection closing checkpoints the WAL into the file
    return file_bytes(path), table_bytes(path)


def table_bytes(path: Path) -> dict[str, int]:
    """Bytes of pages used by each table and index (SQLite's dbstat), for the breakdown."""
    conn = sqlite3.connect(str(path))
    try:
        rows = conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name").fetchall()
    except sqlite3.OperationalError:
        rows = []
    finally:
        conn.close()
    return {name: size for name, size in rows}


@dataclass
class Bytes:
    prefill: int
    sqlite_per_step: float
    graphtape_per_step: float
    graphtape_tables: dict[str, float]


def measure_bytes(prefills: list[int], k: int, tmp: Path) -> list[Bytes]:
    builder = build(MsgState, _msg_node)
    out = []
    for prefill in prefills:
        sizes = {}
        tables = {}
        for steps in (k, 2 * k):
            sizes["sqlite", steps] = sqlite_saver_bytes(builder, tmp / f"bytes-lg-{prefill}-{steps}.sqlite", prefill, steps)
            sizes["gt", steps], tables[steps] = graphtape_bytes(builder, tmp / f"bytes-gt-{prefill}-{steps}.db", prefill, steps)
        names = set(tables[k]) | set(tables[2 * k])
        per_table = {n: (tables[2 * k].get(n, 0) - tables[k].get(n, 0)) / k for n in names}
        out.append(
            Bytes(
                prefill,
                (sizes["sqlite", 2 * k] - sizes["sqlite", k]) / k,
                (sizes["gt", 2 * k] - sizes["gt", k]) / k,
                per_table,
            )
        )
        print(f"  bytes: prefill {prefill} done", file=sys.stderr, flush=True)
    return out


def print_bytes(rows: list[Bytes], k: int) -> None:
    print(f"\nBytes on disk per superstep (growing messages, prefilled; growth from {k} to {2 * k} supersteps ÷ {k})")
    head = f"  {'prefilled msgs':>14} {'SqliteSaver':>12} {'graphtape':>11} {'gt ÷ sqlite':>12}"
    print(head)
    print("  " + "-" * (len(head) - 2))
    for r in rows:
        print(f"  {r.prefill:>14} {_b(r.sqlite_per_step):>12} {_b(r.graphtape_per_step):>11} {r.graphtape_per_step / r.sqlite_per_step:>12.3f}")
    print("\n  graphtape bytes per superstep by table/index (dbstat pages, same K→2K difference):")
    names = sorted({n for r in rows for n in r.graphtape_tables if abs(r.graphtape_tables[n]) >= 0.5})
    print("  " + f"{'prefilled msgs':>14} " + " ".join(f"{n[:18]:>18}" for n in names))
    for r in rows:
        print("  " + f"{r.prefill:>14} " + " ".join(f"{_b(r.graphtape_tables.get(n, 0)):>18}" for n in names))
    print(
        "\n  Method: each figure is (size after a 2K-superstep run − size after a K-superstep run) ÷ K, each run"
        "\n  into its own fresh database, sizes taken after close (WAL checkpointed; -wal counted if left). The"
        "\n  difference cancels the fixed costs (schema, the run row, the prefilled input, the first checkpoint),"
        "\n  leaving the steady per-superstep cost. File sizes move in whole pages, so expect ±(page size ÷ K)."
    )
    chain = getattr(_frames, "MAX_CHAIN", None)
    if chain:
        covered = "spans" if k >= chain else "does NOT span (figures exclude most keyframe cost)"
        print(f"  K = {k} {covered} graphtape's longest delta chain ({chain} steps), so its periodic keyframes are amortised in.")


def _b(n: float) -> str:
    if abs(n) >= 10 * KB:
        return f"{n / KB:.1f} KiB"
    return f"{n:.0f} B"


# ---------------------------------------------------------------------------
# Targets
# ---------------------------------------------------------------------------


def print_targets(timings: dict[str, list[Timing]], sizes: list[Bytes]) -> None:
    print("\nTargets")
    for label, rows in timings.items():
        by = {r.name: r for r in rows}
        gt, mem = by["graphtape (async)"], by["InMemorySaver"]
        ratio = gt.invoke_us / mem.invoke_us
        _target(ratio <= 1.0, f"graphtape default ≤ 1.0× InMemorySaver [{label}]", f"{gt.invoke_us:.0f} vs {mem.invoke_us:.0f} µs/step = {ratio:.2f}×")
    for label, rows in timings.items():
        by = {r.name: r for r in rows}
        gs, sq = by["graphtape sync"], by["SqliteSaver"]
        ratio = gs.invoke_us / sq.invoke_us
        _target(ratio <= 0.5, f"graphtape sync ≤ 0.5× SqliteSaver [{label}]", f"{gs.invoke_us:.0f} vs {sq.invoke_us:.0f} µs/step = {ratio:.2f}×")
    big = max(sizes, key=lambda r: r.prefill)
    _target(
        big.graphtape_per_step <= KB,
        f"graphtape ≤ 1 KiB/superstep at {big.prefill} messages",
        f"{big.graphtape_per_step:.0f} B/step (SqliteSaver {_b(big.sqlite_per_step)}/step)",
    )


def _target(ok: bool, what: str, figures: str) -> None:
    print(f"  {'PASS' if ok else 'MISS'}  {what:<56} {figures}")


# ---------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=None, help="timed repetitions per setup (default 5; 3 with --quick)")
    parser.add_argument("--steps", type=int, default=None, help="supersteps per timed run (default 200, rounded up to a multiple of 3)")
    parser.add_argument("--quick", action="store_true", help="smoke run: fewer steps and repetitions, smaller byte runs")
    args = parser.parse_args(argv)
    reps = args.reps or (3 if args.quick else 5)
    steps = round_steps(args.steps or (30 if args.quick else 200))
    from graphtape.recorder.frames import MAX_CHAIN  # noqa: PLC0415

    # K spans the longest delta chain, so keyframes are amortised into the figure.
    k = round_steps(30 if args.quick else MAX_CHAIN + 1)
    prefills = [10, 100, 1000]

    import langgraph.version as lgv  # noqa: PLC0415 - only for the header

    print("graphtape recorder benchmark")
    print(f"  python {platform.python_version()}, langgraph {getattr(lgv, '__version__', '?')}, sqlite {sqlite3.sqlite_version}, {os.cpu_count()} CPUs")
    print(f"  {steps} supersteps per timed run (a→b→c→router loop), {reps} repetitions, medians; one warm-up run per setup")
    print(f"  messages: {MESSAGE_CHARS} chars, Human/AI alternating, Zipf-weighted words from a {len(_VOCAB)}-word vocabulary (seeded)")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="graphtape-bench-") as d:
        tmp = Path(d)
        timings = {
            "int state": time_graph("int", build(IntState, _int_node), int_inputs, steps, reps, tmp),
            "growing messages": time_graph("msgs", build(MsgState, _msg_node), msg_inputs, steps, reps, tmp),
        }
        sizes = measure_bytes(prefills, k, tmp)
    for label, rows in timings.items():
        print_timing(f"Time per superstep, {label} ({steps} supersteps; ratios on the invoke figure)", rows)
    print(
        "\n  µs/step = the graph's wall time (invoke) ÷ supersteps. 'incl. flush' adds the wait until graphtape's"
        "\n  background writer has committed everything. LangGraph's savers run with their default durability"
        "\n  (async, but invoke waits for the last put); 'SqliteSaver sync' is durability='sync', for reference."
        "\n  spread = (max − min) ÷ median over the repetitions."
    )
    print_bytes(sizes, k)
    print_targets(timings, sizes)
    print(f"\n  total benchmark time {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    try:
        main()
    except Exception as exc:  # noqa: BLE001 - a report: say what failed, still exit 0
        import traceback

        traceback.print_exc()
        print(f"\nbenchmark failed: {type(exc).__name__}: {exc}", file=sys.stderr)
    sys.exit(0)
