"""A live response body handed to the caller as it comes, with a bounded copy kept for the recording.

vcrpy reads a live response whole before the client sees any of it: a server that streams
without end (server-sent events, a long poll) would hold the node's read for ever while the
copy grew without bound. For ``httpx`` and its fork ``httpx2`` (sync and async: their response
stream is wrapped, ``passed_through``) and for ``http.client``, ``urllib3`` and ``requests`` (the
response's reads are, ``tee_reads``), the response goes back to the caller at once and each piece
is passed on as it is read; ``aiohttp``'s is copied as the connection feeds it (``http_capture``).
A copy of at most ``MAX_BODY_BYTES`` is kept. The call is recorded
when the body ends or the caller closes it: a body the caller stopped reading is marked
``body_incomplete`` (a replay plays what was read), one longer than the copy ``body_truncated``
(with how many bytes the caller read; a replay cannot play it).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from graphtape.recorder.http_exchange import MAX_BODY_BYTES

Ended = Callable[["KeptBody", bool], None]  # (the copy, whether the body ended by itself)


class KeptBody:
    """The first ``cap`` bytes of a body, and how many went by in all."""

    def __init__(self, cap: int | None = None) -> None:
        self.cap = MAX_BODY_BYTES if cap is None else cap
        self._parts: list[bytes] = []
        self.kept = 0
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        if self.kept < self.cap:
            part = bytes(chunk[: self.cap - self.kept])
            self._parts.append(part)
            self.kept += len(part)

    @property
    def truncated(self) -> bool:
        return self.total > self.kept

    def body(self) -> bytes:
        return b"".join(self._parts)


def passed_through(httpx: Any, stream: Any, ended: Ended, *, is_async: bool) -> Any:
    """``stream`` (an httpx response stream) wrapped: every chunk goes to the caller unchanged, a
    bounded copy is kept, and ``ended`` is called once, when the body ends or is closed."""
    key = (httpx.__name__, is_async)
    cls = _CLASSES.get(key)
    if cls is None:
        cls = _CLASSES[key] = _async_class(httpx) if is_async else _sync_class(httpx)
    return cls(stream, ended)


_CLASSES: dict[tuple[str, bool], type] = {}


class _Tee:
    """What both directions share: the copy, and ``ended`` called once."""

    def __init__(self, stream: Any, ended: Ended) -> None:
        self._stream = stream
        self._ended: Ended | None = ended
        self._kept = KeptBody()

    def _end(self, complete: bool) -> None:
        ended, self._ended = self._ended, None
        if ended is not None:
            ended(self._kept, complete)


def _sync_class(httpx: Any) -> type:
    class Body(_Tee, httpx.SyncByteStream):
        def __iter__(self) -> Iterator[bytes]:
            complete = False
            try:
                for chunk in self._stream:
                    self._kept.add(chunk)
                    yield chunk
                complete = True
            finally:
                self._end(complete)

        def close(self) -> None:
            try:
                self._stream.close()
            finally:
                self._end(False)

    return Body


def _async_class(httpx: Any) -> type:
    class AsyncBody(_Tee, httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            complete = False
            try:
                async for chunk in self._stream:
                    self._kept.add(chunk)
                    yield chunk
                complete = True
            finally:
                self._end(complete)

        async def aclose(self) -> None:
            try:
                await self._stream.aclose()
            finally:
                self._end(False)

    return AsyncBody


def tee_reads(response: Any, ended: Ended, *, generators: tuple[str, ...] = ()) -> None:
    """Make ``response`` (an ``http.client`` or ``urllib3`` response, read by the caller) keep a
    bounded copy of what its reads return, and call ``ended`` once: at the end of the body, or
    when it is closed first. Only the outermost read of a call counts (``read(n)`` reads through
    ``readinto``); ``generators`` name methods that yield the body in pieces (urllib3's
    ``read_chunked``)."""
    kept = KeptBody()
    depth = 0
    done = False

    def end(complete: bool) -> None:
        nonlocal done
        if not done:
            done = True
            ended(kept, complete)

    def teed(name: str) -> Callable[..., Any]:
        inner = getattr(response, name)

        def read(*args: Any, **kwargs: Any) -> Any:
            nonlocal depth
            depth += 1
            try:
                out = inner(*args, **kwargs)
            finally:
                depth -= 1
            if depth == 0 and not done:
                data = bytes(memoryview(args[0])[:out]) if name == "readinto" and isinstance(out, int) else out
                if isinstance(data, (bytes, bytearray)) and data:
                    kept.add(data)
                if _over(response):
                    end(True)
            return out

        return read

    def teed_generator(name: str) -> Callable[..., Any]:
        inner = getattr(response, name)

        def pieces(*args: Any, **kwargs: Any) -> Iterator[bytes]:
            complete = False
            try:
                for piece in inner(*args, **kwargs):
                    if not done:
                        kept.add(piece)
                        if _over(response):
                            end(True)
                    yield piece
                complete = True
            finally:
                if complete:
                    end(True)

        return pieces

    closing = response.close

    def close(*args: Any, **kwargs: Any) -> Any:
        try:
            return closing(*args, **kwargs)
        finally:
            end(False)

    for name in ("read", "read1", "readinto", "readline"):
        if callable(getattr(response, name, None)):
            setattr(response, name, teed(name))
    for name in generators:
        if callable(getattr(response, name, None)):
            setattr(response, name, teed_generator(name))
    response.close = close


def _over(response: Any) -> bool:
    """Whether the body of ``response`` was read to its end: ``http.client`` lets go of the
    connection then (urllib3's response reads through one)."""
    fp = getattr(response, "_fp", None)
    if fp is not None and callable(getattr(fp, "isclosed", None)):
        return bool(fp.isclosed())
    isclosed = getattr(response, "isclosed", None)
    return bool(isclosed()) if callable(isclosed) else False
