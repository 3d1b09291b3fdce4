"""The LangGraph task running in this context: its config, its recording session, where it is.

LangGraph puts the running task's config in LangChain's ``var_child_runnable_config``
(copied into the task's thread or asyncio task), with the step, node and namespace in
its metadata and graphtape's capture handler among its callbacks. Recorders of what a
node's own code does (its HTTP requests, its long-term memory reads and writes) file
it under that task, and a replay answers it for that task.
"""

from __future__ import annotations

from typing import Any


def task_config() -> dict[str, Any]:
    """The running task's config (empty outside a task)."""
    from langchain_core.runnables.config import var_child_runnable_config

    return var_child_runnable_config.get() or {}


def session_of(config: dict[str, Any]) -> Any:
    """The recording session of the run whose task is running here (graphtape's handler among its callbacks)."""
    from graphtape.recorder.capture import CaptureHandler

    callbacks = config.get("callbacks")
    handlers = getattr(callbacks, "handlers", None)
    if handlers is None:
        handlers = callbacks if isinstance(callbacks, list) else ()
    for handler in handlers:
        if isinstance(handler, CaptureHandler):
            return handler.session
    return None


def site_of(config: dict[str, Any]) -> tuple[str, str | None, str | None, int | None]:
    """``(namespace, node, task id, step)`` of the task, placed as the recorder places calls."""
    from graphtape.recorder.session import call_site

    return call_site(config.get("metadata"))
