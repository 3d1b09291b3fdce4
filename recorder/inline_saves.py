"""Saves to graphtape's own in-memory savers run at once, not through LangGraph's thread pool.

LangGraph hands every checkpoint save to its run's background executor: a thread hop for
each task's writes and one per superstep, and a pool thread started for every run. For the
saver graphtape lends a graph without memory (and a replay's), a save is a few dict inserts
that cost less than the hop: on a three-node loop the hops are a fifth of a superstep, and in
a six-superstep run starting the pool thread is half of what LangGraph's checkpointing costs.

No seam lets a saver ask to be called in place, so while a recorded run or a replay is going
(:func:`acquire` / :func:`release`, counted) the executors' ``submit`` is wrapped: a save whose
saver says ``saves_inline`` runs there and then, in the caller's thread, and comes back as a
finished future that the executor tracks like its own (an error in it is raised when the run
ends, as LangGraph raises a failed save). Every other submission, a user's saver's included,
goes on to LangGraph's ``submit`` as it came. A LangGraph without these executors is left alone.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import threading
from collections.abc import Callable
from typing import Any

# The savers' methods LangGraph submits: a task's writes, and a superstep's checkpoint (through
# the loop's method that waits for the previous save first).
_WRITES = frozenset({"put_writes", "aput_writes"})
_CHECKPOINT = "_checkpointer_put_after_previous"

_lock = threading.Lock()
_users = 0
_installed: list[tuple[type, Callable[..., Any]]] = []  # (executor class, its own submit)


def acquire() -> None:
    """A recorded run or a replay starts: make sure saves to graphtape's savers run in place."""
    global _users
    with _lock:
        if _users == 0:
            _install()
        _users += 1


def release() -> None:
    """A run ended: the last one out gives LangGraph its own ``submit`` back."""
    global _users
    with _lock:
        if _users == 0:
            return
        _users -= 1
        if _users == 0:
            _uninstall()


def installed() -> bool:
    """Whether the executors' ``submit`` is wrapped now."""
    return bool(_installed)


def runs_inline(fn: Any) -> bool:
    """Whether ``fn``, as LangGraph submits it, is a save to a saver that asks to be called in place."""
    name = getattr(fn, "__name__", None)
    if name in _WRITES:
        saver = getattr(fn, "__self__", None)
    elif name == _CHECKPOINT:
        saver = getattr(getattr(fn, "__self__", None), "checkpointer", None)
    else:
        return False
    return getattr(saver, "saves_inline", False) is True


def _install() -> None:
    try:
        from langgraph.pregel._executor import AsyncBackgroundExecutor, BackgroundExecutor
    except ImportError:  # another LangGraph layout: saves hop as LangGraph makes them
        return
    for cls, run_now in ((BackgroundExecutor, _run_now), (AsyncBackgroundExecutor, _arun_now)):
        own = cls.__dict__.get("submit")
        if own is None or not hasattr(cls, "done"):
            continue
        cls.submit = _wrapped(own, run_now)
        _installed.append((cls, own))


def _uninstall() -> None:
    while _installed:
        cls, own = _installed.pop()
        if getattr(cls.__dict__.get("submit"), "__wrapped__", None) is own:
            cls.submit = own  # put back only what we replaced: another wrapper on top stays


def _flags(kwargs: dict[str, Any]) -> tuple[bool, bool]:
    """Take LangGraph's ``__dunder__`` options out of ``kwargs``: (cancel on exit, re-raise on exit)."""
    cancel = kwargs.pop("__cancel_on_exit__", False)
    reraise = kwargs.pop("__reraise_on_exit__", True)
    for key in [k for k in kwargs if k.startswith("__") and k.endswith("__")]:
        del kwargs[key]
    return cancel, reraise


def _track(executor: Any, future: Any, flags: tuple[bool, bool]) -> Any:
    # As LangGraph tracks a submission: a failed one stays listed and is raised at the run's end.
    executor.tasks[future] = flags
    future.add_done_callback(executor.done)
    return future


def _wrapped(own: Callable[..., Any], run_now: Callable[[Any, Any, tuple, dict], Any]) -> Callable[..., Any]:
    """An executor's ``submit`` that hands a save to its saver to ``run_now`` (which returns the
    finished future) and everything else to the executor's own ``submit``."""

    @functools.wraps(own)
    def submit(self: Any, fn: Any, *args: Any, **kwargs: Any) -> Any:
        if not runs_inline(fn) or not isinstance(getattr(self, "tasks", None), dict):
            return own(self, fn, *args, **kwargs)
        flags = _flags(kwargs)
        return _track(self, run_now(self, fn, args, kwargs), flags)

    return submit


def _run_now(executor: Any, fn: Any, args: tuple, kwargs: dict) -> concurrent.futures.Future:
    future: concurrent.futures.Future = concurrent.futures.Future()
    try:
        future.set_result(fn(*args, **kwargs))
    except Exception as exc:  # noqa: BLE001 - LangGraph's executor holds it for the run's end
        future.set_exception(exc)
    # Ctrl+C or an exit while a save runs here, on the caller's thread, stops the run at once.
    return future


def _arun_now(executor: Any, fn: Any, args: tuple, kwargs: dict) -> asyncio.Future:
    loop = executor.loop
    coro = fn(*args, **kwargs)
    try:
        waiting = coro.send(None)
    except StopIteration as done:
        future = loop.create_future()
        future.set_result(done.value)
    except Exception as exc:  # noqa: BLE001 - held for the run's end, as above
        future = loop.create_future()
        future.set_exception(exc)
    else:
        # It waits on something after all: asyncio runs the rest of it, as it would have.
        future = asyncio.ensure_future(_rest_of(coro, waiting), loop=loop)
    return future


async def _rest_of(coro: Any, waiting: Any) -> Any:
    return await _Started(coro, waiting)


class _Started:
    """A coroutine started by hand, stopped waiting on ``waiting``: awaiting this drives the rest."""

    def __init__(self, coro: Any, waiting: Any) -> None:
        self.coro, self.waiting = coro, waiting

    def __await__(self) -> Any:
        coro, waiting = self.coro, self.waiting
        while True:
            try:
                sent = yield waiting
            except BaseException as exc:  # noqa: BLE001 - a cancellation or close, handed on
                try:
                    waiting = coro.throw(exc)
                except StopIteration as done:
                    return done.value
                continue
            try:
                waiting = coro.send(sent)
            except StopIteration as done:
                return done.value
