"""Which subgraphs a paused run waits in, read from LangGraph's own state snapshot.

A run stopped at an ``interrupt()`` inside a subgraph keeps that subgraph's state in a
namespace of its own (``node:<task id>``), which a person may edit before answering
(``update_state(get_state(config, subgraphs=True).tasks[0].state.config, ...)``). The
recorder records such edits as the subgraph's steps; a replay puts them back into the same
subgraph waiting in the replay, whose namespace holds another task id.
"""

from __future__ import annotations

from typing import Any

_MAX_DEPTH = 8  # subgraphs nested deeper are not looked into


def waiting_subgraphs(snapshot: Any, depth: int = 0) -> list[str]:
    """The namespaces of the subgraphs a ``get_state(..., subgraphs=True)`` snapshot's tasks wait in, at any depth."""
    out: list[str] = []
    for task in getattr(snapshot, "tasks", ()) if depth < _MAX_DEPTH else ():
        state = getattr(task, "state", None)
        ns = ((getattr(state, "config", None) or {}).get("configurable") or {}).get("checkpoint_ns")
        if isinstance(ns, str) and ns:
            out.append(ns)
            out += waiting_subgraphs(state, depth + 1)
    return out


def node_path(ns: str) -> str:
    """A namespace without its task ids (``sub:1a2b|inner:3c4d`` -> ``sub|inner``): the same subgraph in any run."""
    return "|".join(part.split(":", 1)[0] for part in ns.split("|"))
