"""How much of a run a SIGKILL loses under the default ``async`` durability (a soak, not a test).

A child records an endless run (each step sleeps ``--sleep`` ms, 0 for a graph busy on the CPU)
and reports each step as it starts, with the time; it is killed at a random moment. The steps the
child had finished but the store does not hold, and how long before the kill the last stored one
finished, are the window. Prints the median and the worst over ``--trials``.

    python benchmarks/soak_kill_window.py --trials 20 --sleep 0
"""

from __future__ import annotations

import argparse
import os
import random
import select
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

CHILD = textwrap.dedent(
    """
    import operator, os, sys, time
    from typing import Annotated, TypedDict
    from langgraph.graph import START, StateGraph
    from graphtape.recorder import Recorder

    class S(TypedDict):
        n: int
        notes: Annotated[list, operator.add]

    pause = float(sys.argv[2]) / 1000
    rec = Recorder(sys.argv[1])

    def work(state):
        # Runs in step n + 1: step n's checkpoint was handed to the recorder.
        os.write(1, f"{state['n']} {time.time()}\\n".encode())
        if pause:
            time.sleep(pause)
        return {"n": state["n"] + 1, "notes": [f"note {state['n']}"]}

    b = StateGraph(S)
    b.add_node("work", work)
    b.add_edge(START, "work")
    b.add_conditional_edges("work", lambda s: "work")
    rec.attach(b.compile()).invoke({"n": 0, "notes": []}, {"recursion_limit": 10**9})
    """
)


def trial(folder: Path, i: int, sleep_ms: float, rng: random.Random) -> tuple[int, float]:
    db = folder / f"k{i}.db"
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(db), str(sleep_ms)], stdout=subprocess.PIPE)
    seen: dict[int, float] = {}
    buf = b""
    started = None
    kill_in = rng.uniform(0.2, 2.0)
    while True:
        if select.select([proc.stdout], [], [], 0.01)[0]:
            chunk = os.read(proc.stdout.fileno(), 65536)
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                n, t = line.split()
                seen[int(n)] = float(t)
                started = started or time.monotonic()
        if started is not None and time.monotonic() - started >= kill_in:
            os.kill(proc.pid, signal.SIGKILL)
            killed_at = time.time()
            break
    proc.wait()
    rest = os.read(proc.stdout.fileno(), 1 << 20)
    for line in (buf + rest).split(b"\n"):
        if line.strip():
            n, t = line.split()
            seen[int(n)] = float(t)
    con = sqlite3.connect(db)
    stored = con.execute("select coalesce(max(step), -1) from steps where ns = ''").fetchone()[0]
    con.close()
    finished = max(seen)  # step `finished` was handed to the recorder when this was said
    lost = finished - stored
    window = killed_at - seen[stored + 1] if stored + 1 in seen else 0.0  # step stored+1 was done since then
    return lost, window


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--trials", type=int, default=20)
    p.add_argument("--sleep", type=float, default=0.0, help="ms each step sleeps (0: busy on the CPU)")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as folder:
        out = [trial(Path(folder), i, args.sleep, rng) for i in range(args.trials)]
    lost = [n for n, _ in out]
    windows = [w for _, w in out]
    print(f"steps lost: median {statistics.median(lost)}, worst {max(lost)}")
    print(f"window (kill - when the first lost step was done): median {statistics.median(windows) * 1000:.0f} ms, worst {max(windows) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
