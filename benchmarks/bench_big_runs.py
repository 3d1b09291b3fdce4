"""Long runs: peak memory and time of ``graphtape export`` and ``graphtape show --json``.

Records, once per invocation, the three-node loop of ``bench_recorder`` with an int state
(10,000 supersteps) and with a message list growing by one message a superstep (2,000, and
10,000 with ``--big``), then runs each command ``--reps`` times as its own process, output
to a file, and prints the medians of its wall time and peak RSS (``ru_maxrss``).

``--against PYTHON`` runs the same commands with another checkout's interpreter (its
editable install: the code before a change) on the same store, and prints the ratios.

Usage::

    .venv/bin/python benchmarks/bench_big_runs.py
    .venv/bin/python benchmarks/bench_big_runs.py --big --against ../base/.venv/bin/python

A report: it always exits 0.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

RECORD = """
import sys
sys.path.insert(0, {here!r})
from bench_recorder import IntState, MsgState, _int_node, _msg_node, build, int_inputs, msg_inputs
from graphtape import Recorder
kind, steps = sys.argv[2], int(sys.argv[3])
graph = build(IntState, _int_node) if kind == "int" else build(MsgState, _msg_node)
with Recorder(sys.argv[1]) as rec:
    app = rec.attach(graph.compile(), name=f"{{kind}}-{{steps}}")
    app.invoke(int_inputs(steps) if kind == "int" else msg_inputs(steps), {{"recursion_limit": steps + 20}})
    print(rec.last_run_id)
"""

MEASURE = """
import resource, sys, time
from graphtape.tui.cli import main
out = open(sys.argv[1], "w")
sys.stdout = out
t0 = time.perf_counter()
code = main(sys.argv[2:])
seconds = time.perf_counter() - t0
sys.stdout = sys.__stdout__
out.close()
print(code, seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def record(db: Path, kind: str, steps: int) -> str:
    out = subprocess.run([sys.executable, "-c", RECORD.format(here=str(HERE)), str(db), kind, str(steps)], capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def measure(python: str, args: list[str], out: Path, reps: int) -> tuple[float, float] | None:
    """Median (seconds, peak MB) of ``graphtape ARGS`` run as its own process, or None if it failed."""
    times, peaks = [], []
    for _ in range(reps):
        done = subprocess.run([python, "-c", MEASURE, str(out), *args], capture_output=True, text=True)
        lines = done.stdout.strip().splitlines()
        if done.returncode != 0 or not lines or lines[-1].split()[0] != "0":
            print(f"    failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
            return None
        _, seconds, rss_kb = lines[-1].split()
        times.append(float(seconds))
        peaks.append(int(rss_kb) / 1024)
    return statistics.median(times), statistics.median(peaks)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--big", action="store_true", help="also a 10,000-step growing-messages run (its old export peaks past 1 GB)")
    p.add_argument("--against", metavar="PYTHON", help="another checkout's interpreter: the same commands, with ratios")
    args = p.parse_args(argv)
    shapes = [("int", 9_999), ("msg", 2_001)] + ([("msg", 9_999)] if args.big else [])
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for kind, steps in shapes:
            db = folder / f"{kind}{steps}.db"
            run_id = record(db, kind, steps)
            print(f"\n{kind} loop, {steps + 1:,} supersteps (run {run_id})")
            commands = {
                "export": ["export", run_id, "--db", str(db), "-o", str(folder / "fixture.json"), "--force", "--graph", "bench:graph"],
                "show --json": ["show", run_id, "--db", str(db), "--json"],
            }
            for label, command in commands.items():
                mine = measure(sys.executable, command, folder / "out.txt", args.reps)
                line = f"  {label:<12} " + (f"{mine[0]:6.2f} s  {mine[1]:7.0f} MB peak" if mine else "failed")
                if args.against and mine:
                    theirs = measure(args.against, command, folder / "out.txt", args.reps)
                    if theirs:
                        line += f"   against: {theirs[0]:6.2f} s  {theirs[1]:7.0f} MB   ratio {mine[0] / theirs[0]:.2f}x time, {mine[1] / theirs[1]:.2f}x memory"
                print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
