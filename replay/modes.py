"""Replay modes: what is answered from the recording and what runs live."""

from __future__ import annotations

from graphtape.recorder.choices import Choice
from graphtape.recorder.records import STORE


class ReplayMode(Choice):
    """How a replay treats the recording's tool, model, HTTP and store calls.

    ``strict`` answers every tool and model call, every HTTP request and every
    read of the graph's store from the recording (a call it cannot answer is a
    divergence, never a silent live call; a request it cannot answer is refused,
    never sent); ``tools`` answers tools and store reads (the world the model
    acted in) and lets models and HTTP requests run live, to see how a prompt or
    model change moves the route; ``live`` mocks nothing. No mode writes to the
    graph's store.
    """

    STRICT = "strict"
    TOOLS = "tools"
    LIVE = "live"

    def answers(self, kind: str) -> bool:
        """Whether calls of ``kind`` ("tool", "model", "http" or "store") come from the recording."""
        if self is ReplayMode.STRICT:
            return True
        return self is ReplayMode.TOOLS and kind in ("tool", STORE)
