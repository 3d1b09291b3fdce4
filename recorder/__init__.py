"""graphtape's recorder: attach to a compiled LangGraph graph and every superstep is stored.

Headless by design: nothing here imports Textual or the TUI.
"""

from recorder.attach import Durability, Recorder
from recorder.codec import register_type
from recorder.errors import (
    AmbiguousRun,
    GraphtapeError,
    RecorderFault,
    RunNotFound,
    SchemaVersionError,
    StepNotFound,
    StoreError,
)
from recorder.records import CallInfo, Checkpoint, RouteInfo, RunDetail, RunInfo, StepDetail, StepInfo, TaskInfo
from recorder.store import RunStore, SqlStore, open_store

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
