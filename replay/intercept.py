"""Answer tool and model calls from a recording while a replay runs.

A model object or a tool lives inside the user's node, where no LangGraph or
LangChain seam reaches it (LangChain's cache sees only a serialized prompt
and is skipped by models built with ``cache=False``). So, while at least one
replay runs, four methods are wrapped at the class level: ``BaseChatModel``'s
``_generate_with_cache`` / ``_agenerate_with_cache`` (every provider's
``invoke`` goes through them, after the callbacks that record the call fire)
and ``BaseTool``'s ``run`` / ``arun``; a node that calls a model's
``stream`` / ``astream`` itself (which would bypass ``_generate_with_cache``)
gets the answer as one chunk, through ``invoke`` so the call is still
recorded. The wrappers ask the replay of the
current context (a context variable, which LangGraph copies into its worker
threads) and otherwise call the original. They are removed when the last
replay ends. A thread without that context (a node's own thread pool) is the
replay's only when one replay runs and the thread did not exist before it began:
a server's or a test runner's other threads keep calling their models live.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from graphtape.replay.calls import rebuild_error


@dataclass(frozen=True, slots=True)
class Answer:
    """What a call returns (or raises) in the replay, and how long it takes."""

    value: Any = None
    error: tuple[str | None, str | None] | None = None  # recorded (type, message)
    error_frames: Any = None  # the recorded error's traceback: which package raised it
    error_fields: Any = None  # what the recorded error carried besides its message (recorder.error_fields)
    tool_error: bool = False  # a handled tool error: the value is the error text the tool reported
    delay_s: float = 0.0
    call: Any = None  # an override function to call with the tool's parsed arguments
    interrupt: tuple[Any, ...] = ()  # (value,): the recorded call stopped at interrupt(value)
    sends: tuple[tuple[str, Any], ...] = ()  # (channel, value): what the recorded tool wrote to the state itself

    def raise_if_error(self) -> None:
        if self.interrupt:
            interrupt_again(self.interrupt[0])
        if self.error is not None:
            raise rebuild_error(*self.error, self.error_frames, self.error_fields)


_MAX_RESUMED = 10_000


def interrupt_again(value: Any) -> None:
    """Stop the call at LangGraph's ``interrupt(value)``, as the recording did.

    The recorded call got this far after as many resumes as the task holds now:
    the earlier ``interrupt()`` calls return those resume values, and the next one
    raises LangGraph's own ``GraphInterrupt`` (the same interrupt id and bookkeeping
    as the live run), so the replay pauses there and is resumed as recorded.
    """
    from langgraph.types import interrupt

    for _ in range(_MAX_RESUMED):
        interrupt(value)
    raise RuntimeError("graphtape replay: a recorded interrupt was answered more often than it could have been")


class Answerer(Protocol):
    """What a replay supplies: an answer per call, or ``None`` to let it run live."""

    def answer_model(self, model: Any, messages: list[Any], stop: Any, run_manager: Any, kwargs: dict) -> Answer | None: ...

    def answer_tool(self, tool: Any, tool_input: Any, kwargs: dict) -> Answer | None: ...

    def answers_model(self, model: Any) -> bool: ...


_current: contextvars.ContextVar[Answerer | None] = contextvars.ContextVar("graphtape_replay", default=None)
_active: list[Answerer] = []
_threads_before: set[int] = set()  # threads alive when the running replay began: not the replay's
_lock = threading.Lock()
_originals: dict[tuple[str, str], tuple[type, Any]] = {}  # (class name, method) -> (class, original)


def _answerer() -> Answerer | None:
    found = _current.get()
    if found is not None:
        return found
    # A thread started without copying the context: only unambiguous with one replay running,
    # and only a thread the replay may have started (one already there belongs to someone else).
    with _lock:
        return _active[0] if len(_active) == 1 and threading.get_ident() not in _threads_before else None


@contextlib.contextmanager
def answering(answerer: Answerer) -> Iterator[None]:
    """Route tool and model calls in this context to ``answerer`` until the block ends."""
    with _lock:
        if not _active:
            _install()
            _threads_before.clear()
            _threads_before.update(t.ident for t in threading.enumerate() if t.ident is not None and t is not threading.current_thread())
        _active.append(answerer)
    token = _current.set(answerer)
    try:
        yield
    finally:
        _current.reset(token)
        with _lock:
            _active.remove(answerer)
            if not _active:
                _uninstall()


def _install() -> None:
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.tools import BaseTool

    wrappers = {
        (BaseChatModel, "_generate_with_cache"): _generate,
        (BaseChatModel, "_agenerate_with_cache"): _agenerate,
        (BaseChatModel, "agenerate"): _agenerate_outer,
        (BaseTool, "run"): _run_tool,
        (BaseTool, "arun"): _arun_tool,
        (BaseChatModel, "stream"): _stream,
        (BaseChatModel, "astream"): _astream,
    }
    for (cls, name), wrapper in wrappers.items():
        _originals[(cls.__name__, name)] = (cls, cls.__dict__[name])
        setattr(cls, name, wrapper)


def _uninstall() -> None:
    for (_cls_name, name), (cls, original) in _originals.items():
        setattr(cls, name, original)
    _originals.clear()
    _stand_ins.clear()


def _original(cls_name: str, name: str) -> Any:
    found = _originals.get((cls_name, name))
    if found is None:
        raise RuntimeError(f"graphtape replay: {cls_name}.{name} is not wrapped")
    return found[1]


# -- models ----------------------------------------------------------------------


def _chat_result(answer: Answer) -> Any:
    from langchain_core.outputs import ChatGeneration, ChatResult

    answer.raise_if_error()
    return ChatResult(generations=[ChatGeneration(message=answer.value)])


def _generate(self: Any, messages: list[Any], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
    answerer = _answerer()
    answer = answerer.answer_model(self, messages, stop, run_manager, kwargs) if answerer is not None else None
    if answer is None:
        return _original("BaseChatModel", "_generate_with_cache")(self, messages, stop, run_manager, **kwargs)
    if answer.delay_s:
        time.sleep(answer.delay_s)
    return _chat_result(answer)


class ReplayStop(BaseException):
    """A call the replay cannot answer stops it (``answers.ReplayMiss``): no ``except Exception`` takes it."""


# The stops raised under one ``agenerate``: LangChain gathers its calls with return_exceptions and
# then reads every result that is not an ``Exception`` as a ChatResult, so a stop would come out
# of it as an AttributeError. ``_agenerate_outer`` raises the stop itself instead.
_async_stops: contextvars.ContextVar[list[ReplayStop] | None] = contextvars.ContextVar("graphtape_async_stops", default=None)


async def _agenerate_outer(self: Any, *args: Any, **kwargs: Any) -> Any:
    stops: list[ReplayStop] = []
    token = _async_stops.set(stops)
    try:
        return await _original("BaseChatModel", "agenerate")(self, *args, **kwargs)
    except Exception:
        if stops:
            raise stops[0] from None
        raise
    finally:
        _async_stops.reset(token)


async def _agenerate(self: Any, messages: list[Any], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
    answerer = _answerer()
    try:
        answer = answerer.answer_model(self, messages, stop, run_manager, kwargs) if answerer is not None else None
    except ReplayStop as refused:
        held = _async_stops.get()
        if held is not None:
            held.append(refused)
        raise
    if answer is None:
        return await _original("BaseChatModel", "_agenerate_with_cache")(self, messages, stop, run_manager, **kwargs)
    if answer.delay_s:
        await asyncio.sleep(answer.delay_s)
    return _chat_result(answer)


def _as_chunk(message: Any) -> Any:
    from langchain_core.messages import AIMessageChunk
    from langchain_core.messages.tool import tool_call_chunk

    import json

    chunks = [tool_call_chunk(name=c["name"], args=json.dumps(c["args"]), id=c.get("id"), index=i) for i, c in enumerate(getattr(message, "tool_calls", None) or [])]
    return AIMessageChunk(
        content=message.content,
        additional_kwargs=message.additional_kwargs,
        response_metadata=message.response_metadata,
        tool_call_chunks=chunks,
        id=message.id,
        usage_metadata=getattr(message, "usage_metadata", None),
    )


def _stream(self: Any, input: Any, config: Any = None, *, stop: Any = None, **kwargs: Any) -> Any:
    answerer = _answerer()
    if answerer is None or not answerer.answers_model(self):
        yield from _original("BaseChatModel", "stream")(self, input, config, stop=stop, **kwargs)
        return
    yield _as_chunk(self.invoke(input, config, stop=stop, **kwargs))


async def _astream(self: Any, input: Any, config: Any = None, *, stop: Any = None, **kwargs: Any) -> Any:
    answerer = _answerer()
    if answerer is None or not answerer.answers_model(self):
        async for chunk in _original("BaseChatModel", "astream")(self, input, config, stop=stop, **kwargs):
            yield chunk
        return
    yield _as_chunk(await self.ainvoke(input, config, stop=stop, **kwargs))


# -- tools -----------------------------------------------------------------------


_answered_cls: type | None = None
_current_answer: contextvars.ContextVar[Answer | None] = contextvars.ContextVar("graphtape_tool_answer", default=None)
_stand_ins: dict[int, tuple[Any, Any]] = {}


def _answered_tool_class() -> type:
    global _answered_cls
    if _answered_cls is None:
        from langchain_core.tools import BaseTool, ToolException
        from pydantic import PrivateAttr

        class AnsweredTool(BaseTool):
            """Stands in for a recorded tool: its body is the answer of the call running now."""

            _injected: frozenset[str] = PrivateAttr(default=frozenset())

            @property
            def _injected_args_keys(self) -> frozenset[str]:
                # The real tool's injected arguments (a ``ToolRuntime`` found in its function's
                # signature, not in its schema): LangChain keeps them out of what the callbacks see.
                return self._injected

            def _run(self, *args: Any, **kwargs: Any) -> Any:
                answer = _current_answer.get()
                if answer is not None and answer.delay_s:
                    time.sleep(answer.delay_s)
                return self._produce(answer, args, kwargs)

            async def _arun(self, *args: Any, **kwargs: Any) -> Any:
                answer = _current_answer.get()
                if answer is not None and answer.delay_s:
                    await asyncio.sleep(answer.delay_s)
                return self._produce(answer, args, kwargs)

            def _produce(self, answer: Answer | None, args: tuple, kwargs: dict) -> Any:
                if answer is None:
                    raise RuntimeError("graphtape replay: a stand-in tool ran outside its call")
                if answer.call is not None:
                    return self._as_returned(answer.call(*args, **_taken_by(answer.call, kwargs, self._injected)))
                _send_again(answer.sends)
                answer.raise_if_error()
                if answer.tool_error:
                    raise ToolException(answer.value)
                return answer.value

            def _as_returned(self, value: Any) -> Any:
                # An override of a ``content_and_artifact`` tool (every MCP tool) that returns its
                # content alone answers with no artifact, rather than failing LangChain's two-tuple check.
                if self.response_format == "content_and_artifact" and not (isinstance(value, tuple) and len(value) == 2):
                    return value, None
                return value

        _answered_cls = AnsweredTool
    return _answered_cls


def _stand_in(tool: Any, answer: Answer) -> Any:
    """A tool with ``tool``'s name and argument schema whose body is the answer.

    Running it through ``BaseTool.run`` keeps everything around the body real:
    argument validation (so a recorded validation error recurs by itself),
    callbacks (so the replay records the call), and the ToolMessage built
    with the live tool-call id. One stand-in per tool (and per way of
    handling errors); the answer travels in a context variable, so parallel
    calls of one tool each see their own.
    """
    key = (id(tool), answer.tool_error)
    with _lock:
        hit = _stand_ins.get(key)  # type: ignore[arg-type]
        if hit is not None and hit[0] is tool:
            return hit[1]
    stand_in = _answered_tool_class()(
        name=tool.name,
        description=tool.description or tool.name,
        args_schema=tool.args_schema,
        return_direct=tool.return_direct,
        response_format=tool.response_format,
        handle_validation_error=tool.handle_validation_error,
        handle_tool_error=True if answer.tool_error else tool.handle_tool_error,
        tags=tool.tags,
        metadata=tool.metadata,
    )
    stand_in._injected = _injected_keys(tool)
    with _lock:
        _stand_ins[key] = (tool, stand_in)  # type: ignore[index]
    return stand_in


def _send_again(writes: tuple[tuple[str, Any], ...]) -> None:
    """Write to the state what the recorded tool call wrote itself, through the running task's
    send function, as the tool did (``recorder.tool_sends``)."""
    if not writes:
        return
    from langchain_core.runnables.config import var_child_runnable_config

    from graphtape.recorder.tool_sends import SEND_KEY

    send = ((var_child_runnable_config.get() or {}).get("configurable") or {}).get(SEND_KEY)
    if callable(send):
        send(list(writes))


def _injected_keys(tool: Any) -> frozenset[str]:
    try:
        return frozenset(getattr(tool, "_injected_args_keys", None) or ())
    except Exception:  # noqa: BLE001 - a langchain-core without it: its schema says it all
        return frozenset()


def _taken_by(override: Any, kwargs: dict[str, Any], injected: frozenset[str]) -> dict[str, Any]:
    """The tool's arguments for an override: what LangChain injected (a ``ToolRuntime``) only
    where the override names it (or takes ``**kwargs``), as it is handed a tool's own arguments."""
    if not injected.intersection(kwargs):
        return kwargs
    try:
        params = inspect.signature(override).parameters
    except (TypeError, ValueError):
        return kwargs
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return kwargs
    return {k: v for k, v in kwargs.items() if k not in injected or k in params}


def _is_stand_in(tool: Any) -> bool:
    return _answered_cls is not None and isinstance(tool, _answered_cls)


def _run_tool(self: Any, tool_input: Any, *args: Any, **kwargs: Any) -> Any:
    run = _original("BaseTool", "run")
    answerer = None if _is_stand_in(self) else _answerer()
    answer = answerer.answer_tool(self, tool_input, kwargs) if answerer is not None else None
    if answer is None:
        return run(self, tool_input, *args, **kwargs)
    token = _current_answer.set(answer)
    try:
        return run(_stand_in(self, answer), tool_input, *args, **kwargs)
    finally:
        _current_answer.reset(token)


async def _arun_tool(self: Any, tool_input: Any, *args: Any, **kwargs: Any) -> Any:
    arun = _original("BaseTool", "arun")
    answerer = None if _is_stand_in(self) else _answerer()
    answer = answerer.answer_tool(self, tool_input, kwargs) if answerer is not None else None
    if answer is None:
        return await arun(self, tool_input, *args, **kwargs)
    token = _current_answer.set(answer)
    try:
        return await arun(_stand_in(self, answer), tool_input, *args, **kwargs)
    finally:
        _current_answer.reset(token)
