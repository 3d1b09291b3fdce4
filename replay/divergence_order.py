"""Where a divergence happened in the run, as a key that sorts divergences in run order.

A subgraph's steps run inside one step of its parent, and its step numbers are its own: a
divergence two subgraphs deep is placed by the root step that entered the outer subgraph, the
outer subgraph's step that entered the inner one, and so on down, then by its own step. So a
node deep inside a step is told before what its parents' step made of it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

_NONE = 1 << 30  # no step known: after every step


def entered_steps(namespaces: Iterable[str], details_of: Callable[[str], list[Any]]) -> dict[str, int]:
    """Each subgraph namespace -> the step of its parent namespace whose task ran it (first run)."""
    out: dict[str, int] = {}
    for parent in ["", *namespaces]:
        depth = parent.count("|") + 1 if parent else 0
        for d in details_of(parent):
            for t in d.tasks:
                for sub in t.subgraph_ns:
                    out.setdefault("|".join(sub.split("|")[: depth + 1]), d.step.step)
    return out


def order_key(ns: str, step: int | None, entered: dict[str, int], root: int | None = None) -> tuple[int, ...]:
    """The sort key of something at ``step`` of namespace ``ns`` (see the module docstring).

    ``entered`` maps each namespace to its parent's entering step, by full namespace or by the
    namespace's path without task ids; ``root`` is the root step, where it is known otherwise (a
    subgraph with memory of its own keeps one namespace for every run of its node)."""
    own = step if step is not None else _NONE
    if not ns:
        return (own, 1, own)
    parts = ns.split("|")
    if root is not None:
        return (root, 0, own, 1)
    key: list[int] = []
    for i in range(len(parts)):
        prefix = "|".join(parts[:i + 1])
        at = entered.get(prefix)
        if at is None:  # not known: taken to be entered where the divergence is
            at = own if i == 0 else _NONE
        key += [at, 0]
    return (*key, own, 1)
