"""The store at scale: listing and filtering 100,000 runs, and recording with several writers.

Two measurements, SQLite and PostgreSQL side by side:

1. Listing. A store is filled with N synthetic runs (default 100,000; a few
   steps, a model call and tool calls each) through ``store.write`` in large
   batches, so the facet triggers fire as they do when recording. Each query
   of ``graphtape runs`` (the newest 50, by status, name, tag, tool, node,
   error text, free text, and ``count_runs``) is timed ``--reps`` times; the
   table shows the median and its ratio to the unfiltered listing measured in
   the same run. Common filters match a large share of the runs, rare ones a
   handful, so both ends of each index are exercised.
2. Recording. W writers (processes, each with its own ``Recorder``) record
   runs of a small real graph (three nodes, one tool call) into one store for
   a fixed number of runs each; throughput in runs/s, and PostgreSQL's ratio
   to SQLite at the same W.

Usage::

    .venv/bin/python benchmarks/bench_store.py               # 100,000 runs, both backends
    .venv/bin/python benchmarks/bench_store.py --runs 20000 --reps 5
    .venv/bin/python benchmarks/bench_store.py --quick       # smoke run, seconds
    .venv/bin/python benchmarks/bench_store.py --no-pg       # SQLite only

PostgreSQL comes from ``GRAPHTAPE_BENCH_PG_URL`` (default: the local test
server); the benchmark runs in a throwaway schema and drops it. The script
is a report: it always exits 0.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from graphtape.recorder.store import Batch, SqlStore, pack  # noqa: E402

PG_DEFAULT = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
LIMIT = 50

GRAPHS = [f"agent-{i:02d}" for i in range(20)]
NODES = ["__start__", "plan", "retrieve", "reason", "act", "answer"]
RARE_NODE = "escalate"  # runs in 1 of 1,000 runs
TOOLS = [f"tool_{i:02d}" for i in range(30)]
RARE_TOOL = "wire_transfer"  # called in 1 of 2,000 runs
ERRORS = ["TimeoutError: upstream took too long", "ValueError: bad order id", "KeyError: 'customer'", "RateLimitError: slow down"]
RARE_ERROR = "certificate verify failed"  # 1 of 5,000 runs


# ---------------------------------------------------------------------------
# Synthetic runs
# ---------------------------------------------------------------------------


def synthetic_batches(n: int, *, seed: int = 7, chunk: int = 2000, steps_per_run: int = 4, t0: float | None = None) -> Iterator[Batch]:
    """``n`` finished runs in batches of ``chunk``, shaped like recorded ones (wide rows included).

    Deterministic for a seed; also used by tests/test_store_scale.py with a small ``n``.
    """
    rng = random.Random(seed)
    start = (t0 if t0 is not None else time.time()) - n * 10.0
    graph_json = orjson.dumps({"name": "agent", "nodes": NODES[1:], "edges": [{"source": a, "target": b} for a, b in zip(NODES, NODES[1:])]}).decode()
    config_json = orjson.dumps({"configurable": {"thread_id": "t"}, "recursion_limit": 25, "metadata": {"team": "support"}}).decode()
    payload = pack({"t": [], "r": [], "e": [], "s": {"v": {"question": "where is my order?" * 4}, "cv": {}, "vs": {}}})
    batch = Batch()
    for i in range(n):
        run_id = f"{i:016x}"
        t = start + i * 10.0 + rng.random()
        roll = rng.random()
        status = "ok" if roll < 0.85 else "error" if roll < 0.95 else "interrupted"
        error = None
        if status == "error":
            error = RARE_ERROR if i % 5000 == 17 else rng.choice(ERRORS)
        tags = ["env:prod" if rng.random() < 0.7 else "env:dev", f"user:{rng.randrange(1000)}"]
        if i % 1000 == 3:
            tags.append("vip")
        batch.runs_new.append(
            {
                "id": run_id,
                "name": rng.choice(GRAPHS),
                "graph_name": "agent",
                "thread_id": f"thread-{i}",
                "status": status,
                "error_type": error.split(":")[0] if error else None,
                "error_message": error,
                "started_at": t,
                "ended_at": t + 2.5,
                "heartbeat_at": t + 2.5,
                "inputs": orjson.dumps({"question": f"order {i} has not arrived"}).decode(),
                "config": config_json,
                "graph": graph_json,
                "versions": '{"langgraph": "1.0"}',
                "tags": orjson.dumps(tags).decode(),
                "step_count": steps_per_run,
                "owner_host": "bench",
                "owner_pid": 1,
                "durability": "async",
            }
        )
        nodes = list(NODES[: steps_per_run])
        if i % 1000 == 11:
            nodes[-1] = RARE_NODE
        for seq, node in enumerate(nodes, 1):
            batch.steps.append(
                {
                    "run_id": run_id,
                    "ns": "",
                    "seq": seq,
                    "step": seq - 2,
                    "source": "loop",
                    "checkpoint_id": f"{run_id}-{seq}",
                    "created_at": t + seq * 0.1,
                    "is_key": seq == 1,
                    "nodes": "" if seq == 1 else node,
                    "writes": ",answer,",
                    "summary": "",
                    "flags": 0,
                    "payload": payload,
                }
            )
        tools = rng.sample(TOOLS, 2)
        if i % 2000 == 5:
            tools.append(RARE_TOOL)
        for k, tool in enumerate(["model", *tools]):
            batch.calls.append(
                {
                    "run_id": run_id,
                    "ns": "",
                    "step": 1 + k,
                    "node": "act",
                    "call_id": f"{run_id}-{k}",
                    "kind": "model" if tool == "model" else "tool",
                    "name": "chat-model" if tool == "model" else tool,
                    "inputs": '{"order_id": "A-1"}',
                    "output": '"ok"',
                    "started_at": t + k,
                    "latency_ms": 12.5,
                }
            )
        if len(batch.runs_new) >= chunk:
            yield batch
            batch = Batch()
    if batch:
        yield batch


def fill(store: SqlStore, n: int, **kwargs: Any) -> float:
    """Write ``n`` synthetic runs; returns the seconds it took."""
    t = time.perf_counter()
    for batch in synthetic_batches(n, **kwargs):
        store.write(batch)
    if not store.is_sqlite:
        with store.engine.begin() as conn:
            conn.exec_driver_sql("ANALYZE")
    return time.perf_counter() - t


QUERIES: list[tuple[str, dict[str, Any]]] = [
    ("newest 50 (baseline)", {}),
    ("status=error", {"status": "error"}),
    ("status=running (none)", {"status": "running"}),
    ("name exact", {"name": GRAPHS[3]}),
    ("name prefix agent-1*", {"name": "agent-1*"}),
    ("tag common env:prod", {"tag": "env:prod"}),
    ("tag rare vip", {"tag": "vip"}),
    ("tool common", {"tool": TOOLS[4]}),
    ("tool rare", {"tool": RARE_TOOL}),
    ("node common plan", {"node": "plan"}),
    ("node rare", {"node": RARE_NODE}),
    ("error text common", {"error": "timeout"}),
    ("error text rare", {"error": RARE_ERROR}),
    ("status=ok + tool + tag", {"status": "ok", "tool": TOOLS[4], "tag": "env:dev"}),
    ("free text (--search)", {"text": "agent-07"}),
]


def median_ms(fn: Callable[[], Any], reps: int) -> float:
    fn()  # warm the cache: the figure is a warm listing, as in the TUI
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def bench_listing(store: SqlStore, reps: int) -> dict[str, tuple[float, float, int]]:
    """Per query: (median ms to list 50, median ms to count, rows matched)."""
    out = {}
    for label, filters in QUERIES:
        lst = median_ms(lambda: store.list_runs(limit=LIMIT, **filters), reps)
        cnt = median_ms(lambda: store.count_runs(**filters), reps)
        out[label] = (lst, cnt, store.count_runs(**filters))
    return out


# ---------------------------------------------------------------------------
# Recording with several writers
# ---------------------------------------------------------------------------


def _small_graph() -> Any:
    from typing import TypedDict

    from langchain_core.tools import tool
    from langgraph.graph import END, START, StateGraph

    @tool
    def lookup(order_id: str) -> str:
        """Look an order up."""
        return f"order {order_id}: shipped"

    class State(TypedDict, total=False):
        order: str
        status: str
        answer: str

    def plan(state: State) -> dict:
        return {"order": state["order"].upper()}

    def act(state: State) -> dict:
        return {"status": lookup.invoke({"order_id": state["order"]})}

    def answer(state: State) -> dict:
        return {"answer": f"Your {state['status']}"}

    b = StateGraph(State)
    b.add_node("plan", plan)
    b.add_node("act", act)
    b.add_node("answer", answer)
    b.add_edge(START, "plan")
    b.add_edge("plan", "act")
    b.add_edge("act", "answer")
    b.add_edge("answer", END)
    return b.compile()


def _writer(url: str, runs: int, worker: int, ready: Any, go: Any, done: Any) -> None:
    from graphtape.recorder import Recorder

    rec = Recorder(url)
    graph = rec.attach(_small_graph(), name="bench:writers")
    graph.invoke({"order": "warmup"}, {"configurable": {"thread_id": f"w{worker}-warm"}})
    rec.flush()
    ready.put(worker)
    go.wait()
    t = time.perf_counter()
    for i in range(runs):
        graph.invoke({"order": f"a-{worker}-{i}"}, {"configurable": {"thread_id": f"w{worker}-{i}"}})
    rec.flush()
    done.put(time.perf_counter() - t)
    rec.close()


def bench_writers(url: str, writers: int, runs_each: int) -> float:
    """Runs per second with ``writers`` processes recording at once (start to last flush)."""
    ctx = mp.get_context("spawn")
    ready, done, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=_writer, args=(url, runs_each, w, ready, go, done)) for w in range(writers)]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get(timeout=120)
    t = time.perf_counter()
    go.set()
    for _ in procs:
        done.get(timeout=600)
    wall = time.perf_counter() - t
    for p in procs:
        p.join(timeout=60)
    return writers * runs_each / wall


# ---------------------------------------------------------------------------
# Backends
# ---------------------------------------------------------------------------


@contextmanager
def backend(name: str, pg_base: str) -> Iterator[str]:
    """A URL to a fresh empty store on ``name``, removed afterwards."""
    if name == "sqlite":
        with tempfile.TemporaryDirectory(prefix="gt-bench-store-") as d:
            yield str(Path(d) / "graphtape.db")
        return
    schema = f"gt_bench_{secrets.token_hex(4)}"
    engine = sa.create_engine(pg_base)
    with engine.begin() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in pg_base else "?"
    try:
        yield f"{pg_base}{sep}options=-csearch_path%3D{schema}"
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')
        engine.dispose()


def pg_reachable(url: str) -> str | None:
    try:
        engine = sa.create_engine(url)
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
        engine.dispose()
        return None
    except Exception as exc:  # noqa: BLE001 - any failure means "skip PostgreSQL"
        return str(exc).splitlines()[0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=100_000, help="synthetic runs to list (default 100000)")
    ap.add_argument("--reps", type=int, default=9, help="timed repetitions per query (default 9)")
    ap.add_argument("--writers", default="1,4", help="writer process counts for the recording test (default 1,4)")
    ap.add_argument("--runs-per-writer", type=int, default=60, help="graph runs each writer records (default 60)")
    ap.add_argument("--no-pg", action="store_true", help="SQLite only")
    ap.add_argument("--quick", action="store_true", help="smoke run: 3,000 runs, 3 reps, 10 runs per writer")
    args = ap.parse_args()
    if args.quick:
        args.runs, args.reps, args.runs_per_writer = 3000, 3, 10
    writer_counts = [int(w) for w in args.writers.split(",") if w.strip()]
    pg_base = os.environ.get("GRAPHTAPE_BENCH_PG_URL", PG_DEFAULT)
    backends = ["sqlite"]
    if not args.no_pg:
        why = pg_reachable(pg_base)
        if why is None:
            backends.append("postgresql")
        else:
            print(f"PostgreSQL skipped: {why}")

    import platform

    print(f"graphtape store benchmark · Python {platform.python_version()} · SQLite {__import__('sqlite3').sqlite_version} · {os.cpu_count()} CPUs")
    listing: dict[str, dict[str, tuple[float, float, int]]] = {}
    for name in backends:
        with backend(name, pg_base) as url:
            store = SqlStore(url)
            secs = fill(store, args.runs)
            print(f"{name}: filled {args.runs:,} runs in {secs:.1f} s ({args.runs / secs:,.0f} runs/s through store.write)")
            listing[name] = bench_listing(store, args.reps)
            store.close()

    print(f"\nListing {args.runs:,} runs, newest {LIMIT} (median of {args.reps}; ratio to the unfiltered listing on the same backend)")
    head = f"{'query':<26}{'matches':>9}"
    for name in backends:
        head += f"  {name + ' list':>16}{'ratio':>7}{'count':>9}"
    print(head)
    base_label = QUERIES[0][0]
    worst: dict[str, float] = {}
    for label, _ in QUERIES:
        line = f"{label:<26}{listing[backends[0]][label][2]:>9,}"
        for name in backends:
            lst, cnt, _n = listing[name][label]
            base = listing[name][base_label][0]
            line += f"  {lst:>13.1f} ms{lst / base:>6.1f}x{cnt:>6.1f} ms"
            worst[name] = max(worst.get(name, 0.0), lst)
        print(line)

    print(f"\nRecording a 3-node graph with one tool call, {args.runs_per_writer} runs per writer process (runs/s)")
    rates: dict[tuple[str, int], float] = {}
    for name in backends:
        for w in writer_counts:
            with backend(name, pg_base) as url:
                SqlStore(url).close()  # create the schema before the writers race to
                rates[(name, w)] = bench_writers(url, w, args.runs_per_writer)
    print(f"{'writers':<10}" + "".join(f"{n:>14}" for n in backends) + ("    postgresql/sqlite" if len(backends) > 1 else ""))
    for w in writer_counts:
        line = f"{w:<10}" + "".join(f"{rates[(n, w)]:>14.1f}" for n in backends)
        if len(backends) > 1:
            line += f"    {rates[('postgresql', w)] / rates[('sqlite', w)]:>17.2f}x"
        print(line)
    if len(writer_counts) > 1:
        lo, hi = writer_counts[0], writer_counts[-1]
        for n in backends:
            print(f"{n}: {hi} writers vs {lo}: {rates[(n, hi)] / rates[(n, lo)]:.2f}x the throughput")

    print("\nTargets")
    for name in backends:
        verdict = "PASS" if worst[name] < 200 else "MISS"
        print(f"  {verdict}  {name}: every listing of {args.runs:,} runs under 200 ms (slowest {worst[name]:.1f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
