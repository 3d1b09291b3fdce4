"""Text holding a lone surrogate (half of an emoji cut by a stream, bytes decoded with
``surrogateescape``): stored, never the reason a step is lost.

UTF-8, and so orjson, SQLite and PostgreSQL, cannot encode such a character. The
encoder keeps a recorded string exactly in a ``{"$t": "str"}`` envelope (escaped as
text columns escape it); anything else that reaches JSON with one (an error message,
a name) has it replaced by U+FFFD, as display does, instead of failing the whole row.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

_LONE = re.compile("[\ud800-\udfff]")


def has_lone_surrogate(text: str) -> bool:
    """Whether ``text`` holds a character UTF-8 cannot encode (ASCII text is answered at once)."""
    return not text.isascii() and _LONE.search(text) is not None


def displayable(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (one character for one: offsets stay)."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def json_bytes(tree: Any) -> bytes:
    """``orjson.dumps(tree)``; a lone surrogate anywhere in it becomes U+FFFD rather than an error."""
    try:
        return orjson.dumps(tree)
    except TypeError as exc:
        if "surrogates" not in str(exc):
            raise
        return orjson.dumps(_valid(tree))


def _valid(value: Any) -> Any:
    t = type(value)
    if t is str:
        return displayable(value) if has_lone_surrogate(value) else value
    if t is dict:
        return {(_valid(k) if type(k) is str else k): _valid(v) for k, v in value.items()}
    if t is list or t is tuple:
        return [_valid(v) for v in value]
    return value
