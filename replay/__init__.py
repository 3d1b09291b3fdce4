"""Replay and fork recorded runs, name where they diverge, and keep runs as regression fixtures.

``replay(run_id, graph, from_step, mode)`` resumes the user's graph at a
recorded checkpoint with tool and model calls answered from the recording;
``fork`` continues from an edited state. Both record a new, linked run and
return a ``ReplayResult`` listing every ``Divergence``. ``export_fixture`` /
``import_fixture`` turn a run into a file a pytest test replays offline.

Names are imported on first use: the pytest plugin loads this package in
every test session, which must not pay for LangGraph until a replay runs.
"""

from __future__ import annotations

from recorder.lazy import lazy_exports

_WHERE = {
    "Divergence": "replay.result",
    "FixtureError": "replay.fixture",
    "RecordMode": "replay.record_mode",
    "RecordedError": "replay.calls",
    "ReplayError": "replay.runner",
    "ReplayMiss": "replay.answers",
    "ReplayMode": "replay.modes",
    "ReplayResult": "replay.result",
    "StepRange": "replay.fixture",
    "export_fixture": "replay.fixture",
    "fork": "replay.runner",
    "import_fixture": "replay.fixture",
    "read_fixture": "replay.fixture",
    "replay": "replay.runner",
    "write_fixture": "replay.fixture",
}

__all__ = sorted(_WHERE)
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
