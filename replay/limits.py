"""Keep a replayed graph's view of its recursion limit the recorded one.

A replay resumes at a recorded step, and LangGraph counts a resumed run's
limit from where it resumes (``stop = step + recursion_limit + 1``, computed
once when the run starts, from the config alone): resumed with the recorded
limit, a runaway loop recorded to end at step 6 runs on to step 11. So the
root run is given a lower limit, which puts its ``stop`` exactly where the
recording's was; its ``remaining_steps`` (``stop - step``) are then the
recorded ones too. Nothing else may see that lower number:

- subgraphs, which inherit the caller's config (passed on, or taken from the
  context by a graph invoked inside a node without one): their own stop, and
  so the ``remaining_steps`` a prebuilt agent puts into its ``Send`` packets,
  would differ from the recording's;
- the ``GraphRecursionError`` a runaway loop ends with, whose message quotes
  the limit;
- the replay's own run record, which keeps the recorded limit (``Lineage``).

LangGraph has no seam for the first two, so while a replay runs
``Pregel.stream`` and ``astream`` are wrapped at the class level (as
``intercept`` wraps models and tools, and removed when the last replay ends):
a subgraph call gets the recorded limit back, and the root run's recursion
error quotes it.

A replay from one of the last steps before a recursion error needs a limit
below 1, which LangGraph refuses: the root run is given 1, and its loop's
``stop`` is moved back by the difference once the loop has set it (the pregel
loop's entry is wrapped the same way), so it stops, and counts its remaining
steps, where the recording did.

A replay in a subgraph's namespace (``--ns``) resumes that subgraph in the
middle too: the first loop entered in that namespace has its ``stop`` moved
back the same way once it is set. It is done on the loop, not the config: only
the loop knows its namespace for sure (an agent invoked in a ``@task`` or a
node takes it from the caller, and LangGraph numbers a second run in the same
task, ``node:<id>|1``, only once the loop starts).
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

_NS_KEY = "checkpoint_ns"


@dataclass(frozen=True)
class Limits:
    """The limit the recording ran with, and the one the resumed root run is given."""

    recorded: int
    lowered: int
    stop_shift: int = 0  # below 0: the root loop's stop is that much earlier than ``lowered`` gives
    resumed_ns: str | None = None  # the subgraph namespace a replay resumes in (``--ns``): it counts from there too
    ns_lowered: int = 0
    ns_stop_shift: int = 0
    # More namespaces whose first loop's stop is moved (a persistent subgraph resumed at its input)
    ns_shifts: dict[str, int] = field(default_factory=dict)


def lowered_limit(recorded: int, steps_done: int, *, fresh: bool = True) -> Limits:
    """The limits of a replay resumed ``steps_done`` steps after the recording began (at its
    input step when ``fresh``, else at the checkpoint a run that went on with a thread left)."""
    wanted = recorded - steps_done - (1 if fresh else 0)
    if is_default_limit(recorded):
        # The recording ran with LangGraph's default, which its config merges leave out: a tool
        # (and a subagent it runs) saw LangChain's own default, not a number. The replay's root
        # keeps that default too, and its stop is moved back instead.
        return Limits(recorded=recorded, lowered=recorded, stop_shift=wanted - recorded)
    return Limits(recorded=recorded, lowered=max(1, wanted), stop_shift=min(0, wanted - 1))


def is_default_limit(limit: Any) -> bool:
    """Whether ``limit`` is LangGraph's default as ``ensure_config`` fills it in (a type of its own)."""
    return type(limit).__name__ == "_DefaultRecursionLimit"


_current: contextvars.ContextVar[Limits | None] = contextvars.ContextVar("graphtape_replay_limits", default=None)
# The stop shifts not yet applied, by namespace ("" the root): the first loop entered in each takes
# its own (a dict, shared by copied contexts).
_shift_due: contextvars.ContextVar[dict[str, int] | None] = contextvars.ContextVar("graphtape_replay_stop_shift", default=None)
_active = 0
_lock = threading.Lock()
_originals: dict[str, Any] = {}


@contextlib.contextmanager
def recorded_limits(limits: Limits | None) -> Iterator[None]:
    """While the block runs (in this context), subgraphs and recursion errors see ``limits.recorded``."""
    global _active
    if limits is None:
        yield
        return
    with _lock:
        if _active == 0:
            _install()
        _active += 1
    token = _current.set(limits)
    shifts = {"": limits.stop_shift}
    if limits.resumed_ns:  # runs with the recorded limit, its stop moved to where the recording's was
        shifts[limits.resumed_ns] = limits.ns_lowered + limits.ns_stop_shift - limits.recorded
    for ns, shift in limits.ns_shifts.items():
        shifts[ns] = shifts.get(ns, 0) + shift
    due = _shift_due.set({ns: shift for ns, shift in shifts.items() if shift} or None)
    try:
        yield
    finally:
        _shift_due.reset(due)
        _current.reset(token)
        with _lock:
            _active -= 1
            if _active == 0:
                _uninstall()


def _install() -> None:
    from langgraph.pregel import Pregel
    from langgraph.pregel._loop import AsyncPregelLoop, SyncPregelLoop

    _originals["stream"], _originals["astream"] = Pregel.stream, Pregel.astream
    Pregel.stream, Pregel.astream = _stream, _astream  # type: ignore[method-assign]
    _originals["enter"], _originals["aenter"] = SyncPregelLoop.__enter__, AsyncPregelLoop.__aenter__
    SyncPregelLoop.__enter__, AsyncPregelLoop.__aenter__ = _enter, _aenter  # type: ignore[method-assign]


def _uninstall() -> None:
    from langgraph.pregel import Pregel
    from langgraph.pregel._loop import AsyncPregelLoop, SyncPregelLoop

    Pregel.stream, Pregel.astream = _originals.pop("stream"), _originals.pop("astream")  # type: ignore[method-assign]
    SyncPregelLoop.__enter__, AsyncPregelLoop.__aenter__ = _originals.pop("enter"), _originals.pop("aenter")  # type: ignore[method-assign]


def _shift_stop(loop: Any) -> None:
    due = _shift_due.get()
    if due:
        ns = ((getattr(loop, "config", None) or {}).get("configurable") or {}).get(_NS_KEY, "") if getattr(loop, "is_nested", False) else ""
        loop.stop += due.pop(ns, 0)


def _enter(self: Any) -> Any:
    entered = _originals["enter"](self)
    _shift_stop(entered)
    return entered


async def _aenter(self: Any) -> Any:
    entered = await _originals["aenter"](self)
    _shift_stop(entered)
    return entered


def _split(args: tuple, kwargs: dict) -> tuple[Any, tuple, dict]:
    """The call's config, and the arguments without it (config is the second positional or a keyword)."""
    if len(args) >= 2:
        return args[1], args[:1] + args[2:], kwargs
    return kwargs.get("config"), args, {k: v for k, v in kwargs.items() if k != "config"}


def _adjust(config: Any, limits: Limits) -> tuple[Any, bool]:
    """``(config, is_root)``: a subgraph's config with the recorded limit.

    A graph is nested when its config names a checkpoint namespace, or, called from inside
    a node without a config (``agent.invoke(inputs)``), when the config LangGraph hands it
    through the context does: it would inherit the root's lowered limit from there.
    """
    if is_default_limit(limits.recorded):
        return config, True  # the root kept the default (``lowered_limit``): subgraphs inherit what they did
    conf = (config or {}).get("configurable") or {} if isinstance(config, dict) else {}
    if conf.get(_NS_KEY):
        return {**config, "recursion_limit": limits.recorded}, False
    if config is None or not conf:
        from langchain_core.runnables.config import var_child_runnable_config

        inherited = var_child_runnable_config.get() or {}
        if (inherited.get("configurable") or {}).get(_NS_KEY):
            return {**(config or {}), "recursion_limit": limits.recorded}, False
    return config, True


def _recorded_error(exc: BaseException, limits: Limits) -> BaseException:
    from langgraph.errors import GraphRecursionError

    text = str(exc)
    lowered = f"Recursion limit of {limits.lowered} "
    if isinstance(exc, GraphRecursionError) and lowered in text:
        return GraphRecursionError(text.replace(lowered, f"Recursion limit of {limits.recorded} ", 1))
    return exc


def _stream(self: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
    original = _originals["stream"]
    limits = _current.get()
    if limits is None:
        yield from original(self, *args, **kwargs)
        return
    config, rest, kw = _split(args, kwargs)
    config, is_root = _adjust(config, limits)
    try:
        yield from original(self, rest[0] if rest else kw.pop("input", None), config, *rest[1:], **kw)
    except Exception as exc:
        if not is_root:
            raise
        replaced = _recorded_error(exc, limits)
        if replaced is exc:
            raise
        raise replaced from exc


async def _astream(self: Any, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
    original = _originals["astream"]
    limits = _current.get()
    if limits is None:
        async for chunk in original(self, *args, **kwargs):
            yield chunk
        return
    config, rest, kw = _split(args, kwargs)
    config, is_root = _adjust(config, limits)
    try:
        async for chunk in original(self, rest[0] if rest else kw.pop("input", None), config, *rest[1:], **kw):
            yield chunk
    except Exception as exc:
        if not is_root:
            raise
        replaced = _recorded_error(exc, limits)
        if replaced is exc:
            raise
        raise replaced from exc
