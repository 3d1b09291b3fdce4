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
    try:
        own = vars(error)
    except TypeError:
        own = {}
    out: dict[str, Any] = {}
    for name, value in list(own.items())[:_MAX_FIELDS * 4]:
        if len(out) >= _MAX_FIELDS:
            break
        if not isinstance(name, str) or name.startswith("_"):
            continue
        plain = _plain(value, 0)
        if plain is not _SKIP:
            out[name] = plain
        elif not isinstance(value, type) and not callable(value):
            shallow = _shallow(value)
            if shallow is not None:
                out[name] = shallow
    return {KEY: out, CLASS: qualified_name(cls)}


_SKIP = object()


def _plain(value: Any, depth: int) -> Any:
    """``value`` if it is plain data (text cut long), a mapping or list of it; ``_SKIP`` otherwise."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return value[:_MAX_TEXT]
    if depth >= 2:
        return _SKIP
    if isinstance(value, Mapping):
        items = list(value.items())[:_MAX_FIELDS]
        out = {str(k): _plain(v, depth + 1) for k, v in items}
        return {k: v for k, v in out.items() if v is not _SKIP}
    if isinstance(value, (list, tuple)):
        out_list = [_plain(v, depth + 1) for v in value[:_MAX_FIELDS]]
        return [v for v in out_list if v is not _SKIP]
    return _SKIP


def _shallow(obj: Any) -> dict[str, Any] | None:
    """An object's plain public attributes, one level deep (a response's status code and headers)."""
    try:
        own = vars(obj)
    except TypeError:
        return None
    out: dict[str, Any] = {OBJECT: type(obj).__name__}
    for name, value in list(own.items())[:_MAX_FIELDS * 4]:
        if len(out) > _MAX_FIELDS or not isinstance(name, str):
            break
        if name.startswith("_"):
            continue
        plain = _plain(dict(value.items()) if isinstance(value, Mapping) else value, 1)
        if plain is not _SKIP:
            out[name] = plain
    return out
