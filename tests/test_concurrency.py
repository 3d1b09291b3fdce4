"""Many recorders at once: 8 processes of 8 threads each, into one SQLite file and into PostgreSQL.

A helper process imports everything once and forks the eight recording
processes together (half record with ``durability="sync"``, half in the
background). Every thread records runs of its own length into the same
store, each run tagged through its thread id. Meanwhile this process reads
the store through the store API, as the TUI does, and checks that whatever
it sees is consistent. Afterwards: no run lost a superstep, no graph saw an
error (no "database is locked"), no recorder counted a fault, and each run's
state holds only its own inputs.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from graphtape.recorder import StepNotFound, open_store

ROOT = Path(__file__).resolve().parents[1]
PROCESSES = 8
THREADS = 8
RUNS_PER_THREAD = 3

SERVER = textwrap.dedent(
    """
    import json, operator, os, random, sys, threading, time
    from typing import Annotated, TypedDict
    from langgraph.graph import END, START, StateGraph
    from graphtape.recorder import Recorder

    url, out_dir, procs, threads, runs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])

    class S(TypedDict):
        n: int
        stop: int
        tag: str
        notes: Annotated[list, operator.add]

    def work(state):
        time.sleep(random.random() * 0.002)
        return {"n": state["n"] + 1, "notes": [f"{state['tag']}:{state['n']}"]}

    def check(state):
        return {"notes": [f"{state['tag']}:checked"]}

    def route(state):
        if state["n"] >= state["stop"]:
            return END
        return ["work", "check"] if state["n"] % 3 == 0 else "work"

    b = StateGraph(S)
    b.add_node("work", work)
    b.add_node("check", check)
    b.add_edge(START, "work")
    b.add_conditional_edges("work", route, ["work", "check", END])
    b.add_edge("check", END)  # a parallel branch that ends on its own
    plain = b.compile()
    plain.invoke({"n": 0, "stop": 2, "tag": "warm", "notes": []})  # every lazy import, before forking

    def child(p):
        durability = "sync" if p % 2 else "async"
        rec = Recorder(url, durability=durability)
        graph = rec.attach(plain)
        results, errors = [], []

        def thread(t):
            rng = random.Random(p * 1000 + t)
            for r in range(runs):
                tag = f"p{p}t{t}r{r}"
                base = rng.randrange(1_000_000)
                length = rng.randint(3, 12)
                try:
                    out = graph.invoke({"n": base, "stop": base + length, "tag": tag, "notes": []}, {"configurable": {"thread_id": tag}})
                    results.append({"tag": tag, "base": base, "length": length, "n": out["n"], "notes": out["notes"], "durability": durability})
                except BaseException as exc:
                    errors.append(f"{tag}: {type(exc).__name__}: {exc}")

        ts = [threading.Thread(target=thread, args=(t,)) for t in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        rec.close()
        with open(os.path.join(out_dir, f"proc-{p}.json"), "w") as f:
            json.dump({"results": results, "errors": errors, "faults": rec.fault_count, "warned": sorted(rec._warned)}, f)

    pids = []
    for p in range(procs):
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                child(p)
            except BaseException as exc:
                sys.stderr.write(f"process {p}: {type(exc).__name__}: {exc}\\n")
                code = 3
            finally:
                os._exit(code)
        pids.append(pid)
    bad = [os.waitpid(pid, 0)[1] for pid in pids]
    sys.exit(1 if any(bad) else 0)
    """
)


class Reader(threading.Thread):
    """Reads the store like the TUI while the recorders write, checking what it sees."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.stop = threading.Event()
        self.errors: list[str] = []
        self.runs_checked = 0
        self.steps_checked = 0
        self.saw_running = 0

    def run(self) -> None:
        store = open_store(self.url)
        rng = random.Random(7)
        try:
            while not self.stop.is_set():
                try:
                    self.check_once(store, rng)
                except Exception as exc:  # noqa: BLE001 - reported by the test
                    self.errors.append(f"{type(exc).__name__}: {exc}")
                    return
        finally:
            store.close()

    def check_once(self, store, rng: random.Random) -> None:
        runs = store.list_runs(limit=200)
        for run in rng.sample(runs, min(len(runs), 6)):
            steps = store.list_steps(run.id)
            if run.status == "running":
                self.saw_running += 1
            numbers = [s.step for s in steps]
            if numbers != list(range(-1, len(numbers) - 1)):
                self.errors.append(f"{run.thread_id}: steps {numbers} are not a prefix")
            if len(numbers) < 2:
                continue
            first = store.state_at(run.id, 0)
            if first["tag"] != run.thread_id:
                self.errors.append(f"run {run.thread_id} starts with the state of {first['tag']}")
            for s in steps[1:]:
                try:
                    state = store.state_at(run.id, s.step)
                    store.step_detail(run.id, s.step)
                except StepNotFound as exc:
                    self.errors.append(f"{run.thread_id}: listed step {s.step} not found: {exc}")
                    continue
                if state["tag"] != run.thread_id or any(not n.startswith(run.thread_id + ":") for n in state["notes"]):
                    self.errors.append(f"{run.thread_id} step {s.step}: foreign values {state}")
                if state["n"] < first["n"] or state["n"] > state["stop"]:
                    self.errors.append(f"{run.thread_id} step {s.step}: n={state['n']} outside its run")
                self.steps_checked += 1
            self.runs_checked += 1


def record_concurrently(url: str, tmp_path: Path) -> tuple[list[dict], Reader, float]:
    script = tmp_path / "concurrency_server.py"
    script.write_text(SERVER)
    out = tmp_path / "results"
    out.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    reader = Reader(url)
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, str(script), url, str(out), str(PROCESSES), str(THREADS), str(RUNS_PER_THREAD)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    reader.start()
    try:
        _, err = proc.communicate(timeout=600)
    finally:
        reader.stop.set()
        reader.join(60)
    assert proc.returncode == 0, err[-3000:]
    reports = [json.loads((out / f"proc-{p}.json").read_text()) for p in range(PROCESSES)]
    return reports, reader, time.perf_counter() - started


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_processes_and_threads_record_into_one_store(backend: str, tmp_path: Path, request) -> None:
    url = str(tmp_path / "shared.db") if backend == "sqlite" else request.getfixturevalue("pg_url")
    open_store(url, create=True).close()  # the schema exists before eight processes race for it
    reports, reader, elapsed = record_concurrently(url, tmp_path)

    errors = [e for r in reports for e in r["errors"]]
    assert errors == [], errors[:5]  # no "database is locked" (or anything else) reached a graph
    assert [r["faults"] for r in reports] == [0] * PROCESSES, [r["warned"] for r in reports]  # and no recorder gave up on a write
    results = [res for r in reports for res in r["results"]]
    assert len(results) == PROCESSES * THREADS * RUNS_PER_THREAD

    store = open_store(url)
    try:
        runs = {r.thread_id: r for r in store.list_runs()}
        assert len(runs) == len(results)  # nothing lost, nothing doubled
        total_steps = 0
        for res in results:
            tag, base, length = res["tag"], res["base"], res["length"]
            assert res["n"] == base + length
            run = runs[tag]
            assert (run.status, run.faults) == ("ok", 0), tag
            steps = store.list_steps(run.id)
            numbers = [s.step for s in steps]
            # Exactly the supersteps the graph executed: its last step holds its output.
            assert numbers == list(range(-1, len(numbers) - 1)), (tag, numbers)
            assert run.step_count == len(numbers), tag  # every superstep stored, the input step too
            # The input step, step 0, then one step per `work` (with `check` beside it now and then).
            assert [sorted(s.nodes) for s in steps[2:]] == [["check", "work"] if k and (base + k) % 3 == 0 else ["work"] for k in range(length)], tag
            final = store.state_at(run.id, numbers[-1])
            assert final == {"n": base + length, "stop": base + length, "tag": tag, "notes": res["notes"]}, tag
            assert store.state_at(run.id, 0)["n"] == base
            total_steps += len(numbers)
    finally:
        store.close()

    assert reader.errors == [], reader.errors[:5]
    assert reader.runs_checked > 0 and reader.steps_checked > 0
    print(
        f"\n{backend}: {len(results)} runs, {total_steps} supersteps from {PROCESSES} processes x {THREADS} threads in {elapsed:.1f} s; "
        f"reader checked {reader.runs_checked} runs / {reader.steps_checked} steps while writing ({reader.saw_running} seen running)"
    )
