"""An HTTP request and its response as graphtape stores them, and back.

vcrpy hands each request over as its ``Request`` (method, uri, headers, body) and
each response as ``{"status": {"code", "message"}, "headers": {name: [values]},
"body": {"string": bytes}}``. graphtape stores them as plain values that the codec
encodes and redacts like every other value of a run (a header named like a secret,
``Authorization``, ``api-key``, ``Cookie``, is stored as ``[REDACTED]``; a token in a
URL's query or in a body is scrubbed):

- a call's inputs: ``{"method", "url", "headers", "body"}``;
- its output: ``{"status", "reason", "headers", "body"}``.

A body is text when it is UTF-8 (JSON reads, diffs and is redacted as text), bytes
otherwise, and a compressed response is stored decompressed. What a request asked
(:func:`asked`) is its query and its body, JSON parsed: two requests that differ only
in key order, whitespace or headers ask the same thing.
"""

from __future__ import annotations

import base64
import http
import json
import re
import zlib
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from graphtape.recorder.redaction import MARK

HTTP = "http"  # the kind of an HTTP call in the calls table
MAX_BODY_BYTES = 8 * 1024 * 1024  # a larger body is not kept (a download is not a fixture)
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # RFC 9110 field-name
_HOP_HEADERS = frozenset({"content-length", "transfer-encoding", "connection", "keep-alive"})


def call_name(method: str, url: str) -> str:
    """How an HTTP call is named (and matched): ``"POST https://api.example.com/v1/charge"``.

    The query is left out (it is part of what was asked, compared on its own) and so is
    any user and password in the URL.
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return f"{method.upper()} {urlunsplit((parts.scheme, host, parts.path or '/', '', ''))}"


def url_without_password(url: str) -> str:
    """``url`` with the password of its user part replaced (``user:REDACTED@host``: brackets would read as IPv6)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, f"{parts.username or ''}:{MARK.strip('[]')}@{host}", parts.path, parts.query, parts.fragment))


def request_record(method: str, url: str, headers: Any, body: Any) -> dict[str, Any]:
    """A request as a call's inputs (plain values, not yet redacted: the encoder does that).

    A body the client compressed (``Content-Encoding: gzip``) is stored decompressed, as a
    response's is: compressed, the encoder could not read the secrets in it to redact them.
    One that does not decompress is not kept, for the same reason."""
    plain = _headers(headers)
    stored = _request_body(body)
    encoding = _header(plain, "content-encoding")
    if encoding and isinstance(stored, bytes) and encoding.lower() != "identity":
        raw = _decompress(stored, encoding.lower())
        stored = _body(raw) if raw is not None else f"<{len(stored)} bytes in content-encoding {encoding!r} graphtape cannot read: not kept>"
    return {"method": str(method).upper(), "url": url_without_password(str(url)), "headers": plain, "body": stored}


def response_record(response: Mapping[str, Any]) -> dict[str, Any]:
    """A vcrpy response dict as a call's output; a compressed body is stored decompressed."""
    status = response.get("status") or {}
    headers = dict(response.get("headers") or {})
    raw = (response.get("body") or {}).get("string")
    if isinstance(raw, str):
        raw = raw.encode("utf-8")
    encoding = _header(headers, "content-encoding")
    if raw and encoding:
        plain = _decompress(raw, encoding.lower())
        if plain is not None or _is_text(raw):
            # Decompressed here, or already by the client (urllib3 hands bodies over decoded).
            raw = plain if plain is not None else raw
            headers = {k: v for k, v in headers.items() if k.lower() != "content-encoding"}
    out: dict[str, Any] = {"status": status.get("code"), "reason": status.get("message"), "headers": _headers(headers)}
    if raw is not None and len(raw) > MAX_BODY_BYTES:
        out["body"] = None
        out["body_omitted"] = len(raw)
    else:
        out["body"] = _body(raw)
    return out


def vcr_response(output: Any) -> dict[str, Any]:
    """A recorded output (decoded from the store) as the response dict vcrpy plays back.

    Recorded data is hostile: the status must be a real status code, header names must be
    header names and values lose any line break (no header can be smuggled in), and a body that was not
    kept cannot be played. Raises ``ValueError`` saying why.
    """
    if not isinstance(output, Mapping):
        raise ValueError("the recorded response is not an HTTP response")
    status = output.get("status")
    if type(status) is not int or not 100 <= status <= 599:
        raise ValueError(f"the recorded status {status!r:.40} is not an HTTP status code")
    if output.get("body_omitted"):
        raise ValueError(f"the recorded response body ({output['body_omitted']} bytes) was too large to keep")
    if output.get("body_truncated"):
        raise ValueError(f"the recorded response body was streamed past what graphtape keeps ({output['body_truncated']!r:.20} bytes read; the start of it kept)")
    body = body_bytes(output.get("body"))
    headers: dict[str, list[str]] = {}
    for name, value in (output.get("headers") or {}).items() if isinstance(output.get("headers"), Mapping) else ():
        name = _text(name)
        if not _TOKEN.fullmatch(name) or name.lower() in _HOP_HEADERS:
            continue  # not a header name a client would accept (or one that is recomputed)
        values = value if isinstance(value, list) else [value]
        headers.setdefault(name, []).extend(_one_line(v) for v in values)
    headers["Content-Length"] = [str(len(body))]
    reason = output.get("reason")
    if not isinstance(reason, str):
        try:
            reason = http.HTTPStatus(status).phrase
        except ValueError:
            reason = ""
    return {"status": {"code": status, "message": _one_line(reason)}, "headers": headers, "body": {"string": body}}


def body_bytes(body: Any) -> bytes:
    """A stored body (text, decoded bytes, or JSON-like data) as the bytes to send back."""
    if body is None:
        return b""
    if isinstance(body, str):
        return body.encode("utf-8")
    if isinstance(body, (bytes, bytearray)):
        return bytes(body)
    if isinstance(body, Mapping) and body.get("__type__") == "bytes" and isinstance(body.get("base64"), str):
        return base64.b64decode(body["base64"])
    return json.dumps(body).encode("utf-8")


def asked(inputs: Any) -> dict[str, Any]:
    """What a request asked, comparable between a recording and a replay: its query and body.

    ``inputs`` is a request's plain, redacted record (as the store gives it back).
    """
    if not isinstance(inputs, Mapping):
        return {}
    out: dict[str, Any] = {}
    url = inputs.get("url")
    if isinstance(url, str):
        query = sorted(parse_qsl(urlsplit(url).query, keep_blank_values=True))
        if query:
            out["query"] = [list(pair) for pair in query]
    body = inputs.get("body")
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except ValueError:
            pass
    if body not in (None, "", b""):
        out["body"] = body
    return out


# -- internals ----------------------------------------------------------------------


def _headers(headers: Any) -> dict[str, Any]:
    """Headers as ``{name: value}`` (a list where a name repeats, as ``Set-Cookie`` may)."""
    out: dict[str, Any] = {}
    for name, value in _header_items(headers):
        name = _text(name)
        values = [_text(v) for v in value] if isinstance(value, (list, tuple)) else [_text(value)]
        for v in values:
            if name in out:
                old = out[name]
                out[name] = [*old, v] if isinstance(old, list) else [old, v]
            else:
                out[name] = v
    return out


def _header_items(headers: Any) -> Iterable[tuple[Any, Any]]:
    if headers is None:
        return ()
    multi = getattr(headers, "multi_items", None)  # httpx.Headers: every value of a repeated name
    if callable(multi):
        return multi()
    items = getattr(headers, "items", None)
    return items() if callable(items) else headers


def _header(headers: Mapping[str, Any], name: str) -> str | None:
    for k, v in headers.items():
        if str(k).lower() == name:
            v = v[0] if isinstance(v, (list, tuple)) and v else v
            return _text(v)
    return None


def _text(value: Any) -> str:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("latin-1")
    return str(value)


def _one_line(value: Any) -> str:
    return _text(value).replace("\r", " ").replace("\n", " ")


def _request_body(body: Any) -> Any:
    if body is None or isinstance(body, (str, bytes, bytearray)):
        return _body(body)
    if isinstance(body, (Mapping, list, tuple)):
        return body  # aiohttp's json= or data= mapping, as the node passed it
    read = getattr(body, "read", None)  # a file-like body vcrpy did not materialize
    if callable(read):
        return None
    return _text(body)


def _body(raw: Any) -> Any:
    if raw is None or isinstance(raw, str):
        return raw
    raw = bytes(raw)
    if len(raw) > MAX_BODY_BYTES:
        return f"<{len(raw)} bytes, over graphtape's {MAX_BODY_BYTES}-byte limit: not kept>"
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw


def _is_text(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _decompress(raw: bytes, encoding: str) -> bytes | None:
    """The body without its content encoding, or ``None`` when it does not decode as that."""
    try:
        if encoding in ("gzip", "x-gzip"):
            return zlib.decompress(raw, 16 + zlib.MAX_WBITS)
        if encoding == "deflate":
            try:
                return zlib.decompress(raw)
            except zlib.error:
                return zlib.decompress(raw, -zlib.MAX_WBITS)
        if encoding == "br":
            import brotli  # type: ignore[import-not-found]

            return brotli.decompress(raw)
        if encoding == "zstd":
            import zstandard  # type: ignore[import-not-found]

            return zstandard.ZstdDecompressor().decompress(raw)
    except Exception:  # noqa: BLE001 - not compressed as it says (or no decoder): kept as it came
        return None
    return None
