"""Line up the supersteps of two runs by what ran and how it was routed, not by step number.

Two runs of one agent rarely keep the same step numbers: one retried twice
more, or took a detour, and every step after that is shifted. Each step is
reduced to a signature, and the two sequences of signatures are aligned the
way a text diff aligns lines (``difflib.SequenceMatcher``, after the common
start and end are taken off), so the runs line up again after the steps only
one of them has.

Signatures come in two grains. The coarse one is the step's shape: the nodes
that ran, where each route went, the tools called and how many model calls.
In a loop every turn has the same shape, so shape alone cannot say which
turn was retried; the fine one adds what the step decided (the tools'
arguments, what the model answered, what routers returned). The runs are
aligned on the fine signatures first, and where those disagree (other
inputs flow into every call, or the model words things differently) the
stretch in between is aligned again on shapes.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

from graphtape.recorder.records import CallInfo, StepDetail

Pair = tuple[int | None, int | None]  # indices into the two step lists; None where one run has no such step
Ops = list[tuple[str, int, int, int, int]]


def step_signature(detail: StepDetail, calls: Iterable[CallInfo] = ()) -> Hashable:
    """A step's shape, comparable across runs: nodes, routes (source -> destinations), tools, model calls."""
    nodes = tuple(sorted(t.node for t in detail.tasks))
    routes = tuple(sorted((r.source, tuple(sorted(r.destinations))) for r in detail.routes))
    made = Counter(c.name if c.kind == "tool" else c.kind for c in calls)  # a model's name may differ between runs
    return (nodes, routes, tuple(sorted(made.items())), detail.step.pending)


def step_decisions(detail: StepDetail, calls: Iterable[CallInfo], normalize: Callable[[Any], Any]) -> Hashable:
    """What a step decided beyond its shape: tool arguments, model answers, router return values.

    Tool results are left out on purpose: they are what the world answered,
    and a different answer at the same point is a difference to report, not a
    reason to pair the step with another one.
    """
    made = sorted(repr(normalize(c.inputs if c.kind == "tool" else c.output)) for c in calls)
    returned = sorted(repr(normalize(r.returned)) for r in detail.routes if r.router)
    return hash((tuple(made), tuple(returned)))


def align(a: Sequence[Hashable], b: Sequence[Hashable], fine_a: Sequence[Hashable] | None = None, fine_b: Sequence[Hashable] | None = None) -> list[Pair]:
    """Pairs of indices in order: ``(i, j)`` where the runs line up, ``(i, None)`` / ``(None, j)`` where one has a step the other has not.

    With fine signatures, steps that decided the same thing line up first and
    the stretches between are aligned on ``a`` and ``b`` (shapes). Steps that
    differ in the same place (a ``replace`` in diff terms) are paired one to
    one, so the comparison can say how they differ; what is left over of the
    longer side is unpaired.
    """
    if fine_a is None or fine_b is None:
        return _pairs(_opcodes(a, b))
    fine_a = [(x, y) for x, y in zip(a, fine_a)]  # a decision counts only on a step of the same shape
    fine_b = [(x, y) for x, y in zip(b, fine_b)]
    out: list[Pair] = []
    for op, i1, i2, j1, j2 in _opcodes(fine_a, fine_b):
        if op == "equal":
            out.extend(zip(range(i1, i2), range(j1, j2)))
        else:
            out.extend((None if i is None else i + i1, None if j is None else j + j1) for i, j in align(a[i1:i2], b[j1:j2]))
    return out


def _opcodes(a: Sequence[Hashable], b: Sequence[Hashable]) -> Ops:
    """``SequenceMatcher`` opcodes over the whole of both, the common start and end matched without it."""
    head = 0
    while head < len(a) and head < len(b) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < len(a) - head and tail < len(b) - head and a[len(a) - 1 - tail] == b[len(b) - 1 - tail]:
        tail += 1
    ops: Ops = [("equal", 0, head, 0, head)] if head else []
    mid_a, mid_b = a[head : len(a) - tail], b[head : len(b) - tail]
    if mid_a or mid_b:
        # autojunk off: in a long run the same few signatures repeat, and they are what lines the runs up.
        matcher = difflib.SequenceMatcher(None, mid_a, mid_b, autojunk=False)
        ops.extend((op, i1 + head, i2 + head, j1 + head, j2 + head) for op, i1, i2, j1, j2 in matcher.get_opcodes())
    if tail:
        ops.append(("equal", len(a) - tail, len(a), len(b) - tail, len(b)))
    return ops


def _pairs(ops: Ops) -> list[Pair]:
    pairs: list[Pair] = []
    for op, i1, i2, j1, j2 in ops:
        if op == "equal":
            pairs.extend(zip(range(i1, i2), range(j1, j2)))
            continue
        both = min(i2 - i1, j2 - j1) if op == "replace" else 0
        pairs.extend(zip(range(i1, i1 + both), range(j1, j1 + both)))
        pairs.extend((i, None) for i in range(i1 + both, i2))
        pairs.extend((None, j) for j in range(j1 + both, j2))
    return pairs
