"""Modes as ``str`` Enums whose bad values are refused naming the valid ones.

One base for every mode graphtape takes from users (durability, replay mode,
record mode): ``Mode("x")`` and ``Mode.parse("x")`` raise ``ValueError``
with the same one-line message, named after the class (``ReplayMode`` ->
"replay mode").
"""

from __future__ import annotations

import enum
import re
from typing import Any


class Choice(str, enum.Enum):
    """A ``str`` Enum of named choices; subclasses list the members."""

    @classmethod
    def _missing_(cls, value: Any) -> Any:
        noun = re.sub(r"(?<!^)(?=[A-Z])", " ", cls.__name__).lower()
        valid = ", ".join(repr(m.value) for m in cls)
        raise ValueError(f"unknown {noun} {value!r}: use one of {valid}")

    @classmethod
    def parse(cls, value: str | Choice) -> Any:
        """The member named ``value``; a bad name raises ``ValueError`` naming the valid ones."""
        return cls(value)
