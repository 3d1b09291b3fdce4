"""Argument types the command line shares: whole numbers the store can hold, said wrong in one line."""

from __future__ import annotations

import argparse

INT_LIMIT = 2**62  # steps, limits: well inside the store's 64-bit integers
# How a command names a run (``RunStore.resolve_run``), in every command's help.
RUN_HELP = (
    "run id, a unique id prefix, last (the newest recorded run: replays and forks are skipped, "
    "name those by id), last~N, or a run's name (its newest recorded run)"
)


def _whole(text: str, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if abs(value) > INT_LIMIT:
        raise argparse.ArgumentTypeError(f"{text} is out of range for {what}")
    return value


def step_number(text: str) -> int:
    """A step number (``-1`` is the input)."""
    return _whole(text, "a step number")


def non_negative(text: str) -> int:
    """A count or a limit: 0 or more."""
    value = _whole(text, "a count")
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value
