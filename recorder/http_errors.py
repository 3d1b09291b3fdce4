"""Network errors as each HTTP client raises them: named when recorded, raised again in a replay.

A replay raises a recorded transport error (a timeout, a refused connection) where
the client raised it, as the client's own type, so a node's ``except
httpx.TimeoutException`` or a retry loop takes the path it took when recorded. A
request a strict replay refuses fails the same way, as a refused connection.
Types are rebuilt only from an allow-list (each client's own transport errors and
the builtin ``OSError`` family), never imported by a name read from a recording;
an error outside it comes back as the client's plain connection error with the
recorded type named in its message.

Clients, by the vcrpy entry point a request went through: ``httpx`` (sync and
async) and its fork ``httpx2`` (which recent ``openai`` SDKs use), ``aiohttp``,
and ``http.client`` (which ``requests``, ``urllib3`` and ``urllib.request`` use).
"""

from __future__ import annotations

import builtins
import errno
import importlib
import socket
from typing import Any

HTTPX = "httpx"
HTTPX2 = "httpx2"
HTTPX_LIKE = (HTTPX, HTTPX2)  # the same API under two names
AIOHTTP = "aiohttp"
HTTP_CLIENT = "http.client"

_OS_ERRORS = ("ConnectionRefusedError", "ConnectionResetError", "ConnectionAbortedError", "BrokenPipeError", "ConnectionError", "TimeoutError", "OSError")
_ROOTS = ("httpx", "httpx2", "urllib3", "aiohttp", "requests", "httpcore", "openai")


def error_name(exc: BaseException) -> str:
    """How a transport error is stored: ``httpx.ConnectError``, ``urllib3.NewConnectionError``, ``TimeoutError``."""
    cls = type(exc)
    module = cls.__module__ or ""
    if module == "builtins":
        return cls.__qualname__
    root = module.split(".")[0]
    return f"{root}.{cls.__qualname__}" if root in _ROOTS else f"{module}.{cls.__qualname__}"


def refused(client: str | None, message: str, request: Any = None, connection: Any = None) -> BaseException:
    """The error a refused request fails with: the client's own "could not connect"."""
    if client in HTTPX_LIKE:
        httpx = importlib.import_module(client)
        return httpx.ConnectError(message, request=request) if request is not None else httpx.ConnectError(message)
    if client == AIOHTTP:
        import aiohttp

        return aiohttp.ClientConnectionError(message)
    # http.client (requests, urllib3): a refused socket, which urllib3 and requests wrap as they always do.
    return ConnectionRefusedError(errno.ECONNREFUSED, message)


def rebuilt(client: str | None, type_name: str | None, message: str | None, request: Any = None, connection: Any = None) -> BaseException:
    """A recorded transport error raised again as the client raised it (allow-listed types only)."""
    message = message or ""
    name = (type_name or "").rpartition(".")[2]
    try:
        made = _make(client, name, message, request, connection)
    except Exception:  # noqa: BLE001 - a constructor that wants more than a message: the plain error
        made = None
    if made is not None:
        return made
    return refused(client, f"{type_name}: {message}" if type_name else message, request, connection)


def _make(client: str | None, name: str, message: str, request: Any, connection: Any) -> BaseException | None:
    if client in HTTPX_LIKE:
        httpx = importlib.import_module(client)
        cls = _allowed(httpx, httpx.TransportError).get(name)
        if cls is None:
            return None
        return cls(message, request=request) if request is not None else cls(message)
    if client == AIOHTTP:
        import aiohttp

        cls = _allowed(aiohttp, aiohttp.ClientError).get(name)
        if cls is not None:
            return cls(message)  # ClientConnectorError wants a connection key: TypeError, the plain error
        return _os_error(name, message)
    if name in ("NewConnectionError", "ConnectTimeoutError") and connection is not None:
        import urllib3.exceptions as u3

        cls = getattr(u3, name)
        return cls(connection, message) if name == "NewConnectionError" else cls(message)
    if name == "NameResolutionError":
        return socket.gaierror(socket.EAI_NONAME, message)  # urllib3 turns it into its NameResolutionError
    if name in ("ReadTimeoutError", "timeout"):
        return TimeoutError(message)  # urllib3 turns a socket timeout into its ReadTimeoutError
    if name == "RemoteDisconnected":
        import http.client

        return http.client.RemoteDisconnected(message)
    return _os_error(name, message)


def _os_error(name: str, message: str) -> BaseException | None:
    if name in _OS_ERRORS:
        return getattr(builtins, name)(message)
    return None


_ALLOWED: dict[tuple[str, type], dict[str, type]] = {}


def _allowed(module: Any, base: type) -> dict[str, type]:
    """The exception classes ``module`` exports that derive from ``base``, by name (built once)."""
    key = (module.__name__, base)
    found = _ALLOWED.get(key)
    if found is None:
        found = {n: c for n, c in vars(module).items() if isinstance(c, type) and issubclass(c, base)}
        _ALLOWED[key] = found
    return found
