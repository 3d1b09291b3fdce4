"""Text as graphtape stores it in a text column: any Python string, reversibly.

PostgreSQL's text refuses NUL, and neither SQLite nor PostgreSQL can encode a
lone surrogate. Such a character is stored as ``ESCAPE`` + its code point in hex
+ ``;`` (``ESCAPE`` itself too, so the mapping reverses exactly); text without
them, nearly all of it, is stored as it is. ``schema.AnyText`` applies it to
every text column; a reader that bypasses SQLAlchemy (``quick_listing``) calls
``from_column`` itself. Free of SQLAlchemy on purpose.
"""

from __future__ import annotations

import re

ESCAPE = "\U0010ffff"  # a noncharacter: valid UTF-8 that text does not hold by accident
_REFUSED = re.compile("[\x00\ud800-\udfff\U0010ffff]")
_ESCAPED = re.compile("\U0010ffff([0-9a-f]{1,6});")


def needs_escape(text: str) -> bool:
    """Whether ``text`` holds a character a text column refuses (or the escape itself)."""
    return _REFUSED.search(text) is not None


def to_column(text: str) -> str:
    """``text`` as a text column stores it on every backend (unchanged unless it holds a refused character)."""
    if _REFUSED.search(text) is None:
        return text
    return _REFUSED.sub(lambda m: f"{ESCAPE}{ord(m.group()):x};", text)


def from_column(text: str | None) -> str | None:
    """The text ``to_column`` was given (``None`` stays ``None``)."""
    if text is None or ESCAPE not in text:
        return text
    return _ESCAPED.sub(lambda m: chr(int(m.group(1), 16)), text)
