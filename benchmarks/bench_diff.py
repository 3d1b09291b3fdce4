"""Diffing two long runs, and the run screen's graph view on a 50-node graph.

**Diff.** An agent loop (a scripted chat model bound to one tool, the state
keeping the last 20 messages) is recorded three times with ``--turns`` model
turns (two supersteps each, so 500 turns are ~1,000 supersteps):

- **A**, and **A again** (the same behaviour, recorded a second time: every
  id, timestamp and latency differs);
- **B**: the tool call of turn ``turns / 2`` retried twice more, and the
  last answer worded differently.

Timed, with medians over repetitions, each on a freshly opened store:

- ``diff A B`` and ``diff A A-again`` (``graphtape.replay.diff_runs``);
- baseline **reads**: what any diff of the two runs must read through the store
  API (their steps with routes, their calls, their stored states);
- baseline **replay compare**: replay's own step-by-step comparison
  (``RunComparison``, live mode, by step number) of A and A-again.

Target (issue 17): a diff of two 1,000-step runs in under 1 s.

**Graph view.** A 50-node graph (48 nodes in a chain whose routers skip
ahead or loop back, so the run takes many edges) is recorded for ``--steps``
supersteps. Timed: laying it out once (``tui.graph_reader.read_graph``: the
structure, every step's routes for the edge counts, grandalf's layout), then
per step on the store alone: lighting the step up (``step_marks``) and
drawing the rows a 40-row view shows, or the whole drawing; baseline: what the
run screen reads for a step anyway (``StepReader.read``). In the app
(headless, 120x36): a step with the Graph tab open, key press until the
step's payload is shown and the screen has painted, against the same with the
State tab open.

Target (issue 17): the graph view on a 50-node graph in under 100 ms per step.

Usage::

    .venv/bin/python benchmarks/bench_diff.py             # ~1 min
    .venv/bin/python benchmarks/bench_diff.py --quick     # smoke run

Always exits 0: it is a report, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.graph.message import add_messages  # noqa: E402

from graphtape.recorder import Recorder, open_store  # noqa: E402
from graphtape.replay.compare import RunComparison, Side  # noqa: E402
from graphtape.replay.loading import load_module_from_path  # noqa: E402
from graphtape.replay.modes import ReplayMode  # noqa: E402
from graphtape.replay.normalize import Normalizer  # noqa: E402
from graphtape.replay.run_diff import diff_runs  # noqa: E402
from graphtape.tui.graph_reader import read_graph, step_marks  # noqa: E402
from graphtape.tui.step_reader import StepReader  # noqa: E402

ScriptedChatModel = load_module_from_path(ROOT / "fixtures" / "agents" / "scripted_model.py").ScriptedChatModel

SIZE = (120, 36)
VIEW_ROWS = 40  # the rows a graph view shows at most on a tall terminal
POLL_S = 0.001


# -- the agent loop for the diff ------------------------------------------------------------------


def last_20(left: list, right: list) -> list:
    return add_messages(left, right)[-20:]


class LoopState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], last_20]
    n: int


@tool
def lookup(n: int) -> str:
    """Look something up."""
    return f"result {n}: " + "x" * 80


def agent_loop(turns: int, retry_at: int | None = None, retries: int = 0, last: str = "done") -> Any:
    script = []
    for i in range(turns):
        script.append(AIMessage(content=f"turn {i}", tool_calls=[{"name": "lookup", "args": {"n": i}, "id": f"c{i}"}]))
        if i == retry_at:
            script.extend(AIMessage(content=f"retrying {i}", tool_calls=[{"name": "lookup", "args": {"n": i}, "id": f"r{i}.{k}"}]) for k in range(retries))
    script.append(AIMessage(content=last))
    model = ScriptedChatModel(script=script).bind_tools([lookup])

    def agent(state: LoopState) -> dict:
        return {"messages": [model.invoke(state.get("messages") or [])]}

    def tools(state: LoopState) -> dict:
        call = state["messages"][-1].tool_calls[0]
        return {"messages": [ToolMessage(content=lookup.invoke(call["args"]), tool_call_id=call["id"])], "n": state.get("n", 0) + 1}

    b = StateGraph(LoopState)
    b.add_node("agent", agent)
    b.add_node("tools", tools)
    b.add_edge(START, "agent")
    b.add_conditional_edges("agent", lambda s: "tools" if s["messages"][-1].tool_calls else END, ["tools", END])
    b.add_edge("tools", "agent")
    return b.compile()


# -- the 50-node graph for the view ------------------------------------------------------------------


class WalkState(TypedDict, total=False):
    k: int


NODES = 48


def fifty_node_graph(steps: int) -> Any:
    """START, 48 nodes in a chain whose routers skip ahead or loop back, END: 50 nodes in all."""
    names = [f"node_{i:02d}" for i in range(NODES)]
    b = StateGraph(WalkState)
    for i, name in enumerate(names):
        b.add_node(name, lambda s: {"k": s.get("k", 0) + 1})
        targets = {names[(i + 1) % NODES], names[(i + 5) % NODES], names[(i - 7) % NODES], END}

        def route(s: WalkState, i: int = i) -> str:
            if s.get("k", 0) >= steps:
                return END
            k = s["k"]
            return names[(i - 7) % NODES] if k % 11 == 0 else names[(i + 5) % NODES] if k % 3 == 0 else names[(i + 1) % NODES]

        b.add_conditional_edges(name, route, sorted(targets))
    b.add_edge(START, names[0])
    return b.compile(name="fifty-node walk")


# -- helpers --------------------------------------------------------------------------------------------


def median_ms(xs: list[float]) -> float:
    return statistics.median(xs) * 1000


def timed(fn: Callable[[], Any], reps: int) -> tuple[list[float], Any]:
    out, last = [], None
    for _ in range(reps):
        t = time.perf_counter()
        last = fn()
        out.append(time.perf_counter() - t)
    return out, last


def fresh(db: str, fn: Callable[[Any], Any]) -> Callable[[], Any]:
    """``fn`` on a freshly opened store (no blob cache warm from the last repetition)."""

    def run() -> Any:
        store = open_store(db)
        try:
            return fn(store)
        finally:
            store.close()

    return run


def record(db: str, graph: Any, inputs: dict, name: str, limit: int) -> str:
    with Recorder(db) as rec:
        rec.attach(graph, name=name).invoke(inputs, {"recursion_limit": limit})
        rec.flush()
        return rec.last_run_id


# -- the diff -----------------------------------------------------------------------------------------------


def reads(store: Any, runs: tuple[str, str]) -> None:
    for run_id in runs:
        store.step_details(run_id, "", writes=False)
        store.calls(run_id)
        for _ in store.frames(run_id, ""):
            pass


def replay_compare(store: Any, a: str, b: str) -> list:
    cmp = RunComparison(store, Normalizer(), ReplayMode.LIVE)
    cmp.namespace(Side(a, "", None), Side(b, "", None), store.calls(a, ns=""), store.calls(b, ns=""))
    return cmp.found


def bench_diff(folder: Path, turns: int, reps: int) -> list[str]:
    db = str(folder / "diff.db")
    limit = 4 * turns + 100
    t = time.perf_counter()
    a = record(db, agent_loop(turns), {"messages": [], "n": 0}, "loop", limit)
    again = record(db, agent_loop(turns), {"messages": [], "n": 0}, "loop", limit)
    b = record(db, agent_loop(turns, retry_at=turns // 2, retries=2, last="all done"), {"messages": [], "n": 0}, "loop", limit)
    store = open_store(db)
    steps = {r: len(store.list_steps(r)) for r in (a, again, b)}
    store.close()
    print(f"recorded 3 runs of {turns} turns in {time.perf_counter() - t:.1f} s: A {steps[a]} supersteps, A again {steps[again]}, B {steps[b]}")

    base_reads, _ = timed(fresh(db, lambda s: reads(s, (a, b))), reps)
    base_cmp, _ = timed(fresh(db, lambda s: replay_compare(s, a, again)), reps)
    same, same_diff = timed(fresh(db, lambda s: diff_runs(a, again, store=s)), reps)
    differ, diff = timed(fresh(db, lambda s: diff_runs(a, b, store=s)), reps)
    r, c = median_ms(base_reads), median_ms(base_cmp)
    print()
    print(f"{'diff of two ~' + str(steps[a]) + '-step runs':<44}{'median':>10}{'/ reads':>10}{'/ replay cmp':>14}")
    for label, xs in (("reads (baseline)", base_reads), ("replay compare A, A again (baseline)", base_cmp), ("diff A, A again", same), ("diff A, B (retried turn)", differ)):
        m = median_ms(xs)
        print(f"  {label:<42}{m:>8.0f} ms{m / r:>9.2f}x{m / c:>13.2f}x")
    print(f"  diff A, A again: {'same' if same_diff.same else f'{len(same_diff.differences)} differences (expected none)'}")
    print(f"  diff A, B: {len(diff.differences)} differences; {diff.summary()}")
    worst = max(median_ms(same), median_ms(differ))
    return [f"diff of two ~{steps[a]}-step runs < 1 s: {'PASS' if worst < 1000 else 'MISS'} ({worst:.0f} ms, median of the slower case)"]


# -- the graph view ---------------------------------------------------------------------------------------------


async def _until(pred: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.perf_counter() + timeout
    while not pred():
        if time.perf_counter() > deadline:
            raise TimeoutError(f"waited {timeout:.0f} s for {what}")
        await asyncio.sleep(POLL_S)


async def _settle(pilot: Any) -> float:
    await pilot.pause(0)
    done = time.perf_counter()
    for _ in range(5):
        t = time.perf_counter()
        await pilot.pause(0)
        if time.perf_counter() - t < 0.002:
            break
        done = time.perf_counter()
    return done


async def ui_steps(db: str, run_id: str, tab: str, presses: int) -> list[float]:
    """Per ``left`` press: until the previous step's payload is shown and the screen has painted."""
    from graphtape.tui.app import build_app
    from graphtape.tui.screens.run import RunScreen
    from graphtape.tui.widgets.graph_view import GraphView

    app = build_app(db, run_id)
    out = []
    async with app.run_test(size=SIZE) as pilot:
        await _until(lambda: isinstance(app.screen, RunScreen) and app.screen.payload is not None, "the run screen")
        screen = app.screen
        app.simulate_key(tab)
        if tab == "7":
            view = screen.query_one(GraphView)
            await _until(lambda: view.drawings is not None, "the graph's layout")
        app.simulate_key("end")
        await _until(lambda: screen.payload is not None and screen.payload.index == len(screen.steps) - 1, "the last step")
        await _settle(pilot)
        for _ in range(presses):
            target = screen.index - 1
            t0 = time.perf_counter()
            app.simulate_key("left")
            await _until(lambda: screen.payload is not None and screen.payload.index == target, f"step index {target}")
            out.append(await _settle(pilot) - t0)
    return out


def bench_graph(folder: Path, steps: int, reps: int, presses: int) -> list[str]:
    db = str(folder / "graph.db")
    t = time.perf_counter()
    run_id = record(db, fifty_node_graph(steps), {"k": 0}, "walk", steps * 2 + 50)
    store = open_store(db)
    infos = store.list_steps(run_id)
    details = store.step_details(run_id, "", writes=False)
    print(f"\nrecorded a walk of the 50-node graph: {len(infos)} supersteps in {time.perf_counter() - t:.1f} s")
    layout_times, drawings = timed(fresh(db, lambda s: read_graph(s, run_id)), reps)
    layout = drawings[0].layout
    taken = sum(1 for n in layout.counts.values() if n)
    print(f"laid out: {len(layout.boxes)} nodes, {len(layout.edges)} edges ({taken} taken by the run), {layout.width} x {layout.height} cells")

    reader = StepReader(store, run_id)
    sample = list(range(len(infos) - 1, max(0, len(infos) - 1 - presses), -1))
    step_reads, marks_view, marks_all = [], [], []
    for i in sample:
        t0 = time.perf_counter()
        reader.read(infos, i)
        step_reads.append(time.perf_counter() - t0)
        detail = next(d for d in details if d.step.step == infos[i].step)
        t0 = time.perf_counter()
        nodes, edges, failed = step_marks(detail)
        boxes = [layout.boxes[n] for n in nodes if n in layout.boxes]
        top = max(0, min(b.y for b in boxes) - VIEW_ROWS // 2) if boxes else 0
        for y in range(top, min(layout.height, top + VIEW_ROWS)):
            layout.line(y, nodes, edges, failed)
        marks_view.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        layout.lines(nodes, edges, failed)
        marks_all.append(time.perf_counter() - t0)
    store.close()

    state_tab = asyncio.run(ui_steps(db, run_id, "1", presses))
    graph_tab = asyncio.run(ui_steps(db, run_id, "7", presses))
    base = median_ms(step_reads)
    print()
    print(f"{'graph view, 50 nodes':<52}{'median':>10}{'/ step read':>14}")
    rows = (
        ("a step's reads, run screen (baseline)", step_reads),
        ("layout, once per run (structure, counts, grandalf)", layout_times),
        ("a step drawn: rows in a 40-row view", marks_view),
        ("a step drawn: the whole drawing", marks_all),
        ("in the app: a step, State tab open (baseline)", state_tab),
        ("in the app: a step, Graph tab open", graph_tab),
    )
    for label, xs in rows:
        m = median_ms(xs)
        print(f"  {label:<50}{m:>8.1f} ms{m / base:>13.2f}x")
    per_step = median_ms(graph_tab)
    extra = per_step - median_ms(state_tab)
    return [
        f"graph view on a 50-node graph < 100 ms per step: {'PASS' if per_step < 100 else 'MISS'} "
        f"({per_step:.1f} ms per step in the app with the Graph tab, {extra:+.1f} ms against the State tab; drawing alone {median_ms(marks_view):.1f} ms)"
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--turns", type=int, default=500, help="model turns per diffed run (two supersteps each; default 500)")
    p.add_argument("--steps", type=int, default=300, help="supersteps of the 50-node walk (default 300)")
    p.add_argument("--reps", type=int, default=5, help="repetitions per timing (default 5)")
    p.add_argument("--presses", type=int, default=40, help="steps taken in the app per tab (default 40)")
    p.add_argument("--quick", action="store_true", help="smoke run: small runs, few repetitions")
    args = p.parse_args(argv)
    if args.quick:
        args.turns, args.steps, args.reps, args.presses = 50, 60, 2, 8
    with tempfile.TemporaryDirectory(prefix="graphtape-bench-diff-") as tmp:
        targets = bench_diff(Path(tmp), args.turns, args.reps)
        targets += bench_graph(Path(tmp), args.steps, args.reps, args.presses)
    print("\nTargets")
    for line in targets:
        print("  " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
