"""Import hygiene and the public surface: the core runs without the UI."""

from __future__ import annotations

import subprocess
import sys

from graphtape import recorder


def test_headless_packages_do_not_import_textual():
    code = "import sys, graphtape, graphtape.recorder, graphtape.replay, graphtape.tui, graphtape.tui.cli; bad = [m for m in ('textual', 'graphtape.tui.app') if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_recorder_public_surface_is_pinned():
    assert sorted(recorder.__all__) == [
        "AmbiguousRun",
        "CallInfo",
        "Checkpoint",
        "Durability",
        "GraphtapeError",
        "Recorder",
        "RecorderFault",
        "RouteInfo",
        "RunDetail",
        "RunInfo",
        "RunNotFound",
        "RunStore",
        "SchemaVersionError",
        "SqlStore",
        "StepDetail",
        "StepInfo",
        "StepNotFound",
        "StoreError",
        "TaskInfo",
        "open_store",
        "register_type",
    ]
    for name in recorder.__all__:
        assert getattr(recorder, name).__doc__, f"recorder.{name} needs a docstring"


def test_replay_public_surface_is_pinned_and_lazy():
    from graphtape import replay

    assert replay.__all__ == [
        "Divergence",
        "FixtureError",
        "RecordMode",
        "RecordedError",
        "ReplayError",
        "ReplayMiss",
        "ReplayMode",
        "ReplayResult",
        "RunDiff",
        "RunDifference",
        "StepRange",
        "diff_runs",
        "export_fixture",
        "fork",
        "import_fixture",
        "read_fixture",
        "replay",
        "write_fixture",
    ]
    for name in replay.__all__:
        assert getattr(replay, name).__doc__, f"replay.{name} needs a docstring"
    code = "import sys, graphtape, graphtape.replay, graphtape.replay.pytest_plugin, graphtape.replay.loading; print(sorted(m for m in ('langgraph', 'langchain_core', 'textual') if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "[]", proc.stdout + proc.stderr
