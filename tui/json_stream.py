"""JSON for ``--json`` output, written as it is made: a run of 10,000 steps is not one string first.

``json.dumps(..., indent=2)`` encodes in Python (indenting turns its C encoder off):
most of ``show --json``'s time on a long run. orjson writes the same document;
a value it refuses (an integer past 64 bits, a lone surrogate) falls back to
``json`` for that value alone. The layout is ``json.dumps(indent=2)``'s.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, TextIO

import orjson

_OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS


def dumps(value: Any) -> str:
    """``value`` as indented JSON; what JSON has no form for is written as its ``str``."""
    try:
        return orjson.dumps(value, option=_OPTIONS, default=str).decode()
    except orjson.JSONEncodeError:
        return json.dumps(value, ensure_ascii=False, indent=2, default=str)


def write_object(out: TextIO, head: Mapping[str, Any], key: str, items: Iterable[Any]) -> None:
    """Write ``{**head, key: [*items]}`` as indented JSON, each item as soon as it comes.

    What ``out`` is sent is the document ``dumps`` gives for the whole, so a reader
    cannot tell the two apart; the items are never held together.
    """
    out.write("{")
    for k, v in head.items():
        out.write(f"\n  {_key(k)}: {_nested(v, 1)},")
    out.write(f"\n  {_key(key)}: [")
    first = True
    for item in items:
        out.write(("\n    " if first else ",\n    ") + _nested(item, 2))
        first = False
    out.write("]\n}\n" if first else "\n  ]\n}\n")


def _key(k: str) -> str:
    return json.dumps(k, ensure_ascii=False)


def _nested(value: Any, depth: int) -> str:
    """``value`` as indented JSON at ``depth`` levels in (a JSON text holds no raw newline but these)."""
    return dumps(value).replace("\n", "\n" + "  " * depth)
