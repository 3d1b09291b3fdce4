"""How a run that recorded no step is told: replay, fork, export and the TUI say why it has none.

A run LangGraph refused before its first superstep (no input, an input its schema rejects) or
one killed as it started is stored with no step at all; "has no steps" alone reads like a bug
of graphtape's. Its error says what went wrong, and `show` what it was given.
"""

from __future__ import annotations

from graphtape.recorder.records import RunInfo
from graphtape.recorder.terminal_text import command_line, one_line


def why_no_steps(run: RunInfo) -> str:
    """`` (it failed before its first: ValueError: ...)``, or nothing when the run kept no error."""
    if not run.error_type:
        return ""
    said = f"{run.error_type}: {run.error_message}" if run.error_message else run.error_type
    return f" (it failed before its first: {one_line(said)[:200]})"


def no_steps_message(run: RunInfo, what: str) -> str:
    """One line for ``what`` (replay, fork, export) refused on a run with no steps, and what to look at."""
    return f"run {run.id} recorded no steps{why_no_steps(run)}: there is nothing to {what}; {command_line('graphtape', 'show', run.id)} shows what it was given"
