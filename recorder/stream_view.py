"""The stream a graph without a checkpointer gives, though graphtape lends it one.

To record a graph compiled without a checkpointer, ``attach`` gives its copy a
run-scoped saver. LangGraph then emits checkpoint events that the bare graph
never emits: every chunk of ``stream_mode="checkpoints"`` and the checkpoint
events of ``"debug"``. They are dropped here, so attaching leaves the stream
as the caller would have had it, in every chunk shape LangGraph yields (one mode
or several, with ``subgraphs=True`` or not, ``version="v2"`` parts).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

CHECKPOINT_MODES = ("checkpoints", "debug")


class StreamShape:
    """How the chunks of one ``stream()`` call are shaped, read from its arguments."""

    __slots__ = ("modes", "several", "subgraphs", "parts")

    def __init__(self, graph: Any, kwargs: dict[str, Any]) -> None:
        mode = kwargs.get("stream_mode")
        if mode is None:
            mode = getattr(graph, "stream_mode", "values")
        self.several = isinstance(mode, (list, tuple))
        self.modes = tuple(mode) if self.several else (mode,)
        self.subgraphs = bool(kwargs.get("subgraphs"))
        self.parts = kwargs.get("version") == "v2"

    def may_hold_checkpoints(self) -> bool:
        return any(m in CHECKPOINT_MODES for m in self.modes)

    def is_checkpoint(self, chunk: Any) -> bool:
        """Whether ``chunk`` is a checkpoint event (which the bare graph would not have emitted)."""
        return self.checkpoint_of(chunk) is not None

    def parts_of(self, chunk: Any) -> tuple[Any, Any, Any]:
        """``(mode, namespace, data)`` of a chunk of this shape (``(None, None, None)`` if it has none)."""
        if self.parts:
            return (chunk.get("type"), chunk.get("ns"), chunk.get("data")) if isinstance(chunk, dict) else (None, None, None)
        if self.several or self.subgraphs:
            if not isinstance(chunk, tuple) or not chunk:
                return None, None, None
            ns, body = (chunk[0], chunk[1:]) if self.subgraphs else ((), chunk)
            return (body[0], ns, body[1]) if self.several and len(body) >= 2 else (self.modes[0], ns, body[0] if body else None)
        return self.modes[0], (), chunk

    def checkpoint_of(self, chunk: Any) -> dict | None:
        """The checkpoint a checkpoint event carries (its config among it), else None."""
        mode, _, data = self.parts_of(chunk)
        if mode == "checkpoints":
            return data if isinstance(data, dict) else {}
        if mode == "debug" and isinstance(data, dict) and data.get("type") == "checkpoint":
            return data.get("payload") if isinstance(data.get("payload"), dict) else {}
        return None


def without_checkpoints(chunks: Iterator[Any], shape: StreamShape) -> Iterator[Any]:
    for chunk in chunks:
        if not shape.is_checkpoint(chunk):
            yield chunk


async def awithout_checkpoints(chunks: AsyncIterator[Any], shape: StreamShape) -> AsyncIterator[Any]:
    async for chunk in chunks:
        if not shape.is_checkpoint(chunk):
            yield chunk


def _hide_key(event: dict, key: str) -> None:
    """Leave ``key`` out of an event's configs, replaced by copies: LangGraph's own are not touched."""
    for name in ("config", "parent_config"):
        config = event.get(name)
        conf = config.get("configurable") if isinstance(config, dict) else None
        if isinstance(conf, dict) and key in conf:
            event[name] = {**config, "configurable": {k: v for k, v in conf.items() if k != key}}


def without_key(chunks: Iterator[Any], shape: StreamShape, key: str) -> Iterator[Any]:
    """The checkpoint events of a graph with its own saver, without graphtape's key in their configs."""
    for chunk in chunks:
        event = shape.checkpoint_of(chunk)
        if event:
            _hide_key(event, key)
        yield chunk


async def awithout_key(chunks: AsyncIterator[Any], shape: StreamShape, key: str) -> AsyncIterator[Any]:
    async for chunk in chunks:
        event = shape.checkpoint_of(chunk)
        if event:
            _hide_key(event, key)
        yield chunk
