"""Replay modes: what is answered from the recording and what runs live."""

from __future__ import annotations

from graphtape.recorder.choices import Choice


class ReplayMode(Choice):
    """How a replay treats the recording's tool and model calls.

    ``strict`` answers every tool and model call from the recording (a call
    it cannot answer is a divergence, never a silent live call); ``tools``
    answers tools and lets models run live, to see how a prompt or model
    change moves the route; ``live`` mocks nothing.
    """

    STRICT = "strict"
    TOOLS = "tools"
    LIVE = "live"

    def answers(self, kind: str) -> bool:
        """Whether calls of ``kind`` ("tool" or "model") come from the recording."""
        if self is ReplayMode.STRICT:
            return True
        return self is ReplayMode.TOOLS and kind == "tool"
