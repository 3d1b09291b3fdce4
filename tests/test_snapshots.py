"""Snapshot tests: one per screen, on the bundled demo runs, with clocks and ids frozen.

Regenerate after an intended UI change with ``pytest tests/test_snapshots.py --snapshot-update``
and look at the SVGs in ``tests/__snapshots__`` before committing them.
"""

from __future__ import annotations

import os

import pytest
import sqlalchemy as sa
from conftest import load_agent

from graphtape.recorder import Recorder
from textual.worker import WorkerCancelled

from graphtape.tui.app import build_app

T0 = 1_790_000_000.0  # a fixed "now" for every recorded timestamp


def _freeze(db: str) -> None:
    """Give runs fixed ids, times and latencies so the pictures are stable."""
    engine = sa.create_engine(f"sqlite:///{db}")
    with engine.begin() as conn:
        runs = conn.execute(sa.text("SELECT id FROM runs ORDER BY started_at")).scalars().all()
        for i, old in enumerate(runs):
            new = f"{i + 1:04d}feedbeef0000"[:16]
            for table, col in (("runs", "id"), ("steps", "run_id"), ("calls", "run_id")):
                conn.execute(sa.text(f"UPDATE {table} SET {col}=:new WHERE {col}=:old"), {"new": new, "old": old})
            conn.execute(sa.text("UPDATE runs SET parent_run_id=:new WHERE parent_run_id=:old"), {"new": new, "old": old})
            conn.execute(sa.text("UPDATE runs SET started_at=:t, ended_at=:t + 1.5, heartbeat_at=:t WHERE id=:id"), {"t": T0 + i * 60, "id": new})
        # The incident's timed-out lookups return after their node gave up, before or
        # after the run ends depending on the machine: show them as still running.
        conn.execute(
            sa.text(
                "UPDATE calls SET error_type='Unfinished', error_message='the call had not returned when the run ended', output='null' "
                "WHERE name='lookup_order_status' AND node='act' AND run_id IN (SELECT id FROM runs WHERE name='demo:incident')"
            )
        )
        # Parallel calls race: order them by what they are, not by when they started.
        ids = conn.execute(sa.text("SELECT id FROM calls ORDER BY run_id, step, kind, name, inputs")).scalars().all()
        # (a second after every step's tasks, which are frozen at T0: no call looks like it outlived its node)
        for rank, call in enumerate(ids):
            conn.execute(sa.text("UPDATE calls SET latency_ms=12.0, started_at=:t WHERE id=:id"), {"t": T0 + 1 + rank, "id": call})
        conn.execute(sa.text("UPDATE steps SET duration_ms=3.0, created_at=:t"), {"t": T0})
    engine.dispose()


@pytest.fixture(scope="module")
def frozen_demo(tmp_path_factory):
    folder = tmp_path_factory.mktemp("snap")
    db = str(folder / "demo.db")
    ra = load_agent("reason_act")
    react = load_agent("react_agent")
    rec = Recorder(db)
    rec.attach(react.build_graph(), name="demo:react").invoke(react.inputs_for())
    rec.attach(ra.build_graph("happy"), name="demo:happy").invoke(ra.inputs_for("happy"))
    rec.attach(ra.build_graph("incident"), name="demo:incident").invoke(ra.inputs_for("incident"))
    rec.close()
    _freeze(db)
    return db


@pytest.fixture(autouse=True)
def _fixed_timezone(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    if hasattr(__import__("time"), "tzset"):
        __import__("time").tzset()


def _app(db: str, run: str | None = None):
    app = build_app(db, run)
    app.store_label = "demo.db"
    app.animation_level = "none"  # the tab underline slides: freeze it like the clock
    return app


async def _settle(pilot) -> None:
    """Wait until the screen shows what its workers loaded (the chain is several messages long)."""
    app = pilot.app
    for _ in range(60):
        await pilot.pause(0.02)
        try:
            await app.workers.wait_for_complete()
        except WorkerCancelled:
            continue  # an exclusive worker replaced by a newer one
        screen = app.screen
        busy = any(w.is_running for w in app.workers)
        payload = getattr(screen, "payload", None)
        if not busy and (not hasattr(screen, "payload") or (payload is not None and payload.index == screen.index)):
            break
    await pilot.pause(0.1)


def test_runs_screen(snap_compare, frozen_demo):
    assert snap_compare(_app(frozen_demo), terminal_size=(100, 24), run_before=_settle)


def test_run_screen_state(snap_compare, frozen_demo):
    assert snap_compare(_app(frozen_demo, "last"), terminal_size=(140, 34), run_before=_settle)


def test_run_screen_narrow_routes(snap_compare, frozen_demo):
    async def go(pilot):
        await _settle(pilot)
        await pilot.press("end")  # scroll from a settled layout, so the picture does not race it
        await _settle(pilot)
        await pilot.press("left", "4")
        await _settle(pilot)

    assert snap_compare(_app(frozen_demo, "last"), terminal_size=(80, 24), run_before=go)


def test_run_screen_calls(snap_compare, frozen_demo):
    async def go(pilot):
        await _settle(pilot)
        await pilot.press("colon")
        await pilot.press("1", "enter")
        await _settle(pilot)
        await pilot.press("5")
        await _settle(pilot)

    assert snap_compare(_app(frozen_demo, "0001"), terminal_size=(140, 34), run_before=go)


def test_run_screen_diff(snap_compare, frozen_demo):
    async def go(pilot):
        await _settle(pilot)
        await pilot.press("3")
        await _settle(pilot)

    assert snap_compare(_app(frozen_demo, "last"), terminal_size=(140, 34), run_before=go)


def test_help_screen(snap_compare, frozen_demo):
    async def go(pilot):
        await _settle(pilot)
        await pilot.press("question_mark")
        await _settle(pilot)

    assert snap_compare(_app(frozen_demo, "last"), terminal_size=(100, 30), run_before=go)


def test_error_screen(snap_compare):
    missing = "/nonexistent-graphtape-dir/runs.db"
    app = build_app(missing)
    app.animation_level = "none"
    assert snap_compare(app, terminal_size=(90, 12), run_before=_settle)
    assert not os.path.exists(missing)


@pytest.fixture(scope="module")
def frozen_replay(tmp_path_factory):
    """A recorded triage run replayed on a copy of its graph that routes elsewhere, ids and clocks frozen."""
    from dataclasses import replace

    from graphtape.replay import replay
    from graphtape.replay.loading import load_graph
    from test_tui_replay import TRIAGE

    folder = tmp_path_factory.mktemp("snap-replay")
    (folder / "triage.py").write_text(TRIAGE.format(limit=5))
    (folder / "triage_changed.py").write_text(TRIAGE.format(limit=500))
    db = str(folder / "replay.db")
    with Recorder(db) as rec:
        rec.attach(load_graph(f"{folder / 'triage.py'}:graph"), name="triage").invoke({"ticket": "printer on fire"})
        rec.flush()
        source = rec.last_run_id
    result = replay(source, load_graph(f"{folder / 'triage_changed.py'}:graph"), db=db)
    _freeze(db)
    return db, replace(result, source_run_id="0001feedbeef0000", run_id="0002feedbeef0000")


def test_compare_screen(snap_compare, frozen_replay):
    from graphtape.tui.screens.compare import CompareScreen

    db, result = frozen_replay

    async def go(pilot):
        await _settle(pilot)
        await pilot.app.push_screen(CompareScreen(result))
        await _settle(pilot)
        await pilot.press("n")  # the second divergence: the step where the two runs' nodes differ
        await _settle(pilot)

    assert snap_compare(_app(db, "0001"), terminal_size=(120, 32), run_before=go)


def test_compare_two_runs_screen(snap_compare, frozen_demo):
    async def go(pilot):
        await _settle(pilot)
        await pilot.press("down", "m", "up", "d")  # mark demo:happy as run A, diff demo:incident against it
        await _settle(pilot)
        await _settle(pilot)
        pilot.app.clear_notifications()  # what the keys said on the way ("Marked…", "Comparing…")
        await _settle(pilot)

    assert snap_compare(_app(frozen_demo), terminal_size=(120, 36), run_before=go)


def test_run_screen_graph(snap_compare, frozen_demo):
    async def go(pilot):
        await _settle(pilot)
        await pilot.press("7")  # the incident opens at step 2 (act timed out): its graph, act and its route lit
        await _settle(pilot)
        await pilot.press("right")
        await _settle(pilot)

    assert snap_compare(_app(frozen_demo, "last"), terminal_size=(120, 36), run_before=go)
