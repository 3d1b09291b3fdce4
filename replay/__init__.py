"""Replay and fork recorded runs, name where they diverge, and keep runs as regression fixtures.

``replay(run_id, graph, from_step, mode)`` resumes the user's graph at a
recorded checkpoint with tool and model calls answered from the recording;
``fork`` continues from an edited state. Both record a new, linked run and
return a ``ReplayResult`` listing every ``Divergence``. ``diff_runs`` compares
any two recorded runs (a ``RunDiff``), aligned by what ran. ``export_fixture`` /
``import_fixture`` turn a run into a file a pytest test replays offline.

Names are imported on first use: the pytest plugin loads this package in
every test session, which must not pay for LangGraph until a replay runs.

The package is also the ``replay`` function: ``from graphtape import replay``
gives this module, and calling it calls ``graphtape.replay.runner.replay``.
One name serves as the public function and as the subpackage, so neither
shadows the other (``import graphtape.replay.runner`` keeps working).
"""

from __future__ import annotations

import sys
import types
from typing import Any

from graphtape.recorder.lazy import lazy_exports

_WHERE = {
    "Divergence": "graphtape.replay.result",
    "FixtureError": "graphtape.replay.fixture",
    "RecordMode": "graphtape.replay.record_mode",
    "RecordedError": "graphtape.replay.calls",
    "ReplayError": "graphtape.replay.runner",
    "ReplayMiss": "graphtape.replay.answers",
    "ReplayMode": "graphtape.replay.modes",
    "ReplayResult": "graphtape.replay.result",
    "RunDiff": "graphtape.replay.diff_result",
    "RunDifference": "graphtape.replay.diff_result",
    "StepRange": "graphtape.replay.fixture",
    "diff_runs": "graphtape.replay.run_diff",
    "export_fixture": "graphtape.replay.fixture",
    "fork": "graphtape.replay.runner",
    "import_fixture": "graphtape.replay.fixture",
    "read_fixture": "graphtape.replay.fixture",
    "replay": "graphtape.replay.runner",
    "write_fixture": "graphtape.replay.fixture",
}

__all__ = sorted(_WHERE)
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)


class _ReplayPackage(types.ModuleType):
    """The ``graphtape.replay`` package, callable as the ``replay`` function."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from graphtape.replay.runner import replay as run_replay

        return run_replay(*args, **kwargs)

    @property
    def __signature__(self) -> Any:
        import inspect

        from graphtape.replay.runner import replay as run_replay

        return inspect.signature(run_replay)


sys.modules[__name__].__class__ = _ReplayPackage
