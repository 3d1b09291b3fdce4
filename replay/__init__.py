"""Replay and fork recorded runs, and name where they diverge from the recording.

``replay(run_id, graph, from_step, mode)`` resumes the user's graph at a
recorded checkpoint with tool and model calls answered from the recording;
``fork`` continues from an edited state. Both record a new, linked run and
return a ``ReplayResult`` listing every ``Divergence``.
"""

from replay.answers import ReplayMiss
from replay.calls import RecordedError
from replay.modes import ReplayMode
from replay.result import Divergence, ReplayResult
from replay.runner import ReplayError, fork, replay

__all__ = ["Divergence", "RecordedError", "ReplayError", "ReplayMiss", "ReplayMode", "ReplayResult", "fork", "replay"]
