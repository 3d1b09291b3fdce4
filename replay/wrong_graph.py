"""Whether a fixture is being replayed on another graph than the one it was recorded from.

A fixture replayed on the wrong graph (a typo in the marker's ``graph=``, another agent
of the same project) diverges at every step; offering to re-record it would overwrite
the fixture with that graph's behaviour. The nodes that ran in the recording are compared
with the nodes of the graph given: when most of them are missing, the graph is likely wrong.
Node names come from the fixture: data, only ever compared and shown.
"""

from __future__ import annotations

from typing import Any

from graphtape.recorder.terminal_text import one_line

START = "__start__"
SHOWN = 8  # node names listed per side; more are counted


def recorded_nodes(fixture: dict[str, Any]) -> list[str]:
    """The root graph's nodes that ran in the fixture's steps, in first-run order."""
    seen: dict[str, None] = {}
    for step in fixture.get("steps") or ():
        for task in (step.get("tasks") or ()) if isinstance(step, dict) else ():
            node = task.get("node") if isinstance(task, dict) else None
            if isinstance(node, str) and node != START:
                seen.setdefault(node)
    return list(seen)


def graph_nodes(graph: Any) -> list[str]:
    """A compiled graph's own nodes (LangGraph's ``__start__`` left out)."""
    return [str(n) for n in getattr(graph, "nodes", {}) if n != START]


def wrong_graph(fixture: dict[str, Any], graph: Any, given: str) -> str | None:
    """One line saying the graph looks like the wrong one, or None.

    Wrong means more than half of the nodes that ran in the recording are not in the graph
    (none shared at all, most often): a renamed node or two in a refactor is not.
    """
    recorded, ours = recorded_nodes(fixture), graph_nodes(graph)
    missing = [n for n in recorded if n not in ours]
    if not recorded or not ours or 2 * len(missing) <= len(recorded):
        return None
    return one_line(f"this fixture was recorded from a graph with nodes {_names(recorded)}; the graph given ({given}) has {_names(ours)}: wrong graph?")


def _names(nodes: list[str]) -> str:
    shown = sorted(nodes)[:SHOWN]
    more = len(nodes) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more else "")
