"""TUI responsiveness on long runs: open, step and diff, in the app and on the store alone.

Three runs of one graph are recorded once with graphtape's ``Recorder`` and
kept in a cache database: two nodes take turns (a conditional edge picks the
next one), each superstep appends one ~200-character message to an
``add_messages`` list that starts with prefilled messages.

- **long**: 10,000 supersteps, 1,000 prefilled messages (the run under test);
- **short**: 1,000 supersteps, 1,000 prefilled (same shape, a tenth as long);
- **wide**: 1,000 supersteps, 10,000 prefilled (as long as *short*, but its
  last steps hold as many messages as *long*'s), which separates the cost of
  run length from the cost of state size.

For each run the script times, with medians over repetitions:

1. **open**: from app start until the run screen holds the last step's payload
   (``build_app(db, run_id)`` headless at 140x40), and until it is painted;
2. **step**: ``left`` pressed until the previous step's payload is shown (this
   includes the default diff of a step against the one before it);
3. **diff**: first step marked (``home``, ``m``), then ``end`` and ``d``: time
   until ``diff_entries`` arrive, and until the Diff tab is painted;

and the same reads on the store alone (``list_steps``, ``state_at``,
``step_detail``, ``calls``, ``tui.data.diff_states``), so UI overhead and
store cost can be told apart. The runs *short* and *wide* are the in-process
baselines. Memory is measured in a fresh subprocess per run: RSS after
opening, then RSS and tracemalloc while stepping back through 200 steps.

Usage::

    .venv/bin/python benchmarks/bench_tui.py               # full run (records the runs on first use)
    .venv/bin/python benchmarks/bench_tui.py --db runs.db  # keep the recorded runs in this file
    .venv/bin/python benchmarks/bench_tui.py --quick       # smoke run on small runs, seconds
    .venv/bin/python benchmarks/bench_tui.py --profile     # also cProfile every op that misses a target

The script is a report: it always exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import json
import os
import platform
import pstats
import random
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recorder import open_store
from recorder.records import StepInfo
from recorder.schema import SCHEMA_VERSION
from recorder.store import SqlStore
from tui.data import diff_states, first_of

SIZE = (140, 40)
MESSAGE_CHARS = 200
POLL_S = 0.001
TIMEOUT_S = 120.0
TARGETS_MS = {"open": 1000.0, "step": 50.0, "diff": 100.0}
MIB = 1024 * 1024


@dataclass(frozen=True)
class Shape:
    """One recorded run: how many supersteps, how many messages before the first."""

    label: str
    steps: int
    prefill: int

    @property
    def name(self) -> str:
        return f"bench-tui-{self.steps}x{self.prefill}"


FULL = [Shape("long", 10_000, 1_000), Shape("short", 1_000, 1_000), Shape("wide", 1_000, 10_000)]
QUICK = [Shape("long", 600, 100), Shape("short", 60, 100), Shape("wide", 60, 600)]


# ---------------------------------------------------------------------------
# The graph and its recording (run in a subprocess: LangGraph's own memory stays out of the figures)
# ---------------------------------------------------------------------------

_WORDS = """
the of and to a in is that for it as with was on be by this are or from at an not which have has but
they their you can will more one all were been we would there also if its other into when so what about
state step graph node agent tool model call result value error retry search query answer question context
document source page user assistant system message token prompt response database table index record file
weather forecast city temperature price stock market account invoice customer ticket issue refund shipping
""".split()


def text_for(i: int) -> str:
    """A distinct ~200-character message text (content-addressed blobs must not collapse)."""
    rng = random.Random(i)
    words = [f"#{i}"]
    while sum(len(w) + 1 for w in words) < MESSAGE_CHARS:
        words.append(rng.choice(_WORDS))
    return " ".join(words)[:MESSAGE_CHARS]


def build_graph() -> Any:
    """Nodes ``a`` and ``b`` take turns through a conditional edge; each appends one message."""
    from typing import Annotated, TypedDict

    from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import add_messages

    # The functional form: this module's `from __future__ import annotations` would leave strings.
    State = TypedDict("State", {"n": int, "limit": int, "messages": Annotated[list[AnyMessage], add_messages]})

    def speak(state: dict) -> dict:
        n = state["n"]
        cls = HumanMessage if n % 2 else AIMessage
        return {"n": n + 1, "messages": [cls(content=text_for(10_000_000 + n))]}

    def turn(state: dict) -> str:
        if state["n"] >= state["limit"]:
            return "done"
        return "b" if state["n"] % 2 else "a"

    g = StateGraph(State)
    g.add_node("a", speak)
    g.add_node("b", speak)
    g.add_edge(START, "a")
    for node in ("a", "b"):
        g.add_conditional_edges(node, turn, {"a": "a", "b": "b", "done": END})
    return g.compile()


def record_child(db: str, steps: int, prefill: int, name: str) -> dict:
    """Record one run into ``db`` (durability default); report timings and peak RSS."""
    from langchain_core.messages import HumanMessage

    from recorder import Recorder

    graph = build_graph()
    inputs = {"n": 0, "limit": steps, "messages": [HumanMessage(content=text_for(i), id=f"pre-{i}") for i in range(prefill)]}
    rec = Recorder(db)
    recorded = rec.attach(graph, name=name)
    rss0 = _proc_status()["VmRSS"]
    t0 = time.perf_counter()
    out = recorded.invoke(inputs, {"recursion_limit": steps + 100})
    t1 = time.perf_counter()
    rec.close()
    t2 = time.perf_counter()
    status = _proc_status()
    return {
        "invoke_s": t1 - t0,
        "close_s": t2 - t1,
        "messages": len(out["messages"]),
        "rss_before": rss0,
        "peak_rss": status["VmHWM"],
        "run_id": rec.last_run_id,
    }


def _proc_status() -> dict[str, int]:
    """VmRSS / VmHWM in bytes (Linux); zeros elsewhere."""
    out = {"VmRSS": 0, "VmHWM": 0}
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in out:
                out[key] = int(rest.split()[0]) * 1024
    except OSError:
        pass
    return out


def _child(args: list[str]) -> dict:
    """Run this script with a hidden sub-command; its last stdout line is JSON."""
    cmd = [sys.executable, os.path.abspath(__file__), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=os.path.dirname(os.path.abspath(__file__)))
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:2])} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


@dataclass
class Recorded:
    shape: Shape
    run_id: str
    step_rows: int
    cached: bool
    invoke_s: float | None = None
    close_s: float | None = None
    peak_rss: int | None = None


def find_run(store: SqlStore, shape: Shape) -> str | None:
    for run in store.list_runs(text=shape.name):
        if run.name == shape.name and run.status == "ok":
            return run.id
    return None


def ensure_runs(db: Path, shapes: list[Shape]) -> list[Recorded]:
    """Find each run in the cache, recording the missing ones."""
    out = []
    for shape in shapes:
        with _opened(db) as store:
            run_id = find_run(store, shape)
        if run_id is not None:
            out.append(Recorded(shape, run_id, 0, cached=True))
            continue
        print(f"  recording {shape.label}: {shape.steps} supersteps, {shape.prefill} prefilled messages ...", file=sys.stderr, flush=True)
        r = _child(["--_record", str(db), str(shape.steps), str(shape.prefill), shape.name])
        out.append(Recorded(shape, r["run_id"], 0, cached=False, invoke_s=r["invoke_s"], close_s=r["close_s"], peak_rss=r["peak_rss"]))
    with _opened(db) as store:
        for r in out:
            r.step_rows = len(store.list_steps(r.run_id))
            if r.cached:
                info = store.get_run(r.run_id)
                r.invoke_s = info.duration_s
    return out


class _opened:
    def __init__(self, db: Path) -> None:
        self.store = SqlStore(db, create=True)

    def __enter__(self) -> SqlStore:
        return self.store

    def __exit__(self, *exc: Any) -> None:
        self.store.close()


# ---------------------------------------------------------------------------
# Store only: what the run screen's workers do, called directly
# ---------------------------------------------------------------------------

STEP_PARTS = ("step_detail", "state_at", "state_at(prev)", "calls", "diff_states")


def read_step(store: Any, run_id: str, steps: list[StepInfo], index: int) -> dict[str, float]:
    """The reads of ``RunScreen._read_step``, timed part by part (seconds)."""
    t: dict[str, float] = {}
    step = steps[index]
    t0 = time.perf_counter()
    store.step_detail(run_id, step.step)
    t1 = time.perf_counter()
    state = store.state_at(run_id, step.step)
    t2 = time.perf_counter()
    prev_index = first_of(steps, index, -1, lambda s: not s.pending and s.step < step.step)
    old = store.state_at(run_id, steps[prev_index].step) if prev_index is not None else {}
    t3 = time.perf_counter()
    if step.step >= 0:
        store.calls(run_id, step=step.step, ns="")
    t4 = time.perf_counter()
    diff_states(old, state)
    t5 = time.perf_counter()
    t.update({"step_detail": t1 - t0, "state_at": t2 - t1, "state_at(prev)": t3 - t2, "calls": t4 - t3, "diff_states": t5 - t4, "total": t5 - t0})
    return t


def store_open(db: Path, run_id: str) -> tuple[float, float]:
    """Fresh store (cold blob cache, like a fresh app): run, steps, call counts, then the last step."""
    t0 = time.perf_counter()
    store = open_store(db)
    try:
        run = store.get_run(run_id)
        steps = store.list_steps(run.id)
        store.call_counts(run.id)
        t1 = time.perf_counter()
        read_step(store, run.id, steps, len(steps) - 1)
        t2 = time.perf_counter()
    finally:
        store.close()
    return t1 - t0, t2 - t0


def store_diff(store: Any, run_id: str, a: StepInfo, b: StepInfo) -> tuple[float, int]:
    """``RunScreen.load_diff``: both states, then ``diff_states``."""
    t0 = time.perf_counter()
    old = store.state_at(run_id, a.step)
    new = store.state_at(run_id, b.step)
    entries = diff_states(old, new)
    return time.perf_counter() - t0, len(entries)


# ---------------------------------------------------------------------------
# The app, headless
# ---------------------------------------------------------------------------


async def _until(pred: Callable[[], bool], what: str) -> None:
    deadline = time.perf_counter() + TIMEOUT_S
    while not pred():
        if time.perf_counter() > deadline:
            raise TimeoutError(f"waited {TIMEOUT_S:.0f} s for {what}")
        await asyncio.sleep(POLL_S)


def _run_screen(app: Any) -> Any:
    from tui.screens.run import RunScreen

    screen = app.screen
    return screen if isinstance(screen, RunScreen) else None


async def _open(app: Any, pilot: Any, t0: float) -> tuple[Any, dict[str, float]]:
    """Wait for the run screen to show its last step; times from ``t0`` (seconds)."""
    await _until(lambda: (s := _run_screen(app)) is not None and bool(s.steps), "the run screen's steps")
    screen = _run_screen(app)
    t_steps = time.perf_counter() - t0
    last = len(screen.steps) - 1
    await _until(lambda: screen.payload is not None and screen.payload.index == last, "the last step's payload")
    t_payload = time.perf_counter() - t0
    await pilot.pause(0)
    t_paint = time.perf_counter() - t0
    return screen, {"steps": t_steps, "payload": t_payload, "painted": t_paint}


async def ui_open(db: Path, run_id: str) -> dict[str, float]:
    from tui.app import build_app

    app = build_app(str(db), run_id)
    t0 = time.perf_counter()
    async with app.run_test(size=SIZE) as pilot:
        _, times = await _open(app, pilot, t0)
    return times


async def _press(app: Any, key: str) -> None:
    """Post a key event and return at once.

    ``Pilot.press`` would wait for the process to go idle (at least two 20 ms
    sleeps, and as long as a worker is busy), which is harness time, not the app's.
    """
    app.simulate_key(key)
    await asyncio.sleep(0)


async def _step_to(app: Any, screen: Any, key: str, target: int) -> None:
    await _press(app, key)
    await _until(lambda: screen.payload is not None and screen.payload.index == target, f"step index {target}")


async def _mark_first_and_go_last(app: Any, screen: Any) -> None:
    """``home``, ``right``, ``m``, ``end``: the first superstep (after the input) is marked, the last shown."""
    await _step_to(app, screen, "home", 0)
    await _step_to(app, screen, "right", 1)
    await _press(app, "m")
    await _until(lambda: screen.marked == 1, "the mark")
    await _step_to(app, screen, "end", len(screen.steps) - 1)


async def ui_step_and_diff(db: Path, run_id: str, presses: int, diff_reps: int) -> tuple[list[tuple[float, float]], list[tuple[float, float]], int]:
    """One session: ``presses`` × left, then the first superstep marked and ``diff_reps`` × d at the end."""
    from tui.app import build_app

    app = build_app(str(db), run_id)
    steps_out: list[tuple[float, float]] = []
    diffs_out: list[tuple[float, float]] = []
    async with app.run_test(size=SIZE) as pilot:
        screen, _ = await _open(app, pilot, time.perf_counter())
        for _ in range(presses):
            t0 = time.perf_counter()
            await _step_to(app, screen, "left", screen.index - 1)
            t1 = time.perf_counter()
            await pilot.pause(0)
            steps_out.append((t1 - t0, time.perf_counter() - t0))
        await _mark_first_and_go_last(app, screen)
        await pilot.pause(0)
        n_entries = 0
        for _ in range(diff_reps):
            before = screen.diff_entries
            t0 = time.perf_counter()
            await _press(app, "d")
            await _until(lambda: screen.diff_entries is not before, "the marked diff")
            t1 = time.perf_counter()
            await pilot.pause(0)
            diffs_out.append((t1 - t0, time.perf_counter() - t0))
            n_entries = len(screen.diff_entries)
    return steps_out, diffs_out, n_entries


async def memory_walk(db: Path, run_id: str, walk: int, trace_last: int) -> dict:
    """RSS after open, then while stepping back ``walk`` steps; tracemalloc over the last ``trace_last``."""
    from tui.app import build_app

    app = build_app(str(db), run_id)
    async with app.run_test(size=SIZE) as pilot:
        screen, _ = await _open(app, pilot, time.perf_counter())
        gc.collect()
        rss_open = _proc_status()["VmRSS"]
        samples = []
        trace_from = walk - trace_last
        traced0 = 0
        for i in range(1, walk + 1):
            await _step_to(app, screen, "left", screen.index - 1)
            await pilot.pause(0)
            if i == trace_from:
                gc.collect()
                tracemalloc.start()
                traced0 = tracemalloc.get_traced_memory()[0]
            if i % max(1, walk // 8) == 0 or i == walk:
                samples.append((i, _proc_status()["VmRSS"]))
        gc.collect()
        traced_end, traced_peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        state_msgs = len(screen.payload.state.get("messages", []))
    st = _proc_status()
    return {
        "rss_open": rss_open,
        "samples": samples,
        "peak_rss": st["VmHWM"],
        "traced_growth": traced_end - traced0,
        "traced_peak": traced_peak - traced0,
        "state_messages": state_msgs,
        "steps": len(screen.steps),
    }


# ---------------------------------------------------------------------------
# Measuring and printing
# ---------------------------------------------------------------------------


@dataclass
class Result:
    label: str
    ui: dict[str, list[float]] = field(default_factory=dict)  # op -> seconds per sample
    store: dict[str, list[float]] = field(default_factory=dict)
    parts: dict[str, list[float]] = field(default_factory=dict)  # store step breakdown
    diff_entries: int = 0
    memory: dict | None = None


def measure(rec: Recorded, db: Path, reps: int, presses: int) -> Result:
    res = Result(rec.shape.label)
    label = f"{rec.shape.label} ({rec.step_rows} steps)"
    # Store only. A fresh store per open; one warm store for stepping, like the app's.
    opens = [store_open(db, rec.run_id) for _ in range(reps + 1)][1:]
    res.store["open (steps listed)"] = [a for a, _ in opens]
    res.store["open"] = [b for _, b in opens]
    store = open_store(db)
    try:
        steps = store.list_steps(rec.run_id)
        read_step(store, rec.run_id, steps, len(steps) - 1)  # warm, as after open
        walk = [read_step(store, rec.run_id, steps, len(steps) - 2 - i) for i in range(presses)]
        res.store["step"] = [w["total"] for w in walk]
        res.parts = {p: [w[p] for w in walk] for p in STEP_PARTS}
        diffs = [store_diff(store, rec.run_id, steps[1], steps[-1]) for _ in range(reps)]
        res.store["diff"] = [d for d, _ in diffs]
        res.diff_entries = diffs[0][1]
    finally:
        store.close()
    print(f"  {label}: store-only done", file=sys.stderr, flush=True)
    # The app. One warm-up open (imports, CSS, page cache), then ``reps`` timed opens.
    asyncio.run(ui_open(db, rec.run_id))
    ui_opens = [asyncio.run(ui_open(db, rec.run_id)) for _ in range(reps)]
    res.ui["open (steps listed)"] = [o["steps"] for o in ui_opens]
    res.ui["open"] = [o["payload"] for o in ui_opens]
    res.ui["open, painted"] = [o["painted"] for o in ui_opens]
    steps_ui, diffs_ui, n = asyncio.run(ui_step_and_diff(db, rec.run_id, presses, reps))
    res.ui["step"] = [a for a, _ in steps_ui]
    res.ui["step, painted"] = [b for _, b in steps_ui]
    res.ui["diff"] = [a for a, _ in diffs_ui]
    res.ui["diff, painted"] = [b for _, b in diffs_ui]
    if n != res.diff_entries:
        print(f"  note: the app's marked diff has {n} entries, the store-only one {res.diff_entries}", file=sys.stderr)
    print(f"  {label}: app done", file=sys.stderr, flush=True)
    return res


def _ms(xs: list[float]) -> float:
    return statistics.median(xs) * 1000


def _spread(xs: list[float]) -> str:
    if len(xs) < 2:
        return ""
    med = statistics.median(xs)
    return f"{(max(xs) - min(xs)) / med:.0%}" if med else ""


OPS = ["open (steps listed)", "open", "open, painted", "step", "step, painted", "diff", "diff, painted"]


def print_times(results: list[Result], recs: list[Recorded]) -> None:
    by = {r.label: r for r in results}
    labels = [r.shape.label for r in recs]
    base = "short" if "short" in by else labels[-1]
    print("\nMedian milliseconds (app = headless Textual at 140x40; store = the same reads without the UI)")
    head = f"  {'operation':<22} {'where':<6}" + "".join(f" {lab:>10}" for lab in labels) + f" {'long÷' + base:>11} {'target':>8} {'long÷target':>12}"
    print(head)
    print("  " + "-" * (len(head) - 2))
    for op in OPS:
        for where in ("app", "store"):
            rows = {lab: (by[lab].ui if where == "app" else by[lab].store).get(op) for lab in labels}
            if all(v is None for v in rows.values()):
                continue
            cells = "".join(f" {_ms(v):>10.1f}" if v else f" {'':>10}" for v in rows.values())
            lv, bv = rows.get("long"), rows.get(base)
            ratio = f"{_ms(lv) / _ms(bv):>11.2f}" if lv and bv else f"{'':>11}"
            key = op.split(" ")[0].rstrip(",")
            target = TARGETS_MS.get(key)
            tgt = f"{target:>8.0f}" if target and "listed" not in op else f"{'':>8}"
            vs = f"{_ms(lv) / target:>12.2f}" if target and lv and "listed" not in op else f"{'':>12}"
            print(f"  {op:<22} {where:<6}{cells} {ratio} {tgt} {vs}")
    print("\n  Spread (max−min)/median of the long run's samples: " + ", ".join(f"{op} {_spread(by['long'].ui[op])}" for op in ("open", "step", "diff") if "long" in by))
    print("\nStore-only step, broken down (median ms; one step back, as `left` does)")
    head = f"  {'part':<16}" + "".join(f" {lab:>10}" for lab in labels)
    print(head)
    print("  " + "-" * (len(head) - 2))
    for p in STEP_PARTS:
        print(f"  {p:<16}" + "".join(f" {_ms(by[lab].parts[p]):>10.1f}" for lab in labels))
    print("  " + f"{'marked diff size':<16}" + "".join(f" {by[lab].diff_entries:>10}" for lab in labels) + "  (entries, first step vs last)")


def print_memory(mems: dict[str, dict], walk: int, trace_last: int) -> None:
    print(f"\nMemory while stepping back {walk} steps (fresh process per run; RSS from /proc, tracemalloc over the last {trace_last} steps)")
    head = f"  {'run':<7} {'steps':>7} {'msgs/state':>10} {'RSS open':>10} {'RSS end':>10} {'growth':>9} {'/100 steps':>11} {'peak RSS':>10} {'traced Δ':>10} {'traced peak':>12}"
    print(head)
    print("  " + "-" * (len(head) - 2))
    for label, m in mems.items():
        (first_i, first_rss), (last_i, last_rss) = m["samples"][0], m["samples"][-1]
        per100 = (last_rss - first_rss) / max(1, last_i - first_i) * 100
        print(
            f"  {label:<7} {m['steps']:>7} {m['state_messages']:>10} {m['rss_open'] / MIB:>9.0f}M {last_rss / MIB:>9.0f}M "
            f"{(last_rss - m['rss_open']) / MIB:>8.1f}M {per100 / MIB:>10.2f}M {m['peak_rss'] / MIB:>9.0f}M "
            f"{m['traced_growth'] / MIB:>9.2f}M {m['traced_peak'] / MIB:>11.1f}M"
        )
    print("  RSS samples (step: MiB): ")
    for label, m in mems.items():
        print(f"    {label:<7} " + "  ".join(f"{i}:{rss / MIB:.0f}" for i, rss in m["samples"]))
    print(
        "  growth = RSS at the end − RSS right after open; /100 steps = slope between the first and last sample,"
        "\n  so a leak shows there. traced Δ = tracemalloc net growth over its window (≈0 if nothing is kept per"
        "\n  step); traced peak = largest extra memory held at once in that window (one step's working set)."
    )


def print_targets(results: list[Result]) -> list[str]:
    print("\nTargets (long run, median)")
    long = next(r for r in results if r.label == "long")
    missed = []
    for op, target in TARGETS_MS.items():
        for variant in (op, f"{op}, painted"):
            if variant not in long.ui:
                continue
            v = _ms(long.ui[variant])
            ok = v < target
            store_v = long.store.get(op)
            extra = f"  (store only {_ms(store_v):.1f} ms)" if store_v else ""
            print(f"  {'PASS' if ok else 'MISS'}  {variant:<16} < {target:>5.0f} ms   {v:>9.1f} ms = {v / target:.2f}× target{extra}")
            if not ok:
                missed.append(variant)
    return missed


# ---------------------------------------------------------------------------
# Profiles of what missed
# ---------------------------------------------------------------------------


def profile_missed(missed: list[str], db: Path, rec: Recorded, top: int) -> None:
    """cProfile the store-side work (what the worker thread runs) and, for the app, the UI thread."""
    if not missed:
        return
    ops = {m.split(",")[0] for m in missed}
    store = open_store(db)
    steps = store.list_steps(rec.run_id)
    read_step(store, rec.run_id, steps, len(steps) - 1)
    jobs: list[tuple[str, Callable[[], Any]]] = []
    if "open" in ops:
        jobs.append(("store side of open (fresh store, last step)", lambda: store_open(db, rec.run_id)))
    if "step" in ops:
        jobs.append(("store side of 10 steps back", lambda: [read_step(store, rec.run_id, steps, len(steps) - 2 - i) for i in range(10)]))
    if "diff" in ops:
        jobs.append(("store side of the marked diff", lambda: store_diff(store, rec.run_id, steps[1], steps[-1])))
    for title, job in jobs:
        prof = cProfile.Profile()
        prof.enable()
        job()
        prof.disable()
        _print_profile(f"{title} [{rec.shape.label}]", prof, top)
    store.close()
    # The UI thread (event loop) during a step and a diff: the worker threads are not in this profile.
    prof = cProfile.Profile()

    async def session() -> None:
        from tui.app import build_app

        app = build_app(str(db), rec.run_id)
        async with app.run_test(size=SIZE) as pilot:
            screen, _ = await _open(app, pilot, time.perf_counter())
            if "step" in ops:
                prof.enable()
                for _ in range(10):
                    await _step_to(app, screen, "left", screen.index - 1)
                    await pilot.pause(0)
                prof.disable()
            if "diff" in ops:
                await _mark_first_and_go_last(app, screen)
                await pilot.pause(0)
                before = screen.diff_entries
                prof.enable()
                await _press(app, "d")
                await _until(lambda: screen.diff_entries is not before, "diff")
                await pilot.pause(0)
                prof.disable()

    asyncio.run(session())
    _print_profile(f"UI thread during {' and '.join(sorted(ops - {'open'}))} [{rec.shape.label}]", prof, top)


def _print_profile(title: str, prof: cProfile.Profile, top: int) -> None:
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf).strip_dirs().sort_stats("cumulative")
    stats.print_stats(top)
    print(f"\nProfile: {title} (cumulative, top {top})")
    lines = buf.getvalue().splitlines()
    start = next((i for i, line in enumerate(lines) if "ncalls" in line), 0)
    total = next((line for line in lines if "function calls" in line), "")
    print("  " + total.strip())
    for line in lines[start:]:
        if line.strip():
            print("  " + line)


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------


def default_db(quick: bool) -> Path:
    d = Path(tempfile.gettempdir()) / "graphtape-bench-tui"
    d.mkdir(exist_ok=True)
    return d / f"runs-s{SCHEMA_VERSION}{'-quick' if quick else ''}.db"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--_record"]:
        db, steps, prefill, name = argv[1:5]
        print(json.dumps(record_child(db, int(steps), int(prefill), name)))
        return 0
    if argv[:1] == ["--_memory"]:
        db, run_id, walk, trace_last = argv[1:5]
        print(json.dumps(asyncio.run(memory_walk(Path(db), run_id, int(walk), int(trace_last)))))
        return 0

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", type=Path, help="database holding the recorded runs (made on first use; default: a file in the temp dir)")
    ap.add_argument("--reps", type=int, default=5, help="repetitions for open and diff (default 5)")
    ap.add_argument("--presses", type=int, default=20, help="left presses timed per run (default 20)")
    ap.add_argument("--walk", type=int, default=200, help="steps walked for the memory figures (default 200)")
    ap.add_argument("--trace-last", type=int, default=50, help="tracemalloc window: the walk's last N steps (default 50)")
    ap.add_argument("--quick", action="store_true", help="small runs and few repetitions: a smoke run")
    ap.add_argument("--no-memory", action="store_true", help="skip the memory subprocesses")
    ap.add_argument("--profile", action="store_true", help="print cProfile output for every target the long run misses")
    ap.add_argument("--top", type=int, default=25, help="rows per profile (default 25)")
    args = ap.parse_args(argv)
    if args.quick:
        args.reps, args.presses, args.walk, args.trace_last = 3, 5, 20, 10
    shapes = QUICK if args.quick else FULL
    db = (args.db or default_db(args.quick)).expanduser().resolve()
    t_start = time.perf_counter()

    print(f"graphtape TUI benchmark — Python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs")
    print(f"store: {db}")
    print(f"reps: {args.reps} opens and diffs, {args.presses} steps, memory walk {args.walk} steps")

    t0 = time.perf_counter()
    recs = ensure_runs(db, shapes)
    print(f"\nRecorded runs (Recorder, durability default; one ~{MESSAGE_CHARS}-char message per superstep)")
    head = f"  {'run':<7} {'supersteps':>10} {'prefilled':>9} {'step rows':>9} {'invoke':>9} {'close':>8} {'ms/step':>8} {'peak RSS':>9}  source"
    print(head)
    print("  " + "-" * (len(head) - 2))
    for r in recs:
        inv = f"{r.invoke_s:>8.1f}s" if r.invoke_s is not None else f"{'?':>9}"
        close = f"{r.close_s:>7.2f}s" if r.close_s is not None else f"{'':>8}"
        per = f"{r.invoke_s / r.shape.steps * 1000:>8.2f}" if r.invoke_s else f"{'':>8}"
        rss = f"{r.peak_rss / MIB:>8.0f}M" if r.peak_rss else f"{'':>9}"
        src = "cached (invoke = the run's recorded duration)" if r.cached else "recorded now"
        print(f"  {r.shape.label:<7} {r.shape.steps:>10} {r.shape.prefill:>9} {r.step_rows:>9} {inv} {close} {per} {rss}  {src}")
    print(f"  ({time.perf_counter() - t0:.1f} s to find or record the runs; file {db.stat().st_size / MIB:.0f} MiB)")

    results = [measure(r, db, args.reps, args.presses) for r in recs]
    print_times(results, recs)

    if not args.no_memory:
        mems = {}
        for r in recs:
            mems[r.shape.label] = _child(["--_memory", str(db), r.run_id, str(args.walk), str(args.trace_last)])
            print(f"  {r.shape.label}: memory done", file=sys.stderr, flush=True)
        print_memory(mems, args.walk, args.trace_last)

    missed = print_targets(results)
    if args.profile:
        profile_missed(missed, db, next(r for r in recs if r.shape.label == "long"), args.top)
    print(f"\nTotal {time.perf_counter() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
