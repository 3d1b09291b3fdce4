"""Record the HTTP requests a run's own code makes, and let a replay answer them.

A node, a ``@task`` or a tool's body may call a service directly: the ``openai``
SDK, ``httpx`` or ``requests`` to an internal API, a payment provider. vcrpy
already patches those clients where a request can be seen and a response
played back (``httpx`` sync and async, ``requests``, ``urllib3``,
``http.client`` / ``urllib.request``, ``aiohttp``, ``boto3``), and builds each
client's own response object on playback. graphtape hands vcrpy one cassette of
its own, :class:`_Dispatcher`, which keeps nothing: for every request it asks
the context the request runs in.

- The run: LangGraph puts the running task's config in LangChain's
  ``var_child_runnable_config`` (copied into the task's thread or asyncio task),
  with the step, node and namespace in its metadata and graphtape's capture
  handler among its callbacks. The request is recorded as a call of kind
  ``http`` of that task, or, inside a tool or model call graphtape records
  (``ChatOpenAI``'s own request), as part of that call (``parent_call_id``).
- A replay: :func:`answering_http` installs an answerer for the replay's
  context; it answers a request from the recording, lets it go live, or refuses
  it. A refused request never leaves the machine: it fails inside the node as
  the client's own connection error.

The patches are in place only while a recorded run or a replay is running
(:func:`acquire` / :func:`release`, counted) and are removed when the last one
ends. A request outside any run passes through untouched; a recorder problem is
counted on the run and the request goes on (unless the recorder is strict).

On top of vcrpy's patches, thin wrappers (the two transports of ``httpx`` and of
its fork ``httpx2``, which recent ``openai`` SDKs use,
``aiohttp``'s ``ClientSession._request`` and vcrpy's ``http.client`` stub
connection) tell which client a request went through and see a request fail: a
cassette is told of responses only, and a recorded timeout or refused
connection is part of the story too.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import importlib
import logging
import threading
import time
import itertools
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol
from unittest import mock

from graphtape.recorder.call_scope import current_call
from graphtape.recorder.http_errors import AIOHTTP, HTTP_CLIENT, HTTPX_LIKE, error_name, rebuilt, refused
from graphtape.recorder.http_exchange import HTTP, call_name, request_record, response_record, vcr_response
from graphtape.recorder.http_stream import KeptBody, passed_through, tee_reads
from graphtape.recorder.running_task import session_of, site_of, task_config

_log = logging.getLogger("graphtape")


# -- what a replay plugs in ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HttpAnswer:
    """A request answered from a recording: the recorded response, or the recorded transport error."""

    output: Any = None
    error: tuple[str | None, str | None] | None = None  # (type, message)


@dataclass(frozen=True, slots=True)
class HttpRefusal:
    """A request the recording cannot answer and the replay does not let through; ``reason`` says why."""

    reason: str


@dataclass(frozen=True, slots=True)
class Site:
    """Who made a request: the step, namespace and node of the task it ran in."""

    step: int | None
    ns: str
    node: str | None


class HttpAnswerer(Protocol):
    """What a replay supplies: an answer, a refusal, or ``None`` to let the request go live."""

    def answer_http(self, inputs: dict[str, Any], site: Site) -> HttpAnswer | HttpRefusal | None: ...


_answerer: contextvars.ContextVar[HttpAnswerer | None] = contextvars.ContextVar("graphtape_http_answerer", default=None)


@contextlib.contextmanager
def answering_http(answerer: HttpAnswerer | None) -> Iterator[None]:
    """Route HTTP requests made in this context to ``answerer`` until the block ends (``None``: none)."""
    acquire()
    token = _answerer.set(answerer)
    try:
        yield
    finally:
        _answerer.reset(token)
        release()


# -- installing vcrpy's patches, counted -------------------------------------------------

_lock = threading.Lock()
_users = 0
_patches: contextlib.ExitStack | None = None


def acquire() -> None:
    """A recorded run or a replay starts: make sure the clients are patched."""
    global _users, _patches
    with _lock:
        if _users == 0:
            stack = contextlib.ExitStack()
            try:
                _install(stack)
            except BaseException:
                stack.close()
                raise
            _patches = stack
        _users += 1


def prepare() -> None:
    """Build the patchers now, once per process: importing vcrpy and the clients it patches takes
    about 0.3 s, which the first recorded run would otherwise spend after it has started (a
    deadline on that run would run out before its first node)."""
    if _patchers is None:
        acquire()
        release()


def release() -> None:
    """A recorded run or a replay ended: the last one out removes the patches."""
    global _users, _patches
    with _lock:
        if _users == 0:
            return
        _users -= 1
        if _users == 0 and _patches is not None:
            stack, _patches = _patches, None
            stack.close()


@contextlib.contextmanager
def recording_http() -> Iterator[None]:
    """The clients are patched for the duration of the block."""
    acquire()
    try:
        yield
    finally:
        release()


def installed() -> bool:
    """Whether the patches are in place now."""
    return _patches is not None


# The patchers, built by the first install and entered again by each later one: building them
# (vcrpy makes a class per patched client and tries each optional client's import) cost a run
# more than its own recording of a short graph. What they put in place never changes: vcrpy's
# replacements wrap the clients as vcrpy found them when it was imported, ours wrap vcrpy's.
_patchers: list[Any] | None = None


def _install(stack: contextlib.ExitStack) -> None:
    global _patchers
    if _patchers is not None:
        for patcher in _patchers:
            stack.enter_context(patcher)
        return
    from vcr.patch import CassettePatcherBuilder
    from vcr.stubs import VCRConnection

    built: list[Any] = []

    def enter(patcher: Any) -> None:
        stack.enter_context(patcher)
        built.append(patcher)

    for patcher in CassettePatcherBuilder(_dispatcher()).build():
        enter(patcher)
    # Ours go on top of vcrpy's (entered after, so removed first; built with vcrpy's in place).
    enter(mock.patch.object(VCRConnection, "request", _remembering_options(VCRConnection.request)))
    enter(mock.patch.object(VCRConnection, "getresponse", _sync_entry(HTTP_CLIENT, _streaming_getresponse(VCRConnection.getresponse))))
    for name in HTTPX_LIKE:
        try:
            httpx = importlib.import_module(name)
        except ImportError:  # a client that is not installed is not patched
            continue
        sync_send, async_send = _httpx_streaming(httpx)
        enter(mock.patch.object(httpx.HTTPTransport, "handle_request", _sync_entry(name, sync_send or httpx.HTTPTransport.handle_request)))
        enter(mock.patch.object(httpx.AsyncHTTPTransport, "handle_async_request", _async_entry(name, async_send or httpx.AsyncHTTPTransport.handle_async_request)))
    try:
        import aiohttp
    except ImportError:  # pragma: no cover
        pass
    else:
        enter(mock.patch.object(aiohttp.ClientSession, "_request", _async_entry(AIOHTTP, aiohttp.ClientSession._request)))
        for patcher in _aiohttp_streaming():
            enter(patcher)
    _patchers = built


# -- httpx: a live body streamed to the caller ------------------------------------------------


def _httpx_streaming(httpx: Any) -> tuple[Any, Any]:
    """The transports' send for ``httpx`` (or ``httpx2``) as vcrpy's, except that a live response
    goes back to the caller at once, its body passed through as it comes (``http_stream``), where
    vcrpy would read it whole first (for ever, from a server that streams without end). A request
    outside any run is sent untouched. ``(None, None)`` if this vcrpy keeps the originals elsewhere."""
    import vcr.patch as vcr_patch
    from vcr.stubs.httpx_stubs import _make_vcr_request, _play_responses

    prefix = {"httpx": "_Httpx", "httpx2": "_Httpx2"}.get(httpx.__name__, "")
    send = getattr(vcr_patch, f"{prefix}HttpTransport_handle_request", None)
    async_send = getattr(vcr_patch, f"{prefix}AsyncHttpTransport_handle_async_request", None)
    if send is None or async_send is None:
        return None, None

    def asked(real_request: Any, body: bytes) -> tuple[Any, Any]:
        real_request.stream = httpx.ByteStream(body)
        vcr_request = _make_vcr_request(real_request, body)
        cassette = _dispatcher()
        return vcr_request, (_play_responses(cassette, vcr_request, httpx) if cassette.can_play_response_for(vcr_request) else None)

    @functools.wraps(send)
    def handle_request(self: Any, real_request: Any) -> Any:
        vcr_request, played = asked(real_request, b"".join(real_request.stream))
        if played is not None:
            return played
        return _streamed(httpx, vcr_request, send(self, real_request), is_async=False)

    @functools.wraps(async_send)
    async def handle_async_request(self: Any, real_request: Any) -> Any:
        vcr_request, played = asked(real_request, b"".join([part async for part in real_request.stream]))
        if played is not None:
            return played
        return _streamed(httpx, vcr_request, await async_send(self, real_request), is_async=True)

    return handle_request, handle_async_request


def _streamed(httpx: Any, vcr_request: Any, response: Any, *, is_async: bool) -> Any:
    """``response`` with its body passed through; its call recorded when the body ends or is closed."""
    pending = getattr(vcr_request, "_graphtape", None)
    if pending is None or pending.session is None or pending.done:
        return response  # not a run's request (or already answered for): nothing to keep
    headers: dict[str, list[str]] = {}
    for name, value in response.headers.multi_items():
        headers.setdefault(name, []).append(value)
    status = {"code": response.status_code, "message": response.reason_phrase}

    def ended(kept: KeptBody, complete: bool) -> None:
        _record_streamed(pending, status, headers, kept, complete)

    response.stream = passed_through(httpx, response.stream, ended, is_async=is_async)
    return response


# -- aiohttp: a live body streamed to the caller ------------------------------------------------


@dataclass(slots=True)
class _AioTee:
    """The bounded copy of one aiohttp response body, kept as the connection feeds it."""

    reader: Any  # the response's StreamReader (held: its id is the key)
    kept: KeptBody
    ended: Any  # (kept, complete) -> None


_aio_tees: dict[int, _AioTee] = {}  # id(StreamReader) -> its copy, while its body is live


def _aiohttp_streaming() -> list[Any]:
    """Patchers that make a live aiohttp response reach the caller as it comes, with a bounded copy.

    vcrpy reads a live response whole before the node sees it (for ever, from a server that
    streams without end). Here its ``record_response`` leaves a run's live body alone, and a
    copy of at most ``MAX_BODY_BYTES`` is kept as aiohttp's parser feeds the response's
    ``StreamReader`` (what the caller reads, decompressed); the call is recorded at the end of
    the body, or when the body fails or is released first (``body_incomplete``)."""
    from aiohttp import streams
    from vcr.stubs import aiohttp_stubs

    return [
        mock.patch.object(aiohttp_stubs, "record_response", _streaming_record_response(aiohttp_stubs.record_response)),
        mock.patch.object(streams.StreamReader, "feed_data", _teeing_feed(streams.StreamReader.feed_data)),
        mock.patch.object(streams.StreamReader, "set_exception", _ending_on_failure(streams.StreamReader.set_exception)),
    ]


def _streaming_record_response(vcr_record: Any) -> Any:
    @functools.wraps(vcr_record)
    async def record_response(cassette: Any, vcr_request: Any, response: Any) -> None:
        content = getattr(response, "content", None)
        if getattr(response, "_released", False) or not callable(getattr(content, "on_eof", None)) or content.is_eof():
            # A redirect aiohttp let go of, or a body read to its end already: in memory, as vcrpy reads it.
            await vcr_record(cassette, vcr_request, response)
            return
        pending = getattr(vcr_request, "_graphtape", None)
        if pending is None:
            pending = _begin(vcr_request)  # the end of a redirect aiohttp followed: recorded as its own request
        if pending.session is None or pending.done:
            return  # not a run's request: its body is the caller's alone
        headers: dict[str, list[str]] = {}
        for name, value in response.headers.items():
            headers.setdefault(str(name), []).append(value)
        status = {"code": response.status, "message": response.reason}

        def ended(kept: KeptBody, complete: bool) -> None:
            _record_streamed(pending, status, headers, kept, complete)

        kept = KeptBody()
        # What the parser fed before the response came back (headers and body can share a packet);
        # nothing of it is read yet. aiohttp keeps it there; a later aiohttp that does not is copied from here on.
        offset = getattr(content, "_buffer_offset", 0)
        for i, chunk in enumerate(list(getattr(content, "_buffer", ()))):
            kept.add(chunk[offset:] if i == 0 else chunk)
        if content.exception() is not None:
            ended(kept, False)
            return
        _aio_tees[id(content)] = _AioTee(content, kept, ended)
        content.on_eof(functools.partial(_aio_end, content, True))

    return record_response


def _aio_end(reader: Any, complete: bool) -> None:
    tee = _aio_tees.get(id(reader))
    if tee is None or tee.reader is not reader:
        return
    del _aio_tees[id(reader)]
    tee.ended(tee.kept, complete)


def _teeing_feed(feed_data: Any) -> Any:
    @functools.wraps(feed_data)
    def teeing(self: Any, data: Any, *args: Any, **kwargs: Any) -> Any:
        tee = _aio_tees.get(id(self))
        if tee is not None and tee.reader is self and data:
            tee.kept.add(data)
        return feed_data(self, data, *args, **kwargs)

    return teeing


def _ending_on_failure(set_exception: Any) -> Any:
    @functools.wraps(set_exception)
    def ending(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return set_exception(self, *args, **kwargs)
        finally:
            _aio_end(self, False)  # the connection failed, or the caller let go of the body first

    return ending


# -- http.client, urllib3, requests: a live body streamed to the caller -------------------------

# What the client asked of the response besides the request (urllib3's preload_content,
# decode_content): vcrpy's stub connection keeps only the request, and sends it with none.
_PASSED_ON = ("preload_content", "decode_content", "enforce_content_length")


def _remembering_options(request: Any) -> Any:
    @functools.wraps(request)
    def remembering(self: Any, method: Any, url: Any, body: Any = None, headers: Any = None, *args: Any, **kwargs: Any) -> Any:
        self._graphtape_options = {k: v for k, v in kwargs.items() if k in _PASSED_ON}
        return request(self, method, url, body, headers, *args, **kwargs)

    return remembering


def _streaming_getresponse(vcr_getresponse: Any) -> Any:
    """vcrpy's stub connection's ``getresponse``, except that for a request a run records, the
    live response goes back to the caller at once, its body passed through as the caller reads
    it (``http_stream.tee_reads``), where vcrpy would read it whole first."""
    from vcr.patch import force_reset

    @functools.wraps(vcr_getresponse)
    def getresponse(self: Any, _: Any = False, **kwargs: Any) -> Any:
        vcr_request = getattr(self, "_vcr_request", None)
        if vcr_request is None or self.cassette.can_play_response_for(vcr_request):
            return vcr_getresponse(self, _, **kwargs)
        pending = getattr(vcr_request, "_graphtape", None)
        if pending is None or pending.session is None or pending.done:
            return vcr_getresponse(self, _, **kwargs)  # not a run's request: as vcrpy does
        with force_reset():
            if self.__dict__.get("_deferred_connect"):
                args, kw = self._deferred_connect
                self._deferred_connect = None
                self.real_connection.connect(*args, **kw)
            options = getattr(self, "_graphtape_options", None) or {}
            self.real_connection.request(method=vcr_request.method, url=self._url(vcr_request.uri), body=vcr_request.body_bytes, headers=vcr_request.headers, **options)
        response = self.real_connection.getresponse()
        headers: dict[str, list[str]] = {}
        for name, value in _header_pairs(response):
            headers.setdefault(name, []).append(value)
        status = {"code": response.status, "message": response.reason}

        def ended(kept: KeptBody, complete: bool) -> None:
            _record_streamed(pending, status, headers, kept, complete)

        preloaded = getattr(response, "_body", None)  # urllib3 read it whole already (preload_content)
        if isinstance(preloaded, bytes):
            kept = KeptBody()
            kept.add(preloaded)
            ended(kept, True)
        else:
            tee_reads(response, ended, generators=("read_chunked",))
        return response

    return getresponse


def _header_pairs(response: Any) -> list[tuple[str, str]]:
    msg = getattr(response, "msg", None)
    if msg is not None and hasattr(msg, "items"):
        return list(msg.items())
    headers = getattr(response, "headers", None)
    items = getattr(headers, "items", None)
    return list(items()) if callable(items) else []


def _record_streamed(pending: _Pending, status: dict[str, Any], headers: dict[str, list[str]], kept: KeptBody, complete: bool) -> None:
    """A streamed response's call, once its body ended or was closed: what was kept, and how it ended."""
    try:
        output = response_record({"status": status, "headers": headers, "body": {"string": kept.body()}})
        if kept.truncated:
            output["body_truncated"] = kept.total  # what the caller read; the copy is its start
        elif not complete:
            output["body_incomplete"] = True  # the caller stopped reading before the end
    except Exception as exc:  # noqa: BLE001 - the body reached the caller whatever happens here
        _fault(pending.session, exc)
        return
    _finish(pending, output=output)


# -- one request -------------------------------------------------------------------------------


@dataclass(slots=True)
class _Pending:
    """What is known about one request (kept on vcrpy's request object)."""

    session: Any = None
    call_id: str | None = None
    started_at: float = 0.0
    perf0: float = 0.0
    answer: HttpAnswer | None = None
    done: bool = False


@dataclass(slots=True)
class _Slot:
    """One request through one client entry point: which client, and the request once it is known."""

    client: str
    pending: list[_Pending] = field(default_factory=list)


_slot: contextvars.ContextVar[_Slot | None] = contextvars.ContextVar("graphtape_http_slot", default=None)


class _Raise(BaseException):
    """Raised inside vcrpy's stub, turned into the client's own error by the entry wrapper."""

    def __init__(self, make: Any) -> None:
        super().__init__()
        self.make = make  # (client, request, connection) -> the exception to raise


def _raising(make: Any) -> BaseException:
    """What to raise inside vcrpy's stub: for a wrapped client, a ``_Raise`` its wrapper turns into the
    client's own error; for one without a wrapper (tornado, httpx's mock and ASGI transports), the
    plain error at once, so nothing of graphtape's own escapes into the node."""
    if _slot.get() is None:
        return make(None, None, None)
    return _Raise(make)


def _sync_entry(client: str, inner: Any) -> Any:
    @functools.wraps(inner)
    def entry(*args: Any, **kwargs: Any) -> Any:
        slot = _Slot(client)
        token = _slot.set(slot)
        try:
            return inner(*args, **kwargs)
        except _Raise as stop:
            raise _client_error(stop, client, args) from None
        except BaseException as exc:
            _failed(slot, exc)
            raise
        finally:
            _slot.reset(token)

    return entry


def _async_entry(client: str, inner: Any) -> Any:
    @functools.wraps(inner)
    async def entry(*args: Any, **kwargs: Any) -> Any:
        slot = _Slot(client)
        token = _slot.set(slot)
        try:
            return await inner(*args, **kwargs)
        except _Raise as stop:
            raise _client_error(stop, client, args) from None
        except BaseException as exc:
            _failed(slot, exc)
            raise
        finally:
            _slot.reset(token)

    return entry


def _client_error(stop: _Raise, client: str, args: tuple) -> BaseException:
    request = args[1] if client in HTTPX_LIKE and len(args) > 1 else None
    connection = args[0] if client == HTTP_CLIENT and args else None
    return stop.make(client, request, connection)


def _failed(slot: _Slot, exc: BaseException) -> None:
    """A live request failed (refused, timed out, reset): its call ends with that error."""
    for pending in slot.pending:
        if not pending.done:
            _finish(pending, error=(error_name(exc), _message(exc)))


# -- the cassette vcrpy talks to ----------------------------------------------------------------

_DISPATCHER: Any = None


def _dispatcher() -> Any:
    global _DISPATCHER
    if _DISPATCHER is None:
        _DISPATCHER = _dispatcher_class()()
    return _DISPATCHER


def _dispatcher_class() -> type:
    from vcr.cassette import Cassette

    class _Dispatcher(Cassette):
        """vcrpy's cassette, keeping nothing: each request is asked of the context it runs in."""

        def __init__(self) -> None:
            super().__init__(path="Graphtape")

        @property
        def write_protected(self) -> bool:
            return False  # a request nobody answers goes out (a strict replay refuses before this)

        def filter_request(self, request: Any) -> Any:
            return request

        def can_play_response_for(self, request: Any) -> bool:
            pending = getattr(request, "_graphtape", None)
            if pending is None:
                pending = _begin(request)
            return pending.answer is not None

        def play_response(self, request: Any) -> dict:
            pending = getattr(request, "_graphtape", None)
            if pending is None or pending.answer is None:
                pending = _begin(request) if pending is None else pending
                if pending.answer is None:  # a redirect the recording did not follow
                    raise _refuse(pending, request, "no recorded answer for the redirect")
            answer = pending.answer
            if answer.error is not None:
                _finish(pending, error=answer.error)
                kind, message = answer.error
                raise _raising(lambda client, req, conn: rebuilt(client, kind, message, req, conn))
            try:
                played = vcr_response(answer.output)
            except ValueError as exc:
                raise _refuse(pending, request, f"the recorded response cannot be played: {exc}") from None
            _finish(pending, output=answer.output)
            return played

        def append(self, request: Any, response: dict) -> None:
            pending = getattr(request, "_graphtape", None)
            if pending is None:
                pending = _begin(request)  # a redirect aiohttp followed: recorded as its own request
            if pending.session is None or pending.done:
                return
            try:
                output = response_record(response)
            except Exception as exc:  # noqa: BLE001 - the response reached the node whatever happens here
                _fault(pending.session, exc)
                return
            _finish(pending, output=output)

        def find_requests_with_most_matches(self, request: Any) -> list:
            return [(request, [], [])]  # aiohttp's playback of a redirect asks for the next request itself

        def _save(self, force: bool = False) -> None:
            return None

    return _Dispatcher


# Call ids: random per process, counted within it (os.urandom per request costs more than the rest).
_ID_PREFIX = f"http-{secrets.token_hex(6)}"
_ids = itertools.count(1)


def _begin(request: Any) -> _Pending:
    """Decide about a request seen for the first time: answer, refuse, or let it go (and record it)."""
    pending = _Pending(started_at=time.time(), perf0=time.perf_counter())
    request._graphtape = pending
    slot = _slot.get()
    if slot is not None:
        slot.pending.append(pending)
    answerer = _answerer.get()
    try:
        config = task_config()
        session = session_of(config)
        if session is None and answerer is None:
            return pending  # not a run's request: untouched
        inputs = request_record(request.method, request.uri, request.headers, getattr(request, "body_bytes", request.body))
        ns, node, task_id, step = site_of(config)
        parent = current_call()
        decision = None
        if answerer is not None and parent is None:
            # A request inside a tool or model call is that call's business: answered (or not) with it.
            decision = answerer.answer_http(inputs, Site(step, ns, node))
        if session is not None:
            pending.session = session
            pending.call_id = f"{_ID_PREFIX}-{next(_ids):012d}"
            session.begin_call(
                pending.call_id,
                {
                    "kind": HTTP,
                    "name": session.redactor.scrub_key(call_name(inputs["method"], inputs["url"])),  # scrubbed once per URL
                    "ns": ns,
                    "node": node,
                    "task_id": task_id,
                    "step": step,
                    "inputs": inputs,
                    "started_at": pending.started_at,
                    "perf0": pending.perf0,
                    "parent_call_id": parent if parent is not None and session.is_call(parent) else None,
                },
            )
    except Exception as exc:  # noqa: BLE001 - a recorder problem never stops the request
        _fault(getattr(pending, "session", None), exc)
        return pending
    if isinstance(decision, HttpRefusal):
        raise _refuse(pending, request, decision.reason)
    if isinstance(decision, HttpAnswer):
        pending.answer = decision
    return pending


def _refuse(pending: _Pending, request: Any, reason: str) -> BaseException:
    message = f"graphtape replay refused {request.method} {_shown_url(pending, request)}: {reason}; the request was not sent"
    _finish(pending, error=("RefusedByReplay", reason))
    return _raising(lambda client, req, conn: refused(client, message, req, conn))


def _shown_url(pending: _Pending, request: Any) -> str:
    session = pending.session
    name = call_name(request.method, str(request.uri)).partition(" ")[2]
    return session.redactor.scrub(name) if session is not None else name


def _finish(pending: _Pending, *, output: Any = None, error: tuple[str | None, str | None] | None = None) -> None:
    if pending.done:
        return
    pending.done = True
    session = pending.session
    if session is None or pending.call_id is None:
        return
    fields: dict[str, Any] = {"latency_ms": round((time.perf_counter() - pending.perf0) * 1000, 3)}
    if error is not None:
        fields["error_type"], fields["error_message"] = error
    else:
        fields["output"] = output
    try:
        session.end_call(pending.call_id, **fields)
    except Exception as exc:  # noqa: BLE001
        _fault(session, exc)


def _fault(session: Any, exc: Exception) -> None:
    if session is None:
        _log.warning("graphtape: HTTP capture: %s: %s", type(exc).__name__, exc)
        return
    session.fault(f"http capture: {type(exc).__name__}: {exc}")
    if session.strict:
        from graphtape.recorder.errors import RecorderFault

        raise RecorderFault(f"graphtape could not record an HTTP request ({type(exc).__name__}: {exc})") from exc


def _message(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001
        text = ""
    return (text or type(exc).__name__)[:4000]
