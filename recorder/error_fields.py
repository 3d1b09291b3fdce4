"""What a failed call's error carried besides its message, kept so a replay can hand it back.

An SDK's error is more than its text: ``openai.RateLimitError`` has a ``status_code`` and a
``response``, httpx's ``HTTPStatusError`` a ``response`` whose ``status_code`` LangGraph's
default ``retry_on`` reads. The error's public attributes are kept as plain values; an
object among them (a response) as the plain values of its own public attributes, one level
deep. Redaction applies as to any recorded value (the writer encodes them). A replay raises
the error's class again with these (``replay.loaded_errors``); nothing here is ever called.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from graphtape.recorder.codec import qualified_name

KEY = "error_fields"  # the failed call's output: {KEY: {attribute: value}, CLASS: "module.QualName"}
CLASS = "error_class"  # which of the loaded classes of the error's name it was (a name is not unique)
OBJECT = "$attrs"  # an attribute that was an object: {OBJECT: its class's name, attribute: value...}
_MAX_FIELDS = 32
_MAX_TEXT = 4_000


def error_fields(error: BaseException) -> dict[str, Any] | None:
    """``{KEY: {...}, CLASS: ...}`` for an error that is not one of Python's own, else None."""
    cls = type(error)
    if cls.__module__ == "builtins":
        return None
    out: dict[str, Any] = {}
    for name, value in _public(error):
        plain = _plain(value, 0)
        if plain is _SKIP and not isinstance(value, type) and not callable(value):
            plain = _shallow(value)  # an object (a response): its own plain attributes
        if plain is not _SKIP:
            out[name] = plain
    return {KEY: out, CLASS: qualified_name(cls)}


_SKIP = object()


def _public(obj: Any) -> list[tuple[str, Any]]:
    """An object's own public attributes, at most ``_MAX_FIELDS`` of them."""
    try:
        own = vars(obj)
    except TypeError:
        return []
    return [(k, v) for k, v in list(own.items()) if isinstance(k, str) and not k.startswith("_")][:_MAX_FIELDS]


def _plain(value: Any, depth: int) -> Any:
    """``value`` if it is plain data (text cut long), a mapping or list of it; ``_SKIP`` otherwise."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return value[:_MAX_TEXT]
    if depth >= 2:
        return _SKIP
    if isinstance(value, Mapping):
        out = {str(k): _plain(v, depth + 1) for k, v in list(value.items())[:_MAX_FIELDS]}
        return {k: v for k, v in out.items() if v is not _SKIP}
    if isinstance(value, (list, tuple)):
        return [p for p in (_plain(v, depth + 1) for v in value[:_MAX_FIELDS]) if p is not _SKIP]
    return _SKIP


def _shallow(obj: Any) -> Any:
    """An object's plain public attributes, one level deep (a response's status code and headers);
    ``_SKIP`` for an object without attributes of its own."""
    try:
        vars(obj)
    except TypeError:
        return _SKIP
    out: dict[str, Any] = {OBJECT: type(obj).__name__}
    for name, value in _public(obj):
        plain = _plain(dict(value.items()) if isinstance(value, Mapping) else value, 1)
        if plain is not _SKIP:
            out[name] = plain
    return out
