"""Channel writes kept in a recording so a replay can hand them to LangGraph again.

A task carried over from an earlier run (its pending writes) and the update a resume
brought with it (``Command(resume=..., update=...)``) are both writes to channels, which
LangGraph applies without running anything. They are stored as ``[[channel, value], ...]``;
a ``Send`` (a write to the tasks channel) as ``[channel, node, arg]``, since a recording
never holds objects it would have to import to rebuild.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def is_send(v: Any) -> bool:
    """A LangGraph ``Send`` (told by its shape: the recorder never imports the user's types)."""
    return type(v).__name__ == "Send" and hasattr(v, "node") and hasattr(v, "arg")


def stored(writes: Iterable[tuple[str, Any]]) -> list[list[Any]]:
    """``(channel, value)`` pairs as a recording keeps them."""
    return [[ch, v.node, v.arg] if is_send(v) else [ch, v] for ch, v in writes]


def is_stored(value: Any) -> bool:
    """Whether a value read back has the stored shape (a damaged or hostile one does not)."""
    return type(value) is list and all(type(w) is list and len(w) in (2, 3) and type(w[0]) is str for w in value)


def as_writes(value: Any) -> list[tuple[str, Any]]:
    """Stored writes (typed) as LangGraph takes them, ``Send`` rebuilt; entries of another shape are left out."""
    from langgraph.types import Send

    return [(w[0], Send(w[1], w[2])) if len(w) == 3 else (w[0], w[1]) for w in value if type(w) is list and len(w) in (2, 3) and type(w[0]) is str] if type(value) is list else []
