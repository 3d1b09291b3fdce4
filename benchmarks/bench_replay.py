"""Strict replay of a long recorded run: how long it takes, against running the graph itself.

The graph is the usual agent loop: ``agent`` (a scripted chat model bound to
one tool) -> ``should_continue`` -> ``tools`` -> ``agent``. Each model turn
asks for one tool call, so every two supersteps add a model call, a tool
call and two messages to the state. Two shapes of the ``tools`` node:

- **bounded**: the node invokes the tool itself, and the state keeps the last
  20 messages (a trimming reducer, as long-running agents do): per-step work
  stays flat, so this shape measures replay overhead per superstep;
- **direct**: the same with the whole history kept: the state, the prompt
  and LangGraph's own reducer grow with every step, so the graph itself is
  quadratic in run length;
- **toolnode**: the whole history, and LangGraph's prebuilt ``ToolNode``,
  which runs each batch of calls on a fresh thread pool.

A run of N supersteps is recorded once per shape with graphtape (into a
temporary SQLite file), then, for each repetition, in the same process:

- **bare**: the graph run from scratch without graphtape (LangGraph + the
  scripted model + the tool): the floor a replay cannot go under;
- **recorded**: the same with a graphtape Recorder attached (what a replay
  pays to record itself as a new run);
- **replay**: ``replay(run_id, graph, mode="strict")``: restore the first
  checkpoint, answer every call from the recording, record the replay, and
  compare both runs step by step.

Target (issue 4): strict replay of a 1,000-superstep run in under 2 s
(median). Ratios are against *bare* and *recorded*, measured in the same run.

Usage::

    .venv/bin/python benchmarks/bench_replay.py            # 1,000 supersteps, 5 repetitions
    .venv/bin/python benchmarks/bench_replay.py --steps 200 --reps 3   # quick look

Always exits 0: it is a report, not a test.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated, TypedDict

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from langchain_core.messages import AIMessage, AnyMessage  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.graph.message import add_messages  # noqa: E402
from langgraph.prebuilt import ToolNode  # noqa: E402

from graphtape.recorder import Recorder  # noqa: E402
from graphtape.replay import replay  # noqa: E402
from graphtape.replay.loading import load_module_from_path  # noqa: E402

ScriptedChatModel = load_module_from_path(ROOT / "fixtures" / "agents" / "scripted_model.py").ScriptedChatModel


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def last_20(left: list, right: list) -> list:
    return add_messages(left, right)[-20:]


class BoundedState(TypedDict):
    messages: Annotated[list[AnyMessage], last_20]


@tool
def lookup(n: int) -> str:
    """Look something up."""
    return f"result {n}: " + "x" * 80


def build(turns: int, shape: str = "direct"):
    """An agent loop that makes ``turns`` tool calls and then answers."""

    counter = {"done": 0}

    def reply(messages: list) -> AIMessage:
        done = counter["done"]
        counter["done"] += 1
        if done >= turns:
            return AIMessage(content="done")
        return AIMessage(content=f"step {done}", tool_calls=[{"name": "lookup", "args": {"n": done}, "id": f"call_{done}"}])

    model = ScriptedChatModel(script=reply).bind_tools([lookup])

    def agent(state) -> dict:
        return {"messages": [model.invoke(state["messages"])]}

    def should_continue(state) -> str:
        return "tools" if state["messages"][-1].tool_calls else END

    def tools(state) -> dict:
        return {"messages": [lookup.invoke(c) for c in state["messages"][-1].tool_calls]}

    b = StateGraph(BoundedState if shape == "bounded" else State)
    b.add_node("agent", agent)
    b.add_node("tools", ToolNode([lookup]) if shape == "toolnode" else tools)
    b.add_edge(START, "agent")
    b.add_conditional_edges("agent", should_continue, ["tools", END])
    b.add_edge("tools", "agent")
    return b.compile()


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def measure(shape: str, steps: int, reps: int) -> tuple[float, bool]:
    turns = max(1, (steps - 2) // 2)
    inputs = {"messages": [("user", "go")]}
    config = {"recursion_limit": steps + 10}
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "bench.db")
        with Recorder(db) as rec:
            rec.attach(build(turns, shape)).invoke(inputs, config)
            rec.flush()
            run_id = rec.last_run_id
            recorded_steps = rec.store.get_run(run_id).step_count
        bare, recorded, replays, results = [], [], [], []
        for _ in range(reps):
            bare.append(timed(lambda: build(turns, shape).invoke(inputs, config)))
            with Recorder(db) as rec2:
                app = rec2.attach(build(turns, shape))
                recorded.append(timed(lambda: (app.invoke(inputs, config), rec2.flush())))
            replays.append(timed(lambda: results.append(replay(run_id, build(turns, shape), db=db))))
    med = statistics.median
    diverged = sum(r.diverged for r in results)
    print(f"{shape}: strict replay of a {recorded_steps}-superstep run ({turns} model + {turns} tool calls, up to {2 * turns + 1} messages); {reps} repetitions, medians")
    print(f"  bare graph run         {med(bare):7.3f} s")
    print(f"  recorded graph run     {med(recorded):7.3f} s   ({med(recorded) / med(bare):.2f}x bare)")
    print(f"  strict replay          {med(replays):7.3f} s   ({med(replays) / med(bare):.2f}x bare, {med(replays) / med(recorded):.2f}x recorded)")
    print(f"  calls answered from the recording: {results[-1].served}; replays that diverged: {diverged}/{len(results)}")
    return med(replays), diverged == 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1000, help="supersteps in the recorded run (default 1000)")
    ap.add_argument("--reps", type=int, default=5, help="repetitions (default 5)")
    ap.add_argument("--shape", choices=("bounded", "direct", "toolnode", "all"), default="all", help="graph shape (default: all three)")
    args = ap.parse_args()
    shapes = ("bounded", "direct", "toolnode") if args.shape == "all" else (args.shape,)
    outcome = {shape: measure(shape, args.steps, args.reps) for shape in shapes}
    target = 2.0 * args.steps / 1000
    print()
    for shape, (seconds, clean) in outcome.items():
        verdict = "PASS" if seconds < target and clean else "MISS"
        print(f"Target ({shape}): strict replay of {args.steps} supersteps under {target:.1f} s: {verdict} ({seconds:.3f} s{'' if clean else ', diverged'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
