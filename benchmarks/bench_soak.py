"""Soak: minutes of PostgreSQL backend kills and SQLite exclusive locks under 8 writer processes.

Two phases, each ``--seconds`` long:

1. PostgreSQL. W writer processes (half ``sync``, half ``async``) record runs of
   a small real graph into one store while a thread here terminates every one
   of their backends (``pg_terminate_backend``) every 50-400 ms.
2. SQLite. The same writers record into one file while another process takes
   SQLite's write lock (``BEGIN EXCLUSIVE``) again and again, held 0.5-6 s
   (past the recorder's 2 s bound), with 0.5-3 s between.

Each writer notes the id of every run that returned to it and, in ``sync``
mode, the time of each superstep (from one node call to the next: its commit
included). Afterwards the store is checked: a run lost is one that returned to
its caller but is not stored complete with status ``ok`` (every superstep, the
step count that says so); an orphan is a step or call without its run row.

Usage::

    .venv/bin/python benchmarks/bench_soak.py                 # 2 x 75 s (~3 min)
    .venv/bin/python benchmarks/bench_soak.py --seconds 20    # a short soak
    .venv/bin/python benchmarks/bench_soak.py --no-pg         # SQLite only

PostgreSQL comes from ``GRAPHTAPE_BENCH_PG_URL`` (default: the local test
server), in a throwaway schema dropped afterwards. A report: it always exits 0.
"""

from __future__ import annotations

import argparse
import json
import operator
import os
import random
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated, TypedDict

NODES = 8
PG_DEFAULT = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
LOCKER = """
import random, sqlite3, sys, time
rnd = random.Random(14)
stop_at = time.time() + float(sys.argv[2])
held = 0
while time.time() < stop_at:
    time.sleep(rnd.uniform(0.5, 3.0))
    conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=60)
    conn.execute("BEGIN EXCLUSIVE")
    hold = rnd.uniform(0.5, 6.0)
    time.sleep(hold)
    conn.execute("COMMIT")
    conn.close()
    held += 1
    print(f"{hold:.2f}", flush=True)
"""


class St(TypedDict):
    n: int
    notes: Annotated[list, operator.add]


# -- a writer process ----------------------------------------------------------------


def writer(url: str, durability: str, seconds: float, out: str) -> None:
    import logging

    from langgraph.graph import END, START, StateGraph

    from graphtape.recorder import Recorder

    logging.getLogger("graphtape").setLevel(logging.ERROR)
    stamps: list[float] = []

    def work(state: St) -> dict:
        stamps.append(time.monotonic())
        return {"n": state["n"] + 1, "notes": [f"note {state['n']} " + "x" * 200]}

    b = StateGraph(St)
    b.add_node("work", work)
    b.add_edge(START, "work")
    b.add_conditional_edges("work", lambda s: "work" if s["n"] < NODES else END)
    rec = Recorder(url, durability=durability)
    graph = rec.attach(b.compile(), name=f"soak-{durability}")
    run_ids: list[str] = []
    gaps: list[float] = []
    wrong = 0
    Path(out + ".ready").touch()  # imported and built: the soak starts when every writer is
    while not Path(out).parent.joinpath("go").exists():
        time.sleep(0.01)
    stop_at = time.monotonic() + seconds
    while time.monotonic() < stop_at:
        stamps.clear()
        if graph.invoke({"n": 0, "notes": []})["n"] != NODES:
            wrong += 1
        run_ids.append(rec.last_run_id)
        gaps += [b - a for a, b in zip(stamps, stamps[1:])]
        if durability == "async":
            time.sleep(0.02)  # an async writer would otherwise record thousands of runs
    closing = time.monotonic()
    rec.close(timeout=30)
    Path(out).write_text(json.dumps({"runs": run_ids, "gaps": gaps, "wrong": wrong, "faults": rec.fault_count, "close_s": time.monotonic() - closing, "durability": durability}))


# -- the soak ------------------------------------------------------------------------


def run_writers(url: str, writers: int, seconds: float, workdir: Path, env_extra: dict | None = None) -> tuple[list[subprocess.Popen], list[Path]]:
    procs, outs = [], []
    for i in range(writers):
        out = workdir / f"writer-{i}-{secrets.token_hex(3)}.json"
        durability = "sync" if i % 2 == 0 else "async"
        cmd = [sys.executable, __file__, "--child", url, durability, str(seconds), str(out)]
        procs.append(subprocess.Popen(cmd, env={**os.environ, **(env_extra or {})}))
        outs.append(out)
    while not all(Path(f"{o}.ready").exists() for o in outs) and any(p.poll() is None for p in procs):
        time.sleep(0.05)
    (workdir / "go").touch()
    return procs, outs


def check(url: str, outs: list[Path]) -> dict:
    import sqlalchemy as sa

    from graphtape.recorder import open_store
    from graphtape.recorder import schema as S

    results = [json.loads(p.read_text()) for p in outs if p.exists()]
    store = open_store(url)
    lost = 0
    ids = [r for res in results for r in res["runs"]]
    for run_id in ids:
        try:
            run = store.get_run(run_id)
            steps = [s.step for s in store.list_steps(run_id) if not s.pending]
            if (run.status, steps, run.step_count) != ("ok", list(range(-1, NODES + 1)), NODES + 2):
                lost += 1
        except Exception:  # noqa: BLE001 - not stored at all
            lost += 1
    known = sa.select(S.runs.c.id)
    with store.engine.connect() as conn:
        orphans = sum(int(conn.execute(sa.select(sa.func.count()).select_from(t).where(t.c.run_id.not_in(known))).scalar_one()) for t in (S.steps, S.calls))
    store.close()
    gaps = sorted(g for res in results if res["durability"] == "sync" for g in res["gaps"])
    return {
        "writers_done": len(results),
        "runs": len(ids),
        "lost": lost,
        "orphans": orphans,
        "wrong_results": sum(r["wrong"] for r in results),
        "faults_counted": sum(r["faults"] for r in results),
        "sync_median_ms": statistics.median(gaps) * 1000 if gaps else float("nan"),
        "sync_p99_ms": gaps[int(len(gaps) * 0.99)] * 1000 if gaps else float("nan"),
        "sync_max_ms": gaps[-1] * 1000 if gaps else float("nan"),
        "close_max_s": max((r["close_s"] for r in results), default=0.0),
    }


def soak_pg(base: str, writers: int, seconds: float, workdir: Path) -> dict:
    import sqlalchemy as sa

    workdir = workdir / "pg"
    workdir.mkdir()
    schema = f"gt_soak_{secrets.token_hex(4)}"
    admin = sa.create_engine(base, poolclass=sa.pool.NullPool)
    with admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    sep = "&" if "?" in base else "?"
    url = f"{base}{sep}options=-csearch_path%3D{schema}"
    app = f"gt-soak-{secrets.token_hex(3)}"
    try:
        from graphtape.recorder.store import SqlStore

        SqlStore(url, create=True).close()
        procs, outs = run_writers(f"{url}&application_name={app}", writers, seconds, workdir)
        kills = attempts = 0
        rnd = random.Random(14)
        stop_at = time.monotonic() + seconds
        while time.monotonic() < stop_at and any(p.poll() is None for p in procs):
            time.sleep(rnd.uniform(0.05, 0.4))
            with admin.begin() as conn:
                kills += int(conn.execute(sa.text("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = :a AND pid <> pg_backend_pid()"), {"a": app}).scalar_one())
            attempts += 1
        for p in procs:
            p.wait()
        got = check(url, outs)
        got.update(injected=f"{kills} backends killed in {attempts} rounds")
        return got
    finally:
        with admin.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def soak_sqlite(writers: int, seconds: float, workdir: Path) -> dict:
    from graphtape.recorder.store import SqlStore

    workdir = workdir / "sqlite"
    workdir.mkdir()
    db = workdir / "soak.db"
    SqlStore(str(db), create=True).close()
    procs, outs = run_writers(str(db), writers, seconds, workdir)
    locker = subprocess.Popen([sys.executable, "-c", LOCKER, str(db), str(seconds)], stdout=subprocess.PIPE, text=True)
    holds = [float(line) for line in locker.stdout]
    locker.wait()
    for p in procs:
        p.wait()
    got = check(str(db), outs)
    got.update(injected=f"{len(holds)} exclusive locks held {sum(holds):.0f} s in all (longest {max(holds, default=0):.1f} s)")
    return got


def report(name: str, r: dict) -> None:
    print(f"\n{name}")
    print(f"  faults injected      {r['injected']}")
    print(f"  runs recorded        {r['runs']} by {r['writers_done']} writers")
    print(f"  runs lost            {r['lost']}{'   (must be 0: MISS)' if r['lost'] else ''}")
    print(f"  orphan rows          {r['orphans']}{'   (must be 0: MISS)' if r['orphans'] else ''}")
    print(f"  wrong graph results  {r['wrong_results']}")
    print(f"  faults counted       {r['faults_counted']} (by the recorders: runs that waited for the store)")
    print(f"  sync step latency    median {r['sync_median_ms']:.0f} ms, p99 {r['sync_p99_ms']:.0f} ms, max {r['sync_max_ms']:.0f} ms (longest stall)")
    print(f"  longest close        {r['close_max_s']:.1f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=75.0, help="length of each phase (default 75)")
    ap.add_argument("--writers", type=int, default=8)
    ap.add_argument("--no-pg", action="store_true")
    ap.add_argument("--no-sqlite", action="store_true")
    ap.add_argument("--child", nargs=4, metavar=("URL", "DURABILITY", "SECONDS", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        url, durability, seconds, out = args.child
        writer(url, durability, float(seconds), out)
        return
    print(f"soak: {args.writers} writer processes (half sync, half async), {args.seconds:.0f} s per phase, {NODES}-superstep runs, lock bound 2 s")
    with tempfile.TemporaryDirectory(prefix="gt-soak-") as tmp:
        work = Path(tmp)
        if not args.no_pg:
            base = os.environ.get("GRAPHTAPE_BENCH_PG_URL", PG_DEFAULT)
            try:
                report("PostgreSQL, backends killed every 50-400 ms", soak_pg(base, args.writers, args.seconds, work))
            except Exception as exc:  # noqa: BLE001 - a report, not a test
                print(f"\nPostgreSQL: skipped ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})")
        if not args.no_sqlite:
            report("SQLite, another process holding BEGIN EXCLUSIVE 0.5-6 s at a time", soak_sqlite(args.writers, args.seconds, work))


if __name__ == "__main__":
    main()
