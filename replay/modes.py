"""Replay modes: what is answered from the recording and what runs live."""

from __future__ import annotations

import enum


class ReplayMode(str, enum.Enum):
    """How a replay treats the recording's tool and model calls.

    ``strict`` answers every tool and model call from the recording (a call
    it cannot answer is a divergence, never a silent live call); ``tools``
    answers tools and lets models run live, to see how a prompt or model
    change moves the route; ``live`` mocks nothing.
    """

    STRICT = "strict"
    TOOLS = "tools"
    LIVE = "live"

    @classmethod
    def parse(cls, value: str | ReplayMode) -> ReplayMode:
        """The mode named ``value``; a bad name raises ``ValueError`` naming the valid ones."""
        try:
            return cls(value)
        except ValueError:
            valid = ", ".join(repr(m.value) for m in cls)
            raise ValueError(f"unknown replay mode {value!r}: use one of {valid}") from None

    def answers(self, kind: str) -> bool:
        """Whether calls of ``kind`` ("tool" or "model") come from the recording."""
        if self is ReplayMode.STRICT:
            return True
        return self is ReplayMode.TOOLS and kind == "tool"
