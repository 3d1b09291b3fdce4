"""Recorded text made safe for a terminal: what every output of recorded strings goes through.

The command line, the TUI and the pytest plugin's failure messages all print text
that came from a recording, which may be hostile.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable

# C0 controls (but newline and tab), DEL, C1 controls and the bidirectional overrides: a
# recorded string carrying them could move the cursor, set the clipboard (OSC 52), retitle
# the terminal or reorder what is shown. So could the direction marks (U+200E, U+200F,
# U+061C), and the invisible ones make two different names look the same or break a line
# where none is shown (zero-width space, word joiner and invisible operators, the byte order
# mark, the line and paragraph separators). They print as "?". The zero-width (non-)joiners
# stay: Persian words and emoji sequences are written with them.
_CONTROLS = [*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0)]
_BIDI = [*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C]
_INVISIBLE = [0x200B, *range(0x2060, 0x2065), 0xFEFF, 0x2028, 0x2029]
_UNSAFE = {c: "?" for c in [*_CONTROLS, *_BIDI, *_INVISIBLE]}


# Most text holds none of them: one scan of a character class says so, where ``str.translate``
# costs ten times more once the text holds one non-ASCII character (a "→" in a step summary).
_ANY_UNSAFE = re.compile("[" + "".join(re.escape(chr(c)) for c in sorted(_UNSAFE)) + "]").search


def printable(text: str) -> str:
    """``text`` safe for a terminal: control characters, bidi overrides and invisible characters shown as ``?``."""
    return text if _ANY_UNSAFE(text) is None else text.translate(_UNSAFE)


def one_line(text: str) -> str:
    """``text`` kept to one line: a line break shows as ``⏎``. A line of a report or a view is
    built from recorded names (a node, a state key, a step's summary), and a hostile store's
    name holding a line break must not start a line of its own there."""
    return text.replace("\n", "⏎") if "\n" in text else text


def joined_lines(lines: Iterable[str]) -> str:
    """A report's or a view's lines, each kept to one (see ``one_line``), joined."""
    return "\n".join(map(one_line, lines))


def command_line(*words: object) -> str:
    """A command shown for a person to paste (``graphtape show RUN --ns NS``): each word quoted
    for a POSIX shell where it needs it, so recorded text in it (a run's id, a subgraph's
    namespace) is one argument when pasted, never shell syntax (``$(...)``, ``;``, a glob)."""
    return shlex.join(str(w) for w in words)
