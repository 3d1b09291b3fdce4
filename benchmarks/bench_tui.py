"""TUI responsiveness on long runs: open, step and diff, in the app and on the store alone.

Three runs of one graph are recorded once with graphtape's ``Recorder`` and
kept in a cache database. Two nodes take turns (a conditional edge picks the
next one); each superstep appends one ~200-character message to an
``add_messages`` list that starts with prefilled messages:

- **long**: 10,000 supersteps, 1,000 prefilled messages (the run under test);
- **short**: 1,000 supersteps, 1,000 prefilled (same shape, a tenth as long);
- **wide**: 1,000 supersteps, 10,000 prefilled: as long as *short*, but its
  last steps hold as many messages as *long*'s, so it separates the cost of
  run length from the cost of state size.

For each run the script times, with medians over repetitions:

1. **open**: from app start (``build_app(db, run_id)``, headless at 140x40)
   until the run screen holds the payload of the step it opens at (its first
   problem, else step 0), and until the UI is idle again (layout and paint
   done); then ``end`` until the last step's payload is on screen;
2. **step**: ``left`` until the previous step's payload is on screen (this
   includes the default diff of a step against the one before it);
3. **diff**: the first superstep marked (``home``, ``right``, ``m``), then
   ``end`` and ``d``: until ``diff_entries`` arrive, and until painted;

and the same reads on the store alone (``list_steps``, then
``tui.step_reader.StepReader``: the code the run screen's workers run, with
its small cache of states), so UI overhead and store cost can be told apart. *short* and *wide* are the in-process
baselines. Memory is measured in a fresh subprocess per run (the three run
side by side): RSS after opening and while stepping back 200 steps, then
tracemalloc over a further window of steps.

Keys are posted with ``App.simulate_key`` and the script polls for the
result every millisecond: ``Pilot.press`` waits until the process has been
idle for 20 ms, which would time the harness rather than the app.

Usage::

    .venv/bin/python benchmarks/bench_tui.py               # ~1 min; the first time ~2 more to record the runs
    .venv/bin/python benchmarks/bench_tui.py --db runs.db  # keep the recorded runs in this file
    .venv/bin/python benchmarks/bench_tui.py --quick       # smoke run on small runs, about a minute
    .venv/bin/python benchmarks/bench_tui.py --profile     # also cProfile each target the long run misses

The recorded runs are cached in the temp directory, one file per version of
the recorder's source (``graphtape-bench-tui/runs-<digest>.db``); old files
there can be deleted.

The script is a report: it always exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import hashlib
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

from graphtape import recorder
from graphtape.recorder import open_store
from graphtape.recorder.records import StepInfo
from graphtape.recorder.store import SqlStore
from graphtape.tui.data import count_differences, diff_states, first_of, message_lists
from graphtape.tui.step_reader import TRANSCRIPT_TAIL, StepReader

SIZE = (140, 40)
MESSAGE_CHARS = 200
POLL_S = 0.001
TIMEOUT_S = 180.0
IDLE_PASS_S = 0.005  # a layout-and-paint pass this short found nothing left to do
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
# The graph and its recording (in a subprocess, so LangGraph's memory stays out of the figures)
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


def build_graph(stamps: list[float] | None = None) -> Any:
    """Nodes ``a`` and ``b`` take turns through a conditional edge; each appends one message.

    Each node run appends ``time.perf_counter()`` to ``stamps``: the wall clock of every superstep.
    """
    from typing import Annotated, TypedDict

    from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import add_messages

    # The functional form: this module's `from __future__ import annotations` would leave strings.
    State = TypedDict("State", {"n": int, "limit": int, "messages": Annotated[list[AnyMessage], add_messages]})

    def speak(state: dict) -> dict:
        if stamps is not None:
            stamps.append(time.perf_counter())
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


def _inputs(steps: int, prefill: int) -> dict:
    from langchain_core.messages import HumanMessage

    return {"n": 0, "limit": steps, "messages": [HumanMessage(content=text_for(i), id=f"pre-{i}") for i in range(prefill)]}


def _rates(stamps: list[float]) -> tuple[float, float]:
    """ms per superstep over the first and the last tenth of a run."""
    tenth = max(1, len(stamps) // 10)
    return (stamps[tenth] - stamps[0]) / tenth * 1000, (stamps[-1] - stamps[-1 - tenth]) / tenth * 1000


def record_child(db: str, steps: int, prefill: int, name: str) -> dict:
    """Record one run into ``db`` (durability default); report timings and peak RSS."""
    from graphtape.recorder import Recorder

    stamps: list[float] = []
    rec = Recorder(db)
    recorded = rec.attach(build_graph(stamps), name=name)
    t0 = time.perf_counter()
    recorded.invoke(_inputs(steps, prefill), {"recursion_limit": steps + 100})
    t1 = time.perf_counter()
    rec.close()
    t2 = time.perf_counter()
    head, tail = _rates(stamps)
    return {"run_id": rec.last_run_id, "invoke_s": t1 - t0, "close_s": t2 - t1, "head_ms": head, "tail_ms": tail, "peak_rss": _proc_status()["VmHWM"]}


def bare_child(steps: int, prefill: int) -> dict:
    """The same graph without graphtape, in a process of its own.

    Not after the recorded run in one process: after a large recorded run the
    same process ran the bare graph about 2x slower, even after close() and gc.
    """
    stamps: list[float] = []
    graph = build_graph(stamps)
    t0 = time.perf_counter()
    graph.invoke(_inputs(steps, prefill), {"recursion_limit": steps + 100})
    t1 = time.perf_counter()
    head, tail = _rates(stamps)
    return {"bare_s": t1 - t0, "bare_head_ms": head, "bare_tail_ms": tail}


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


def _child_cmd(args: list[str]) -> list[str]:
    return [sys.executable, os.path.abspath(__file__), *args]


def _child_result(proc: subprocess.CompletedProcess | subprocess.Popen, out: str, err: str, what: str) -> dict:
    """A hidden sub-command's last stdout line is its JSON result."""
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed:\n{err[-3000:]}")
    return json.loads(out.strip().splitlines()[-1])


def _child(args: list[str]) -> dict:
    proc = subprocess.run(_child_cmd(args), capture_output=True, text=True)
    return _child_result(proc, proc.stdout, proc.stderr, args[0])


@dataclass
class Recorded:
    """A run in the cache database, with what its recording cost (kept in a JSON file beside it)."""

    shape: Shape
    run_id: str
    cached: bool
    step_rows: int = 0
    figures: dict[str, float] = field(default_factory=dict)  # from record_child and bare_child


def find_run(store: SqlStore, shape: Shape) -> str | None:
    for run in store.list_runs(text=shape.name):
        if run.name == shape.name and run.status == "ok":
            return run.id
    return None


def ensure_runs(db: Path, shapes: list[Shape]) -> list[Recorded]:
    """Find each run in the cache database, recording the missing ones."""
    sidecar = db.with_name(db.name + ".recording.json")
    try:
        known = json.loads(sidecar.read_text())
    except (OSError, ValueError):
        known = {}
    out = []
    for shape in shapes:
        store = SqlStore(db, create=True)
        try:
            run_id = find_run(store, shape)
        finally:
            store.close()
        if run_id is not None:
            figures = known.get(shape.name, {})
            out.append(Recorded(shape, run_id, cached=True, figures=figures if figures.get("run_id") == run_id else {}))
            continue
        print(f"  recording {shape.label}: {shape.steps} supersteps, {shape.prefill} prefilled messages ...", file=sys.stderr, flush=True)
        figures = _child(["--_record", str(db), str(shape.steps), str(shape.prefill), shape.name])
        figures.update(_child(["--_bare", str(shape.steps), str(shape.prefill)]))
        figures["recorder"] = recorder_version()
        known[shape.name] = figures
        sidecar.write_text(json.dumps(known, indent=1))
        out.append(Recorded(shape, figures["run_id"], cached=False, figures=figures))
    store = open_store(db)
    try:
        for r in out:
            r.step_rows = len(store.list_steps(r.run_id))
            if not r.figures:
                r.figures = {"invoke_s": store.get_run(r.run_id).duration_s}
    finally:
        store.close()
    return out


# ---------------------------------------------------------------------------
# Store only: what the run screen's workers do, called directly
# ---------------------------------------------------------------------------

STEP_PARTS = ("step_detail", "state_at", "state_at(prev)", "calls", "diff_states", "transcript")


def read_step(reader: StepReader, steps: list[StepInfo], index: int) -> dict[str, float]:
    """``StepReader.read`` (what the run screen's worker runs), timed whole and part by part (seconds).

    The parts repeat its calls one by one on a second reader with the same
    cache, so they add up to about the whole without timing a copy of it.
    """
    t0 = time.perf_counter()
    reader.read(steps, index)
    total = time.perf_counter() - t0
    parts = StepReader(reader.store, reader.run_id, reader.ns)
    parts._states = dict(reader._states)
    store, step = reader.store, steps[index]
    t0 = time.perf_counter()
    store.step_detail(reader.run_id, step.step)
    t1 = time.perf_counter()
    parts._states.pop(step.step, None)  # as the screen sees it: this step new, the one before cached
    state = parts.state(step.step)
    t2 = time.perf_counter()
    prev_index = first_of(steps, index, -1, lambda s: not s.pending and s.step < step.step)
    old = parts.state(steps[prev_index].step) if prev_index is not None else {}
    t3 = time.perf_counter()
    if step.step >= 0:
        store.calls(reader.run_id, step=step.step, ns="")
    t4 = time.perf_counter()
    diff_states(old, state)
    t5 = time.perf_counter()
    lists = message_lists(state)
    for key in list(lists)[:1]:
        list(lists[key][-TRANSCRIPT_TAIL:])
    t6 = time.perf_counter()
    return {"step_detail": t1 - t0, "state_at": t2 - t1, "state_at(prev)": t3 - t2, "calls": t4 - t3, "diff_states": t5 - t4, "transcript": t6 - t5, "total": total}


def store_open(db: Path, run_id: str) -> tuple[float, float]:
    """A fresh store (cold blob cache, like a fresh app): run, steps and call counts, then the last step."""
    t0 = time.perf_counter()
    store = open_store(db)
    try:
        run = store.get_run(run_id)
        steps = store.list_steps(run.id)
        store.call_counts(run.id)
        t1 = time.perf_counter()
        StepReader(store, run.id).read(steps, len(steps) - 1)
        t2 = time.perf_counter()
    finally:
        store.close()
    return t1 - t0, t2 - t0


def store_diff(reader: StepReader, a: StepInfo, b: StepInfo) -> tuple[float, int]:
    """What ``RunScreen.load_diff`` does: ``StepReader.diff`` (returns seconds and how many differences)."""
    t0 = time.perf_counter()
    entries = reader.diff(a, b)
    return time.perf_counter() - t0, count_differences(entries)


# ---------------------------------------------------------------------------
# The app, headless
# ---------------------------------------------------------------------------


async def _until(pred: Callable[[], bool], what: str) -> None:
    deadline = time.perf_counter() + TIMEOUT_S
    while not pred():
        if time.perf_counter() > deadline:
            raise TimeoutError(f"waited {TIMEOUT_S:.0f} s for {what}")
        await asyncio.sleep(POLL_S)


async def _settle(pilot: Any) -> float:
    """Force layout and paint until a pass finds nothing left; returns when the last real pass ended.

    One pass is not always enough: a big renderable can trigger a second
    reflow (scrollbars appear), during which the UI is still frozen.
    """
    await pilot.pause(0)
    done = time.perf_counter()
    for _ in range(5):
        t = time.perf_counter()
        await pilot.pause(0)
        if time.perf_counter() - t < IDLE_PASS_S:
            break
        done = time.perf_counter()
    return done


def _run_screen(app: Any) -> Any:
    from graphtape.tui.screens.run import RunScreen

    screen = app.screen
    return screen if isinstance(screen, RunScreen) else None


async def _open(app: Any, pilot: Any, t0: float) -> tuple[Any, dict[str, float]]:
    """Wait until the run screen shows the step it opens at, then go to the last step (``end``).

    A run opens at its first problem, else where its story starts (step 0), so the opening
    step is read first; the last step, whose state is the largest, is where the stepping
    and diff sessions start from. Times from ``t0`` (seconds).
    """
    await _until(lambda: (s := _run_screen(app)) is not None and bool(s.steps), "the run screen's steps")
    screen = _run_screen(app)
    t_steps = time.perf_counter() - t0
    await _until(lambda: screen.payload is not None and screen.payload.index == screen.index, "the opening step's payload")
    t_payload = time.perf_counter() - t0
    t_paint = await _settle(pilot) - t0
    last = len(screen.steps) - 1
    t_end = time.perf_counter()
    if screen.index != last:
        await _step_to(app, screen, "end", last)
    t_last = time.perf_counter() - t_end
    await _settle(pilot)
    return screen, {"steps": t_steps, "payload": t_payload, "painted": t_paint, "last": t_last}


async def _press(app: Any, key: str) -> None:
    """Post a key event and return at once (see the module docstring for why not ``Pilot.press``)."""
    app.simulate_key(key)
    await asyncio.sleep(0)


async def _step_to(app: Any, screen: Any, key: str, target: int) -> None:
    await _press(app, key)
    await _until(lambda: screen.payload is not None and screen.payload.index == target, f"step index {target}")


async def _mark_first_and_go_last(app: Any, screen: Any) -> None:
    """``home``, ``right``, ``m``, ``end``: the first superstep (after the input) marked, the last shown."""
    await _step_to(app, screen, "home", 0)
    await _step_to(app, screen, "right", 1)
    await _press(app, "m")
    await _until(lambda: screen.marked == 1, "the mark")
    await _step_to(app, screen, "end", len(screen.steps) - 1)


async def ui_start(db: Path) -> float:
    """Baseline: app start until the runs list is loaded (no run opened)."""
    from graphtape.tui.app import build_app
    from graphtape.tui.screens.runs import RunsScreen

    app = build_app(str(db))
    t0 = time.perf_counter()
    async with app.run_test(size=SIZE) as pilot:
        await _until(lambda: isinstance(app.screen, RunsScreen) and bool(app.screen.runs), "the runs list")
        return await _settle(pilot) - t0


async def ui_open(db: Path, run_id: str) -> dict[str, float]:
    from graphtape.tui.app import build_app

    app = build_app(str(db), run_id)
    t0 = time.perf_counter()
    async with app.run_test(size=SIZE) as pilot:
        _, times = await _open(app, pilot, t0)
    return times


Samples = list[tuple[float, float]]  # (data arrived, UI idle again), seconds


async def ui_step_and_diff(db: Path, run_id: str, presses: int, diff_reps: int, budget_s: float) -> tuple[Samples, Samples, int]:
    """One session: ``presses`` × left, then the first superstep marked and d at the last step.

    The diff repeats ``diff_reps`` times or until ``budget_s`` is spent (at least once).
    """
    from graphtape.tui.app import build_app

    app = build_app(str(db), run_id)
    steps_out: Samples = []
    diffs_out: Samples = []
    async with app.run_test(size=SIZE) as pilot:
        screen, _ = await _open(app, pilot, time.perf_counter())
        for _ in range(presses):
            t0 = time.perf_counter()
            await _step_to(app, screen, "left", screen.index - 1)
            t1 = time.perf_counter()
            steps_out.append((t1 - t0, await _settle(pilot) - t0))
        await _mark_first_and_go_last(app, screen)
        await _settle(pilot)
        n_entries = 0
        spent = 0.0
        while len(diffs_out) < diff_reps and (not diffs_out or spent < budget_s):
            before = screen.diff_entries
            t0 = time.perf_counter()
            await _press(app, "d")
            await _until(lambda: screen.diff_entries is not before, "the marked diff")
            t1 = time.perf_counter()
            t2 = await _settle(pilot)
            diffs_out.append((t1 - t0, t2 - t0))
            spent += time.perf_counter() - t0
            n_entries = count_differences(screen.diff_entries)
    return steps_out, diffs_out, n_entries


async def memory_walk(db: Path, run_id: str, walk: int, trace: int) -> dict:
    """RSS after open and while stepping back ``walk`` steps; then tracemalloc over ``trace`` more."""
    from graphtape.tui.app import build_app

    app = build_app(str(db), run_id)
    async with app.run_test(size=SIZE) as pilot:
        screen, _ = await _open(app, pilot, time.perf_counter())
        gc.collect()
        rss_open = _proc_status()["VmRSS"]
        samples = []
        every = max(1, walk // 8)
        for i in range(1, walk + 1):
            await _step_to(app, screen, "left", screen.index - 1)
            await _settle(pilot)
            if i % every == 0 or i == walk:
                samples.append((i, _proc_status()["VmRSS"]))
        peak_rss = _proc_status()["VmHWM"]  # before tracemalloc, whose own tables would count
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        for _ in range(trace):
            await _step_to(app, screen, "left", screen.index - 1)
            await _settle(pilot)
        gc.collect()
        traced_end, traced_peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return {
            "rss_open": rss_open,
            "samples": samples,
            "peak_rss": peak_rss,
            "traced_growth": traced_end - base,
            "traced_peak": traced_peak - base,
            "state_messages": len(screen.payload.state.get("messages", [])),
            "steps": len(screen.steps),
        }


def memory_all(db: Path, recs: list[Recorded], walk: int, trace: int) -> dict[str, dict]:
    """One subprocess per run, side by side: memory figures do not care about CPU contention."""
    procs = []
    for r in recs:
        p = subprocess.Popen(_child_cmd(["--_memory", str(db), r.run_id, str(walk), str(trace)]), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append((r.shape.label, p))
    out = {}
    for label, p in procs:
        stdout, stderr = p.communicate()
        out[label] = _child_result(p, stdout, stderr, f"memory walk of {label}")
    return out


# ---------------------------------------------------------------------------
# Measuring
# ---------------------------------------------------------------------------


@dataclass
class Result:
    label: str
    ui: dict[str, list[float]] = field(default_factory=dict)  # op -> seconds per sample
    store: dict[str, list[float]] = field(default_factory=dict)
    parts: dict[str, list[float]] = field(default_factory=dict)  # store-only step, part by part
    diff_entries: int = 0


def measure(rec: Recorded, db: Path, reps: int, presses: int, budget_s: float) -> Result:
    res = Result(rec.shape.label)
    label = f"{rec.shape.label} ({rec.step_rows} steps)"
    # Store only: a fresh store per open (one untimed warm-up), one warm store for stepping, like the app's.
    opens = [store_open(db, rec.run_id) for _ in range(reps + 1)][1:]
    res.store["open (steps listed)"] = [a for a, _ in opens]
    res.store["open"] = [b for _, b in opens]
    store = open_store(db)
    try:
        steps = store.list_steps(rec.run_id)
        reader = StepReader(store, rec.run_id)
        reader.read(steps, len(steps) - 1)
        walk = [read_step(reader, steps, len(steps) - 2 - i) for i in range(presses)]
        res.store["step"] = [w["total"] for w in walk]
        res.parts = {p: [w[p] for w in walk] for p in STEP_PARTS}
        # A fresh reader per diff, as the app's first d: neither state cached.
        diffs = [store_diff(StepReader(store, rec.run_id), steps[1], steps[-1]) for _ in range(reps)]
        res.store["diff"] = [d for d, _ in diffs]
        res.diff_entries = diffs[0][1]
    finally:
        store.close()
    print(f"  {label}: store only done", file=sys.stderr, flush=True)
    # The app: one untimed warm-up open (imports, page cache), then ``reps`` timed ones.
    asyncio.run(ui_open(db, rec.run_id))
    ui_opens = [asyncio.run(ui_open(db, rec.run_id)) for _ in range(reps)]
    res.ui["open (steps listed)"] = [o["steps"] for o in ui_opens]
    res.ui["open"] = [o["payload"] for o in ui_opens]
    res.ui["open, painted"] = [o["painted"] for o in ui_opens]
    res.ui["end (last step)"] = [o["last"] for o in ui_opens]
    steps_ui, diffs_ui, n = asyncio.run(ui_step_and_diff(db, rec.run_id, presses, reps, budget_s))
    res.ui["step"] = [a for a, _ in steps_ui]
    res.ui["step, painted"] = [b for _, b in steps_ui]
    res.ui["diff"] = [a for a, _ in diffs_ui]
    res.ui["diff, painted"] = [b for _, b in diffs_ui]
    if n != res.diff_entries:
        print(f"  note: the app's marked diff has {n} entries, the store-only one {res.diff_entries}", file=sys.stderr)
    print(f"  {label}: app done", file=sys.stderr, flush=True)
    return res


# ---------------------------------------------------------------------------
# Printing
# ---------------------------------------------------------------------------

OPS = ["open (steps listed)", "open", "open, painted", "end (last step)", "step", "step, painted", "diff", "diff, painted"]


def _ms(xs: list[float]) -> float:
    return statistics.median(xs) * 1000


def _p90(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=10)[-1] if len(xs) > 1 else (xs[0] if xs else 0.0)


def _spread(xs: list[float]) -> str:
    med = statistics.median(xs) if xs else 0
    return f"{(max(xs) - min(xs)) / med:.0%}" if len(xs) > 1 and med else "–"


def print_recorded(recs: list[Recorded], db: Path, seconds: float) -> None:
    print("\nRecording (Recorder, durability default) against the bare graph (no checkpointer, own process), s and ms/superstep")
    head = (
        f"  {'run':<6} {'supersteps':>10} {'prefill':>7} {'invoke':>8} {'close':>6} {'bare':>7} {'÷ bare':>7}"
        f" {'ms/step':>8} {'first 10%':>10} {'last 10%':>9} {'bare last':>10} {'peak RSS':>9}"
    )
    print(head)
    print("  " + "-" * (len(head) - 2))

    def cell(key: str, width: int, fmt: str, scale: float = 1.0) -> str:
        v = r.figures.get(key)
        return f"{v * scale:>{width}{fmt}}" if v is not None else f"{'':>{width}}"

    for r in recs:
        f = r.figures
        ratio = f"{f['invoke_s'] / f['bare_s']:>7.2f}" if f.get("bare_s") else f"{'':>7}"
        per = f"{f['invoke_s'] / r.shape.steps * 1000:>8.2f}" if f.get("invoke_s") else f"{'':>8}"
        print(
            f"  {r.shape.label:<6} {r.shape.steps:>10} {r.shape.prefill:>7} {cell('invoke_s', 8, '.1f')} {cell('close_s', 6, '.2f')}"
            f" {cell('bare_s', 7, '.1f')} {ratio} {per} {cell('head_ms', 10, '.2f')} {cell('tail_ms', 9, '.2f')}"
            f" {cell('bare_tail_ms', 10, '.2f')} {cell('peak_rss', 8, '.0f', 1 / MIB)}{'M' if f.get('peak_rss') else ' '}"
        )
    stale = [r.shape.label for r in recs if r.figures.get("recorder") not in (None, recorder_version())]
    if stale:
        print(f"  note: {', '.join(stale)} recorded by a different recorder source than this one; delete {db.name} to re-record")
    fresh = [r.shape.label for r in recs if not r.cached]
    print(f"  ({seconds:.1f} s to find or record the runs{'; recorded now: ' + ', '.join(fresh) if fresh else ', all cached'}; {db.stat().st_size / MIB:.0f} MiB on disk)")
    print("  first/last 10% = ms per superstep over that part of the run (node timestamps); bare last = the same for the")
    print("  graph without graphtape; peak RSS = the recording process's. Figures come from the run's recording.")


def print_times(results: list[Result], recs: list[Recorded], start_ms: list[float], reps: int) -> None:
    by = {r.label: r for r in results}
    labels = [r.shape.label for r in recs]
    base = "short" if "short" in by else labels[-1]
    print("\nMedian milliseconds (app = headless Textual at 140x40; store = the same reads without the UI)")
    head = f"  {'operation':<20} {'where':<6}" + "".join(f" {lab:>9}" for lab in labels) + f" {'long÷' + base:>11} {'target':>7} {'long÷target':>12} {'samples':>9}"
    print(head)
    print("  " + "-" * (len(head) - 2))
    for op in OPS:
        for where in ("app", "store"):
            rows = {lab: (by[lab].ui if where == "app" else by[lab].store).get(op) for lab in labels}
            if all(v is None for v in rows.values()):
                continue
            cells = "".join(f" {_ms(v):>9.1f}" if v else f" {'':>9}" for v in rows.values())
            lv, bv = rows.get("long"), rows.get(base)
            ratio = f"{_ms(lv) / _ms(bv):>11.2f}" if lv and bv else f"{'':>11}"
            target = None if "listed" in op else TARGETS_MS.get(op.split(",")[0])
            tgt = f"{target:>7.0f}" if target else f"{'':>7}"
            vs = f"{_ms(lv) / target:>12.2f}" if target and lv else f"{'':>12}"
            counts = {len(v) for v in rows.values() if v}
            n = "" if counts <= {reps} or op.startswith("step") else "/".join(str(len(v)) if v else "-" for v in rows.values())
            print(f"  {op:<20} {where:<6}{cells} {ratio} {tgt} {vs} {n:>9}")
    print(f"\n  Baseline: app start until the runs list is painted (no run opened): {statistics.median(start_ms):.1f} ms")
    if "long" in by:
        print("  Spread (max−min)/median of the long run's app samples: " + ", ".join(f"{op} {_spread(by['long'].ui[op])}" for op in ("open", "step", "step, painted", "diff")))
        print("  Slowest steps of the long run (ms, 90th percentile / max): " + ", ".join(f"{op} {_p90(by['long'].ui[op]) * 1000:.1f} / {max(by['long'].ui[op]) * 1000:.1f}" for op in ("step", "step, painted")))
    print("  samples: shown where an op repeated fewer than --reps times (the diff stops once --budget seconds are spent).")
    print("\nStore-only step, part by part (median ms; one step back, as `left` does; states cached as StepReader does)")
    head = f"  {'part':<16}" + "".join(f" {lab:>9}" for lab in labels)
    print(head)
    print("  " + "-" * (len(head) - 2))
    for p in STEP_PARTS:
        print(f"  {p:<16}" + "".join(f" {_ms(by[lab].parts[p]):>9.1f}" for lab in labels))
    print("  " + f"{'marked diff':<16}" + "".join(f" {by[lab].diff_entries:>9}" for lab in labels) + "  differences (first superstep vs last)")


def print_memory(mems: dict[str, dict], walk: int, trace: int) -> None:
    print(f"\nMemory while stepping back {walk} steps (a fresh process per run; RSS from /proc/self/status)")
    head = f"  {'run':<6} {'steps':>6} {'msgs/state':>10} {'RSS open':>9} {'RSS end':>8} {'growth':>8} {'MiB/100 steps':>14} {'peak RSS':>9} {'traced Δ':>9} {'traced peak':>12}"
    print(head)
    print("  " + "-" * (len(head) - 2))
    for label, m in mems.items():
        (i0, rss0), (i1, rss1) = m["samples"][min(1, len(m["samples"]) - 1)], m["samples"][-1]
        slope = (rss1 - rss0) / max(1, i1 - i0) * 100 / MIB
        print(
            f"  {label:<6} {m['steps']:>6} {m['state_messages']:>10} {m['rss_open'] / MIB:>8.0f}M {rss1 / MIB:>7.0f}M "
            f"{(rss1 - m['rss_open']) / MIB:>7.1f}M {slope:>14.2f} {m['peak_rss'] / MIB:>8.0f}M "
            f"{m['traced_growth'] / MIB:>8.2f}M {m['traced_peak'] / MIB:>11.1f}M"
        )
    print("  RSS samples (steps walked: MiB)")
    for label, m in mems.items():
        print(f"    {label:<6} " + "  ".join(f"{i}:{rss / MIB:.0f}" for i, rss in m["samples"]))
    print(
        f"  growth = RSS after the walk − RSS right after open; MiB/100 steps = slope from the second sample to the last"
        f"\n  (a per-step leak shows there); peak RSS is taken before tracemalloc starts. traced Δ / traced peak: tracemalloc"
        f"\n  over {trace} further steps, net growth (≈0 when nothing is kept per step) and the most held at once."
    )


def print_targets(results: list[Result]) -> list[str]:
    print("\nTargets (long run, median)")
    long = next(r for r in results if r.label == "long")
    missed = []
    for op, target in TARGETS_MS.items():
        for variant in (op, f"{op}, painted"):
            v = _ms(long.ui[variant])
            ok = v < target
            store_v = long.store.get(op)
            extra = f"   store alone {_ms(store_v):.1f} ms" if store_v else ""
            print(f"  {'PASS' if ok else 'MISS'}  {variant:<14} < {target:>5.0f} ms  {v:>9.1f} ms = {v / target:>6.2f}× target{extra}")
            if not ok:
                missed.append(variant)
    return missed


# ---------------------------------------------------------------------------
# Profiles of what missed
# ---------------------------------------------------------------------------


def profile_missed(missed: list[str], db: Path, rec: Recorded, top: int) -> None:
    """cProfile the store side (what the worker threads run) and the UI thread, for each missed op.

    cProfile sees one thread: the worker threads' reads are profiled by
    running them here directly; the app's own profile is its event loop.
    """
    ops = {m.split(",")[0] for m in missed}
    if not ops:
        return
    store = open_store(db)
    steps = store.list_steps(rec.run_id)
    reader = StepReader(store, rec.run_id)
    reader.read(steps, len(steps) - 1)
    jobs: list[tuple[str, Callable[[], Any]]] = []
    if "open" in ops:
        jobs.append(("store side of open (fresh store, last step)", lambda: store_open(db, rec.run_id)))
    if "step" in ops:
        jobs.append(("store side of 10 steps back", lambda: [reader.read(steps, len(steps) - 2 - i) for i in range(10)]))
    if "diff" in ops:
        jobs.append(("store side of the marked diff", lambda: store_diff(StepReader(store, rec.run_id), steps[1], steps[-1])))
    for title, job in jobs:
        prof = cProfile.Profile()
        prof.enable()
        job()
        prof.disable()
        _print_profile(f"{title} [{rec.shape.label}]", prof, top)
    store.close()

    profs = {op: cProfile.Profile() for op in ops}

    async def session() -> None:
        from graphtape.tui.app import build_app

        app = build_app(str(db), rec.run_id)
        if "open" in profs:
            profs["open"].enable()
        async with app.run_test(size=SIZE) as pilot:
            screen, _ = await _open(app, pilot, time.perf_counter())
            if "open" in profs:
                profs["open"].disable()
            if "step" in profs:
                profs["step"].enable()
                for _ in range(10):
                    await _step_to(app, screen, "left", screen.index - 1)
                    await _settle(pilot)
                profs["step"].disable()
            if "diff" in profs:
                await _mark_first_and_go_last(app, screen)
                await _settle(pilot)
                before = screen.diff_entries
                profs["diff"].enable()
                await _press(app, "d")
                await _until(lambda: screen.diff_entries is not before, "the marked diff")
                await _settle(pilot)
                profs["diff"].disable()

    asyncio.run(session())
    what = {"open": "open", "step": "10 steps back", "diff": "the marked diff until painted"}
    for op, prof in profs.items():
        _print_profile(f"UI thread during {what[op]} [{rec.shape.label}]", prof, top)


def _print_profile(title: str, prof: cProfile.Profile, top: int) -> None:
    for order in ("cumulative", "tottime"):
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).strip_dirs().sort_stats(order).print_stats(top)
        lines = buf.getvalue().splitlines()
        total = next((line.strip() for line in lines if "function calls" in line), "")
        print(f"\nProfile: {title}, by {order} (top {top}; {total})")
        start = next((i for i, line in enumerate(lines) if "ncalls" in line), 0)
        for line in lines[start:]:
            if line.strip():
                print("  " + line)


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------


def recorder_version() -> str:
    """A digest of the recorder's source: how runs are framed and encoded decides what reading them costs."""
    h = hashlib.sha1()
    for f in sorted(Path(recorder.__file__).parent.glob("*.py")):
        h.update(f.name.encode() + f.read_bytes())
    return h.hexdigest()[:10]


def default_db(quick: bool) -> Path:
    """One cache file per recorder version, so a changed recorder is never benchmarked on old recordings."""
    d = Path(tempfile.gettempdir()) / "graphtape-bench-tui"
    d.mkdir(exist_ok=True)
    return d / f"runs-{recorder_version()}{'-quick' if quick else ''}.db"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--_record"]:
        db, steps, prefill, name = argv[1:5]
        print(json.dumps(record_child(db, int(steps), int(prefill), name)))
        return 0
    if argv[:1] == ["--_bare"]:
        print(json.dumps(bare_child(int(argv[1]), int(argv[2]))))
        return 0
    if argv[:1] == ["--_memory"]:
        db, run_id, walk, trace = argv[1:5]
        print(json.dumps(asyncio.run(memory_walk(Path(db), run_id, int(walk), int(trace)))))
        return 0

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", type=Path, help="database holding the recorded runs (made on first use; default: a file in the temp dir)")
    ap.add_argument("--reps", type=int, default=5, help="repetitions of open and diff (default 5)")
    ap.add_argument("--presses", type=int, default=60, help="left presses timed per run (default 60)")
    ap.add_argument("--budget", type=float, default=10.0, help="seconds after which the diff stops repeating (default 10)")
    ap.add_argument("--walk", type=int, default=200, help="steps walked for the RSS figures (default 200)")
    ap.add_argument("--trace", type=int, default=20, help="further steps walked under tracemalloc (default 20)")
    ap.add_argument("--quick", action="store_true", help="small runs and few repetitions: a smoke run")
    ap.add_argument("--no-memory", action="store_true", help="skip the memory subprocesses")
    ap.add_argument("--profile", action="store_true", help="print cProfile output for each target the long run misses (adds minutes while the diff paints slowly)")
    ap.add_argument("--top", type=int, default=25, help="rows per profile (default 25)")
    args = ap.parse_args(argv)
    if args.quick:
        args.reps, args.presses, args.walk, args.trace = 3, 5, 20, 10
    shapes = QUICK if args.quick else FULL
    db = (args.db or default_db(args.quick)).expanduser().resolve()
    t_start = time.perf_counter()

    print(f"graphtape TUI benchmark: Python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs")
    print(f"store: {db}")
    print(f"{args.reps} opens and diffs, {args.presses} steps per run; memory walk {args.walk} + {args.trace} traced steps")

    t0 = time.perf_counter()
    recs = ensure_runs(db, shapes)
    print_recorded(recs, db, time.perf_counter() - t0)
    t_measure = time.perf_counter()

    asyncio.run(ui_start(db))  # warm-up: imports, CSS, page cache
    start_ms = [asyncio.run(ui_start(db)) * 1000 for _ in range(args.reps)]
    results = [measure(r, db, args.reps, args.presses, args.budget) for r in recs]
    print_times(results, recs, start_ms, args.reps)

    if not args.no_memory:
        print_memory(memory_all(db, recs, args.walk, args.trace), args.walk, args.trace)

    missed = print_targets(results)
    if args.profile:
        profile_missed(missed, db, next(r for r in recs if r.shape.label == "long"), args.top)
    print(f"\nMeasuring took {time.perf_counter() - t_measure:.0f} s; {time.perf_counter() - t_start:.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
