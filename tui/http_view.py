"""How an HTTP call reads beside tool and model calls: method, URL, status, timing, bodies.

Shared by ``graphtape show`` and the TUI's Calls tab, so both say the same thing.
A request made inside a tool or model call is shown under that call (``↳``), as
part of it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

HTTP = "http"


def is_http(call: Any) -> bool:
    return _get(call, "kind") == HTTP


def status_text(call: Any) -> str:
    """``200 OK``, ``503 Service Unavailable``; empty when the request got no response."""
    output = _get(call, "output")
    if _get(call, "error_type") or not isinstance(output, Mapping):
        return ""
    status = output.get("status")
    reason = output.get("reason")
    return f"{status} {reason}".strip() if status is not None else ""


def failed_status(call: Any) -> bool:
    """A response with a 4xx or 5xx status (the request itself went through)."""
    output = _get(call, "output")
    status = output.get("status") if isinstance(output, Mapping) else None
    return type(status) is int and status >= 400


def request_body(call: Any) -> Any:
    inputs = _get(call, "inputs")
    return _readable(inputs.get("body")) if isinstance(inputs, Mapping) else None


def response_body(call: Any) -> Any:
    output = _get(call, "output")
    if not isinstance(output, Mapping):
        return None
    if output.get("body_omitted"):
        return f"<{output['body_omitted']} bytes, too large to keep>"
    return _readable(output.get("body"))


def headers(value: Any) -> dict[str, Any]:
    """The headers of a request (a call's inputs) or a response (its output)."""
    found = value.get("headers") if isinstance(value, Mapping) else None
    return dict(found) if isinstance(found, Mapping) else {}


def parent_label(call: Any, calls: list[Any]) -> str | None:
    """``model ChatOpenAI:gpt-4o`` when this request was made inside that call of the same step."""
    parent = _get(call, "parent_call_id")
    if not parent:
        return None
    for other in calls:
        if _get(other, "call_id") == parent:
            return f"{_get(other, 'kind')} {_get(other, 'name')}"
    return "a call of another step"


def _readable(body: Any) -> Any:
    """A stored body as a person reads it: JSON parsed, binary named by its size."""
    if isinstance(body, str):
        try:
            return json.loads(body)
        except ValueError:
            return body
    if isinstance(body, Mapping) and body.get("__type__") == "bytes":
        size = len(str(body.get("base64") or "")) * 3 // 4
        return f"<{size} bytes of binary data>"
    return body


def _get(call: Any, name: str) -> Any:
    return call.get(name) if isinstance(call, Mapping) else getattr(call, name, None)
