"""The long-term memory store (``BaseStore``) as a replay sees it: read, never written.

A node given ``store`` (``get_store()``, ``InjectedStore``) may write memories. A replay
or a fork is a what-if run of past work: its writes must not reach the graph's real
store, which in production is the team's ``PostgresStore``. The replayed graph gets
this guard instead: reads go to the real store, writes are kept in the guard for
the rest of the replay (a node that writes and reads back sees its own write), and
nothing is ever written through.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from typing import Any

from langgraph.store.base import BaseStore, GetOp, Item, Op, PutOp, Result

_GONE = object()  # a key this replay deleted


class ReplayStore(BaseStore):
    """Reads from ``real``; puts and deletes stay here (by namespace and key)."""

    def __init__(self, real: BaseStore) -> None:
        self.real = real
        self.written: dict[tuple[tuple[str, ...], str], Any] = {}

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops, reads = self._reads(ops)
        return self._answer(ops, iter(self.real.batch(reads) if reads else ()))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops, reads = self._reads(ops)
        return self._answer(ops, iter(await self.real.abatch(reads) if reads else ()))

    def _reads(self, ops: Iterable[Op]) -> tuple[list[Op], list[Op]]:
        """The batch, and the ops of it the real store answers: every read but a get of a key
        this replay has written by then (an earlier put in the same batch counts)."""
        ops = list(ops)
        written = set(self.written)
        reads = []
        for op in ops:
            if isinstance(op, PutOp):
                written.add(_key(op))
            elif not (isinstance(op, GetOp) and _key(op) in written):
                reads.append(op)
        return ops, reads

    def _answer(self, ops: list[Op], answers: Iterator[Result]) -> list[Result]:
        out: list[Result] = []
        for op in ops:
            if isinstance(op, PutOp):
                self.written[_key(op)] = _GONE if op.value is None else op.value
                out.append(None)
            elif isinstance(op, GetOp) and _key(op) in self.written:
                value = self.written[_key(op)]
                now = datetime.now(timezone.utc)
                out.append(None if value is _GONE else Item(value=value, key=op.key, namespace=tuple(op.namespace), created_at=now, updated_at=now))
            else:
                out.append(next(answers))
        return out


def _key(op: GetOp | PutOp) -> tuple[tuple[str, ...], str]:
    return tuple(op.namespace), op.key
