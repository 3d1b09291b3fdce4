"""The long-term memory store (``BaseStore``) as a replay sees it: read, never written.

A node given ``store`` (``get_store()``, ``InjectedStore``) may write memories. A replay
or a fork is a what-if run of past work: its writes must not reach the graph's real
store, which in production is the team's ``PostgresStore``. The replayed graph gets
this guard instead: reads go to the real store, writes are kept in the guard for
the rest of the replay (a node that writes and reads back, by key or by search, sees its
own write), and nothing is ever written through.

A strict replay of a recording that recorded its store answers the reads from the
recording instead (``answers``, see ``store_answers``): the guard then asks the real
store only what the recording does not answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from typing import Any

from langgraph.store.base import BaseStore, GetOp, Item, Op, PutOp, Result, SearchItem, SearchOp

from graphtape.recorder.store_capture import StoreOver

from graphtape.replay.store_answers import NOT_ANSWERED, RecordedStore

_GONE = object()  # a key this replay deleted


class ReplayStore(StoreOver):
    """Reads from ``inner``, the real store (or the recording); puts and deletes stay here (by namespace and key)."""

    def __init__(self, real: BaseStore, answers: RecordedStore | None = None) -> None:
        super().__init__(real)
        self.answers = answers
        self.written: dict[tuple[tuple[str, ...], str], Any] = {}

    def writes(self) -> list[tuple[tuple[str, ...], str, Any]]:
        """What this replay has written so far: ``(namespace, key, value)``, ``None`` for a delete."""
        return [(ns, key, None if value is _GONE else value) for (ns, key), value in list(self.written.items())]

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops, recorded, reads = self._reads(ops)
        return self._answer(ops, recorded, iter(self.inner.batch(reads) if reads else ()))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops, recorded, reads = self._reads(ops)
        return self._answer(ops, recorded, iter(await self.inner.abatch(reads) if reads else ()))

    def _reads(self, ops: Iterable[Op]) -> tuple[list[Op], dict[int, Result], list[Op]]:
        """The batch, the answers the recording gives (by position), and the ops the real store
        answers: every other read but a get of a key this replay has written by then (an
        earlier put in the same batch counts)."""
        ops = list(ops)
        recorded: dict[int, Result] = {}
        if self.answers is not None:
            for i, op in enumerate(ops):
                got = self.answers.answer(op)  # a write is matched too, and still kept below
                if got is not NOT_ANSWERED and not isinstance(op, PutOp):
                    recorded[i] = got
        written = dict(self.written)
        reads = []
        for i, op in enumerate(ops):
            if isinstance(op, PutOp):
                written[_key(op)] = _written(op)
            elif isinstance(op, GetOp) and _key(op) in written:
                # A key this run wrote itself reads back what it wrote: the recording's answer only
                # while it holds the same (a fork's edit may have changed the write).
                if i in recorded and _value_of(recorded[i]) != written[_key(op)]:
                    del recorded[i]
            elif i not in recorded:
                reads.append(op)
        return ops, recorded, reads

    def _answer(self, ops: list[Op], recorded: dict[int, Result], answers: Iterator[Result]) -> list[Result]:
        out: list[Result] = []
        for i, op in enumerate(ops):
            if i in recorded:
                out.append(recorded[i])
            elif isinstance(op, PutOp):
                self.written[_key(op)] = _written(op)
                out.append(None)
            elif isinstance(op, GetOp) and _key(op) in self.written:
                value = self.written[_key(op)]
                now = datetime.now(timezone.utc)
                out.append(None if value is _GONE else Item(value=value, key=op.key, namespace=tuple(op.namespace), created_at=now, updated_at=now))
            elif isinstance(op, SearchOp) and self.written:
                out.append(self._searched(op, next(answers)))
            else:
                out.append(next(answers))
        return out

    def _searched(self, op: SearchOp, found: Any) -> list[Any]:
        """A search of the real store, with this replay's own writes under the prefix in it: a
        put first (newest), a key it put or deleted not as the real store has it."""
        prefix = tuple(op.namespace_prefix)
        mine = []
        now = datetime.now(timezone.utc)
        for (ns, key), value in self.written.items():
            if value is _GONE or ns[: len(prefix)] != prefix or not _matches(value, op.filter):
                continue
            mine.append(SearchItem(namespace=ns, key=key, value=value, created_at=now, updated_at=now))
        theirs = [i for i in (found or []) if (tuple(i.namespace), i.key) not in self.written]
        return (mine + theirs)[: op.limit] if op.offset == 0 else theirs[: op.limit]


def _matches(value: Any, wanted: dict[str, Any] | None) -> bool:
    """A search filter's exact matches (the operators a store also takes are not judged here: kept)."""
    if not wanted:
        return True
    return isinstance(value, dict) and all(isinstance(w, dict) or value.get(k) == w for k, w in wanted.items())


def _key(op: GetOp | PutOp) -> tuple[tuple[str, ...], str]:
    return tuple(op.namespace), op.key


def _written(op: PutOp) -> Any:
    """What a put leaves under its key: its value, or ``_GONE`` for a delete."""
    return _GONE if op.value is None else op.value


def _value_of(result: Any) -> Any:
    """What a get answered: an item's value, or ``_GONE`` for no item."""
    return _GONE if result is None else getattr(result, "value", result)
