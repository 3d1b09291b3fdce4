"""graphtape's recorder: attach to a compiled LangGraph graph and every superstep is stored.

Headless by design: nothing here imports Textual or the TUI. The recorder
and the store are imported on first use, so code that only needs the
errors or records (the pytest plugin, the CLI's parser) starts fast.
"""

from __future__ import annotations

from recorder.errors import (
    AmbiguousRun,
    GraphtapeError,
    RecorderFault,
    RunNotFound,
    SchemaVersionError,
    StepNotFound,
    StoreError,
)
from recorder.lazy import lazy_exports
from recorder.records import CallInfo, Checkpoint, RouteInfo, RunDetail, RunInfo, StepDetail, StepInfo, TaskInfo

_LAZY = {
    "Durability": "recorder.attach",
    "Recorder": "recorder.attach",
    "register_type": "recorder.codec",
    "RunStore": "recorder.store",
    "SqlStore": "recorder.store",
    "open_store": "recorder.store",
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
