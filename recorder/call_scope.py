"""Which recorded LangChain call (a tool or a chat model) is running in this context.

The capture handler enters a call when its start callback fires and leaves it when
it ends; both callbacks run in the call's own context (LangChain calls an inline
handler where the call runs, and a tool's body runs in a copy of that context).
The HTTP recorder reads it: a request made inside such a call (``ChatOpenAI``'s own
request to its provider) is part of that call, not a call of its own.
"""

from __future__ import annotations

import contextvars

# (call id, the call it is nested in): a chain, so leaving a call restores the one around it.
_current: contextvars.ContextVar[tuple[str, tuple | None] | None] = contextvars.ContextVar("graphtape_call", default=None)


def enter_call(call_id: str) -> None:
    """``call_id`` runs in this context from now on (until :func:`leave_call`)."""
    _current.set((call_id, _current.get()))


def leave_call(call_id: str) -> None:
    """``call_id`` has ended: the call around it (if any) is the current one again."""
    found = _current.get()
    while found is not None and found[0] != call_id:
        found = found[1]  # an inner call that never reported its end
    if found is not None:
        _current.set(found[1])


def current_call() -> str | None:
    """The id of the innermost recorded call running in this context, if any."""
    found = _current.get()
    return found[0] if found is not None else None


def enclosing_calls() -> tuple[str, ...]:
    """The ids of every recorded call running in this context, innermost first."""
    out = []
    found = _current.get()
    while found is not None:
        out.append(found[0])
        found = found[1]
    return tuple(out)
