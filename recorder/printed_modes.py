"""``print_mode`` that prints what the bare graph would print, though graphtape lends a saver.

LangGraph prints the chunks of ``print_mode`` inside its loop, before graphtape's stream
wrapper can leave out the lent saver's checkpoint events or its run key. So the modes that
hold checkpoint events (``checkpoints``, ``debug``) are taken out of ``print_mode`` and asked
for as stream modes instead; graphtape prints them, in LangGraph's format, from the stream it
has already cleaned, and hands the caller only the modes the caller asked for, in its shape.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from langgraph.pregel.debug import get_bolded_text, get_colored_text

from graphtape.recorder.stream_view import CHECKPOINT_MODES, StreamShape


class PrintedCheckpoints:
    """Prints one stream call's checkpoint-holding ``print_mode`` chunks; yields the caller's."""

    def __init__(self, modes: tuple[str, ...], wanted: StreamShape, widened: StreamShape) -> None:
        self.modes = modes
        self.wanted = wanted
        self.widened = widened

    @staticmethod
    def take(graph: Any, kwargs: dict[str, Any]) -> tuple[PrintedCheckpoints | None, dict[str, Any]]:
        """The printer for this call, if it prints checkpoint events, and the kwargs to run it with."""
        printed = printed_modes(kwargs)
        ours = tuple(m for m in printed if m in CHECKPOINT_MODES)
        if not ours:
            return None, kwargs
        wanted = StreamShape(graph, kwargs)
        widened = {**kwargs, "print_mode": [m for m in printed if m not in ours], "stream_mode": [*wanted.modes, *(m for m in ours if m not in wanted.modes)]}
        return PrintedCheckpoints(ours, wanted, StreamShape(graph, widened)), widened

    def chunks(self, chunks: Iterator[Any]) -> Iterator[Any]:
        for chunk in chunks:
            shown = self._pass(chunk)
            if shown is not _DROPPED:
                yield shown

    async def achunks(self, chunks: AsyncIterator[Any]) -> AsyncIterator[Any]:
        async for chunk in chunks:
            shown = self._pass(chunk)
            if shown is not _DROPPED:
                yield shown

    def _pass(self, chunk: Any) -> Any:
        """Print ``chunk`` if its mode is printed; the chunk in the caller's shape, or ``_DROPPED``."""
        mode, ns, payload = self.widened.parts_of(chunk)
        if mode in self.modes:
            head = get_bolded_text(f"[{mode}]")
            print(" ".join((head, get_colored_text(f"[graph={ns}]", color="yellow"), repr(payload)) if self.widened.subgraphs and ns else (head, repr(payload))))
        if mode not in self.wanted.modes:
            return _DROPPED
        if self.wanted.parts or self.wanted.several:
            return chunk  # the same shape either way: a v2 part, or a (ns,) mode, payload tuple
        return (ns, payload) if self.wanted.subgraphs else payload


_DROPPED = object()


def printed_modes(kwargs: dict[str, Any]) -> tuple[str, ...]:
    """The modes a stream call's ``print_mode`` names (one or several)."""
    printed = kwargs.get("print_mode") or ()
    return (printed,) if isinstance(printed, str) else tuple(printed)
