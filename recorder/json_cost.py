"""What parsing a JSON document will build in memory, told before it is parsed.

A stored payload is bounded in bytes, but the objects a parse builds are not: 40 kB of
compressed ``[{},{},...]`` inflates to 40 MB, and that parses to 1.3 GB of empty dicts.
A read must refuse such a payload before ``orjson.loads`` runs, so the cost is estimated
from the raw text with a few byte counts (C speed, no parse): every container opens with
``{`` or ``[``, every further item follows a ``,``, and every string is quoted. Commas and
brackets inside strings make the estimate high, never low; a payload that is one string
(a long value stored as its own blob) is charged its length alone.
"""

from __future__ import annotations

# Bytes of memory per token, measured on CPython 3.11 with orjson (``{}`` 64, with a key about
# 200; ``[]`` 56; a float 24; a short string ~50; a list slot 8), rounded up.
_PER_DICT = 192
_PER_LIST = 64
_PER_ITEM = 32
_PER_STRING = 32  # per quote: half a string


def built_bytes(body: bytes) -> int:
    """An upper estimate of the memory ``orjson.loads(body)`` builds, in bytes (the text included)."""
    if body[:1] == b'"':
        return 2 * len(body)  # one string: its text, and the str object holding it
    return (
        len(body)
        + _PER_DICT * body.count(b"{")
        + _PER_LIST * body.count(b"[")
        + _PER_ITEM * body.count(b",")
        + _PER_STRING * body.count(b'"')
    )
