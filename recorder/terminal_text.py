"""Recorded text made safe for a terminal: what every output of recorded strings goes through.

The command line, the TUI and the pytest plugin's failure messages all print text
that came from a recording, which may be hostile.
"""

from __future__ import annotations

# C0 controls (but newline and tab), DEL, C1 controls and the bidirectional overrides: a
# recorded string carrying them could move the cursor, set the clipboard (OSC 52), retitle
# the terminal or reorder what is shown. They print as "?".
_UNSAFE = {c: "?" for c in [*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0), *range(0x202A, 0x202F), *range(0x2066, 0x206A)]}


def printable(text: str) -> str:
    """``text`` safe for a terminal: control characters and bidi overrides shown as ``?``."""
    return text.translate(_UNSAFE)
