"""graphtape: a flight recorder, time-travel debugger and regression-fixture tool for LangGraph.

The public API, in one import::

    from graphtape import Recorder, replay, fork, open_store, register_type

``graphtape.recorder`` (attach and store), ``graphtape.replay`` (replay,
fork, fixtures, the pytest plugin) and ``graphtape.tui`` (the command line
and the Textual app) are the subpackages. Names load on first use, so
``import graphtape`` costs neither LangGraph nor Textual.
"""

from __future__ import annotations

from graphtape import replay
from graphtape.recorder.lazy import lazy_exports

__version__ = "0.2.0"  # the one place the version is written (pyproject reads it)

_WHERE = {
    "Recorder": "graphtape.recorder.attach",
    "fork": "graphtape.replay.runner",
    "open_store": "graphtape.recorder.store",
    "register_type": "graphtape.recorder.codec",
}

__all__ = ["Recorder", "fork", "open_store", "register_type", "replay"]
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
