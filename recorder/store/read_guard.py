"""What one read may cost, and how damage in a store fails: as one ``StoreError`` line.

Each payload is bounded on its own (``payloads.MAX_INFLATE``); a read that
unpacks many shares one budget of bytes. A damaged or hand-edited store
(SQLite keeps any type in any column; a payload can be JSON of another
shape) makes Python raise; public reads turn that into a ``StoreError``.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
from collections.abc import Iterator
from typing import Any

from graphtape.recorder.errors import GraphtapeError, ReadTooLarge, RunNotFound, StoreError
from graphtape.recorder.lone_surrogates import has_lone_surrogate
from graphtape.recorder.store.connection import _one_line

MAX_READ_BYTES = 512 * 1024 * 1024  # memory one store read may inflate and build in all (all its payloads and blobs)


class ReadBudget:
    """What one store read (one call of a public read method) may still inflate and build.

    Each payload is bounded on its own (``MAX_INFLATE``), but a read touches many:
    a crafted 4 MB store of many compressed payloads made one ``show --step`` build
    gigabytes. The budget is shared by everything a read unpacks.
    """

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit if limit is not None else MAX_READ_BYTES
        self.left = self.limit

    def spend(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            raise ReadTooLarge(f"this read would inflate and build more than {self.limit // (1024 * 1024)} MB from stored data (a damaged or crafted store?); refusing it")


_READ_BUDGET: contextvars.ContextVar[ReadBudget | None] = contextvars.ContextVar("graphtape_read_budget", default=None)


@contextlib.contextmanager
def read_budget(limit: int | None = None) -> Iterator[ReadBudget]:
    """The budget of the read in progress, or a new one for a read starting now."""
    current = _READ_BUDGET.get()
    if current is not None:
        yield current
        return
    budget = ReadBudget(limit)
    token = _READ_BUDGET.set(budget)
    try:
        yield budget
    finally:
        _READ_BUDGET.reset(token)


_DAMAGE = (TypeError, ValueError, AttributeError, KeyError, IndexError)


def _damage_is_a_store_error(method: Any) -> Any:
    """Reads trust nothing they load: a damaged or hand-edited store (SQLite keeps any type in
    any column; a payload can be JSON of another shape) fails as one ``StoreError`` line."""
    def explain(self: Any, exc: BaseException, args: tuple, kwargs: dict) -> GraphtapeError:
        given = _unsendable_argument(exc, (*args, *kwargs.values()))
        if given is not None:
            # Not the store's data: a value asked for that no text column can hold (a run id typed
            # in another encoding than UTF-8): nothing stored is it.
            return RunNotFound(f"no run matches {given!r} in {self._safe_url()}: it is not UTF-8 text (was it typed in another encoding?)")
        return StoreError(f"{self._safe_url()} holds damaged data ({method.__name__}: {type(exc).__name__}: {_one_line(exc)})")

    if inspect.isgeneratorfunction(method):

        @functools.wraps(method)
        def generator(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                yield from method(self, *args, **kwargs)  # each payload stays bounded by MAX_INFLATE
            except _DAMAGE as exc:
                raise explain(self, exc, args, kwargs) from None

        return generator

    @functools.wraps(method)
    def read(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            with read_budget():
                return method(self, *args, **kwargs)
        except _DAMAGE as exc:
            raise explain(self, exc, args, kwargs) from None

    return read


def _unsendable_argument(exc: BaseException, given: tuple) -> str | None:
    """The argument of a read that the driver could not send (it failed to encode it), if that
    is what ``exc`` is: a read decodes stored text, it never encodes it."""
    if not isinstance(exc, UnicodeEncodeError) or not isinstance(exc.object, str):
        return None
    for value in given:
        if isinstance(value, str) and value and value in exc.object and has_lone_surrogate(value):
            return value
    return None
