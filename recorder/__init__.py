"""graphtape's recorder: attach to a compiled LangGraph graph and every superstep is stored.

Headless by design: nothing here imports Textual or the TUI. The recorder
and the store are imported on first use, so code that only needs the
errors or records (the pytest plugin, the CLI's parser) starts fast.
"""

from __future__ import annotations

from graphtape.recorder.errors import (
    AmbiguousRun,
    GraphtapeError,
    RecorderFault,
    RunNotFound,
    SchemaVersionError,
    StepNotFound,
    StoreError,
)
from graphtape.recorder.lazy import lazy_exports
from graphtape.recorder.records import CallInfo, Checkpoint, RouteInfo, RunDetail, RunInfo, StepDetail, StepInfo, TaskInfo

_LAZY = {
    "Durability": "graphtape.recorder.attach",
    "Recorder": "graphtape.recorder.attach",
    "register_type": "graphtape.recorder.codec",
    "RunStore": "graphtape.recorder.store",
    "SqlStore": "graphtape.recorder.store",
    "open_store": "graphtape.recorder.store",
}

__all__ = [
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

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
