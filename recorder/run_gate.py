"""While graphtape loads a user's file for its graph, the graph runs that file starts are stopped.

The first thing people record is often a one-file script: the graph is built, attached and run
at its top level. Loading that file for a replay, a fixture test or the TUI runs its top level
again, and with it the agent, live: paid model calls, tools with side effects, one more recorded
run. Whatever else a file does when it is loaded cannot be helped, but a graph run can: while
:func:`runs_stopped` is in effect in this thread (or the tasks it starts), ``stream`` and
``astream`` of every LangGraph graph (``invoke`` and the rest go through them) raise
:class:`GraphRunStopped` before anything runs or is recorded. It is a ``BaseException`` so that a
script's ``except Exception`` around its run does not swallow it; the loader catches it and keeps
the module as far as it ran, which is where the graph was built.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

_loading: contextvars.ContextVar[str | None] = contextvars.ContextVar("graphtape_loading", default=None)
_lock = threading.Lock()
_users = 0
_originals: dict[str, Callable[..., Any]] = {}


class GraphRunStopped(BaseException):
    """A file being loaded for its graph started a graph run; ``line`` is where, when it is known."""

    def __init__(self, file: str, line: int | None) -> None:
        self.file = file
        self.line = line
        where = f"{file} line {line}" if line else file
        super().__init__(f"{where} runs a graph while it is loaded")


def check() -> None:
    """Raise :class:`GraphRunStopped` when a file is being loaded for its graph in this context."""
    file = _loading.get()
    if file is not None:
        raise GraphRunStopped(file, _line_in(file))


@contextlib.contextmanager
def runs_stopped(file: str) -> Iterator[None]:
    """Stop every graph run started in this context while ``file`` is loaded (see the module doc)."""
    _install()
    token = _loading.set(file)
    try:
        yield
    finally:
        _loading.reset(token)
        _uninstall()


def _line_in(file: str) -> int | None:
    """The line of ``file`` the run was started from: the innermost frame running that file."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename == file:
            return frame.f_lineno
        frame = frame.f_back
    return None


def _install() -> None:
    global _users
    from langgraph.pregel import Pregel

    with _lock:
        _users += 1
        if _users > 1:
            return
        for name in ("stream", "astream"):
            own = Pregel.__dict__[name]
            _originals[name] = own
            setattr(Pregel, name, _gated(own))


def _uninstall() -> None:
    global _users
    from langgraph.pregel import Pregel

    with _lock:
        _users -= 1
        if _users > 0:
            return
        for name, own in _originals.items():
            if getattr(Pregel.__dict__.get(name), "__wrapped__", None) is own:
                setattr(Pregel, name, own)  # put back only what we replaced
        _originals.clear()


def _gated(own: Callable[..., Any]) -> Callable[..., Any]:
    """``own`` (a generator function), checked when it is called, not when it is first iterated."""

    def gated(self: Any, *args: Any, **kwargs: Any) -> Any:
        check()
        return own(self, *args, **kwargs)

    gated.__wrapped__ = own  # type: ignore[attr-defined]
    gated.__name__ = own.__name__
    gated.__doc__ = own.__doc__
    return gated
