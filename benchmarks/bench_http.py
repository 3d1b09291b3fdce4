"""What recording a node's HTTP requests costs, per request, against not recording them.

A local HTTP service on 127.0.0.1 (keep-alive, a ~200-byte JSON answer) and a
one-node graph whose node sends N requests in a loop, each timed on its own with
``perf_counter`` inside the node. For ``httpx`` (a ``Client``) and ``requests``
(a ``Session``), in the same process, interleaved round by round:

- **plain**: the graph run without graphtape: the client and the service alone;
- **vcrpy**: the same, inside a bare vcrpy cassette (``record_mode="all"``):
  what vcrpy's patches cost by themselves (it keeps every interaction in memory);
- **recorded**: the graph attached to a graphtape ``Recorder`` (vcrpy's patches,
  graphtape's dispatcher, the call handed to the background writer);
- **answered**: a strict replay of the recorded run with the service stopped
  (each request matched and answered from the recording; nothing is sent).

Per mode: the median time per request (µs), and the ratio and extra µs against
*plain*. The run's whole time is not the point: LangGraph's own per-step cost
would hide the per-request figures.

Usage::

    .venv/bin/python benchmarks/bench_http.py              # 200 requests per run, 7 rounds
    .venv/bin/python benchmarks/bench_http.py --quick      # a smoke run

Always exits 0: it is a report, not a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import httpx  # noqa: E402
import requests  # noqa: E402
import vcr  # noqa: E402
from http_server import EchoService  # noqa: E402
from langgraph.graph import START, StateGraph  # noqa: E402

from graphtape.recorder import Recorder  # noqa: E402
from graphtape.replay import replay  # noqa: E402


class S(TypedDict, total=False):
    done: int


def graph(url: str, client: str, n: int, times: list[float]):
    """One node sending ``n`` requests with ``client``, appending each request's seconds to ``times``."""

    def send(state: S) -> dict:
        if client == "httpx":
            with httpx.Client() as c:
                for i in range(n):
                    t = time.perf_counter()
                    c.post(f"{url}/charge", json={"order": "A-1", "i": i}).json()
                    times.append(time.perf_counter() - t)
        else:
            with requests.Session() as c:
                for i in range(n):
                    t = time.perf_counter()
                    c.post(f"{url}/charge", json={"order": "A-1", "i": i}).json()
                    times.append(time.perf_counter() - t)
        return {"done": n}

    b = StateGraph(S)
    b.add_node("send", send)
    b.add_edge(START, "send")
    return b.compile()


def measure(client: str, n: int, rounds: int, tmp: str) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"plain": [], "vcrpy": [], "recorded": [], "answered": []}
    for r in range(rounds):
        service = EchoService().start()
        url = service.url
        times: list[float] = []
        graph(url, client, n, times).invoke({})
        out["plain"].append(statistics.median(times))

        times = []
        with vcr.VCR(record_mode="all").use_cassette(os.path.join(tmp, f"{client}-{r}.yaml")):
            graph(url, client, n, times).invoke({})
        out["vcrpy"].append(statistics.median(times))

        times = []
        db = os.path.join(tmp, f"{client}-{r}.db")
        with Recorder(db) as rec:
            rec.attach(graph(url, client, n, times), name="bench").invoke({})
            rec.flush()
            run_id = rec.last_run_id
        out["recorded"].append(statistics.median(times))
        service.stop()

        times = []
        result = replay(run_id, graph(url, client, n, times), db=db)
        if result.diverged or result.served.get("http") != n:
            print(f"  (round {r}: the replay did not answer all {n} requests: {result.report().splitlines()[0]})")
        out["answered"].append(statistics.median(times))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    n, rounds = (30, 2) if args.quick else (args.requests, args.rounds)
    print(f"HTTP recording overhead: {n} requests per run, {rounds} rounds, median of per-request medians")
    with tempfile.TemporaryDirectory() as tmp:
        for client in ("httpx", "requests"):
            got = measure(client, n, rounds, tmp)
            plain = statistics.median(got["plain"])
            print(f"\n{client}")
            print(f"  {'mode':<10} {'µs/request':>11} {'× plain':>8} {'extra µs':>9}")
            for mode, values in got.items():
                med = statistics.median(values)
                print(f"  {mode:<10} {med * 1e6:>11.0f} {med / plain:>8.2f} {(med - plain) * 1e6:>9.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
