"""Regular expressions that run in time linear in their input: RE2 (google-re2).

Every pattern that scans recorded or user text goes through here. Python's ``re``
backtracks: one pattern and a crafted string can take minutes and hold the GIL
(the whole process, the user's graph included). RE2 never backtracks; the price is
that it has no lookaround and no backreferences, and a pattern using them is
refused with a sentence that says so.
"""

from __future__ import annotations

from typing import Any

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a bad pattern is our one-line error, not a C++ log line on stderr
_OPTIONS.max_mem = 64 << 20


def compile_linear(pattern: str) -> Any:
    """``pattern`` compiled by RE2; ``ValueError`` naming what RE2 cannot run."""
    try:
        return re2.compile(pattern, options=_OPTIONS)
    except Exception as exc:  # re2.error, and TypeError for non-text
        raise ValueError(_why(pattern, exc)) from None


def compiles(pattern: str) -> bool:
    """Whether RE2 can run ``pattern``."""
    try:
        re2.compile(pattern, options=_OPTIONS)
    except Exception:  # noqa: BLE001 - only asking
        return False
    return True


def _why(pattern: str, exc: Exception) -> str:
    text = str(exc.args[0] if exc.args else exc)
    if isinstance(exc.args[0] if exc.args else None, bytes):
        text = exc.args[0].decode("utf-8", "replace")
    if "perl operator" in text or "backreference" in text or "(?P=" in pattern:
        return f"{text}: lookarounds and backreferences need backtracking, which can take time far beyond the text's length; use RE2 syntax"
    return text
