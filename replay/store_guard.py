"""The long-term memory store (``BaseStore``) as a replay sees it: read, never written.

A node given ``store`` (``get_store()``, ``InjectedStore``) may write memories. A replay
or a fork is a what-if run of past work: its writes must not reach the graph's real
store, which in production is the team's ``PostgresStore``. The replayed graph gets
this guard instead: reads go to the real store, writes are kept in the guard for
the rest of the replay (a node that writes and reads back sees its own write), and
nothing is ever written through.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from langgraph.store.base import BaseStore, GetOp, Item, Op, PutOp, Result

_GONE = object()  # a key this replay deleted


class ReplayStore(BaseStore):
    """Reads from ``real``; puts and deletes stay here (by namespace and key)."""

    def __init__(self, real: BaseStore) -> None:
        self.real = real
        self.written: dict[tuple[tuple[str, ...], str], Any] = {}

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        reads = [op for op in ops if not isinstance(op, PutOp) and not self._own(op)]
        answers = iter(self.real.batch(reads) if reads else [])
        return [self._apply(op, answers) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        reads = [op for op in ops if not isinstance(op, PutOp) and not self._own(op)]
        answers = iter(await self.real.abatch(reads) if reads else [])
        return [self._apply(op, answers) for op in ops]

    def _own(self, op: Op) -> bool:
        """A get of a key this replay wrote (or deleted): answered here."""
        return isinstance(op, GetOp) and (tuple(op.namespace), op.key) in self.written

    def _apply(self, op: Op, answers: Any) -> Result:
        if isinstance(op, PutOp):
            self.written[(tuple(op.namespace), op.key)] = _GONE if op.value is None else op.value
            return None
        if self._own(op):
            value = self.written[(tuple(op.namespace), op.key)]
            if value is _GONE:
                return None
            from datetime import datetime, timezone

            now = datetime.now(timezone.utc)
            return Item(value=value, key=op.key, namespace=tuple(op.namespace), created_at=now, updated_at=now)
        return next(answers)
