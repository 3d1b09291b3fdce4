"""What a browser session may say over the websocket, read before it reaches the TUI process.

The browser's terminal sends five kinds of message: ``["stdin", text]``, ``["resize", {"width":
w, "height": h}]``, ``["ping", text]``, ``["focus"]`` and ``["blur"]``. Anything else (text that
is not JSON, another shape, a kind never sent) is dropped, not raised: a malformed message used
to end the session with a traceback on the user's terminal. A size is clamped to what a screen
holds, so a ``width`` of 10^9 cannot make the TUI build lines a gigabyte long.
"""

from __future__ import annotations

import json
from typing import Any

MAX_COLUMNS = 1000  # a 4K screen at a small font is about 600 columns
MAX_ROWS = 500
MAX_PING = 64  # the page pings with a clock reading, echoed back
MAX_MESSAGE_BYTES = 256 * 1024  # larger frames close the websocket (aiohttp's limit); a paste is one frame


def clamped_size(width: Any, height: Any) -> tuple[int, int] | None:
    """``(columns, rows)`` within 1..MAX, from integers or their decimal text (a query string);
    None when either is not a whole number."""
    size = []
    for value, most in ((width, MAX_COLUMNS), (height, MAX_ROWS)):
        if isinstance(value, str) and value.strip().lstrip("+-").isdigit() and len(value) <= 12:
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            return None
        size.append(min(max(value, 1), most))
    return size[0], size[1]


def query_size(query: Any) -> tuple[int, int]:
    """The terminal size a websocket's query asks for, clamped; 80x24 where it says nothing usable."""
    return clamped_size(query.get("width", "80"), query.get("height", "24")) or (80, 24)


def read_message(text: str) -> tuple[str, Any] | None:
    """``(kind, data)`` for a message the TUI may be given, or None to drop it.

    ``stdin`` carries its text, ``resize`` a clamped ``(columns, rows)``, ``ping`` its text;
    ``focus`` and ``blur`` carry None.
    """
    if len(text) > MAX_MESSAGE_BYTES:
        return None
    try:
        envelope = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than the parser goes
        return None
    if not isinstance(envelope, list) or not envelope or not isinstance(envelope[0], str):
        return None
    kind, data = envelope[0], envelope[1] if len(envelope) > 1 else None
    if kind == "stdin" and isinstance(data, str):
        return kind, data
    if kind == "resize" and isinstance(data, dict):
        size = clamped_size(data.get("width"), data.get("height"))
        return (kind, size) if size is not None else None
    if kind == "ping" and isinstance(data, str) and len(data) <= MAX_PING:
        return kind, data
    if kind in ("focus", "blur"):
        return kind, None
    return None
